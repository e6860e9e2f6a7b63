package urlfrontier_test

import (
	"testing"

	"github.com/sievecrawl/sieve/auth"
	"github.com/sievecrawl/sieve/urlfrontier"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// TestRolesCoverEveryCall: a call added to the .proto without a role would
// be refused to everyone; this names it first. The roles are issue 29's.
func TestRolesCoverEveryCall(t *testing.T) {
	roles := urlfrontier.Roles()
	d := pb.URLFrontier_ServiceDesc
	calls := map[string]bool{}
	for _, m := range d.Methods {
		calls["/"+d.ServiceName+"/"+m.MethodName] = true
	}
	for _, s := range d.Streams {
		calls["/"+d.ServiceName+"/"+s.StreamName] = true
	}
	for c := range calls {
		if roles[c] == auth.None {
			t.Errorf("%s has no role", c)
		}
	}
	for c := range roles {
		if !calls[c] {
			t.Errorf("Roles names %s, which the service does not have", c)
		}
	}
	want := map[auth.Role][]string{
		auth.Read:  {"ListURLs", "GetStats", "GetURLStatus", "ListCrawls", "ListQueues", "CountURLs", "GetActive", "ListNodes"},
		auth.Crawl: {"GetURLs", "PutURLs", "PutDiscovered"},
		auth.Admin: {"DeleteCrawl", "DeleteQueue", "PurgeURLs", "SetActive", "SetDelay", "SetCrawlLimit", "BlockQueueUntil", "SetLogLevel"},
	}
	for role, names := range want {
		for _, n := range names {
			if got := roles["/"+d.ServiceName+"/"+n]; got != role {
				t.Errorf("Roles[%s] = %v, want %v", n, got, role)
			}
		}
	}
}
