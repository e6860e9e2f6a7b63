package crawl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/testsite"
	"github.com/sievecrawl/sieve/warc"
)

// BenchmarkCrawlVsColly crawls one generated site of 5,000 pages (each linked
// in many spellings, with the usual traps) twice in the same run: with Sieve
// (the whole pipeline in process: NATS JetStream, a dedup worker with the
// in-memory filter, one crawler) and with plain colly (default settings, its
// own in-memory visited set, Async, the same parallelism and depth limit). It
// reports each side's fetches and pages/s, and Sieve's wall time as a
// fraction of colly's.
//
//	go test ./crawl -run '^$' -bench CrawlVsColly -benchtime 1x
//
// Latency stands for the network: with none, both sides are CPU-bound on
// loopback; with some, the number of fetches decides.
func BenchmarkCrawlVsColly(b *testing.B) {
	if testing.Short() {
		b.Skip("crawls 5,000 pages twice")
	}
	const pages, parallel, maxDepth = 5000, 16, 8
	for _, latency := range []time.Duration{0, 10 * time.Millisecond} {
		b.Run(fmt.Sprintf("latency=%v", latency), func(b *testing.B) {
			site := startSite(b, testsite.Options{Pages: pages, Latency: latency})
			if site.Depth() > maxDepth-2 {
				b.Fatalf("site depth %d too deep for max depth %d", site.Depth(), maxDepth)
			}
			unique := len(site.Plan(maxDepth).Once) + site.Plan(maxDepth).Calendar
			for range b.N {
				site.Reset()
				collyTime, collyFetches := crawlWithColly(b, site, parallel, maxDepth)

				site.Reset()
				sieveTime, sieveFetches, st := crawlWithSieve(b, site, parallel, maxDepth)
				if twice := fetchedTwice(site, maxDepth); twice > 0 {
					b.Errorf("Sieve fetched %d pages more than once", twice)
				}
				b.ReportMetric(float64(collyFetches), "colly-fetches")
				b.ReportMetric(float64(sieveFetches), "sieve-fetches")
				b.ReportMetric(float64(collyFetches)/collyTime.Seconds(), "colly-fetches/s")
				b.ReportMetric(float64(st.Pages)/sieveTime.Seconds(), "sieve-pages/s")
				b.ReportMetric(sieveTime.Seconds()/collyTime.Seconds(), "time-ratio")
				b.Logf("site: %d pages, %d unique URLs a crawl may fetch", pages, unique)
				b.Logf("colly: %6d fetches in %7.2fs (%.0f fetches/s)", collyFetches, collyTime.Seconds(), float64(collyFetches)/collyTime.Seconds())
				b.Logf("sieve: %6d fetches in %7.2fs (%.0f fetches/s, %d HTML pages, %d retries)",
					sieveFetches, sieveTime.Seconds(), float64(sieveFetches)/sieveTime.Seconds(), st.Pages, Sum(st.Retried))
				b.Logf("sieve/colly: %.2f× the fetches, %.2f× the wall time", float64(sieveFetches)/float64(collyFetches), sieveTime.Seconds()/collyTime.Seconds())
			}
		})
	}
}

// crawlWithColly crawls the site with colly as its README shows, plus the
// parallelism and depth of the Sieve run and the site's host as the only
// allowed domain.
func crawlWithColly(tb testing.TB, site *testsite.Site, parallel, maxDepth int) (time.Duration, int) {
	tb.Helper()
	u, _ := url.Parse(site.URL)
	c := colly.NewCollector(
		colly.Async(true),
		colly.MaxDepth(maxDepth+1), // colly's seed has depth 1, Sieve's 0
		colly.AllowedDomains(u.Hostname()),
	)
	if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: parallel}); err != nil {
		tb.Fatal(err)
	}
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
	start := time.Now()
	if err := c.Visit(site.URL); err != nil {
		tb.Fatal(err)
	}
	c.Wait()
	elapsed := time.Since(start)
	n, _ := siteFetches(site)
	return elapsed, n
}

// crawlWithSieve crawls the site through the whole pipeline. The time is
// Run's, less the idle period that ends it.
func crawlWithSieve(tb testing.TB, site *testsite.Site, parallel, maxDepth int) (time.Duration, int, Stats) {
	tb.Helper()
	return crawlArchiving(tb, site, parallel, maxDepth, nil)
}

// crawlArchiving is crawlWithSieve with the archive rec (nil: none).
func crawlArchiving(tb testing.TB, site *testsite.Site, parallel, maxDepth int, rec *warc.Recorder) (time.Duration, int, Stats) {
	tb.Helper()
	topo := frontier.Topology{Partitions: 4}
	p := startPipeline(tb, topo)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := Options{
		Topology:     topo,
		Fetcher:      FetcherOptions{HostParallel: parallel, HostDelay: -1, MaxParallel: parallel},
		MaxDepth:     maxDepth,
		MaxRetries:   2,
		RetryBackoff: 100 * time.Millisecond,
		IdleExit:     100 * time.Millisecond,
		InFlight:     4 * parallel,
		Archive:      rec,
	}
	c, err := New(p.js, opts)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if err := seed(ctx, p.js, topo, "bench", []string{site.URL}); err != nil {
		tb.Fatal(err)
	}
	if err := c.Run(ctx); !errors.Is(err, ErrIdle) {
		tb.Fatalf("Run = %v", err)
	}
	elapsed := time.Since(start) - opts.IdleExit
	n, _ := siteFetches(site)
	return elapsed, n, c.Stats()
}

// siteFetches counts the requests the site served, robots.txt apart.
func siteFetches(site *testsite.Site) (pages, robots int) {
	for p, n := range site.Fetches() {
		if p == "/robots.txt" {
			robots += n
		} else {
			pages += n
		}
	}
	return pages, robots
}

// fetchedTwice counts the pages a crawl should fetch once that it fetched
// more often.
func fetchedTwice(site *testsite.Site, maxDepth int) int {
	got := site.Fetches()
	n := 0
	for _, p := range site.Plan(maxDepth).Once {
		if got[p] > 1 {
			n++
		}
	}
	return n
}

// BenchmarkArchiveCost crawls the 5,000-page test site with and without an
// archive (the WARC recorder in the transport, a file written as the crawl
// goes), alternating, three times each in the same run, and reports the
// median wall times, their ratio (goal: at most 1.1), and the peak heap of
// each (records are streamed: no body is held beyond the size limit). With
// pageBytes > 0 the pages are padded to that size, as real pages are.
//
//	go test ./crawl -run '^$' -bench ArchiveCost -benchtime 1x
func BenchmarkArchiveCost(b *testing.B) {
	if testing.Short() {
		b.Skip("crawls 5,000 pages six times")
	}
	const pages, parallel, maxDepth, rounds = 5000, 16, 8, 3
	for _, pageBytes := range []int{0, 30_000} {
		b.Run(fmt.Sprintf("page-bytes=%d", pageBytes), func(b *testing.B) {
			site := startSite(b, testsite.Options{Pages: pages, PageBytes: pageBytes})
			for range b.N {
				var plain, archived, plainCPU, archCPU []float64
				var plainHeap, archHeap []float64
				var written int64
				for range rounds {
					site.Reset()
					peak, cpu := heapPeak(), cpuTime()
					d, _, _ := crawlArchiving(b, site, parallel, maxDepth, nil)
					plain, plainHeap, plainCPU = append(plain, d.Seconds()), append(plainHeap, peak()), append(plainCPU, cpu())

					site.Reset()
					dir := b.TempDir()
					w, err := warc.Open(warc.Options{Dir: dir, CrawlerID: "bench"})
					if err != nil {
						b.Fatal(err)
					}
					peak, cpu = heapPeak(), cpuTime()
					d, n, _ := crawlArchiving(b, site, parallel, maxDepth, warc.NewRecorder(w, warc.RecorderOptions{}))
					archived, archHeap, archCPU = append(archived, d.Seconds()), append(archHeap, peak()), append(archCPU, cpu())
					if err := w.Close(); err != nil {
						b.Fatal(err)
					}
					written = w.Stats().Bytes
					b.Logf("round: plain %.2fs (CPU %.2fs), archiving %.2fs (CPU %.2fs; %d fetches, %.1f MB written)",
						plain[len(plain)-1], plainCPU[len(plainCPU)-1], d.Seconds(), archCPU[len(archCPU)-1], n, float64(written)/1e6)
				}
				mp, ma := median(plain), median(archived)
				b.ReportMetric(ma/mp, "time-ratio")
				b.ReportMetric(median(archHeap)/1e6, "archive-peak-heap-MB")
				b.ReportMetric(median(archCPU)/median(plainCPU), "cpu-ratio")
				b.Logf("median CPU (whole process: site, NATS, worker, crawler): without archive %.2fs, with %.2fs: %.3f×",
					median(plainCPU), median(archCPU), median(archCPU)/median(plainCPU))
				b.Logf("median of %d: without archive %.2fs (peak heap %.0f MB), with %.2fs (peak heap %.0f MB, %.1f MB of WARC): %.3f× the time",
					rounds, mp, median(plainHeap)/1e6, ma, median(archHeap)/1e6, float64(written)/1e6, ma/mp)
			}
		})
	}
}

// heapPeak samples the heap in use every 20 ms until the returned function
// is called, which returns the peak in bytes.
func heapPeak() func() float64 {
	done := make(chan struct{})
	result := make(chan float64)
	go func() {
		var peak uint64
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-done:
				result <- float64(peak)
				return
			case <-t.C:
			}
		}
	}()
	return func() float64 { close(done); return <-result }
}

// cpuTime measures the process's CPU time (user and system) until the
// returned function is called: unlike wall time, it does not grow with
// what else the machine runs.
func cpuTime() func() float64 {
	now := func() float64 {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	start := now()
	return func() float64 { return now() - start }
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
