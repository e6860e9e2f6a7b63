package crawl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/testsite"
)

// testPipeline is a real NATS server with the pipeline's streams and a real
// dedup worker (in memory) admitting what the crawler discovers.
type testPipeline struct {
	js    jetstream.JetStream
	topo  frontier.Topology
	stats *stats.Memory
}

func startPipeline(tb testing.TB, topo frontier.Topology) *testPipeline {
	tb.Helper()
	srv := natstest.Start(tb, natstest.Options{})
	p := &testPipeline{js: srv.JetStream(), topo: topo.WithDefaults(), stats: stats.NewMemory()}
	filter, err := dedup.NewScalableBloom(dedup.ScalableOptions{Growth: dedup.Growth{InitialCapacity: 100_000, TargetFPP: 1e-6}})
	if err != nil {
		tb.Fatal(err)
	}
	canon, err := normalize.New(normalize.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	w, err := frontier.NewWorker(srv.Conn(), filter, canon, p.stats, frontier.WorkerOptions{Topology: topo, StatsInterval: 50 * time.Millisecond, FetchWait: 10 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("dedup worker: %v", err)
		}
		w.Close()
	})
	return p
}

func newCrawler(tb testing.TB, js jetstream.JetStream, opts Options) *Crawler {
	tb.Helper()
	c, err := New(js, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// fastOptions are crawl options for a site on loopback in a test.
func fastOptions(topo frontier.Topology, maxDepth int) Options {
	return Options{
		Topology:     topo,
		Fetcher:      FetcherOptions{HostParallel: 4, HostDelay: -1},
		MaxDepth:     maxDepth,
		RetryBackoff: 100 * time.Millisecond,
		MaxRetries:   2,
		LeaseTTL:     3 * time.Second,
		IdleExit:     time.Second,
	}
}

func checkPlan(t *testing.T, site *testsite.Site, plan testsite.Plan, retries int) {
	t.Helper()
	got := site.Fetches()
	for _, p := range plan.Once {
		if got[p] != 1 {
			t.Errorf("%s fetched %d times, want 1 (requests: %q)", p, got[p], site.Requests(p))
		}
	}
	for _, p := range plan.Never {
		if got[p] != 0 {
			t.Errorf("%s fetched %d times, want never", p, got[p])
		}
	}
	for _, p := range plan.Broken {
		if got[p] != 1+retries {
			t.Errorf("%s (always 500) fetched %d times, want %d", p, got[p], 1+retries)
		}
	}
	for _, p := range plan.Flaky {
		if got[p] != 2 {
			t.Errorf("%s (503 once) fetched %d times, want 2", p, got[p])
		}
	}
	for _, p := range plan.RedirectTrap(5) {
		if got[p] != 1 {
			t.Errorf("%s (redirect chain) fetched %d times, want 1", p, got[p])
		}
	}
	cal := 0
	for p, n := range got {
		if strings.HasPrefix(p, "/calendar/") {
			cal += n
			if n != 1 {
				t.Errorf("%s fetched %d times, want 1", p, n)
			}
		}
	}
	if cal != plan.Calendar {
		t.Errorf("calendar trap: %d months fetched, want %d (bounded by max depth)", cal, plan.Calendar)
	}
	if n := site.OffScopeFetches(); n != 0 {
		t.Errorf("off-scope host fetched %d times, want 0", n)
	}
	var unexpected []string
	known := map[string]bool{"/robots.txt": true}
	for _, p := range append(append(append(append(plan.Once, plan.Never...), plan.Broken...), plan.Flaky...), plan.RedirectTrap(5)...) {
		known[p] = true
	}
	for p := range got {
		if !known[p] && !strings.HasPrefix(p, "/calendar/") {
			unexpected = append(unexpected, p)
		}
	}
	sort.Strings(unexpected)
	if len(unexpected) > 0 {
		t.Errorf("unexpected paths fetched: %q", unexpected)
	}
}

func TestCrawlerCrawlsSiteOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		topo frontier.Topology
	}{
		{"default", frontier.Topology{Partitions: 4}},
		// Pages whose links do not fit in one 1 KiB message are published
		// in several.
		{"small messages", frontier.Topology{Partitions: 4, Limits: frontier.Limits{MaxBytes: 1024}}},
	} {
		t.Run(tc.name, func(t *testing.T) { testCrawlSiteOnce(t, tc.topo) })
	}
}

func testCrawlSiteOnce(t *testing.T, topo frontier.Topology) {
	site := startSite(t, testsite.Options{Pages: 120})
	const maxDepth = 8
	if site.Depth() >= maxDepth {
		t.Fatalf("site tree depth %d needs max depth > %d", site.Depth(), maxDepth)
	}
	p := startPipeline(t, topo)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := seed(ctx, p.js, topo, "t1", []string{site.URL}); err != nil {
		t.Fatal(err)
	}
	opts := fastOptions(topo, maxDepth)
	opts.Logger = testLogger(t)
	c := newCrawler(t, p.js, opts)
	defer checkGoroutines(t, c)
	if err := c.Run(ctx); !errors.Is(err, ErrIdle) {
		d, _ := QueueDepth(context.Background(), p.js, topo)
		t.Fatalf("Run = %v, want %v; stats %+v, queue %+v", err, ErrIdle, c.Stats(), d)
	}
	checkPlan(t, site, site.Plan(maxDepth), 2)

	st := c.Stats()
	plan := site.Plan(maxDepth)
	fetches := 0
	for path, n := range site.Fetches() {
		if path != "/robots.txt" {
			fetches += n
		}
	}
	if int(st.Fetched) != fetches {
		t.Errorf("crawler counted %d responses, site served %d", st.Fetched, fetches)
	}
	if int(st.Pages) != plan.Pages {
		t.Errorf("crawler counted %d HTML pages, want %d", st.Pages, plan.Pages)
	}
	if st.Failed[ReasonRobots] != int64(len(plan.Never))/2 {
		t.Errorf("robots.txt refusals = %d, want %d; stats %+v", st.Failed[ReasonRobots], len(plan.Never)/2, st)
	}
	if n := Sum(st.Skipped); n != 0 {
		t.Errorf("skipped %d entries: %v", n, st.Skipped)
	}
	t.Logf("stats: %+v", st)
	if len(st.Partitions) != 0 || st.InFlight != 0 {
		t.Errorf("after Run: partitions %v, in flight %d; want none", st.Partitions, st.InFlight)
	}
}

// testLogger writes the crawler's log through t.Logf.
func testLogger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// TestCrawlersSharePartitions runs two crawlers over two sites whose hosts
// fall in different partitions: each crawler ends up owning one partition,
// each host is crawled by one crawler at a time (never two requests at once
// with HostParallel 1), and every page is fetched once.
func TestCrawlersSharePartitions(t *testing.T) {
	topo := frontier.Topology{Partitions: 2}.WithDefaults()
	addr := ""
	for i := 3; i < 40 && addr == ""; i++ {
		if a := fmt.Sprintf("127.0.0.%d", i); topo.Partition(a) != topo.Partition("localhost") {
			addr = a
		}
	}
	siteA := startSite(t, testsite.Options{Pages: 60, Latency: 2 * time.Millisecond})
	// Another link graph (Seed): the same generated pages under the same
	// paths would be a mirror of siteA, which a crawl fetches once.
	siteB := startSite(t, testsite.Options{Pages: 60, Latency: 2 * time.Millisecond, Addr: addr, Seed: 2})
	const maxDepth = 6
	p := startPipeline(t, topo)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if err := seed(ctx, p.js, topo, "two", []string{siteA.URL, siteB.URL}); err != nil {
		t.Fatal(err)
	}
	opts := fastOptions(topo, maxDepth)
	opts.Fetcher.HostParallel = 1
	opts.IdleExit = 2 * time.Second
	var crawlers []*Crawler
	errs := make(chan error, 2)
	for i := range 2 {
		o := opts
		o.ID = fmt.Sprintf("crawler-%d", i)
		o.Fetcher.UserAgent = fmt.Sprintf("SieveBot-%d/1.0", i)
		c := newCrawler(t, p.js, o)
		crawlers = append(crawlers, c)
		go func() { errs <- c.Run(ctx) }()
	}
	// Both crawlers come to own one partition each.
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, b := crawlers[0].Stats().Partitions, crawlers[1].Stats().Partitions
		if len(a) == 1 && len(b) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partitions never balanced: %v and %v", a, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrIdle) {
			t.Errorf("Run = %v, want %v", err, ErrIdle)
		}
	}
	for _, site := range []*testsite.Site{siteA, siteB} {
		checkPlan(t, site, site.Plan(maxDepth), 2)
		if n, reqs := site.MaxInFlight(); n != 1 {
			t.Errorf("%s served %d requests at once: %q", site.Host(), n, reqs)
		}
	}
	var fetched int64
	for i, c := range crawlers {
		st := c.Stats()
		fetched += st.Fetched
		t.Logf("crawler %d fetched %d", i, st.Fetched)
	}
	served := 0
	for _, site := range []*testsite.Site{siteA, siteB} {
		for path, n := range site.Fetches() {
			if path != "/robots.txt" {
				served += n
			}
		}
	}
	if fetched != int64(served) {
		t.Errorf("crawlers counted %d responses, sites served %d", fetched, served)
	}
}

// TestCrawlerStopsGracefully stops a crawler in the middle of a crawl: it
// returns promptly, gives its partitions back, and a second crawler
// finishes the crawl without fetching any page twice.
func TestCrawlerStopsGracefully(t *testing.T) {
	site := startSite(t, testsite.Options{Pages: 120, Latency: 5 * time.Millisecond})
	topo := frontier.Topology{Partitions: 4}
	p := startPipeline(t, topo)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if err := seed(ctx, p.js, topo, "stop", []string{site.URL}); err != nil {
		t.Fatal(err)
	}
	const maxDepth = 8
	opts := fastOptions(topo, maxDepth)
	opts.Fetcher.HostParallel = 2
	opts.MaxRetries = -1 // a retried URL counts its deliveries, interrupted ones too
	first := newCrawler(t, p.js, opts)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- first.Run(runCtx) }()
	for deadline := time.Now().Add(30 * time.Second); first.Stats().Fetched < 40; {
		if time.Now().After(deadline) {
			t.Fatal("first crawler never got going")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel = %v, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if st := first.Stats(); st.InFlight != 0 || len(st.Partitions) != 0 {
		t.Fatalf("after Run: in flight %d, partitions %v", st.InFlight, st.Partitions)
	}
	kv, err := p.js.KeyValue(ctx, p.topo.LeaseBucket())
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.topo.Partitions {
		if e, err := kv.Get(ctx, p.topo.LeaseKey(i)); err == nil {
			t.Errorf("partition %d still leased to %s after a graceful stop", i, e.Value())
		}
	}
	firstFetched := first.Stats().Fetched

	second := newCrawler(t, p.js, opts)
	if err := second.Run(ctx); !errors.Is(err, ErrIdle) {
		t.Fatalf("second Run = %v, want %v", err, ErrIdle)
	}
	got := site.Fetches()
	plan := site.Plan(maxDepth)
	for _, path := range plan.Once {
		if got[path] != 1 {
			t.Errorf("%s fetched %d times, want 1 (first crawler stopped after %d fetches)", path, got[path], firstFetched)
		}
	}
	for _, path := range plan.Never {
		if got[path] != 0 {
			t.Errorf("%s fetched %d times, want 0", path, got[path])
		}
	}
}

// checkGoroutines closes c and checks that no goroutine of the crawler,
// its fetcher or its HTTP connections is left.
func checkGoroutines(t *testing.T, c *Crawler) {
	t.Helper()
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := ownGoroutines()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d goroutines left after Close:\n%s", len(left), strings.Join(left, "\n\n"))
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ownGoroutines returns the stacks of goroutines running crawl code (tests
// aside) or HTTP client connections.
func ownGoroutines() []string {
	buf := make([]byte, 4<<20)
	var out []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		own := strings.Contains(g, "sieve/crawl.(*") || strings.Contains(g, "net/http.(*persistConn)") || strings.Contains(g, "gocolly")
		if own && !strings.Contains(g, "_test.go") {
			out = append(out, g)
		}
	}
	return out
}

// TestCrawlerSeedMoves seeds a URL that redirects to another host, as
// http://example.com/ → https://www.example.com/ does: the crawl follows the
// seed to its new host and crawls it. A redirect is no seed, though: when the
// new host is a loopback one, the address guard refuses it unless allowed.
func TestCrawlerSeedMoves(t *testing.T) {
	for _, tc := range []struct {
		name  string
		allow []string
	}{
		{"to a forbidden address", nil},
		{"to an allowed address", []string{"localhost"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := startSite(t, testsite.Options{Pages: 30})
			mux := http.NewServeMux()
			mux.Handle("/{$}", http.RedirectHandler(site.URL, http.StatusMovedPermanently))
			mover := httptest.NewUnstartedServer(mux) // robots.txt: 404
			l, err := net.Listen("tcp", "127.0.0.9:0")
			if err != nil {
				t.Fatal(err)
			}
			mover.Listener = l
			mover.Start()
			defer mover.Close()

			topo := frontier.Topology{Partitions: 2}
			p := startPipeline(t, topo)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			if err := seed(ctx, p.js, topo, "moved", []string{mover.URL + "/"}); err != nil {
				t.Fatal(err)
			}
			const maxDepth = 6
			opts := fastOptions(topo, maxDepth)
			opts.Fetcher.AllowAddresses = tc.allow
			c := newCrawler(t, p.js, opts)
			if err := c.Run(ctx); !errors.Is(err, ErrIdle) {
				t.Fatalf("Run = %v", err)
			}
			st := c.Stats()
			if tc.allow == nil {
				if st.Failed[ReasonForbiddenAddress] != 1 || st.Fetched != 1 || len(site.Fetches()) != 0 {
					t.Errorf("moved to loopback: fetched %d, failed %v, site requests %v; want only the redirect fetched and its target refused",
						st.Fetched, st.Failed, site.Fetches())
				}
				return
			}
			checkPlan(t, site, site.Plan(maxDepth), 2)
		})
	}
}

// seed seeds a crawl as the crawler's seed command does (crawls.Store).
func seed(ctx context.Context, js jetstream.JetStream, topo frontier.Topology, id string, urls []string) error {
	store, err := crawls.Open(ctx, js, topo, crawls.Options{})
	if err != nil {
		return err
	}
	_, err = store.Seed(ctx, id, urls)
	return err
}
