package urlfrontier_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sievecrawl/sieve/urlfrontier"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

const (
	OK      = pb.AckMessage_OK
	SKIPPED = pb.AckMessage_SKIPPED
	FAIL    = pb.AckMessage_FAIL
)

// TestPutURLsStatuses pins the status of each kind of discovered item.
func TestPutURLsStatuses(t *testing.T) {
	n := newEnv(t).start("n1")
	n.put(t, disc("", "https://example.com/a", ""))
	long := disc("", "https://example.com/long", strings.Repeat("k", 256))
	long.ID = "long"
	withID := disc("", "https://example.com/id", "")
	withID.ID = "my-id"
	cases := []struct {
		item *pb.URLItem
		id   string
		want pb.AckMessage_Status
	}{
		{disc("", "https://example.com/b", ""), "https://example.com/b", OK},
		{disc("", "https://example.com/a", ""), "https://example.com/a", SKIPPED},                   // known
		{disc("", "HTTPS://Example.com:443/a#frag", ""), "HTTPS://Example.com:443/a#frag", SKIPPED}, // same canonical URL
		{disc("", "mailto:x@example.com", ""), "mailto:x@example.com", SKIPPED},                     // policy: scheme
		{disc("", "http://[::1", ""), "http://[::1", SKIPPED},                                       // unparsable
		{disc("bad crawl!", "https://example.com/c", ""), "https://example.com/c", SKIPPED},         // crawl id
		{long, "long", SKIPPED}, // key over 255 bytes
		{withID, "my-id", OK},   // the item's ID echoed
		{known("", "https://example.com/never", 1<<62), "https://example.com/never", SKIPPED}, // malformed date
		{&pb.URLItem{ID: "empty"}, "empty", SKIPPED},
	}
	var items []*pb.URLItem
	for _, c := range cases {
		items = append(items, c.item)
	}
	got := n.put(t, items...)
	for _, c := range cases {
		if got[c.id] != c.want {
			t.Errorf("PutURLs(%q) = %v, want %v", c.id, got[c.id], c.want)
		}
	}
}

// TestLeaseDelayCompleteRefetch walks one queue through the life of its
// URLs: hand-out, lease, delay between turns, completion and a refetch.
func TestLeaseDelayCompleteRefetch(t *testing.T) {
	e := newEnv(t)
	n := e.start("n1")
	n.put(t, disc("", "https://a.example/1", ""), disc("", "https://a.example/2", ""), disc("", "https://b.example/1", ""))
	got := n.get(t, anyCrawl(1, 0, 10))
	slices.Sort(got)
	if want := []string{"https://a.example/1", "https://b.example/1"}; !slices.Equal(got, want) {
		t.Fatalf("GetURLs = %v, want %v", got, want)
	}
	// Within the delay (1 s) no queue is served; after it, a.example has
	// one URL in process, the limit per queue asked for.
	if got := n.get(t, anyCrawl(1, 0, 10)); len(got) != 0 {
		t.Fatalf("GetURLs within the delay = %v", got)
	}
	e.clk.Add(1500 * time.Millisecond)
	if got := n.get(t, anyCrawl(1, 0, 10)); len(got) != 0 {
		t.Fatalf("GetURLs with a URL in process per queue = %v", got)
	}
	if got := n.get(t, anyCrawl(2, 0, 10)); !slices.Equal(got, []string{"https://a.example/2"}) {
		t.Fatalf("GetURLs of 2 per queue = %v", got)
	}
	// a.example/1 completed; b.example/1 to be fetched again in an hour.
	later := uint64(e.clk.Now().Add(time.Hour).Unix())
	if st := n.put(t, known("", "https://a.example/1", 0), known("", "https://b.example/1", later)); st["https://a.example/1"] != OK || st["https://b.example/1"] != OK {
		t.Fatalf("known updates: %v", st)
	}
	stats, err := n.client.GetStats(ctxT(t), &pb.QueueWithinCrawlParams{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.GetSize() != 1 || stats.GetInProcess() != 1 || stats.GetCounts()["completed"] != 1 || stats.GetNumberOfQueues() != 2 {
		t.Fatalf("GetStats = %v", stats)
	}
	// The lease of a.example/2 (10 s) ends: it is handed out again.
	e.clk.Add(11 * time.Second)
	if got := n.get(t, anyCrawl(0, 0, 10)); !slices.Equal(got, []string{"https://a.example/2"}) {
		t.Fatalf("GetURLs after the lease = %v", got)
	}
	n.put(t, known("", "https://a.example/2", 0))
	e.clk.Add(time.Hour)
	if got := n.get(t, anyCrawl(0, 0, 10)); !slices.Equal(got, []string{"https://b.example/1"}) {
		t.Fatalf("GetURLs at the refetch date = %v", got)
	}
	// A completed URL is known: discovered again it is skipped.
	if st := n.put(t, disc("", "https://a.example/1", "")); st["https://a.example/1"] != SKIPPED {
		t.Fatalf("rediscovered completed URL: %v", st)
	}
}

// TestQueueControls checks SetDelay, BlockQueueUntil, SetCrawlLimit and
// SetActive.
func TestQueueControls(t *testing.T) {
	e := newEnv(t)
	n := e.start("n1")
	ctx := ctxT(t)
	var items []*pb.URLItem
	for _, u := range []string{"https://q.example/1", "https://q.example/2", "https://q.example/3", "https://r.example/1"} {
		items = append(items, disc("c1", u, ""))
	}
	n.put(t, items...)
	one := &pb.GetParams{MaxUrlsPerQueue: 1, Key: "q.example", DelayRequestable: 1, Item: &pb.GetParams_CrawlID{CrawlID: "c1"}}
	if _, err := n.client.SetDelay(ctx, &pb.QueueDelayParams{Key: "q.example", DelayRequestable: 5, CrawlID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if got := n.get(t, one); len(got) != 1 {
		t.Fatalf("first GetURLs = %v", got)
	}
	e.clk.Add(2 * time.Second) // lease over, delay (5 s) not
	if got := n.get(t, one); len(got) != 0 {
		t.Fatalf("GetURLs within SetDelay's delay = %v", got)
	}
	e.clk.Add(4 * time.Second)
	until := uint64(e.clk.Now().Add(time.Minute).Unix())
	if _, err := n.client.BlockQueueUntil(ctx, &pb.BlockQueueParams{Key: "q.example", Time: until, CrawlID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if got := n.get(t, one); len(got) != 0 {
		t.Fatalf("GetURLs of a blocked queue = %v", got)
	}
	q, err := n.client.ListQueues(ctx, &pb.Pagination{CrawlID: "c1"})
	if err != nil || !slices.Equal(q.GetValues(), []string{"r.example"}) {
		t.Fatalf("ListQueues without inactive = %v, %v", q, err)
	}
	if _, err := n.client.BlockQueueUntil(ctx, &pb.BlockQueueParams{Key: "q.example", Time: 0, CrawlID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.client.SetCrawlLimit(ctx, &pb.CrawlLimitParams{Key: "q.example", Limit: 1, CrawlID: "c1"}); err != nil {
		t.Fatal(err)
	}
	n.put(t, known("c1", "https://q.example/1", 0), known("c1", "https://q.example/2", 0), known("c1", "https://q.example/3", 0))
	n.put(t, disc("c1", "https://q.example/4", ""))
	e.clk.Add(time.Minute)
	if got := n.get(t, one); len(got) != 0 {
		t.Fatalf("GetURLs of a queue at its crawl limit = %v", got)
	}
	if _, err := n.client.SetActive(ctx, &pb.Active{State: false, Local: true}); err != nil {
		t.Fatal(err)
	}
	if got := n.get(t, anyCrawl(0, 0, 1)); len(got) != 0 {
		t.Fatalf("GetURLs while inactive = %v", got)
	}
	if a, _ := n.client.GetActive(ctx, &pb.Local{Local: true}); a.GetState() {
		t.Fatal("GetActive = true after SetActive(false)")
	}
	if st := n.put(t, disc("c1", "https://s.example/1", "")); st["https://s.example/1"] != OK {
		t.Fatalf("put while inactive: %v", st)
	}
	if _, err := n.client.SetActive(ctx, &pb.Active{State: true}); err != nil {
		t.Fatal(err)
	}
	if got := n.get(t, anyCrawl(0, 0, 1)); len(got) != 2 {
		t.Fatalf("GetURLs once active = %v, want r.example/1 and s.example/1", got)
	}
}

// TestRestartKeepsState: leases, delays, blocks and refetch dates are in
// JetStream, so a new server on the same buckets honours them.
func TestRestartKeepsState(t *testing.T) {
	e := newEnv(t)
	n := e.start("n1")
	ctx := ctxT(t)
	n.put(t, disc("", "https://lease.example/1", ""), disc("", "https://block.example/1", ""), disc("", "https://refetch.example/1", ""))
	if _, err := n.client.BlockQueueUntil(ctx, &pb.BlockQueueParams{Key: "block.example", Time: uint64(e.clk.Now().Add(time.Hour).Unix())}); err != nil {
		t.Fatal(err)
	}
	if got := n.get(t, &pb.GetParams{Key: "lease.example", DelayRequestable: 60}); len(got) != 1 {
		t.Fatalf("GetURLs = %v", got)
	}
	n.put(t, known("", "https://refetch.example/1", uint64(e.clk.Now().Add(time.Hour).Unix())))
	n.stop()

	n2 := e.start("n1")
	e.clk.Add(30 * time.Second)
	if got := n2.get(t, anyCrawl(0, 0, 60)); len(got) != 0 {
		t.Fatalf("GetURLs after restart = %v: lease, block or refetch date lost", got)
	}
	e.clk.Add(time.Hour)
	got := n2.get(t, anyCrawl(0, 0, 60))
	slices.Sort(got)
	if want := []string{"https://block.example/1", "https://lease.example/1", "https://refetch.example/1"}; !slices.Equal(got, want) {
		t.Fatalf("GetURLs an hour later = %v, want %v", got, want)
	}
}

// TestTwoServersShareQueues: two servers on one NATS hand each URL out
// once, serve a queue once per delay, and see each other's puts.
func TestTwoServersShareQueues(t *testing.T) {
	e := newEnv(t)
	a, b := e.start("a:1"), e.start("b:1")
	var items []*pb.URLItem
	for q := range 20 {
		for i := range 5 {
			items = append(items, disc("", "https://h"+string(rune('a'+q))+".example/"+string(rune('0'+i)), ""))
		}
	}
	a.put(t, items...)
	eventually(t, "b sees a's URLs", func() bool {
		c, err := b.client.CountURLs(ctxT(t), &pb.CountUrlParams{})
		return err == nil && c.GetValue() == 100
	})
	// Each round both servers ask for one URL per queue; each URL handed
	// out is completed through the other server.
	seen := map[string]int{}
	for range 5 {
		for i, n := range []*node{a, b} {
			other := []*node{b, a}[i]
			var done []*pb.URLItem
			for _, u := range n.get(t, anyCrawl(1, 0, 600)) {
				seen[u]++
				done = append(done, known("", u, 0))
			}
			if len(done) > 0 {
				other.put(t, done...)
			}
		}
		e.clk.Add(1100 * time.Millisecond)
	}
	if len(seen) != 100 {
		t.Errorf("%d URLs handed out, want 100", len(seen))
	}
	for u, k := range seen {
		if k != 1 {
			t.Errorf("%s handed out %d times", u, k)
		}
	}
	if nodes, _ := a.client.ListNodes(ctxT(t), &pb.Empty{}); !slices.Equal(nodes.GetValues(), []string{"a:1", "b:1"}) {
		t.Errorf("ListNodes = %v", nodes.GetValues())
	}
	if _, err := a.client.SetActive(ctxT(t), &pb.Active{State: false}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "SetActive(local=false) reaches b", func() bool {
		r, err := b.client.GetActive(ctxT(t), &pb.Local{Local: true})
		return err == nil && !r.GetState()
	})
}

// TestServersShareTheStore: every server applies the queues' log to its
// own index, so one that joins late sees what the others wrote before and
// after, completions included; one restarted on its directory reads only
// the log's tail, and one that lost its directory rebuilds from the log.
func TestServersShareTheStore(t *testing.T) {
	e := newEnv(t)
	dirA := t.TempDir()
	inDir := func(d string) func(*urlfrontier.Options) { return func(o *urlfrontier.Options) { o.Dir = d } }
	a := e.start("a:1", inDir(dirA))
	a.put(t, disc("", "https://one.example/1", ""), disc("", "https://one.example/2", ""))
	count := func(n *node) uint64 {
		c, err := n.client.CountURLs(ctxT(t), &pb.CountUrlParams{})
		if err != nil {
			t.Fatal(err)
		}
		return c.GetValue()
	}
	b := e.start("b:1")
	if got := count(b); got != 2 {
		t.Fatalf("b counts %d URLs, want a's 2", got)
	}
	b.put(t, disc("", "https://two.example/1", ""))
	eventually(t, "a sees b's URL", func() bool { return count(a) == 3 })
	a.put(t, known("", "https://one.example/1", 0))
	eventually(t, "b sees a's completion", func() bool {
		st, err := b.client.GetStats(ctxT(t), &pb.QueueWithinCrawlParams{})
		return err == nil && st.GetCounts()["completed"] == 1 && st.GetSize() == 2
	})
	if got := count(b); got != 3 {
		t.Fatalf("b counts %d URLs after a completion, want 3 (a completed URL is kept)", got)
	}

	var many []*pb.URLItem
	for i := range 200 {
		many = append(many, disc("", fmt.Sprintf("https://four.example/%d", i), ""))
	}
	b.put(t, many...)
	eventually(t, "a sees b's 200 URLs", func() bool { return count(a) == 203 })
	a.stop()
	b.put(t, disc("", "https://three.example/1", ""))

	a = e.start("a:1", inDir(dirA))
	if got := count(a); got != 204 {
		t.Fatalf("a restarted counts %d URLs, want 204", got)
	}
	if st := urlfrontier.StoreStats(a.srv); st.Read > 10 {
		t.Errorf("a restarted on its directory read %d entries of the log: the whole log, not its tail", st.Read)
	}
	c := e.start("c:1") // an empty directory: rebuilt from the log
	if got := count(c); got != 204 {
		t.Fatalf("c counts %d URLs, want 204", got)
	}
	got := c.get(t, anyCrawl(0, 0, 60))
	if len(got) != 203 || slices.Contains(got, "https://one.example/1") { // completed
		t.Errorf("c hands out %d URLs, want 203 without the completed one", len(got))
	}
	for _, u := range []string{"https://one.example/2", "https://two.example/1", "https://three.example/1", "https://four.example/199"} {
		if !slices.Contains(got, u) {
			t.Errorf("c does not hand out %s", u)
		}
	}
	if again := a.get(t, anyCrawl(0, 0, 60)); len(again) != 0 {
		t.Errorf("a hands out %d URLs c leased", len(again))
	}
}

// TestListCountPurgeDelete covers the read and removal calls.
func TestListCountPurgeDelete(t *testing.T) {
	e := newEnv(t)
	n := e.start("n1")
	ctx := ctxT(t)
	meta := disc("c2", "https://m.example/Page", "")
	meta.GetDiscovered().Info.Metadata = map[string]*pb.StringList{"depth": {Values: []string{"3"}}}
	n.put(t, meta, disc("c2", "https://m.example/other", ""), disc("c2", "https://n.example/1", ""))
	e.clk.Add(48 * time.Hour)
	n.put(t, disc("c2", "https://n.example/2", ""))

	c, err := n.client.CountURLs(ctx, &pb.CountUrlParams{CrawlID: "c2", Filter: ptr("page"), IgnoreCase: ptr(true)})
	if err != nil || c.GetValue() != 1 {
		t.Fatalf("CountURLs(page, ignore case) = %v, %v", c, err)
	}
	st, err := n.client.ListURLs(ctx, &pb.ListUrlParams{CrawlID: "c2", Key: "m.example"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.Recv()
	if err != nil || first.GetKnown().GetInfo().GetMetadata()["depth"].GetValues()[0] != "3" {
		t.Fatalf("ListURLs first = %v, %v", first, err)
	}
	s, err := n.client.GetURLStatus(ctx, &pb.URLStatusRequest{Url: "https://m.example/Page", CrawlID: "c2"})
	// Known, as the reference answers, due since it was stored.
	if err != nil || s.GetKnown() == nil || s.GetCreationDate() == 0 || s.GetKnown().GetRefetchableFromDate() != s.GetCreationDate() {
		t.Fatalf("GetURLStatus(queued) = %v, %v, want a known item due from its creation", s, err)
	}
	if _, err := n.client.GetURLStatus(ctx, &pb.URLStatusRequest{Url: "https://m.example/none", CrawlID: "c2"}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetURLStatus(unknown) error = %v, want NotFound", err)
	}
	p, err := n.client.PurgeURLs(ctx, &pb.PurgeUrlParams{CrawlID: "c2", Days: 1})
	if err != nil || p.GetValue() != 3 {
		t.Fatalf("PurgeURLs(1 day) = %v, %v, want 3", p, err)
	}
	d, err := n.client.DeleteQueue(ctx, &pb.QueueWithinCrawlParams{CrawlID: "c2", Key: "n.example"})
	if err != nil || d.GetValue() != 1 {
		t.Fatalf("DeleteQueue = %v, %v, want 1", d, err)
	}
	n.put(t, disc("c2", "https://z.example/1", ""))
	if l, _ := n.client.ListCrawls(ctx, &pb.Local{}); !slices.Contains(l.GetValues(), "c2") {
		t.Fatalf("ListCrawls = %v", l.GetValues())
	}
	del, err := n.client.DeleteCrawl(ctx, &pb.DeleteCrawlMessage{Value: "c2"})
	if err != nil || del.GetValue() != 1 {
		t.Fatalf("DeleteCrawl = %v, %v, want 1", del, err)
	}
	// The id is free at once: the same URL is new in the new crawl.
	if st := n.put(t, disc("c2", "https://z.example/1", "")); st["https://z.example/1"] != OK {
		t.Fatalf("put after DeleteCrawl: %v", st)
	}
}

// TestQueueAfterDelete: a queue deleted, alone or with its crawl, takes
// new URLs and settings at once and hands them out. Its state's key holds
// a delete marker then, which a create must write over.
func TestQueueAfterDelete(t *testing.T) {
	for _, tc := range []struct {
		name   string
		delete func(ctx context.Context, c pb.URLFrontierClient) error
	}{
		{"DeleteQueue", func(ctx context.Context, c pb.URLFrontierClient) error {
			_, err := c.DeleteQueue(ctx, &pb.QueueWithinCrawlParams{CrawlID: "c", Key: "d.example"})
			return err
		}},
		{"DeleteCrawl", func(ctx context.Context, c pb.URLFrontierClient) error {
			_, err := c.DeleteCrawl(ctx, &pb.DeleteCrawlMessage{Value: "c"})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			n := e.start("n1")
			ctx := ctxT(t)
			n.put(t, disc("c", "https://d.example/1", ""))
			setDelay := func(d uint32) {
				t.Helper()
				if _, err := n.client.SetDelay(ctx, &pb.QueueDelayParams{CrawlID: "c", Key: "d.example", DelayRequestable: d}); err != nil {
					t.Fatalf("SetDelay: %v", err)
				}
			}
			setDelay(5)
			// The URL's turn: the queue's state is stored.
			if got := n.get(t, anyCrawl(0, 0, 60)); len(got) != 1 {
				t.Fatalf("GetURLs = %v, want the queued URL", got)
			}
			deleteAndPut := func(u string) {
				t.Helper()
				if err := tc.delete(ctx, n.client); err != nil {
					t.Fatal(err)
				}
				if st := n.put(t, disc("c", u, "")); st[u] != OK {
					t.Fatalf("put after %s: %v", tc.name, st)
				}
			}
			// A turn taken over the marker (no delay: the default's).
			deleteAndPut("https://d.example/2")
			if got := n.get(t, anyCrawl(0, 0, 60)); !slices.Equal(got, []string{"https://d.example/2"}) {
				t.Fatalf("GetURLs after %s = %v, want the new URL", tc.name, got)
			}
			// A setting stored over the marker, then honoured.
			deleteAndPut("https://d.example/3")
			setDelay(7)
			if got := n.get(t, anyCrawl(0, 0, 60)); !slices.Equal(got, []string{"https://d.example/3"}) {
				t.Fatalf("GetURLs after %s and SetDelay = %v, want the new URL", tc.name, got)
			}
			n.put(t, disc("c", "https://d.example/4", ""))
			e.clk.Add(6 * time.Second)
			if got := n.get(t, anyCrawl(0, 0, 60)); len(got) != 0 {
				t.Fatalf("GetURLs within the new delay = %v, want none", got)
			}
			e.clk.Add(2 * time.Second)
			if got := n.get(t, anyCrawl(0, 0, 60)); !slices.Equal(got, []string{"https://d.example/4"}) {
				t.Fatalf("GetURLs after the new delay = %v", got)
			}
		})
	}
}

// TestBadInput: every bad request gets a status, nothing crashes. The
// client accepts at most 16 KiB of headers, as gRPC's C core (Python's
// grpcio) does: a status whose message is longer reaches it as INTERNAL.
func TestBadInput(t *testing.T) {
	n := newEnv(t).start("n1", func(o *urlfrontier.Options) { o.MaxBatch = 3 })
	ctx := ctxT(t)
	client := n.dial(t, grpc.WithMaxHeaderListSize(16<<10))
	long := strings.Repeat("a", 100<<10)
	cases := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"a crawl id that is no id", func() error {
			_, err := client.ListQueues(ctx, &pb.Pagination{CrawlID: "a b"})
			return err
		}, codes.InvalidArgument},
		{"BlockQueueUntil without a key", func() error {
			_, err := client.BlockQueueUntil(ctx, &pb.BlockQueueParams{Time: 1})
			return err
		}, codes.InvalidArgument},
		{"BlockQueueUntil in milliseconds", func() error {
			_, err := client.BlockQueueUntil(ctx, &pb.BlockQueueParams{Key: "k", Time: 1_764_000_000_000_000})
			return err
		}, codes.InvalidArgument},
		// Issue 39, item 9: the crawl role leased URLs for 136 years.
		{"GetURLs leasing for more than MaxLease", func() error {
			return drain(client.GetURLs(ctx, &pb.GetParams{DelayRequestable: uint32(urlfrontier.MaxLease/time.Second) + 1}))
		}, codes.InvalidArgument},
		{"GetURLs leasing for the most", func() error {
			return drain(client.GetURLs(ctx, &pb.GetParams{DelayRequestable: uint32(urlfrontier.MaxLease / time.Second)}))
		}, codes.OK},
		{"GetURLs leasing for 136 years", func() error {
			return drain(client.GetURLs(ctx, &pb.GetParams{DelayRequestable: math.MaxUint32}))
		}, codes.InvalidArgument},
		// Issue 39, item 14: a 100 KB URL, SKIPPED in a put, answered
		// INTERNAL: its INVALID_ARGUMENT quoted the whole URL.
		{"GetURLStatus of a 100 KB URL", func() error {
			_, err := client.GetURLStatus(ctx, &pb.URLStatusRequest{Url: "https://long.example/" + long})
			return err
		}, codes.InvalidArgument},
		{"a 100 KB crawl id", func() error {
			_, err := client.ListQueues(ctx, &pb.Pagination{CrawlID: long})
			return err
		}, codes.InvalidArgument},
		{"a batch over MaxBatch with a 100 KB ID", func() error {
			st, err := client.PutDiscovered(ctx)
			if err != nil {
				return err
			}
			items := make([]*pb.URLInfo, 4)
			for i := range items {
				items[i] = &pb.URLInfo{Url: "https://big.example/" + string(rune('a'+i))}
			}
			st.Send(&pb.DiscoveredBatch{ID: long, Items: items})
			_, err = st.Recv()
			return err
		}, codes.InvalidArgument},
		{"a batch over MaxBatch", func() error {
			st, err := client.PutDiscovered(ctx)
			if err != nil {
				return err
			}
			items := make([]*pb.URLInfo, 4)
			for i := range items {
				items[i] = &pb.URLInfo{Url: "https://big.example/" + string(rune('a'+i))}
			}
			st.Send(&pb.DiscoveredBatch{ID: "b", Items: items})
			_, err = st.Recv()
			return err
		}, codes.InvalidArgument},
		{"a message over the size limit", func() error {
			st, err := client.PutURLs(ctx)
			if err != nil {
				return err
			}
			st.Send(disc("", "https://x.example/"+strings.Repeat("a", 5<<20), ""))
			_, err = st.Recv()
			return err
		}, codes.ResourceExhausted},
	}
	for _, c := range cases {
		if err := c.call(); status.Code(err) != c.want {
			t.Errorf("%s: error %v, want %v", c.name, err, c.want)
		}
	}
	// The server still works.
	if st := n.put(t, disc("", "https://after.example/", "")); st["https://after.example/"] != OK {
		t.Fatalf("put after bad input: %v", st)
	}
}

// TestBadItemsAcked: a bad item in a put is acknowledged SKIPPED and the
// stream goes on, and bad GetURLs and GetURLStatus requests answer
// INVALID_ARGUMENT or NOT_FOUND: no bad input answers INTERNAL or
// UNAVAILABLE (issue 39), nor ends a stream. Items of at most 4 MiB, the
// server's message limit here: a larger message is RESOURCE_EXHAUSTED
// (TestBadInput).
func TestBadItemsAcked(t *testing.T) {
	n := newEnv(t).start("n1")
	ctx := ctxT(t)
	long := strings.Repeat("a", 100<<10)
	info := func(url, key, crawl string, meta map[string]*pb.StringList) *pb.URLInfo {
		return &pb.URLInfo{Url: url, Key: key, CrawlID: crawl, Metadata: meta}
	}
	bigValue := map[string]*pb.StringList{"m": {Values: []string{strings.Repeat("v", 1100<<10)}}} // over a stored value's 1 MiB
	manyKeys := map[string]*pb.StringList{}
	for i := range 3000 {
		manyKeys[fmt.Sprintf("key-%d", i)] = &pb.StringList{Values: []string{"v"}}
	}
	bad := []struct {
		name string
		info *pb.URLInfo
	}{
		{"a 100 KB URL", info("https://long.example/"+long, "", "", nil)},
		{"no URL", info("", "", "", nil)},
		{"a 5 KB queue key", info("https://k.example/", strings.Repeat("k", 5<<10), "", nil)},
		{"a crawl id that is no id", info("https://c.example/", "", "a b", nil)},
		{"a 1.1 MB metadata value", info("https://m.example/", "", "", bigValue)},
		{"3,000 metadata keys", info("https://mm.example/", "", "", manyKeys)},
	}
	var items []*pb.URLItem
	for _, b := range bad {
		items = append(items,
			&pb.URLItem{ID: "discovered " + b.name, Item: &pb.URLItem_Discovered{Discovered: &pb.DiscoveredURLItem{Info: b.info}}},
			&pb.URLItem{ID: "known " + b.name, Item: &pb.URLItem_Known{Known: &pb.KnownURLItem{Info: b.info}}})
	}
	items = append(items,
		&pb.URLItem{ID: "no item"},
		&pb.URLItem{ID: "refetchable at the end of time", Item: &pb.URLItem_Known{Known: &pb.KnownURLItem{
			Info: info("https://d.example/", "", "", nil), RefetchableFromDate: math.MaxUint64}}},
		&pb.URLItem{ID: "a good one after them", Item: &pb.URLItem_Discovered{Discovered: &pb.DiscoveredURLItem{Info: info("https://good.example/", "", "", nil)}}})
	st, err := n.client.PutURLs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if err := st.Send(it); err != nil {
			t.Fatalf("send %s: %v", it.GetID(), err)
		}
	}
	st.CloseSend()
	for range items {
		a, err := st.Recv()
		if err != nil {
			t.Fatalf("PutURLs: %v after bad items, want an ack for each", err)
		}
		want := pb.AckMessage_SKIPPED
		if a.GetID() == "a good one after them" {
			want = OK
		}
		if a.GetStatus() != want {
			t.Errorf("PutURLs %s: %v, want %v", a.GetID(), a.GetStatus(), want)
		}
	}
	for _, c := range []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"GetURLs of a 100 KB queue key", func() error { return drain(n.client.GetURLs(ctx, &pb.GetParams{Key: long})) }, codes.InvalidArgument},
		{"GetURLs of a crawl id that is no id", func() error {
			return drain(n.client.GetURLs(ctx, &pb.GetParams{Item: &pb.GetParams_CrawlID{CrawlID: "a b"}}))
		}, codes.InvalidArgument},
		{"GetURLs of every URL of every queue", func() error {
			return drain(n.client.GetURLs(ctx, &pb.GetParams{MaxUrlsPerQueue: math.MaxUint32, MaxQueues: math.MaxUint32}))
		}, codes.OK},
		{"GetURLStatus without a URL", func() error { _, err := n.client.GetURLStatus(ctx, &pb.URLStatusRequest{}); return err }, codes.InvalidArgument},
		{"GetURLStatus of a 100 KB queue key", func() error {
			_, err := n.client.GetURLStatus(ctx, &pb.URLStatusRequest{Url: "https://d.example/", Key: long})
			return err
		}, codes.InvalidArgument},
		{"GetURLStatus in a crawl id that is no id", func() error {
			_, err := n.client.GetURLStatus(ctx, &pb.URLStatusRequest{Url: "https://d.example/", CrawlID: "a b"})
			return err
		}, codes.InvalidArgument},
		{"GetURLStatus of a URL with a NUL", func() error {
			_, err := n.client.GetURLStatus(ctx, &pb.URLStatusRequest{Url: "https://d.example/\x00"})
			return err
		}, codes.NotFound},
	} {
		if err := c.call(); status.Code(err) != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// drain reads a server stream to its end: nil at io.EOF, else the error
// that ended it.
func drain[T any](st grpc.ServerStreamingClient[T], err error) error {
	for err == nil {
		_, err = st.Recv()
	}
	if err == io.EOF {
		return nil
	}
	return err
}

// TestCloseLeaksNothing: Close ends the watches, the heartbeat and the
// active flag's watch, and takes the node off the live ones.
func TestCloseLeaksNothing(t *testing.T) {
	e := newEnv(t)
	a := e.start("a:1")
	a.put(t, disc("", "https://leak.example/", ""))
	// One NATS connection for the servers measured, and a first server
	// and client to start what the process keeps (gRPC's shared
	// goroutines).
	e.js = e.nats.JetStream()
	w := e.start("w:1")
	w.get(t, anyCrawl(0, 0, 1))
	w.stop()
	before, _ := clientGoroutines()
	b := e.start("b:1")
	b.get(t, anyCrawl(0, 0, 1))
	b.stop()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, stacks := clientGoroutines()
		if n <= before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after Close, %d before:\n%s", n, before, stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if nodes, _ := a.client.ListNodes(ctxT(t), &pb.Empty{}); !slices.Equal(nodes.GetValues(), []string{"a:1"}) {
		t.Errorf("ListNodes after b closed = %v, want [a:1]", nodes.GetValues())
	}
}

// clientGoroutines counts the goroutines that are not the embedded NATS
// server's (which starts and ends its own as consumers come and go, on its
// own schedule), and returns their stacks.
func clientGoroutines() (int, string) {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var kept []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "created by github.com/nats-io/nats-server/") && !strings.Contains(g, "nats-server/v2/server.") {
			kept = append(kept, g)
		}
	}
	return len(kept), strings.Join(kept, "\n\n")
}

// TestCountsAgree: CountURLs without a filter answers from the queues'
// counts; after puts, completions, refetch dates, a purge and a deleted
// queue, on two servers, it equals the count read from the URLs
// themselves (a filter every URL matches), and GetStats' size plus in
// process.
func TestCountsAgree(t *testing.T) {
	e := newEnv(t)
	a, b := e.start("a:1"), e.start("b:1")
	var items []*pb.URLItem
	for q := range 8 {
		for i := range 25 {
			items = append(items, disc("c", fmt.Sprintf("https://h%d.example/%d", q, i), ""))
		}
	}
	a.put(t, items...)
	eventually(t, "b sees a's URLs", func() bool {
		c, err := b.client.CountURLs(ctxT(t), &pb.CountUrlParams{CrawlID: "c"})
		return err == nil && c.GetValue() == 200
	})
	got := b.get(t, &pb.GetParams{Item: &pb.GetParams_CrawlID{CrawlID: "c"}, MaxUrlsPerQueue: 5, DelayRequestable: 60})
	// want: each queue's URLs not completed, as the calls below leave them;
	// done: its completed ones.
	want, done := map[string]uint64{}, map[string]uint64{}
	for q := range 8 {
		want[fmt.Sprintf("h%d.example", q)] = 25
	}
	var acks []*pb.URLItem
	for i, u := range got {
		refetch := uint64(0)
		if i%2 == 0 {
			refetch = uint64(e.clk.Now().Add(time.Hour).Unix())
		} else {
			want[strings.Split(u, "/")[2]]--
			done[strings.Split(u, "/")[2]]++
		}
		acks = append(acks, known("c", u, refetch))
	}
	want["h1.example"]++ // later
	want["h2.example"]++ // new
	var total uint64
	for _, v := range want {
		total += v
	}
	want[""] = total - want["h3.example"] - want["h7.example"]
	done["h0.example"]++ // never-queued
	done["h7.example"] = 0
	for k, v := range done {
		if k != "" {
			done[""] += v
		}
	}
	for u, st := range a.put(t, append(acks, known("c", "https://h0.example/never-queued", 0), known("c", "https://h1.example/later", uint64(e.clk.Now().Add(time.Hour).Unix())))...) {
		if st != pb.AckMessage_OK {
			t.Fatalf("known update of %s: %v", u, st)
		}
	}
	ctx := ctxT(t)
	if _, err := b.client.DeleteQueue(ctx, &pb.QueueWithinCrawlParams{CrawlID: "c", Key: "h7.example"}); err != nil {
		t.Fatal(err)
	}
	e.clk.Add(48 * time.Hour)
	if st := a.put(t, disc("c", "https://h2.example/new", "")); st["https://h2.example/new"] != pb.AckMessage_OK {
		t.Fatalf("put of a new URL: %v", st)
	}
	if p, err := a.client.PurgeURLs(ctx, &pb.PurgeUrlParams{CrawlID: "c", Key: "h3.example", Days: 1}); err != nil || p.GetValue() != want["h3.example"] {
		t.Fatalf("PurgeURLs(h3) = %v, %v, want %d", p, err, want["h3.example"])
	}
	want["h3.example"], want["h7.example"] = 0, 0
	for _, n := range []*node{a, b} {
		for _, key := range []string{"", "h0.example", "h1.example", "h2.example", "h3.example", "h4.example", "h7.example"} {
			var fast, read *pb.Long
			var st *pb.Stats
			// Each server reaches the others' writes within milliseconds:
			// the three answers agree and are the expected counts;
			// CountURLs counts the completed URLs too, as the reference.
			all := want[key] + done[key]
			eventually(t, fmt.Sprintf("queue %q counts %d URLs, %d completed", key, all, done[key]), func() bool {
				var err error
				if fast, err = n.client.CountURLs(ctx, &pb.CountUrlParams{CrawlID: "c", Key: key}); err != nil {
					t.Fatal(err)
				}
				if read, err = n.client.CountURLs(ctx, &pb.CountUrlParams{CrawlID: "c", Key: key, Filter: ptr("https://")}); err != nil {
					t.Fatal(err)
				}
				if st, err = n.client.GetStats(ctx, &pb.QueueWithinCrawlParams{CrawlID: "c", Key: key}); err != nil {
					t.Fatal(err)
				}
				return fast.GetValue() == all && read.GetValue() == all && st.GetSize()+uint64(st.GetInProcess()) == want[key] &&
					st.GetCounts()["completed"] == done[key]
			})
		}
	}
}
