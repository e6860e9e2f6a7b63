package watch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/testsite"
	"github.com/sievecrawl/sieve/warc"
)

// testPipeline is a real pipeline in the test process, wired as the
// embedded crawler wires it: the test site, a NATS server with JetStream, a
// dedup worker (pipeline.Worker) with an in-memory scalable Bloom filter and
// a crawler, all on one metrics registry and watched by one Server on a
// loopback port.
type testPipeline struct {
	site    *testsite.Site
	topo    frontier.Topology
	worker  *pipeline.Worker
	crawler *crawl.Crawler
	queues  *JetStreamQueues
	rules   *frontier.Rules // the crawl's learned rules, which the page lists
	watch   *Server
	url     string
	// done receives the crawler's Run result once the crawl is idle.
	done chan error
}

const testCrawl = "watched"

// startPipeline starts the pipeline and the crawl of a test site of pages
// pages; the crawl ends by itself when the frontier is empty.
func startPipeline(tb testing.TB, pages int) *testPipeline {
	tb.Helper()
	return startArchivingPipeline(tb, pages, nil)
}

// startArchivingPipeline is startPipeline with a crawler archiving into a
// new directory, with the captures captures returns for the site at
// siteURL; nil: no archive.
func startArchivingPipeline(tb testing.TB, pages int, captures func(siteURL string) warc.Captures) *testPipeline {
	tb.Helper()
	site, err := testsite.New(testsite.Options{Pages: pages})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { site.Close() })
	var caps warc.Captures
	if captures != nil {
		caps = captures(site.URL)
	}
	p := startCrawl(tb, []string{site.URL}, caps)
	p.site = site
	return p
}

// startCrawl starts the pipeline and a crawl of seeds, with a crawler
// archiving into a new directory with the captures caps (nil: no archive).
func startCrawl(tb testing.TB, seeds []string, caps warc.Captures) *testPipeline {
	tb.Helper()
	srv := natstest.Start(tb, natstest.Options{})
	cfg := config.Default()
	cfg.Frontier.Partitions = 4
	// Small layers, so the crawl grows the filter and the page shows layers.
	// A tight bound: the tests expect the filter to count every admitted URL
	// as new when it is marked, which a false positive at marking time (the
	// URL's last bits set by other URLs between Contains and TestAndAdd)
	// breaks: at 0.001, one run in CI counted 126 of 127.
	cfg.Filter.Capacity, cfg.Filter.FPP = 64, 1e-9
	cfg.Worker.StatsInterval, cfg.Worker.FetchWait = 50*time.Millisecond, 10*time.Millisecond
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	topo := cfg.Frontier.Topology().WithDefaults()
	p := &testPipeline{topo: topo, done: make(chan error, 1)}
	canon, err := cfg.Normalize.Normalizer()
	if err != nil {
		tb.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	p.worker = &pipeline.Worker{Config: cfg, Conn: srv.Conn(), Registerer: reg}
	if err := p.worker.Open(context.Background()); err != nil {
		tb.Fatal(err)
	}
	var archive *warc.Recorder
	if caps != nil {
		w, err := warc.Open(warc.Options{Dir: tb.TempDir(), CrawlerID: "watched"})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { w.Close() })
		archive = warc.NewRecorder(w, warc.RecorderOptions{Captures: caps})
	}
	p.crawler, err = crawl.New(srv.JetStream(), crawl.Options{
		Archive:      archive,
		Topology:     topo,
		Fetcher:      crawl.FetcherOptions{HostParallel: 4, HostDelay: -1},
		MaxDepth:     8,
		RetryBackoff: 100 * time.Millisecond,
		MaxRetries:   2,
		LeaseTTL:     3 * time.Second,
		IdleExit:     time.Second,
		Canonicalize: canon.URL,
		Registerer:   reg,
	})
	if err != nil {
		tb.Fatal(err)
	}
	p.queues = NewJetStreamQueues(srv.JetStream(), topo)
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	p.rules, err = frontier.OpenRules(rctx, srv.JetStream(), topo)
	rcancel()
	if err != nil {
		tb.Fatal(err)
	}
	p.watch, err = New(Sources{
		Role: "embedded", Counters: CountersFunc(p.worker.StatsSnapshot), Filter: FilterFunc(p.worker.FilterStats),
		Membership: p.worker, Queues: p.queues, Worker: p.worker, Crawler: p.crawler, Peers: NewJetStreamPeers(srv.JetStream(), topo, 0),
		Rules: p.rules,
	}, Options{Interval: 200 * time.Millisecond, AnnounceEvery: 200 * time.Millisecond, RulesEvery: 200 * time.Millisecond, Registry: reg})
	if err != nil {
		tb.Fatal(err)
	}
	addr, err := p.watch.Listen("127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p.url = PageURL(addr.String())

	ctx, cancel := context.WithCancel(context.Background())
	wdone := make(chan error, 1)
	go func() { wdone <- p.worker.Run(ctx) }()
	tb.Cleanup(func() {
		p.watch.Close()
		p.crawler.Close()
		cancel()
		if err := <-wdone; err != nil {
			tb.Errorf("dedup worker: %v", err)
		}
		p.worker.Close()
	})
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	store, err := crawls.Open(sctx, srv.JetStream(), topo, crawls.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := store.Seed(sctx, testCrawl, seeds); err != nil {
		tb.Fatal(err)
	}
	go func() {
		err := p.crawler.Run(ctx)
		if errors.Is(err, crawl.ErrIdle) {
			err = nil
		}
		p.done <- err
	}()
	return p
}

// wait waits for the crawl to end and the worker to have counted all it
// published, then for one more sample, and returns the final report.
func (p *testPipeline) wait(tb testing.TB) Report {
	tb.Helper()
	select {
	case err := <-p.done:
		if err != nil {
			tb.Fatalf("crawl: %v", err)
		}
	case <-time.After(90 * time.Second):
		tb.Fatal("crawl did not end in 90s")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := p.queues.Depths(context.Background())
		if err == nil && d.DiscoveredQueued == 0 && d.DiscoveredInFlight == 0 {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("discovered stream not drained: %+v, %v", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The worker adds its counts every StatsInterval; the watch samples
	// every Interval: wait until a sample shows the worker's final totals.
	for {
		ws, _ := p.worker.Status()
		want := ws.Totals
		r := p.watch.Report()
		if r.Shared != nil && r.Shared.Totals.Links == want.Links && r.Shared.Totals.Admitted == want.Admitted &&
			r.Crawler != nil && r.Crawler.Fetched == p.crawler.Stats().Fetched {
			return r
		}
		if time.Now().After(deadline) {
			tb.Fatalf("watch report never caught up: shared %+v, worker %+v", r.Shared, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestQueuesBeforeStreams checks that queues read before any worker has
// created the streams are empty, not an error (a process's page starts
// before its worker).
func TestQueuesBeforeStreams(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := NewJetStreamQueues(srv.JetStream(), frontier.Topology{Prefix: "fresh"}).Depths(ctx)
	if err != nil || d.DiscoveredQueued != 0 || d.FrontierQueued != 0 {
		t.Fatalf("Depths before the streams exist = %+v, %v; want empty, no error", d, err)
	}
}
