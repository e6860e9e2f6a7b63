package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sievecrawl/sieve/natstest"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// The serve broad-crawl benchmark is a test that prints a table; it runs
// only when asked (./bench.sh broad, issue 40):
//
//	go test ./cmd/crawler -count=1 -run '^TestServeBroad$' -sieve.servebroad -sieve.servebroad.shapes q20k,q1M,one1M -v -timeout 360m
//
// It measures `crawler serve --embedded` (a subprocess on its own data
// directory, as in TestServeScale: its RSS is serve and its NATS server)
// on the shapes of a broad crawl, each on a fresh server:
//
//   - q20k: the baseline, 1 M URLs over 20,000 queues (50 a queue);
//   - qN: N queues of one URL each (q1M, q10M);
//   - oneN: one queue of N URLs (one1M).
//
// Queues are hosts, h0000000.example and up, and every URL is put with
// its queue as its key. For each shape and binary (the baseline binary
// first where given, then this one):
//
//  1. serve started, the crawl's delay set to 0, its RSS read 5 s later:
//     the empty server, subtracted from the figures below;
//  2. the fill through PutURLs (8 streams, each generating its items 500
//     at a time, acks read as they come), URLs/s;
//  3. RSS 1 s after the fill's last ack and sieve.servebroad.wait after
//     it, per queue and per URL;
//  4. sieve.servebroad.runs rounds of: 30 GetURLs calls of 100 queues, 1
//     URL each, leased for 60 s (median and max), each call's URLs then
//     completed by known updates, untimed; one ListQueues of 100, one
//     GetStats, one CountURLs of the crawl; each figure the median of the
//     rounds;
//  5. hand-out with acknowledgement for 20 s: 4 clients, each a loop of
//     GetURLs (1,000 queues, 1 URL each) and a known update
//     (refetchable_from_date 0) for each URL received, URLs/s;
//  6. for oneN, one GetURLs with no limit of queues or URLs per queue:
//     its time, the URLs received, and its error if any.
//
// Every figure is printed with its ratio to the q20k row of the same
// binary and, with -sieve.servebroad.baseline, to the baseline binary's
// row of the same shape. A call that fails does not stop the table: its
// error is the figure.
var (
	serveBroad       = flag.Bool("sieve.servebroad", false, "run the crawler serve broad-crawl table (TestServeBroad)")
	serveBroadShapes = flag.String("sieve.servebroad.shapes", "q20k,q1M,one1M", "comma-separated shapes, one row each: q20k (1 M URLs over 20,000 queues), qN (N queues of one URL), oneN (one queue of N URLs); k and M accepted")
	serveBroadBin    = flag.String("sieve.servebroad.bin", "", "crawler binary to measure; empty: go build ./cmd/crawler of this tree")
	serveBroadBase   = flag.String("sieve.servebroad.baseline", "", "a crawler binary measured before this one at every shape: the same-run baseline of the second ratio")
	serveBroadRuns   = flag.Int("sieve.servebroad.runs", 3, "rounds of the latency measurements; each latency is their median")
	serveBroadWait   = flag.Duration("sieve.servebroad.wait", 60*time.Second, "idle time after the fill before the second RSS reading and the latencies")
)

const (
	broadBatch       = 500 // items a PutURLs stream generates at a time
	broadGets        = 30  // GetURLs calls a round
	broadGetQueues   = 100 // max_queues of those calls
	broadLease       = 60  // delay_requestable of every GetURLs, in seconds
	broadHandQueues  = 1_000
	broadCallTimeout = time.Minute      // one ListQueues, GetStats, CountURLs or GetURLs call
	broadNoLimitFor  = 10 * time.Minute // the GetURLs with no limit
	broadBaseURLs    = 1_000_000        // q20k's URLs
	broadBaseQueues  = 20_000
)

// broadShape is a crawl's shape: urls URLs over queues queues, URL i in
// queue i mod queues.
type broadShape struct {
	name         string
	queues, urls int
	oneQueue     bool // oneN: the GetURLs with no limit is measured
}

// parseBroadShapes reads -sieve.servebroad.shapes.
func parseBroadShapes(s string) ([]broadShape, error) {
	var shapes []broadShape
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		var sh broadShape
		var num string
		switch {
		case strings.HasPrefix(f, "one"):
			num, sh.oneQueue = f[len("one"):], true
		case strings.HasPrefix(f, "q"):
			num = f[len("q"):]
		default:
			return nil, fmt.Errorf("shape %q: want qN or oneN", f)
		}
		sizes, err := parseSizes(num)
		if err != nil || len(sizes) != 1 {
			return nil, fmt.Errorf("shape %q: %q is not a positive number", f, num)
		}
		n := sizes[0]
		switch {
		case sh.oneQueue:
			sh.queues, sh.urls = 1, n
		case n == broadBaseQueues:
			sh.queues, sh.urls = n, broadBaseURLs
		default:
			sh.queues, sh.urls = n, n
		}
		sh.name = f
		shapes = append(shapes, sh)
	}
	return shapes, nil
}

// item is the i-th URL of the shape, keyed by its queue.
func (sh broadShape) item(i int) *pb.URLInfo {
	host := fmt.Sprintf("h%07d.example", i%sh.queues)
	return &pb.URLInfo{Url: "https://" + host + "/p/" + strconv.Itoa(i) + ".html", Key: host, CrawlID: scaleCrawl}
}

// broadCall is the latency of one call, or its error.
type broadCall struct {
	d   time.Duration
	err error
}

// broadRound is one round of latencies.
type broadRound struct {
	gets      []time.Duration // the calls that answered
	getErr    error           // the first that did not
	getURLs   int             // URLs the calls received
	ackErr    error           // the first known update of them that failed
	list      broadCall
	stats     broadCall
	count     broadCall
	listTotal uint64
	size      uint64
	counted   uint64
}

// broadRow is one row of the table.
type broadRow struct {
	bin      string // "this" or "baseline"
	shape    broadShape
	queued   int     // URLs acked OK
	putRate  float64 // URLs/s
	rssEmpty int64
	rssAfter int64 // 1 s after the fill
	rssWait  int64 // sieve.servebroad.wait after it
	rounds   []broadRound
	handRate float64 // GetURLs + known URLs/s
	handErr  error
	noLimit  broadCall // oneN: the GetURLs with no limit
	noLimitN int       // URLs it received
}

// TestServeBroad prints the serve broad-crawl table described above.
func TestServeBroad(t *testing.T) {
	if !*serveBroad {
		t.Skip("the crawler serve broad-crawl table runs with -sieve.servebroad (./bench.sh broad)")
	}
	shapes, err := parseBroadShapes(*serveBroadShapes)
	if err != nil {
		t.Fatalf("-sieve.servebroad.shapes: %v", err)
	}
	if *serveBroadRuns <= 0 {
		t.Fatal("-sieve.servebroad.runs must be positive")
	}
	bin := *serveBroadBin
	if bin == "" {
		bin = crawlerBinary(t)
	}
	bins := []string{bin}
	if *serveBroadBase != "" {
		bins = []string{*serveBroadBase, bin}
	}
	var rows []broadRow
	for _, sh := range shapes {
		for i, bin := range bins {
			name := "this"
			if len(bins) > 1 && i == 0 {
				name = "baseline"
			}
			t.Run(sh.name+"/"+name, func(t *testing.T) {
				r := measureBroad(t, bin, sh)
				r.bin = name
				rows = append(rows, r)
				t.Logf("%s", broadTable(rows[len(rows)-1:], rows))
			})
		}
	}
	if len(rows) > 0 {
		t.Logf("crawler serve --embedded on broad-crawl shapes; RSS less the empty server's, 1 s and %s after the fill; "+
			"latencies: medians of %d rounds; ratios: to the q20k row of the same binary, and to the baseline binary's row of the shape. "+
			"Issue-40 goals: GetURLs median ≤ 20 ms at 1 M and 10 M queues, ≤ 128 B per queue 60 s after a fill of 10 M queues, "+
			"ListQueues, GetStats and CountURLs answered; GetURLs with no limit on one queue of 1 M URLs\n%s",
			seconds(*serveBroadWait), *serveBroadRuns, broadTable(rows, rows))
	}
}

// measureBroad runs one row (see TestServeBroad).
func measureBroad(t *testing.T, bin string, sh broadShape) broadRow {
	s := &scaleServe{t: t, bin: bin, dir: t.TempDir(), addr: natstest.ClosedAddr(t)}
	r := broadRow{shape: sh}
	s.start()
	if _, err := s.stats("", 2*time.Minute); err != nil {
		s.fatalf("serve did not answer GetStats within 2 minutes of starting: %v", err)
	}
	ctx, cancel := phaseContext(t, 30*time.Second)
	_, err := s.client.SetDelay(ctx, &pb.QueueDelayParams{CrawlID: scaleCrawl, DelayRequestable: 0})
	cancel()
	if err != nil {
		s.fatalf("SetDelay 0: %v", err)
	}
	r.rssEmpty = s.idleRSS()

	// 1. Fill.
	start := time.Now()
	r.queued = s.broadFill(sh)
	end := time.Now()
	r.putRate = float64(r.queued) / end.Sub(start).Seconds()
	t.Logf("%s: %d URLs over %d queues put in %v: %.0f URLs/s", sh.name, r.queued, sh.queues, end.Sub(start).Round(time.Millisecond), r.putRate)

	// 2. RSS.
	r.rssAfter = s.rssAt(end.Add(time.Second))
	r.rssWait = s.rssAt(end.Add(*serveBroadWait))
	t.Logf("RSS empty %.0f MB, 1 s after the fill %.0f MB, %s after %.0f MB", mb(r.rssEmpty), mb(r.rssAfter), seconds(*serveBroadWait), mb(r.rssWait))

	// 3. Latencies.
	for i := range *serveBroadRuns {
		rd := s.broadRound()
		t.Logf("round %d: GetURLs median %v, max %v (%d calls answered, %d URLs; error: %v; their known updates' error: %v); ListQueues %v (total %d; %v), GetStats %v (size %d; %v), CountURLs %v (%d; %v)",
			i+1, median(rd.gets), longest(rd.gets), len(rd.gets), rd.getURLs, rd.getErr, rd.ackErr,
			rd.list.d, rd.listTotal, rd.list.err, rd.stats.d, rd.size, rd.stats.err, rd.count.d, rd.counted, rd.count.err)
		r.rounds = append(r.rounds, rd)
	}

	// 4. Hand-out with acknowledgement.
	ctx, cancel = phaseContext(t, scaleHandFor+5*time.Minute)
	start = time.Now()
	completed, notOK, err := s.handOut(ctx, 1, broadHandQueues, math.MaxInt)
	took := time.Since(start)
	cancel()
	switch {
	case err != nil:
		r.handErr = err
	case notOK > 0:
		r.handErr = fmt.Errorf("%d known updates not OK (%d OK)", notOK, completed)
	}
	r.handRate = float64(completed) / took.Seconds()
	t.Logf("hand-out: %d URLs completed in %v: %.0f URLs/s (error: %v)", completed, took.Round(time.Millisecond), r.handRate, r.handErr)

	// 5. One queue: everything it holds in one call.
	if sh.oneQueue {
		r.noLimit, r.noLimitN = s.broadNoLimit()
		t.Logf("GetURLs with no limit: %d URLs in %v (error: %v)", r.noLimitN, r.noLimit.d.Round(time.Millisecond), r.noLimit.err)
	}
	select {
	case <-s.p.done:
		s.fatalf("serve exited during the measurements: %v", s.p.err)
	default:
	}
	return r
}

// broadFill puts the shape's URLs through scaleStreams PutURLs streams
// and returns how many are queued (acked OK). A URL answered FAIL is put
// again, as in recoveryFill, up to 5 rounds.
func (s *scaleServe) broadFill(sh broadShape) int {
	s.t.Helper()
	ctx, cancel := phaseContext(s.t, 10*time.Minute+time.Duration(sh.urls)*time.Millisecond)
	defer cancel()
	url := func(k int) int { return k }
	m, ok, skipped := sh.urls, 0, 0
	for round := 1; ; round++ {
		o, sk, failed, err := s.putKeyed(ctx, sh, m, url)
		ok += o
		if round == 1 {
			skipped = sk
		} else {
			ok += sk // stored by the put that answered FAIL
		}
		if err != nil {
			s.fatalf("fill: %v (%d OK so far)", err, ok)
		}
		if len(failed) == 0 {
			break
		}
		if round == 5 {
			s.fatalf("fill: %d URLs still FAIL after %d rounds", len(failed), round)
		}
		s.t.Logf("fill, round %d: %d URLs FAIL; putting them again", round, len(failed))
		prev := url
		url, m = func(k int) int { return prev(failed[k]) }, len(failed)
	}
	if float64(skipped) > 1e-4*float64(sh.urls) {
		s.fatalf("fill: %d of %d URLs SKIPPED, want at most the filter's false positives", skipped, sh.urls)
	}
	return ok
}

// putKeyed puts m URLs, the k-th being the shape's item url(k), as
// discovered items through scaleStreams PutURLs streams; each stream
// generates its items broadBatch at a time, and acks are read as they
// come. It returns the URLs acked OK and SKIPPED, and the k of the
// others.
func (s *scaleServe) putKeyed(ctx context.Context, sh broadShape, m int, url func(k int) int) (ok, skipped int, failed []int, err error) {
	var nOK, nSkipped atomic.Int64
	var mu sync.Mutex
	g, ctx := errgroup.WithContext(ctx)
	for first := range scaleStreams {
		g.Go(func() error {
			stream, err := s.client.PutURLs(ctx)
			if err != nil {
				return err
			}
			sent := make(chan error, 1)
			go func() {
				sent <- func() error {
					batch := make([]*pb.URLItem, 0, broadBatch)
					for k := first; k < m; {
						batch = batch[:0]
						for ; k < m && len(batch) < broadBatch; k += scaleStreams {
							d := &pb.DiscoveredURLItem{Info: sh.item(url(k))}
							batch = append(batch, &pb.URLItem{ID: strconv.Itoa(k), Item: &pb.URLItem_Discovered{Discovered: d}})
						}
						for _, it := range batch {
							if err := stream.Send(it); err != nil {
								return fmt.Errorf("send URL %s: %w", it.GetID(), err)
							}
						}
					}
					return stream.CloseSend()
				}()
			}()
			for k := first; k < m; k += scaleStreams {
				a, err := stream.Recv()
				if err != nil {
					return fmt.Errorf("stream %d: ack: %w", first, err)
				}
				switch a.GetStatus() {
				case pb.AckMessage_OK:
					nOK.Add(1)
				case pb.AckMessage_SKIPPED:
					nSkipped.Add(1)
				default:
					id, err := strconv.Atoi(a.GetID())
					if err != nil {
						return fmt.Errorf("stream %d: ack of %q", first, a.GetID())
					}
					mu.Lock()
					failed = append(failed, id)
					mu.Unlock()
				}
			}
			if _, err := stream.Recv(); err != io.EOF {
				return fmt.Errorf("stream %d: end: %v", first, err)
			}
			return <-sent
		})
	}
	err = g.Wait()
	return int(nOK.Load()), int(nSkipped.Load()), failed, err
}

// broadRound measures one round of latencies; a call that fails is
// recorded, not fatal.
func (s *scaleServe) broadRound() broadRound {
	var rd broadRound
	for range broadGets {
		p := &pb.GetParams{MaxQueues: broadGetQueues, MaxUrlsPerQueue: 1, DelayRequestable: broadLease,
			Item: &pb.GetParams_CrawlID{CrawlID: scaleCrawl}}
		var got []*pb.URLInfo
		c := s.timedGet(p, broadCallTimeout, func(u *pb.URLInfo) { got = append(got, u) })
		rd.getURLs += len(got)
		if c.err != nil {
			rd.getErr = firstErr(rd.getErr, c.err)
		} else {
			rd.gets = append(rd.gets, c.d)
		}
		// Complete them, untimed, as a crawler would: a queue with a
		// URL in process is not served with max_urls_per_queue 1, so a
		// lease left running would empty one queue of the next calls.
		if err := s.complete(got); err != nil {
			rd.ackErr = firstErr(rd.ackErr, err)
		}
	}
	rd.list = s.timed(broadCallTimeout, func(ctx context.Context) error {
		l, err := s.client.ListQueues(ctx, &pb.Pagination{Size: 100, CrawlID: scaleCrawl})
		rd.listTotal = l.GetTotal()
		return err
	})
	rd.stats = s.timed(broadCallTimeout, func(ctx context.Context) error {
		st, err := s.client.GetStats(ctx, &pb.QueueWithinCrawlParams{CrawlID: scaleCrawl})
		rd.size = st.GetSize()
		return err
	})
	rd.count = s.timed(broadCallTimeout, func(ctx context.Context) error {
		c, err := s.client.CountURLs(ctx, &pb.CountUrlParams{CrawlID: scaleCrawl})
		rd.counted = c.GetValue()
		return err
	})
	return rd
}

// firstErr keeps the first error.
func firstErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// timedGet times GetURLs p until its stream ends, passing each URL it
// received to got.
func (s *scaleServe) timedGet(p *pb.GetParams, d time.Duration, got func(*pb.URLInfo)) broadCall {
	return s.timed(d, func(ctx context.Context) error {
		get, err := s.client.GetURLs(ctx, p)
		if err != nil {
			return err
		}
		for {
			u, err := get.Recv()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			got(u)
		}
	})
}

// complete sends a known update (refetchable_from_date 0) of each URL on
// one PutURLs stream and waits for their acks, which must be OK.
func (s *scaleServe) complete(urls []*pb.URLInfo) error {
	if len(urls) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.t.Context(), broadCallTimeout)
	defer cancel()
	acks, err := s.client.PutURLs(ctx)
	if err != nil {
		return err
	}
	for _, u := range urls {
		known := &pb.KnownURLItem{Info: &pb.URLInfo{Url: u.GetUrl(), Key: u.GetKey(), CrawlID: scaleCrawl}}
		if err := acks.Send(&pb.URLItem{Item: &pb.URLItem_Known{Known: known}}); err != nil {
			return fmt.Errorf("known update: %w", err)
		}
	}
	if err := acks.CloseSend(); err != nil {
		return err
	}
	for range urls {
		a, err := acks.Recv()
		if err != nil {
			return fmt.Errorf("known update: ack: %w", err)
		}
		if a.GetStatus() != pb.AckMessage_OK {
			return fmt.Errorf("known update of a URL: %v", a.GetStatus())
		}
	}
	if _, err := acks.Recv(); err != io.EOF {
		return fmt.Errorf("known updates: end: %v", err)
	}
	return nil
}

// timed times call with a timeout of d.
func (s *scaleServe) timed(d time.Duration, call func(ctx context.Context) error) broadCall {
	ctx, cancel := context.WithTimeout(s.t.Context(), d)
	defer cancel()
	start := time.Now()
	err := call(ctx)
	return broadCall{d: time.Since(start), err: err}
}

// broadNoLimit is one GetURLs of the crawl with no limit of queues or
// URLs per queue: its time, the URLs it received, its error.
func (s *scaleServe) broadNoLimit() (broadCall, int) {
	n := 0
	c := s.timedGet(&pb.GetParams{DelayRequestable: broadLease, Item: &pb.GetParams_CrawlID{CrawlID: scaleCrawl}}, broadNoLimitFor,
		func(*pb.URLInfo) { n++ })
	return c, n
}

// median is the median of ds (0 if none).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// longest is the longest of ds (0 if none).
func longest(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// roundsMedian is the median over the rounds of f, and the first error
// of a round where f has none to give.
func roundsMedian(rounds []broadRound, f func(broadRound) broadCall) broadCall {
	var ds []time.Duration
	var err error
	for _, rd := range rounds {
		c := f(rd)
		if c.err != nil {
			err = firstErr(err, c.err)
			continue
		}
		ds = append(ds, c.d)
	}
	if len(ds) == 0 {
		return broadCall{err: firstErr(err, errors.New("no round"))}
	}
	return broadCall{d: median(ds), err: err}
}

// broadFigures are a row's figures as the table compares them.
type broadFigures struct {
	putRate, handRate                     float64
	afterQueue, afterURL, waitQ, waitURL  float64 // bytes
	getMedian, getMax, list, stats, count broadCall
	noLimit                               broadCall
}

func (r broadRow) figures() broadFigures {
	net := func(v int64) float64 { return float64(v - r.rssEmpty) }
	return broadFigures{
		putRate: r.putRate, handRate: r.handRate,
		afterQueue: net(r.rssAfter) / float64(r.shape.queues), afterURL: net(r.rssAfter) / float64(r.queued),
		waitQ: net(r.rssWait) / float64(r.shape.queues), waitURL: net(r.rssWait) / float64(r.queued),
		getMedian: roundsMedian(r.rounds, func(rd broadRound) broadCall {
			if len(rd.gets) == 0 {
				return broadCall{err: rd.getErr}
			}
			return broadCall{d: median(rd.gets)}
		}),
		getMax: roundsMedian(r.rounds, func(rd broadRound) broadCall {
			if len(rd.gets) == 0 {
				return broadCall{err: rd.getErr}
			}
			return broadCall{d: longest(rd.gets)}
		}),
		list:    roundsMedian(r.rounds, func(rd broadRound) broadCall { return rd.list }),
		stats:   roundsMedian(r.rounds, func(rd broadRound) broadCall { return rd.stats }),
		count:   roundsMedian(r.rounds, func(rd broadRound) broadCall { return rd.count }),
		noLimit: r.noLimit,
	}
}

// broadTable prints rows, each figure with its ratios to the q20k row of
// the same binary and to the baseline binary's row of the same shape,
// found among all.
func broadTable(rows, all []broadRow) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "binary\tshape\tqueues\tURLs\tPutURLs URLs/s\tRSS empty\tRSS 1 s after fill, net\tRSS %s after, net\tGetURLs median (100 queues × 1)\tGetURLs max\tGetURLs no limit\thand-out+ack URLs/s\tListQueues\tGetStats\tCountURLs\tgoals\n", seconds(*serveBroadWait))
	for _, r := range rows {
		f := r.figures()
		var q20k, base *broadFigures
		for _, o := range all {
			if o.bin == r.bin && o.shape.name != r.shape.name && o.shape.queues == broadBaseQueues && o.shape.urls == broadBaseURLs {
				of := o.figures()
				q20k = &of
			}
			if o.bin == "baseline" && r.bin != "baseline" && o.shape.name == r.shape.name {
				of := o.figures()
				base = &of
			}
		}
		// ratios is v's ratios to the q20k row's and the baseline's.
		ratios := func(v float64, pick func(broadFigures) float64) string {
			var rs []string
			if q20k != nil {
				rs = append(rs, ratio(v, pick(*q20k))+" q20k")
			}
			if base != nil {
				rs = append(rs, ratio(v, pick(*base))+" base")
			}
			if len(rs) == 0 {
				return ""
			}
			return " (" + strings.Join(rs, ", ") + ")"
		}
		rate := func(pick func(broadFigures) float64) string {
			return thousands(pick(f)) + ratios(pick(f), pick)
		}
		ms := func(pick func(broadFigures) broadCall) string {
			c := pick(f)
			if c.d == 0 && c.err != nil {
				return "error: " + errText(c.err)
			}
			// A figure every round of which failed is 0: no ratio.
			s := fmt.Sprintf("%.1f ms", c.d.Seconds()*1e3) + ratios(c.d.Seconds(), func(o broadFigures) float64 { return pick(o).d.Seconds() })
			if c.err != nil {
				s += ", a round's error: " + errText(c.err)
			}
			return s
		}
		bytes := func(total int64, perQ, perURL func(broadFigures) float64) string {
			return fmt.Sprintf("%.0f MB, %s B/queue%s, %s B/URL%s", mb(total), byteCount(perQ(f)), ratios(perQ(f), perQ), byteCount(perURL(f)), ratios(perURL(f), perURL))
		}
		noLimit := "-"
		if r.shape.oneQueue {
			noLimit = fmt.Sprintf("%v, %s URLs", r.noLimit.d.Round(time.Millisecond), thousands(float64(r.noLimitN)))
			if r.noLimit.err != nil {
				noLimit += ", error: " + errText(r.noLimit.err)
			}
		}
		hand := rate(func(o broadFigures) float64 { return o.handRate })
		if r.handErr != nil {
			hand += ", error: " + errText(r.handErr)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%.0f MB\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.bin, r.shape.name, thousands(float64(r.shape.queues)), thousands(float64(r.queued)),
			rate(func(o broadFigures) float64 { return o.putRate }), mb(r.rssEmpty),
			bytes(r.rssAfter, func(o broadFigures) float64 { return o.afterQueue }, func(o broadFigures) float64 { return o.afterURL }),
			bytes(r.rssWait, func(o broadFigures) float64 { return o.waitQ }, func(o broadFigures) float64 { return o.waitURL }),
			ms(func(o broadFigures) broadCall { return o.getMedian }), ms(func(o broadFigures) broadCall { return o.getMax }),
			noLimit, hand,
			ms(func(o broadFigures) broadCall { return o.list }), ms(func(o broadFigures) broadCall { return o.stats }), ms(func(o broadFigures) broadCall { return o.count }),
			broadGoals(r, f))
	}
	w.Flush()
	return b.String()
}

// broadGoals says which of issue 40's goals apply to the row and whether
// it meets them.
func broadGoals(r broadRow, f broadFigures) string {
	var gs []string
	mark := func(ok bool, goal string) {
		if ok {
			gs = append(gs, goal+" ok")
		} else {
			gs = append(gs, goal+" MISSED")
		}
	}
	sh := r.shape
	if !sh.oneQueue && sh.queues >= 1_000_000 {
		mark(f.getMedian.err == nil && f.getMedian.d <= 20*time.Millisecond, "GetURLs ≤ 20 ms")
		mark(f.list.err == nil && f.stats.err == nil && f.count.err == nil, "answered")
	}
	if !sh.oneQueue && sh.queues >= 10_000_000 {
		mark(f.waitQ <= 128, "≤ 128 B/queue")
	}
	if sh.oneQueue && sh.urls >= 1_000_000 {
		mark(r.noLimit.err == nil && r.noLimitN > 0, "no limit")
	}
	if len(gs) == 0 {
		return "-"
	}
	return strings.Join(gs, "; ")
}

// byteCount is v with a decimal below 100 bytes, without one above.
func byteCount(v float64) string {
	if v <= -100 || v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// errText is err's text on one line, cut short for a table cell.
func errText(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// seconds is d as the table prints a wait: "60 s".
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
}
