package frontier_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/internal/heaptest"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/redistest"
	"github.com/sievecrawl/sieve/stats"
)

// The pipeline scale benchmark is a test that prints a table; it runs only
// when asked (./bench.sh scale):
//
//	go test ./frontier -count=1 -run '^TestPipelineScale$' -sieve.pipelinescale -sieve.pipelinescale.sizes 1000000,20000000 -v -timeout 120m
//
// It asks whether the dedup pipeline slows down as the URLs it has admitted
// grow (issue 26: at 20 M, at least 0.9 × its rate at 1 M). For each size N,
// on a fresh embedded NATS server and a fresh redis-server, dedup workers
// with the deployed defaults admit through the crawl's RedisBloom (the
// pipeline benchmark's filter: 1e-6, its first layer of
// -sieve.pipelinescale.capacity URLs; it grows a layer each time one
// fills, and every layer is checked for each URL). By default the first
// layer holds the largest size and its rounds, rounded up to a million: every
// row is the same crawl, created as an operator creates one of that size
// (expect_urls), so that the rows differ only in the URLs admitted. With a
// smaller first layer the larger rows also measure the filter's growth: at
// 10 M, 20 M ran 0.81× 1 M, its second layer checked for every URL. A crawler publishes
// pages of pscaleLinks links each to the discovered stream, with at most
// pscaleBacklog pages waiting; the fill's links are all new, and its workers
// (-sieve.pipelinescale.fillworkers, default 1) admit them until N URLs
// wait on the frontier stream (nothing consumes it). Then one worker,
// started for them so that its seen cache holds the same at every size,
// runs pscaleRounds rounds: each publishes pages holding pscaleChunk new
// URLs and, every pscaleRepeatEvery-th link, a repeat of a URL admitted
// before the round (chosen uniformly, spelled differently), timed from its
// first publish until the discovered stream is drained; a round's admitted
// URLs per second are its new URLs stored on the frontier over that time,
// and the table quotes the median and each round. Beside it: the fill's own
// rate, the frontier stream's bytes per waiting URL (as stream info counts
// them, and its files on disk), the growth of Redis's used_memory, and the
// test process's RSS (the embedded NATS server, the worker and the crawler;
// after the rounds, and the row's peak). Every figure has its ratio to the
// first size's, the same-run baseline.
//
// The frontier stream's duplicate window is pscaleWindow, not the default
// 10 minutes: JetStream holds every message ID of the window in RAM, and at
// full speed for 10 minutes those IDs alone take gigabytes (an earlier
// attempt at 20 M reached 5.9 GB RSS), which would measure the window, not
// the size.
var (
	pipelineScale            = flag.Bool("sieve.pipelinescale", false, "run the pipeline scale table (TestPipelineScale)")
	pipelineScaleSizes       = flag.String("sieve.pipelinescale.sizes", "1000000", "comma-separated numbers of URLs admitted before the measure, one row each (k and M accepted)")
	pipelineScaleFillWorkers = flag.Int("sieve.pipelinescale.fillworkers", 1, "dedup workers that admit the fill")
	pipelineScaleCapacity    = flag.Int64("sieve.pipelinescale.capacity", 0, "URLs of the RedisBloom's first layer (a filter grows a layer each time it fills); 0: the largest size and its rounds, as a crawl created for them")
)

const (
	pscaleCrawl       = "bench"
	pscaleLinks       = 100     // links per page
	pscaleRepeatEvery = 10      // every 10th link of a measured page repeats an admitted URL
	pscaleHosts       = 2_000   // hosts the URLs are spread over
	pscaleChunk       = 200_000 // new URLs per measured round
	pscaleRounds      = 3
	pscaleWindow      = time.Minute // the frontier stream's duplicate window
	pscaleBacklog     = 2_000       // discovered pages the fill lets wait before it pauses
)

// pscaleURL returns the host and path of the i-th new URL. Consecutive URLs
// share a host in runs of 90, so that a page links mostly within its site.
func pscaleURL(i int) (host, path string) {
	h := i / 90 % pscaleHosts
	return "www.site" + strconv.Itoa(h) + ".example",
		"/section-" + strconv.Itoa(i%50) + "/articles/" + strconv.Itoa(i) + "/some-title-of-an-article.html"
}

// pscaleLink spells a link to URL i, seen from a page of pageHost, in one of
// the ways pages do; every spelling has the same canonical URL.
func pscaleLink(i, variant int, pageHost string) string {
	h, p := pscaleURL(i)
	switch {
	case h == pageHost && variant%3 == 0:
		return p // relative to the page
	case variant%7 == 0:
		return "https://" + strings.ToUpper(h) + p + "#comments"
	case variant%11 == 0:
		return "https://" + h + p + "?utm_source=feed&utm_medium=rss"
	default:
		return "https://" + h + p
	}
}

// pscaleCrawler publishes the pages of the benchmark's crawl: new URLs are
// numbered from 0 in the order they are first linked.
type pscaleCrawler struct {
	p    *pipeline
	next int // the next new URL
	rng  *rand.Rand
}

// page returns a page linking to up to fresh new URLs and, if repeatBelow > 0,
// every pscaleRepeatEvery-th link to one of URLs [0, repeatBelow); it
// returns the page and the new URLs it links to.
func (c *pscaleCrawler) page(fresh, repeatBelow int) (frontier.Discovered, int) {
	host, _ := pscaleURL(c.next)
	d := frontier.Discovered{Crawl: pscaleCrawl, URL: "https://" + host + "/section-" + strconv.Itoa(c.next%50) + "/", Depth: 2,
		Links: make([]string, 0, pscaleLinks)}
	added := 0
	for j := 0; j < pscaleLinks; j++ {
		if repeatBelow > 0 && j%pscaleRepeatEvery == pscaleRepeatEvery-1 {
			// Spelled as this position spells links, which need
			// not be the spelling the URL was first seen in.
			d.Links = append(d.Links, pscaleLink(c.rng.IntN(repeatBelow), j+1, host))
			continue
		}
		if added == fresh {
			break
		}
		d.Links = append(d.Links, pscaleLink(c.next, j, host))
		c.next++
		added++
	}
	return d, added
}

// publish publishes pages with n new URLs in all (repeats too if
// repeatBelow > 0). With throttle set it lets at most pscaleBacklog pages
// wait in the discovered stream, as crawlers that the dedup keeps up with
// would; progress, when not nil, is called after every 1,000 pages.
func (c *pscaleCrawler) publish(tb testing.TB, n, repeatBelow int, throttle bool, progress func(published int)) {
	tb.Helper()
	for done, pages := 0, 0; done < n; pages++ {
		if throttle && pages%100 == 0 {
			c.waitBacklog(tb, pscaleBacklog)
		}
		d, added := c.page(n-done, repeatBelow)
		c.p.publish(tb, d)
		done += added
		if progress != nil && pages%1000 == 999 {
			progress(done)
		}
	}
}

// waitBacklog waits until at most limit pages wait in the discovered stream.
func (c *pscaleCrawler) waitBacklog(tb testing.TB, limit uint64) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if msgs := pscaleStreamInfo(tb, c.p, c.p.topo.DiscoveredStream()).State.Msgs; msgs <= limit {
			return
		} else if time.Now().After(deadline) {
			tb.Fatalf("the worker left %d discovered pages waiting for 5 minutes", msgs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pscaleStreamInfo returns the named stream's info.
func pscaleStreamInfo(tb testing.TB, p *pipeline, name string) *jetstream.StreamInfo {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := p.js.Stream(ctx, name)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return info
}

// pscaleRow is one size's measures.
type pscaleRow struct {
	n           int
	fillRate    float64   // URLs admitted per second during the fill
	rounds      []float64 // URLs admitted per second in each round
	rate        float64   // their median
	cacheHits   float64   // share of the rounds' decided URLs the seen cache answered
	lost        int       // new URLs of the rounds not admitted (false positives)
	republished int64     // publishes the duplicate window caught
	layers      int       // the filter's layers at the end
	urls        uint64    // URLs waiting on the frontier at the end
	streamBytes uint64    // the frontier stream's bytes, as stream info counts them
	diskBytes   int64     // the frontier stream's files
	redisBytes  int64     // growth of Redis's used_memory
	rss, peak   int64     // the process's RSS after the rounds, and its peak
}

// TestPipelineScale prints the pipeline scale table described above: one
// row per size of -sieve.pipelinescale.sizes, each on a fresh NATS server
// and redis-server.
func TestPipelineScale(t *testing.T) {
	if !*pipelineScale {
		t.Skip("the pipeline scale table runs with -sieve.pipelinescale (./bench.sh scale)")
	}
	var sizes []int
	for f := range strings.SplitSeq(*pipelineScaleSizes, ",") {
		f = strings.TrimSpace(f)
		f = strings.ReplaceAll(strings.ReplaceAll(f, "k", "000"), "M", "000000")
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			t.Fatalf("-sieve.pipelinescale.sizes: %q is not a positive number", f)
		}
		sizes = append(sizes, n)
	}
	capacity := *pipelineScaleCapacity
	if capacity == 0 {
		capacity = pscaleExpected(slices.Max(sizes))
	}
	var rows []pscaleRow
	for _, n := range sizes {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			r := measurePipelineScale(t, n, capacity)
			t.Logf("%d URLs: fill %.0f URLs/s; rounds %.0f URLs/s (median of %s); frontier %.0f B/URL (disk %.0f); Redis %.1f B/URL; RSS %.0f MB, peak %.0f MB",
				n, r.fillRate, r.rate, pscaleRates(r.rounds), float64(r.streamBytes)/float64(r.urls), float64(r.diskBytes)/float64(r.urls),
				float64(r.redisBytes)/float64(r.urls), float64(r.rss)/1e6, float64(r.peak)/1e6)
			rows = append(rows, r)
		})
	}
	if len(rows) == 0 {
		return
	}
	t.Logf("the dedup pipeline at growing sizes: RedisBloom (%d first, 1e-6) in redis-server, embedded NATS, filled by %d worker(s); "+
		"rounds of %d new URLs + 1 repeat (of a URL admitted before) per %d links, by 1 worker with the deployed defaults started for them; "+
		"frontier duplicate window %v (default %v: its IDs in RAM); URLs: the size filled to, before %d rounds; ratios: to the first row, the same-run baseline\n%s",
		capacity, *pipelineScaleFillWorkers, pscaleChunk, pscaleRepeatEvery, pscaleWindow, frontier.DefaultDuplicateWindow, pscaleRounds, pscaleTable(rows))
	if len(rows) > 1 {
		last := rows[len(rows)-1]
		t.Logf("issue 26 goal: admitted URLs/s at %d ≥ 0.9 × at %d: %.2f×", last.n, rows[0].n, last.rate/rows[0].rate)
	}
}

// pscaleExpected returns the URLs a crawl of the benchmark expects when it
// fills to n and runs its rounds, rounded up to a million: the first layer
// that holds them all.
func pscaleExpected(n int) int64 {
	const m = 1_000_000
	return int64((n+pscaleRounds*pscaleChunk+m-1)/m) * m
}

// measurePipelineScale runs one row: the fill to n URLs, then the rounds,
// through a filter whose first layer holds capacity URLs.
func measurePipelineScale(t *testing.T, n int, capacity int64) pscaleRow {
	pscaleResetPeak(t)
	rsrv := redistest.Start(t, redistest.Options{})
	nsrv := natstest.Start(t, natstest.Options{})
	redisBefore := pscaleUsedMemory(t, rsrv)

	topo := frontier.Topology{Storage: jetstream.FileStorage, DuplicateWindow: pscaleWindow}
	p := &pipeline{srv: nsrv, nc: nsrv.Conn(), topo: topo.WithDefaults()}
	js, err := jetstream.New(p.nc)
	if err != nil {
		t.Fatal(err)
	}
	p.js = js
	if err := p.topo.Ensure(t.Context(), js); err != nil {
		t.Fatal(err)
	}
	f := openBenchFilterOf(t, rsrv, "bench:scale", capacity)
	norm, err := normalize.New(normalize.Options{})
	if err != nil {
		t.Fatal(err)
	}
	startWorker := func() (*frontier.Worker, func() error) {
		w, err := frontier.NewWorker(nsrv.Conn(), f, norm, stats.NewMemory(), frontier.WorkerOptions{Topology: topo})
		if err != nil {
			t.Fatal(err)
		}
		return w, runWorker(t, w)
	}
	c := &pscaleCrawler{p: p, rng: rand.New(rand.NewPCG(uint64(n), 26))}
	waiting := func() uint64 { return pscaleStreamInfo(t, p, p.topo.FrontierStream()).State.Msgs }

	// 1. The fill: n new URLs, the fill's workers keeping up.
	r := pscaleRow{n: n}
	var stops []func() error
	for range *pipelineScaleFillWorkers {
		_, stop := startWorker()
		stops = append(stops, stop)
	}
	start := time.Now()
	c.publish(t, n, 0, true, func(published int) {
		if published%1_000_000 < pscaleLinks*1000 {
			el, admitted := time.Since(start), waiting()
			t.Logf("fill: %d URLs published, %d admitted in %v (%.0f URLs/s)",
				published, admitted, el.Round(time.Second), float64(admitted)/el.Seconds())
		}
	})
	p.waitDrained(t, 30*time.Minute)
	fill := time.Since(start)
	got := waiting()
	r.fillRate = float64(got) / fill.Seconds()
	t.Logf("fill: %d URLs admitted of %d in %v (%.0f URLs/s, %d workers)", got, n, fill.Round(time.Millisecond), r.fillRate, len(stops))
	for _, stop := range stops {
		if err := stop(); err != nil {
			t.Errorf("fill worker: %v", err)
		}
	}

	// 2. The rounds, each timed from its first publish until drained, by
	// one worker started for them: its seen cache holds what it saw in
	// the rounds, whatever the size.
	w, stop := startWorker()
	for i := 0; i < pscaleRounds; i++ {
		had, seen := waiting(), c.next
		start := time.Now()
		c.publish(t, pscaleChunk, seen, false, nil)
		p.waitDrained(t, 10*time.Minute)
		el := time.Since(start)
		admitted := waiting() - had
		r.lost += pscaleChunk - int(admitted)
		r.rounds = append(r.rounds, float64(admitted)/el.Seconds())
		t.Logf("round %d at %d URLs: %d admitted in %v (%.0f URLs/s)", i+1, had, admitted, el.Round(time.Millisecond), r.rounds[i])
	}
	r.rate = median(r.rounds)
	st := w.Status()
	if st.Decided > 0 {
		r.cacheHits = float64(st.CacheHits) / float64(st.Decided)
	}
	r.republished = st.Totals.Republished

	// 3. What the size costs.
	info := pscaleStreamInfo(t, p, p.topo.FrontierStream())
	r.urls, r.streamBytes = info.State.Msgs, info.State.Bytes
	r.diskBytes = streamDirBytes(t, nsrv.StoreDir, p.topo.FrontierStream())
	fst, err := f.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r.layers = len(fst.Layers)
	r.redisBytes = pscaleUsedMemory(t, rsrv) - redisBefore
	anon, file, err := heaptest.RSS()
	if err != nil {
		t.Fatal(err)
	}
	r.rss, r.peak = anon+file, pscalePeak(t)
	if err := stop(); err != nil {
		t.Errorf("worker: %v", err)
	}
	return r
}

// pscaleTable prints the rows, each figure with its ratio to the first
// row's.
func pscaleTable(rows []pscaleRow) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "URLs\tadmitted URLs/s, median\trounds\tfill URLs/s\tcache hits\tfalse positives\trepublished\tfilter layers\tfrontier B/URL (stream info)\tfrontier disk B/URL\tRedis used_memory\tRSS after\tpeak RSS\n")
	base := rows[0]
	ratio := func(v, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", v/b)
	}
	per := func(v int64, n uint64) float64 { return float64(v) / float64(n) }
	// grown is what each URL added since the first row cost: per URL,
	// fixed costs (a filter layer allocated whole, the Go runtime) hide a
	// growth.
	grown := func(r pscaleRow, v, bv int64) string {
		if r.urls == base.urls {
			return ""
		}
		return fmt.Sprintf(", %+.0f B/added URL", float64(v-bv)/(float64(r.urls)-float64(base.urls)))
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%d\t%.0f (%s)\t%s\t%.0f (%s)\t%.1f%%\t%d\t%d\t%d\t%.0f (%s)\t%.0f (%s)\t%.1f MB, %.1f B/URL (%s)%s\t%.0f MB (%s)%s\t%.0f MB (%s)\n",
			r.n, r.rate, ratio(r.rate, base.rate), pscaleRates(r.rounds), r.fillRate, ratio(r.fillRate, base.fillRate),
			100*r.cacheHits, r.lost, r.republished, r.layers,
			per(int64(r.streamBytes), r.urls), ratio(per(int64(r.streamBytes), r.urls), per(int64(base.streamBytes), base.urls)),
			per(r.diskBytes, r.urls), ratio(per(r.diskBytes, r.urls), per(base.diskBytes, base.urls)),
			float64(r.redisBytes)/1e6, per(r.redisBytes, r.urls), ratio(per(r.redisBytes, r.urls), per(base.redisBytes, base.urls)), grown(r, r.redisBytes, base.redisBytes),
			float64(r.rss)/1e6, ratio(float64(r.rss), float64(base.rss)), grown(r, r.rss, base.rss),
			float64(r.peak)/1e6, ratio(float64(r.peak), float64(base.peak)))
	}
	w.Flush()
	return b.String()
}

func pscaleRates(rs []float64) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strconv.FormatFloat(r, 'f', 0, 64)
	}
	return strings.Join(s, ", ")
}

// pscaleUsedMemory returns INFO memory's used_memory.
func pscaleUsedMemory(tb testing.TB, srv *redistest.Server) int64 {
	tb.Helper()
	info, err := srv.Client().Info(context.Background(), "memory").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				tb.Fatalf("INFO memory: used_memory %q: %v", v, err)
			}
			return n
		}
	}
	tb.Fatal("INFO memory: no used_memory")
	return 0
}

// pscaleResetPeak resets the process's peak RSS (VmHWM), so that each row's
// peak is its own.
func pscaleResetPeak(tb testing.TB) {
	tb.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Fatalf("reset peak RSS: %v", err)
	}
}

// pscalePeak returns the process's peak RSS (VmHWM) since pscaleResetPeak.
func pscalePeak(tb testing.TB) int64 {
	tb.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				tb.Fatalf("/proc/self/status VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	tb.Fatal("/proc/self/status has no VmHWM")
	return 0
}
