package crawl

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/testsite"
)

// testPipeline is a real NATS server with the pipeline's streams, and an
// admission loop standing in for the dedup worker: it canonicalizes links
// and lets each canonical URL through once, publishing frontier entries.
type testPipeline struct {
	js   jetstream.JetStream
	topo frontier.Topology

	mu       sync.Mutex
	admitted map[string]int
}

func startPipeline(tb testing.TB, topo frontier.Topology) *testPipeline {
	tb.Helper()
	srv := natstest.Start(tb, natstest.Options{})
	js := srv.JetStream()
	ctx, cancel := context.WithCancel(context.Background())
	p := &testPipeline{js: js, topo: topo.WithDefaults(), admitted: map[string]int{}}
	if err := p.topo.Ensure(ctx, js); err != nil {
		tb.Fatal(err)
	}
	cons, err := js.Consumer(ctx, p.topo.DiscoveredStream(), p.topo.Consumer())
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			batch, err := cons.Fetch(64, jetstream.FetchMaxWait(200*time.Millisecond))
			if err != nil {
				continue
			}
			for msg := range batch.Messages() {
				p.admit(ctx, tb, msg)
			}
		}
	}()
	tb.Cleanup(func() { cancel(); <-done })
	return p
}

func (p *testPipeline) admit(ctx context.Context, tb testing.TB, msg jetstream.Msg) {
	d, err := frontier.DecodeDiscovered(msg.Data(), frontier.Limits{})
	if err != nil {
		tb.Errorf("crawler published an undecodable message: %v", err)
		msg.Term()
		return
	}
	for _, l := range d.Links {
		c, err := normalize.URL(l)
		if err != nil {
			continue
		}
		p.mu.Lock()
		p.admitted[c]++
		first := p.admitted[c] == 1
		p.mu.Unlock()
		if !first {
			continue
		}
		u, _ := url.Parse(c)
		e := frontier.Entry{Crawl: d.Crawl, URL: c, Depth: d.LinkDepth(), From: d.URL}
		data, _ := e.Encode()
		subj := p.topo.FrontierSubject(d.Crawl, p.topo.Partition(u.Hostname()))
		if _, err := p.js.Publish(ctx, subj, data, jetstream.WithMsgID(frontier.MsgID(c))); err != nil {
			tb.Errorf("publish entry: %v", err)
		}
	}
	msg.Ack()
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
	for _, p := range append(append(append(plan.Once, plan.Never...), plan.Broken...), plan.Flaky...) {
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
	site := startSite(t, testsite.Options{Pages: 120})
	const maxDepth = 8
	if site.Depth() >= maxDepth {
		t.Fatalf("site tree depth %d needs max depth > %d", site.Depth(), maxDepth)
	}
	topo := frontier.Topology{Partitions: 4}
	p := startPipeline(t, topo)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := Seed(ctx, p.js, topo, "t1", []string{site.URL}); err != nil {
		t.Fatal(err)
	}
	opts := fastOptions(topo, maxDepth)
	opts.Logger = testLogger(t)
	c := newCrawler(t, p.js, opts)
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
