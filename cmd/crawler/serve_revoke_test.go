package main

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sievecrawl/sieve/auth/authtest"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// TestServeStreamEndsWithItsToken pins issue 39's item 11 on serve: a
// PutDiscovered stream opened with a token removed from the tokens file
// went on; it now ends UNAUTHENTICATED within the file's reload interval
// (2 s), while a stream of another token goes on.
func TestServeStreamEndsWithItsToken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve")
	}
	s := startSecuredServe(t)
	c := frontierClient(t, s.addr, s.ca.ClientTLS(t, authtest.Pair{}))
	open := func(token string) pb.URLFrontier_PutDiscoveredClient {
		t.Helper()
		b, err := c.PutDiscovered(authtest.Bearer(t, token))
		if err != nil {
			t.Fatal(err)
		}
		put(t, b, "before")
		return b
	}
	removed, kept := open(testCrawlToken), open(testAdminToken)
	authtest.WriteFile(t, s.tokens, []byte(strings.Replace(testTokens, testCrawlToken, "# removed", 1)))
	start := time.Now()
	errc := make(chan error, 1)
	go func() { _, err := removed.Recv(); errc <- err }()
	select {
	case err := <-errc:
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("the stream of the token removed ended with %v, want UNAUTHENTICATED", err)
		}
		t.Logf("the stream of the token removed ended %v after the file's change", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the stream of the token removed did not end within 10s (the file is read every 2s)")
	}
	put(t, kept, "after")
}

// put sends one batch of one URL on b and waits for its ack.
func put(t *testing.T, b pb.URLFrontier_PutDiscoveredClient, id string) {
	t.Helper()
	if err := b.Send(&pb.DiscoveredBatch{ID: id, Items: []*pb.URLInfo{{Url: "https://example.com/" + id}}}); err != nil {
		t.Fatal(err)
	}
	ack, err := b.Recv()
	if err != nil {
		t.Fatalf("batch %s: %v", id, err)
	}
	if ack.GetID() != id {
		t.Fatalf("ack of %q, want %q", ack.GetID(), id)
	}
}
