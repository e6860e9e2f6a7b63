package urlfrontier_test

import (
	"io"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/urlfrontier"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// TestFreshURLsOneKey: a URL waiting for its first fetch is one key of the
// store (its place in the ready index, marked index-only); its first known
// update gives it its record (U). A URL stored as earlier versions did (U
// and a copy under R) reads, lists, completes and purges alike, leaving no
// key behind.
func TestFreshURLsOneKey(t *testing.T) {
	e := newEnv(t)
	n := e.start("a")
	ctx := ctxT(t)
	const crawl, key = "c", "a.example"
	u := func(i string) string { return "https://a.example/" + i }
	keysAre := func(url string, want ...string) {
		t.Helper()
		if got := urlfrontier.KeysOf(n.srv, crawl, key, url); !slices.Equal(got, want) {
			t.Errorf("keys of %s = %v, want %v", url, got, want)
		}
	}
	listed := func() []string {
		t.Helper()
		st, err := n.client.ListURLs(ctx, &pb.ListUrlParams{CrawlID: crawl, Key: key, Size: 100})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for {
			it, err := st.Recv()
			if err == io.EOF {
				slices.Sort(out)
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, it.GetKnown().GetInfo().GetUrl())
		}
	}

	st := n.put(t, disc(crawl, u("fresh"), key), disc(crawl, u("purged"), key))
	if st[u("fresh")] != pb.AckMessage_OK || st[u("purged")] != pb.AckMessage_OK {
		t.Fatalf("put: %v", st)
	}
	keysAre(u("fresh"), "R@0+index")
	if err := urlfrontier.PutLegacyFresh(ctx, n.srv, crawl, key, u("legacy"), e.clk.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	if err := urlfrontier.PutLegacyFresh(ctx, n.srv, crawl, key, u("legacy-purged"), e.clk.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	keysAre(u("legacy"), "U", "R@0")

	// Either way a URL is listed once, has a status and is a duplicate.
	want := []string{u("fresh"), u("legacy"), u("legacy-purged"), u("purged")}
	if got := listed(); !slices.Equal(got, want) {
		t.Errorf("ListURLs = %v, want %v", got, want)
	}
	for _, url := range want {
		if _, err := n.client.GetURLStatus(ctx, &pb.URLStatusRequest{CrawlID: crawl, Url: url}); err != nil {
			t.Errorf("GetURLStatus(%s): %v", url, err)
		}
	}
	if c, err := n.client.CountURLs(ctx, &pb.CountUrlParams{CrawlID: crawl, Filter: ptr("a.example")}); err != nil || c.GetValue() != 4 {
		t.Errorf("CountURLs(filter) = %v, %v, want 4", c, err)
	}
	if st := n.put(t, disc(crawl, u("legacy"), key)); st[u("legacy")] != pb.AckMessage_SKIPPED {
		t.Errorf("a second put of the earlier version's URL: %v, want SKIPPED", st)
	}

	// Known updates give a URL its record: completed (U alone), or due
	// again (U and R at the date), whichever way it was stored.
	got := n.get(t, &pb.GetParams{MaxUrlsPerQueue: 10, MaxQueues: 10, DelayRequestable: 600,
		Item: &pb.GetParams_CrawlID{CrawlID: crawl}})
	if len(got) != 4 {
		t.Fatalf("GetURLs handed out %v, want the 4 URLs", got)
	}
	e.clk.Add(48 * time.Hour) // the leases end; the URLs are 2 days old
	refetch := uint64(e.clk.Now().Add(time.Hour).Unix())
	if st := n.put(t, known(crawl, u("fresh"), 0), known(crawl, u("legacy"), refetch)); st[u("fresh")] != pb.AckMessage_OK || st[u("legacy")] != pb.AckMessage_OK {
		t.Fatalf("known updates: %v", st)
	}
	keysAre(u("fresh"), "U")
	keysAre(u("legacy"), "U", "R@"+strconv.FormatUint(refetch*1000, 10))

	// A purge of the queued URLs leaves no key of them.
	p, err := n.client.PurgeURLs(ctx, &pb.PurgeUrlParams{CrawlID: crawl, Days: 1})
	if err != nil || p.GetValue() != 3 {
		t.Fatalf("PurgeURLs(1 day) = %v, %v, want 3 (all but the completed URL)", p, err)
	}
	for _, url := range []string{u("legacy"), u("purged"), u("legacy-purged")} {
		keysAre(url)
	}
	keysAre(u("fresh"), "U")
	if got := listed(); !slices.Equal(got, []string{u("fresh")}) {
		t.Errorf("after the purge ListURLs = %v, want the completed URL alone", got)
	}
}
