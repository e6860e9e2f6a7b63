package urlfrontier_test

import (
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sievecrawl/sieve/dust"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/urlfrontier"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// TestPutByLearnedRules: a crawl whose crawlers learned that h.example's
// parameter zsid does not matter admits one spelling of each page through
// the API, as its dedup workers do, and keeps the spelling put; a crawl
// without rules admits every spelling, as before (issue 37, item 4). The
// rule is written by one follower of the bucket (a crawler) and read by
// the server's own (serve's).
func TestPutByLearnedRules(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	js := e.nats.JetStream()
	writer, err := frontier.OpenRules(ctx, js, frontier.Topology{})
	if err != nil {
		t.Fatal(err)
	}
	rules, err := frontier.OpenRules(ctx, js, frontier.Topology{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rules.Follow(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rules.Close() })
	zsid := dust.Learned{Rule: dust.Rule{Kind: dust.KindParam, Arg: "zsid"}, State: dust.Active}
	if err := writer.Put(ctx, "c1", dust.HostRules{Host: "h.example", Revision: 1, Rules: []dust.Learned{zsid}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the server's follower reads c1's rule", func() bool { return rules.Set("c1").Len() == 1 })
	n := e.start("n1", func(o *urlfrontier.Options) { o.Rules = rules })

	const (
		a = "https://h.example/p?id=1&zsid=a"
		b = "https://h.example/p?id=1&zsid=b"
	)
	cases := []struct {
		crawl, url string
		want       pb.AckMessage_Status
	}{
		{"c1", a, OK},
		{"c1", b, SKIPPED}, // the page of a, under c1's rule
		{"c1", "https://h.example/p?id=2&zsid=a", OK},     // another page: id matters
		{"c1", "https://other.example/p?id=1&zsid=b", OK}, // the rule is h.example's
		{"c2", a, OK},
		{"c2", b, OK}, // c2 learned nothing: two URLs
	}
	for _, c := range cases {
		// One stream each: b is a duplicate of a put already landed.
		if got := n.put(t, disc(c.crawl, c.url, ""))[c.url]; got != c.want {
			t.Errorf("PutURLs(%s, %q) = %v, want %v", c.crawl, c.url, got, c.want)
		}
	}
	// Two spellings of one page in one batch: one is admitted.
	st := n.put(t, disc("c1", "https://h.example/q?zsid=x", ""), disc("c1", "https://h.example/q?zsid=y", ""))
	if got := []pb.AckMessage_Status{st["https://h.example/q?zsid=x"], st["https://h.example/q?zsid=y"]}; !slices.Contains(got, OK) || !slices.Contains(got, SKIPPED) {
		t.Errorf("PutURLs of two spellings in one batch = %v, want one OK and one SKIPPED", got)
	}

	// The store keeps the spelling put, which is what a client fetches.
	got := n.get(t, &pb.GetParams{Item: &pb.GetParams_CrawlID{CrawlID: "c1"}})
	slices.Sort(got)
	if len(got) != 4 || !slices.Contains(got, a) || slices.Contains(got, b) || slices.Contains(got, "https://h.example/p?id=1") {
		t.Errorf("GetURLs(c1) = %v, want 4 URLs as put, %s among them", got, a)
	}
	if got := n.get(t, &pb.GetParams{Item: &pb.GetParams_CrawlID{CrawlID: "c2"}}); len(got) != 2 {
		t.Errorf("GetURLs(c2) = %v, want both spellings", got)
	}

	// GetURLStatus asks the filter for the page's key: a third spelling of
	// a page seen in c1 is probably seen; in c2 it is unknown.
	c := "https://h.example/p?id=1&zsid=c"
	if _, err := n.client.GetURLStatus(ctx, &pb.URLStatusRequest{Url: c, CrawlID: "c1"}); err != nil {
		t.Errorf("GetURLStatus(c1, %q) = %v, want probably seen", c, err)
	}
	if _, err := n.client.GetURLStatus(ctx, &pb.URLStatusRequest{Url: c, CrawlID: "c2"}); status.Code(err) != codes.NotFound {
		t.Errorf("GetURLStatus(c2, %q) = %v, want NotFound", c, err)
	}

	// A known update marks its page's key: another spelling put after it
	// is known.
	if st := n.put(t, known("c1", "https://h.example/r?zsid=x", 0)); st["https://h.example/r?zsid=x"] != OK {
		t.Fatalf("known update: %v", st)
	}
	if st := n.put(t, disc("c1", "https://h.example/r?zsid=y", "")); st["https://h.example/r?zsid=y"] != SKIPPED {
		t.Errorf("PutURLs(c1) after a known update of another spelling = %v, want SKIPPED", st)
	}
}
