package frontier_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"runtime"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/dust"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/redistest"
	"github.com/sievecrawl/sieve/stats"
)

// The pipeline benchmark is a test that prints a table; it runs only when
// asked:
//
//	go test ./frontier -run TestPipelineThroughput -sieve.pipelinebench -v
//
// It measures discovered URLs per second through the whole worker — NATS in,
// JSON decode, normalize, RedisBloom, NATS out, acks — for 1 and 2 workers,
// on a crawl-shaped stream (100 links per page, 90% of them repeats), and in
// the same run the rates of normalizing the same links alone and of the same
// filter calls alone, with the ratios. NATS runs in the test process, Redis
// beside it; all share the machine's cores, as on a single box.
var (
	pipelineBench      = flag.Bool("sieve.pipelinebench", false, "run the pipeline throughput table (TestPipelineThroughput)")
	pipelineBenchPages = flag.Int("sieve.pipelinebench.pages", 3000, "discovered messages in the stream (100 links each)")
)

const (
	benchLinksPerPage = 100
	benchNewPerPage   = 10 // 90% repeats
	benchHosts        = 50
	benchBatch        = 64 // the worker's default batch
)

// crawlStream returns pages of a crawl: each links to benchNewPerPage URLs
// never linked before and to repeats of earlier ones, in the spellings pages
// use (relative, absolute, fragments, tracking parameters, host case).
func crawlStream(pages int) (stream []frontier.Discovered, unique int) {
	r := rand.New(rand.NewPCG(42, 1))
	url := func(n int) (host int, path string) {
		return n % benchHosts, fmt.Sprintf("/articles/%d/item-%d.html", n/benchHosts%97, n)
	}
	next := 0
	for i := 0; i < pages; i++ {
		ph, ppath := url(r.IntN(max(next, 1)))
		d := frontier.Discovered{Crawl: "bench", URL: fmt.Sprintf("https://www.site%d.example%s", ph, ppath), Depth: 2}
		for j := 0; j < benchLinksPerPage; j++ {
			var n int
			if j < benchNewPerPage || next == 0 {
				n = next
				next++
			} else {
				n = r.IntN(next)
			}
			h, p := url(n)
			var link string
			switch {
			case h == ph && j%3 == 0:
				link = p // relative to the page's host
			case j%7 == 0:
				link = fmt.Sprintf("https://WWW.Site%d.example%s#comments", h, p)
			case j%11 == 0:
				link = fmt.Sprintf("https://www.site%d.example%s?utm_source=feed&utm_medium=rss", h, p)
			default:
				link = fmt.Sprintf("https://www.site%d.example%s", h, p)
			}
			d.Links = append(d.Links, link)
		}
		stream = append(stream, d)
	}
	return stream, next
}

// normalizeRate canonicalizes every link of the stream on g goroutines.
func normalizeRate(tb testing.TB, n *normalize.Normalizer, stream []frontier.Discovered, g int) float64 {
	var wg sync.WaitGroup
	start := time.Now()
	for k := 0; k < g; k++ {
		wg.Go(func() {
			for i := k; i < len(stream); i += g {
				d := stream[i]
				for _, l := range d.Links {
					if _, err := n.Resolve(d.URL, l); err != nil {
						tb.Errorf("Resolve(%q, %q): %v", d.URL, l, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	return float64(len(stream)*benchLinksPerPage) / time.Since(start).Seconds()
}

// filterRate makes the worker's filter calls alone: per batch of pages,
// Contains on the batch's distinct canonical URLs, then TestAndAdd on those
// not held, with the same concurrency as one worker.
func filterRate(tb testing.TB, f frontier.Filter, n *normalize.Normalizer, stream []frontier.Discovered, concurrency int) float64 {
	var batches [][][]byte
	for i := 0; i < len(stream); i += benchBatch {
		seen := map[string]bool{}
		var keys [][]byte
		for _, d := range stream[i:min(i+benchBatch, len(stream))] {
			for _, l := range d.Links {
				u, _ := n.Resolve(d.URL, l)
				if !seen[u] {
					seen[u] = true
					keys = append(keys, []byte(u))
				}
			}
		}
		batches = append(batches, keys)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	start := time.Now()
	for k := 0; k < concurrency; k++ {
		wg.Go(func() {
			for i := k; i < len(batches); i += concurrency {
				held, err := f.Contains(ctx, batches[i])
				if err != nil {
					tb.Error(err)
					return
				}
				var fresh [][]byte
				for j, h := range held {
					if !h {
						fresh = append(fresh, batches[i][j])
					}
				}
				if _, err := f.TestAndAdd(ctx, fresh); err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(len(stream)*benchLinksPerPage) / time.Since(start).Seconds()
}

func openBenchFilter(tb testing.TB, srv *redistest.Server, name string) *dedup.RedisBloom {
	return openBenchFilterOf(tb, srv, name, 10_000_000)
}

// openBenchFilterOf is openBenchFilter with a first layer of capacity URLs.
func openBenchFilterOf(tb testing.TB, srv *redistest.Server, name string, capacity int64) *dedup.RedisBloom {
	tb.Helper()
	f, err := dedup.OpenRedisBloom(context.Background(), srv.Client(), name, dedup.RedisBloomOptions{
		InitialCapacity: capacity, TargetFPP: 1e-6, Policy: normalize.PolicyVersion,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}

// pipelineResult is what one pipeline run measured.
type pipelineResult struct {
	rate        float64 // discovered URLs per second
	admitted    uint64  // URLs on the frontier
	republished int64   // publishes the duplicate window caught (racing: no faults here)
	hits        int64   // URLs the workers' seen caches answered
	decided     int64   // URLs the workers' Cores decided
}

// pipelineRate publishes the stream, then runs workers (with routes route
// partitions, 0: none; tune, when not nil, changes their options) until
// every message is acknowledged.
func pipelineRate(tb testing.TB, nsrv *natstest.Server, f frontier.Filter, prefix string, stream []frontier.Discovered, workers, cache, routes int, tune func(*frontier.WorkerOptions)) pipelineResult {
	tb.Helper()
	topo := frontier.Topology{Prefix: prefix, Storage: jetstream.FileStorage, MaxAckPending: 100_000, Routes: routes}
	p := &pipeline{srv: nsrv, nc: nsrv.Conn(), topo: topo.WithDefaults()}
	js, err := jetstream.New(p.nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		tb.Fatal(err)
	}
	p.js = js
	ctx := context.Background()
	if err := p.topo.Ensure(ctx, js); err != nil {
		tb.Fatal(err)
	}
	for _, d := range stream {
		data, err := d.Encode()
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := js.PublishAsync(p.topo.DiscoveredSubject(d.Crawl), data); err != nil {
			tb.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		tb.Fatal("publishing the stream timed out")
	}
	n, err := normalize.New(normalize.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	var ws []*frontier.Worker
	for i := 0; i < workers; i++ {
		o := frontier.WorkerOptions{Topology: topo, SeenCache: cache}
		if tune != nil {
			tune(&o)
		}
		w, err := frontier.NewWorker(nsrv.Conn(), f, n, stats.NewMemory(), o)
		if err != nil {
			tb.Fatal(err)
		}
		ws = append(ws, w)
	}
	start := time.Now()
	for _, w := range ws {
		go func() { _ = w.Run(ctx) }()
	}
	p.waitDrained(tb, 10*time.Minute)
	if routes > 0 {
		p.waitStreamEmpty(tb, p.topo.RoutedStream(), 10*time.Minute)
	}
	elapsed := time.Since(start)
	var r pipelineResult
	for _, w := range ws {
		w.Close()
		st := w.Status()
		r.republished += st.Totals.Republished
		r.hits += st.CacheHits
		r.decided += st.Decided
	}
	s, err := js.Stream(ctx, p.topo.FrontierStream())
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	r.rate, r.admitted = float64(len(stream)*benchLinksPerPage)/elapsed.Seconds(), info.State.Msgs
	return r
}

func TestPipelineThroughput(t *testing.T) {
	if !*pipelineBench {
		t.Skip("the pipeline throughput table runs with -sieve.pipelinebench")
	}
	stream, unique := crawlStream(*pipelineBenchPages)
	links := len(stream) * benchLinksPerPage
	n, err := normalize.New(normalize.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rsrv := redistest.Start(t, redistest.Options{})
	nsrv := natstest.Start(t, natstest.Options{})

	normOne := normalizeRate(t, n, stream, 1)
	normAll := normalizeRate(t, n, stream, runtime.GOMAXPROCS(0))
	filt := filterRate(t, openBenchFilter(t, rsrv, "bench:filteronly"), n, stream, 4)
	type run struct {
		name string
		pipelineResult
	}
	var runs []run
	pipe := func(name string, f frontier.Filter, prefix string, workers, cache, routes int) {
		r := pipelineRate(t, nsrv, f, prefix, stream, workers, cache, routes, nil)
		if r.admitted != uint64(unique) {
			t.Errorf("%s: admitted %d URLs, the stream has %d unique", name, r.admitted, unique)
		}
		runs = append(runs, run{name, r})
	}
	pipe("pipeline, 1 worker (RedisBloom, seen-cache)", openBenchFilter(t, rsrv, "bench:one"), "one", 1, 0, 0)
	pipe("pipeline, 2 workers (RedisBloom, seen-cache)", openBenchFilter(t, rsrv, "bench:two"), "two", 2, 0, 0)
	pipe("pipeline, 3 workers (RedisBloom, seen-cache)", openBenchFilter(t, rsrv, "bench:three"), "three", 3, 0, 0)
	pipe("pipeline, 1 worker, 16 routes (RedisBloom, seen-cache)", openBenchFilter(t, rsrv, "bench:routed1"), "routed1", 1, 0, 16)
	pipe("pipeline, 2 workers, 16 routes (RedisBloom, seen-cache)", openBenchFilter(t, rsrv, "bench:routed2"), "routed2", 2, 0, 16)
	pipe("pipeline, 3 workers, 16 routes (RedisBloom, seen-cache)", openBenchFilter(t, rsrv, "bench:routed3"), "routed3", 3, 0, 16)
	pipe("pipeline, 1 worker (RedisBloom, no cache)", openBenchFilter(t, rsrv, "bench:nocache1"), "nocache1", 1, -1, 0)
	pipe("pipeline, 2 workers (RedisBloom, no cache)", openBenchFilter(t, rsrv, "bench:nocache2"), "nocache2", 2, -1, 0)
	pipe("pipeline, 1 worker (in-memory Bloom, no cache)", newMemoryFilter(t), "mem", 1, -1, 0)

	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "stream: %d pages, %d links (%d per page), %d unique URLs (%.0f%% repeats); GOMAXPROCS %d\t\n",
		len(stream), links, benchLinksPerPage, unique, 100*(1-float64(unique)/float64(links)), runtime.GOMAXPROCS(0))
	fmt.Fprintf(tw, "measure\tURLs/s\t× normalize (1 core)\t× normalize (all cores)\tracing publishes\tcache hit rate\t\n")
	row := func(name string, rate float64, racing, hits string) {
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%s\t%s\t\n", name, rate, rate/normOne, rate/normAll, racing, hits)
	}
	row("normalize only, 1 goroutine", normOne, "", "")
	row(fmt.Sprintf("normalize only, %d goroutines", runtime.GOMAXPROCS(0)), normAll, "", "")
	row("filter only (RedisBloom, worker's calls)", filt, "", "")
	for _, r := range runs {
		hits := "-"
		if r.decided > 0 {
			hits = fmt.Sprintf("%.1f%%", 100*float64(r.hits)/float64(r.decided))
		}
		row(r.name, r.rate, fmt.Sprintf("%d of %d (%.2f%%)", r.republished, r.admitted, 100*float64(r.republished)/float64(r.admitted)), hits)
	}
	tw.Flush()
	t.Logf("targets: ≥ 100000 URLs/s through the pipeline; ≥ 0.6 × normalize-only")

	// Learned rules (issue 37): every URL is spelled by its host's rules
	// before the filter. Every host of the stream has rules (a parameter
	// and a trailing slash, which no URL of the stream has, so the same
	// URLs are admitted): the look-up and the rewrite are the whole cost.
	// Alternating with the same pipeline without rules (ABBA), medians of 4.
	hosts := map[string]bool{}
	for _, d := range stream {
		if u, err := url.Parse(d.URL); err == nil {
			hosts[u.Host] = true
		}
	}
	var recs []dust.HostRules
	for h := range hosts {
		recs = append(recs, dust.HostRules{Host: h, Rules: []dust.Learned{
			{Rule: dust.Rule{Kind: dust.KindParam, Arg: "zsid"}, State: dust.Active},
			{Rule: dust.Rule{Kind: dust.KindSlash}, State: dust.Active}}})
	}
	rules := staticRules{dust.NewSet(recs)}
	var with, without []float64
	for i := range 4 {
		order := []bool{false, true}
		if i%2 == 1 {
			order = []bool{true, false} // ABBA: neither goes first every time
		}
		for _, learned := range order {
			tune := func(o *frontier.WorkerOptions) {
				if learned {
					o.Rules = rules
				}
			}
			r := pipelineRate(t, nsrv, newMemoryFilter(t), fmt.Sprintf("rules%d%v", i, learned), stream, 1, -1, 0, tune)
			if r.admitted != uint64(unique) {
				t.Errorf("learned rules %v: admitted %d URLs, the stream has %d unique", learned, r.admitted, unique)
			}
			if learned {
				with = append(with, r.rate)
			} else {
				without = append(without, r.rate)
			}
		}
	}
	t.Logf("pipeline, 1 worker (in-memory Bloom, no cache), %d hosts: with learned rules %.0f URLs/s %v, without (baseline) %.0f %v: ratio %.3f (goal ≥ 0.9), medians of 4 in ABBA order",
		len(hosts), median(with), with, median(without), without, median(with)/median(without))
}

// staticRules gives every crawl the same learned rules.
type staticRules struct{ s *dust.Set }

func (r staticRules) Set(string) *dust.Set { return r.s }
