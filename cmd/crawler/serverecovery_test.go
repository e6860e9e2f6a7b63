package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/sievecrawl/sieve/natstest"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// The serve recovery benchmark is a test that prints a table; it runs only
// when asked (./bench.sh recovery):
//
//	go test ./cmd/crawler -count=1 -run '^TestServeRecovery$' -sieve.serverecovery -sieve.serverecovery.sizes 1M,5M -v -timeout 180m
//
// It measures, as a client sees them, the two figures an operator meets
// after a fill of `crawler serve --embedded` (a subprocess on its own data
// directory): its resident memory right after the fill, 60 s after it and
// at rest, and how long a restart takes until GetURLs hands out a URL
// again, after SIGKILL and after SIGTERM. For each size and fill client
// (PutDiscovered: 8 streams of 1,000-URL batches; PutURLs with metadata: 8
// streams of discovered items, each with two metadata keys), on a fresh
// data directory:
//
//  1. the fill, URLs over sieve.servebench.queues hosts;
//  2. RSS 1 s after the fill's last ack, and 60 s after it;
//  3. at once SIGKILL, and a start timed until GetURLs gives a URL (the
//     first URLs) and until GetStats counts every URL;
//  4. RSS at rest: the least over up to 5 minutes idle after a second
//     fill of 1 % of the size into the restarted process, which is then
//     stopped with SIGTERM and started again, timed likewise.
//
// Each row is printed with its ratios to the first row (the same-run
// baseline), and with -sieve.serverecovery.baseline BIN every size is
// measured with BIN first (the code before a change, built from another
// checkout) and with this tree's binary after it, each ratio to the
// baseline's row of its size.
var (
	serveRecovery      = flag.Bool("sieve.serverecovery", false, "run the crawler serve recovery table (TestServeRecovery)")
	serveRecoverySizes = flag.String("sieve.serverecovery.sizes", "1000000", "comma-separated numbers of URLs put into crawler serve, one row each (k and M accepted)")
	serveRecoveryFills = flag.String("sieve.serverecovery.fills", "discovered,urls", "fill clients, each a row per size: discovered (PutDiscovered) and urls (PutURLs with metadata)")
	serveRecoveryBase  = flag.String("sieve.serverecovery.baseline", "", "a crawler binary measured before this tree's at every size and fill: the same-run baseline of each ratio")
	serveRecoveryBin   = flag.String("sieve.serverecovery.bin", "", "crawler binary to measure; empty: go build ./cmd/crawler of this tree")
)

// recoveryRow is one row of the table.
type recoveryRow struct {
	bin, fill  string
	n          int
	putRate    float64 // URLs/s acked OK
	rssAfter   int64   // 1 s after the fill
	rss60      int64   // 60 s after the fill
	logBytes   int64   // the stores' log on disk 60 s after the fill (what a SIGKILL restart rebuilds)
	killFirst  time.Duration
	killAll    time.Duration
	rssRest    int64 // the least over up to 5 minutes idle
	stop       time.Duration
	termFirst  time.Duration
	termAll    time.Duration
	queuedLast int
}

// TestServeRecovery prints the serve recovery table described above.
func TestServeRecovery(t *testing.T) {
	if !*serveRecovery {
		t.Skip("the crawler serve recovery table runs with -sieve.serverecovery (./bench.sh recovery)")
	}
	sizes, err := parseSizes(*serveRecoverySizes)
	if err != nil {
		t.Fatalf("-sieve.serverecovery.sizes: %v", err)
	}
	fills := strings.Split(*serveRecoveryFills, ",")
	for _, f := range fills {
		if f != "discovered" && f != "urls" {
			t.Fatalf("-sieve.serverecovery.fills: %q is neither discovered nor urls", f)
		}
	}
	bin := *serveRecoveryBin
	if bin == "" {
		bin = crawlerBinary(t)
	}
	bins := []string{bin}
	if *serveRecoveryBase != "" {
		bins = []string{*serveRecoveryBase, bins[0]}
	}
	var rows []recoveryRow
	for _, n := range sizes {
		for _, fill := range fills {
			for i, bin := range bins {
				name := "this"
				if len(bins) > 1 && i == 0 {
					name = "baseline"
				}
				t.Run(fmt.Sprintf("%d/%s/%s", n, fill, name), func(t *testing.T) {
					r := measureRecovery(t, bin, fill, n, *serveBenchQueues)
					r.bin = name
					t.Logf("%s", recoveryTable([]recoveryRow{r}, *serveBenchQueues))
					rows = append(rows, r)
				})
			}
		}
	}
	if len(rows) > 0 {
		t.Log("crawler serve --embedded after a fill (ratios: to the baseline binary's row of the same size and fill, or else to the first row of the fill)\n" +
			recoveryTable(rows, *serveBenchQueues))
	}
}

// parseSizes reads a comma-separated list of positive numbers, k and M
// accepted (1M: 1000000).
func parseSizes(s string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		f = strings.ReplaceAll(strings.ReplaceAll(f, "k", "000"), "M", "000000")
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// recoveryTable prints the rows, each figure with its ratio to its
// baseline: the baseline binary's row of the same size and fill, or the
// first row.
func recoveryTable(rows []recoveryRow, queues int) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "binary\tfill\tURLs (%d queues)\tputs/s\tRSS 1 s after\tRSS 60 s after\tRSS at rest\tlog on disk\tSIGKILL: first URLs\tSIGKILL: every URL\tSIGTERM stop\tSIGTERM: first URLs\tSIGTERM: every URL\n", queues)
	for _, r := range rows {
		// The baseline binary's row of this size and fill, or else the
		// first row of this fill.
		base := r
		for i := len(rows) - 1; i >= 0; i-- {
			if o := rows[i]; o.fill == r.fill && (o.bin == "baseline" && o.n == r.n || base.bin != "baseline") {
				base = o
			}
		}
		bytes := func(v, bv int64) string {
			return fmt.Sprintf("%.0f MB, %.1f B/URL (%s)", mb(v), perURL(v, r.n), ratio(perURL(v, r.n), perURL(bv, base.n)))
		}
		dur := func(v, bv time.Duration) string {
			return fmt.Sprintf("%v (%s)", v.Round(time.Millisecond), ratio(v.Seconds(), bv.Seconds()))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s (%s)\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.bin, r.fill, thousands(float64(r.n)), thousands(r.putRate), ratio(r.putRate, base.putRate),
			bytes(r.rssAfter, base.rssAfter), bytes(r.rss60, base.rss60), bytes(r.rssRest, base.rssRest), bytes(r.logBytes, base.logBytes),
			dur(r.killFirst, base.killFirst), dur(r.killAll, base.killAll), dur(r.stop, base.stop),
			dur(r.termFirst, base.termFirst), dur(r.termAll, base.termAll))
	}
	w.Flush()
	return b.String()
}

// measureRecovery runs one row (see TestServeRecovery).
func measureRecovery(t *testing.T, bin, fill string, n, queues int) recoveryRow {
	s := &scaleServe{t: t, bin: bin, dir: t.TempDir(), addr: natstest.ClosedAddr(t)}
	r := recoveryRow{fill: fill, n: n}
	s.start()
	if _, err := s.stats("", 2*time.Minute); err != nil {
		s.fatalf("serve did not answer GetStats within 2 minutes of starting: %v", err)
	}
	// No politeness delay: a restarted server hands a URL out at once.
	ctx, cancel := phaseContext(t, 30*time.Second)
	_, err := s.client.SetDelay(ctx, &pb.QueueDelayParams{CrawlID: scaleCrawl, DelayRequestable: 0})
	cancel()
	if err != nil {
		s.fatalf("SetDelay 0: %v", err)
	}

	// 1. Fill.
	queued := s.recoveryFill(fill, 0, n, queues)
	end := time.Now()
	r.putRate = float64(queued) / s.lastFill.Seconds()

	// 2. RSS right after, and 60 s after.
	r.rssAfter = s.rssAt(end.Add(time.Second))
	r.rss60 = s.rssAt(end.Add(60 * time.Second))
	r.logBytes = storeLogBytes(t, s.dir)
	t.Logf("RSS 1 s after the fill %.0f MB, 60 s after %.0f MB; the stores' log %.0f MB on disk", mb(r.rssAfter), mb(r.rss60), mb(r.logBytes))

	// 3. SIGKILL at once, and the start after it.
	s.kill()
	r.killFirst, r.killAll = s.startUntilServing(queued)
	t.Logf("SIGKILL: first URLs after %v, every URL after %v", r.killFirst.Round(time.Millisecond), r.killAll.Round(time.Millisecond))

	// 4. At rest after a second fill, then SIGTERM and the start after it.
	extra := max(n/100, scaleBatch)
	queued += s.recoveryFill(fill, n, extra, queues)
	r.rssRest = s.settledRSS()
	r.stop = s.terminate()
	r.termFirst, r.termAll = s.startUntilServing(queued)
	r.queuedLast = queued
	return r
}

// storeLogBytes adds up the message blocks of the stores' stream
// (<PREFIX>_STORE) under the embedded server's data dir.
func storeLogBytes(t *testing.T, dir string) int64 {
	t.Helper()
	msgs := "_STORE" + string(filepath.Separator) + "msgs" + string(filepath.Separator)
	n, err := walkBytes(dir, func(path string) bool { return strings.Contains(path, msgs) })
	if err != nil {
		t.Fatalf("the stores' log on disk: %v", err)
	}
	return n
}

// rssAt waits until at and returns serve's resident memory.
func (s *scaleServe) rssAt(at time.Time) int64 {
	s.t.Helper()
	time.Sleep(time.Until(at))
	rss, err := vmRSS(s.p.cmd.Process.Pid)
	if err != nil {
		s.fatalf("%v", err)
	}
	return rss
}

// recoveryFill puts URLs from to from+n-1 with the fill client fill and
// returns how many are queued (acked OK); the time it took is s.lastFill.
// A URL answered FAIL (its admission outlasted the server's bound, on a
// busy box) is put again, as a crawler would, up to 5 rounds; SKIPPED
// then means it was stored the first time.
func (s *scaleServe) recoveryFill(fill string, from, n, queues int) int {
	s.t.Helper()
	ctx, cancel := phaseContext(s.t, 10*time.Minute+time.Duration(n)*time.Millisecond)
	defer cancel()
	put := s.putDiscovered
	if fill == "urls" {
		put = s.putURLs
	}
	start := time.Now()
	url := func(k int) int { return from + k }
	m, ok, skipped := n, 0, 0
	for round := 1; ; round++ {
		o, sk, failed, err := put(ctx, m, url, queues)
		ok += o
		if round == 1 {
			skipped = sk
		} else {
			// A URL answered FAIL may have been stored after all (its
			// admission outlasted the answer): put again, it is SKIPPED
			// as known, which the filter says only once it is stored.
			ok += sk
		}
		if err != nil {
			s.fatalf("fill (%s): %v (%d OK so far)", fill, err, ok)
		}
		if len(failed) == 0 {
			break
		}
		if round == 5 {
			s.fatalf("fill (%s): %d URLs still FAIL after %d rounds", fill, len(failed), round)
		}
		s.t.Logf("fill (%s), round %d: %d URLs FAIL; putting them again", fill, round, len(failed))
		prev := url
		url, m = func(k int) int { return prev(failed[k]) }, len(failed)
	}
	s.lastFill = time.Since(start)
	if float64(skipped) > 1e-4*float64(n) {
		s.fatalf("fill (%s): %d of %d URLs SKIPPED, want at most the filter's false positives", fill, skipped, n)
	}
	s.t.Logf("filled %d URLs (%s) in %v: %.0f URLs/s", ok, fill, s.lastFill.Round(time.Millisecond), float64(ok)/s.lastFill.Seconds())
	return ok
}

// startUntilServing starts serve and returns the times until GetURLs
// first hands out a URL of the crawl (one URL, leased for an hour) and
// until GetStats counts every URL, queued or in process.
func (s *scaleServe) startUntilServing(queued int) (first, all time.Duration) {
	s.t.Helper()
	start := time.Now()
	s.start()
	deadline := start.Add(10*time.Minute + time.Duration(queued)*time.Millisecond)
	var answered time.Duration // the first answer, with or without a URL
	empty := 0
	for {
		ctx, cancel := context.WithTimeout(s.t.Context(), 5*time.Second)
		got, err := s.getOne(ctx)
		cancel()
		if err == nil && answered == 0 {
			answered = time.Since(start)
		}
		if err == nil && got {
			first = time.Since(start)
			s.t.Logf("started: GetURLs answered after %v, gave a URL after %v (%d empty answers before)",
				answered.Round(time.Millisecond), first.Round(time.Millisecond), empty)
			break
		}
		if err == nil {
			empty++
		}
		select {
		case <-s.p.done:
			s.fatalf("serve exited (%v) before handing a URL out (last GetURLs: %v)", s.p.err, err)
		default:
		}
		if time.Now().After(deadline) {
			s.fatalf("no URL handed out within %v of starting (last GetURLs: %v)", time.Since(start), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		st, err := s.stats(scaleCrawl, time.Until(deadline))
		if err == nil && st.GetSize()+uint64(st.GetInProcess()) == uint64(queued) {
			return first, time.Since(start)
		}
		if time.Now().After(deadline) {
			s.fatalf("GetStats: %v (err %v), want %d URLs queued or in process", st, err, queued)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// getOne asks GetURLs for one URL of the crawl and reports whether it got
// one.
func (s *scaleServe) getOne(ctx context.Context) (bool, error) {
	get, err := s.client.GetURLs(ctx, &pb.GetParams{MaxUrlsPerQueue: 1, MaxQueues: 1, DelayRequestable: 3600,
		Item: &pb.GetParams_CrawlID{CrawlID: scaleCrawl}}, grpc.WaitForReady(true))
	if err != nil {
		return false, err
	}
	got := false
	for {
		_, err := get.Recv()
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return false, err
		}
		got = true
	}
}

// putURLs is putDiscovered through scaleStreams PutURLs streams, each
// URL a discovered item with two metadata keys (its depth and the page
// that linked it, as a crawler sends them); acks are read as they come.
func (s *scaleServe) putURLs(ctx context.Context, m int, url func(k int) int, queues int) (ok, skipped int, failed []int, err error) {
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
					for k := first; k < m; k += scaleStreams {
						u := url(k)
						info := &pb.URLInfo{Url: scaleURL(u, queues), CrawlID: scaleCrawl, Metadata: map[string]*pb.StringList{
							"depth":   {Values: []string{strconv.Itoa(1 + u%7)}},
							"referer": {Values: []string{"https://www.site" + strconv.Itoa(u%queues) + ".example/"}},
						}}
						item := &pb.URLItem{ID: strconv.Itoa(k), Item: &pb.URLItem_Discovered{Discovered: &pb.DiscoveredURLItem{Info: info}}}
						if err := stream.Send(item); err != nil {
							return fmt.Errorf("send URL %d: %w", u, err)
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
