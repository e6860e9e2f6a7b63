package urlfrontier

import (
	"github.com/sievecrawl/sieve/auth"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// Roles gives every call of the API the role it needs (package auth):
// reading what the frontier holds is read; taking and putting URLs, what a
// fetcher does, is crawl; changing or deleting the frontier's state is
// admin. auth.Authenticator.GRPCOptions refuses a call it does not name.
func Roles() map[string]auth.Role {
	return map[string]auth.Role{
		pb.URLFrontier_ListNodes_FullMethodName:    auth.Read,
		pb.URLFrontier_ListCrawls_FullMethodName:   auth.Read,
		pb.URLFrontier_ListQueues_FullMethodName:   auth.Read,
		pb.URLFrontier_GetStats_FullMethodName:     auth.Read,
		pb.URLFrontier_GetActive_FullMethodName:    auth.Read,
		pb.URLFrontier_GetURLStatus_FullMethodName: auth.Read,
		pb.URLFrontier_ListURLs_FullMethodName:     auth.Read,
		pb.URLFrontier_CountURLs_FullMethodName:    auth.Read,

		pb.URLFrontier_GetURLs_FullMethodName:       auth.Crawl,
		pb.URLFrontier_PutURLs_FullMethodName:       auth.Crawl,
		pb.URLFrontier_PutDiscovered_FullMethodName: auth.Crawl,

		pb.URLFrontier_DeleteCrawl_FullMethodName:     auth.Admin,
		pb.URLFrontier_DeleteQueue_FullMethodName:     auth.Admin,
		pb.URLFrontier_PurgeURLs_FullMethodName:       auth.Admin,
		pb.URLFrontier_BlockQueueUntil_FullMethodName: auth.Admin,
		pb.URLFrontier_SetActive_FullMethodName:       auth.Admin,
		pb.URLFrontier_SetDelay_FullMethodName:        auth.Admin,
		pb.URLFrontier_SetLogLevel_FullMethodName:     auth.Admin,
		pb.URLFrontier_SetCrawlLimit_FullMethodName:   auth.Admin,
	}
}
