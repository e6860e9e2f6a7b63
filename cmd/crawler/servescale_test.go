package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sievecrawl/sieve/natstest"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// The serve scale benchmark is a test that prints a table; it runs only
// when asked (./bench.sh scale):
//
//	go test ./cmd/crawler -count=1 -run '^TestServeScale$' -sieve.servebench -sieve.servebench.sizes 1000000 -v -timeout 120m
//
// It measures `crawler serve --embedded` from outside, as a client sees it:
// a subprocess with its own data directory, so that its RSS is serve and its
// embedded NATS server. For each size N it puts N discovered URLs over
// sieve.servebench.queues hosts into the crawl "bench" through PutDiscovered
// (8 streams, batches of 1,000, acks read as they come), reads the
// process's RSS after 5 s idle and the data directory's bytes, stops it with
// SIGTERM and starts it again (then SIGKILL and again), timing each start
// until GetStats reports the N URLs, and hands URLs out for 20 s (or
// 200,000 URLs) with GetURLs, each completed by a known update, with no
// politeness delay. Every figure per URL is printed with its ratio to the
// first size's, the same-run baseline: a ratio above 1 for bytes per URL
// means that state grows faster than the URLs; bytes are also given per URL
// added since the first size, which fixed costs (the Go runtime, NATS's
// buffers, caches) do not hide.
var (
	serveBench       = flag.Bool("sieve.servebench", false, "run the crawler serve scale table (TestServeScale)")
	serveBenchSizes  = flag.String("sieve.servebench.sizes", "1000000", "comma-separated numbers of URLs put into crawler serve, one row each (k and M accepted)")
	serveBenchQueues = flag.Int("sieve.servebench.queues", 20000, "queues (hosts) the URLs are spread over")
	serveBenchBin    = flag.String("sieve.servebench.bin", "", "crawler binary to measure; empty: go build ./cmd/crawler of this tree")
)

const (
	scaleCrawl   = "bench"
	scaleStreams = 8     // concurrent PutDiscovered streams
	scaleBatch   = 1_000 // URLs in one DiscoveredBatch
	scaleWorkers = 4     // concurrent GetURLs + PutURLs(known) clients
	scaleHandFor = 20 * time.Second
	scaleHandMax = 200_000
	scaleIdle    = 5 * time.Second // before reading RSS
	// scaleSettle is how long the filled server is left idle for its
	// settled RSS: the Go runtime collects at least every 2 minutes, and
	// only then returns what a burst left (NATS's block buffers are
	// pooled, dropped after two collections).
	scaleSettle = 5 * time.Minute
)

// scaleURL is the i-th URL of the fill; its queue is its host, i mod queues.
func scaleURL(i, queues int) string {
	return "https://www.site" + strconv.Itoa(i%queues) + ".example/articles/" + strconv.Itoa(i) + ".html"
}

// serveScale is one row of the table.
type serveScale struct {
	n          int
	putRate    float64 // URLs/s admitted through PutDiscovered
	rssFilled  int64   // bytes, idle after the fill
	rssSettled int64   // the least over scaleSettle idle after the fill
	disk       int64   // bytes under the data directory after the fill
	stop       time.Duration
	restart    time.Duration // SIGTERM, then start until GetStats says N
	killed     time.Duration // SIGKILL, then start until GetStats says N
	rssRestart int64         // idle after the SIGKILL restart
	completed  int
	getRate    float64 // URLs/s handed out and completed
	rssHanded  int64   // idle after the hand-out
}

// TestServeScale prints the serve scale table described above: one row per
// size of -sieve.servebench.sizes, each on a fresh data directory.
func TestServeScale(t *testing.T) {
	if !*serveBench {
		t.Skip("the crawler serve scale table runs with -sieve.servebench (./bench.sh scale)")
	}
	sizes, err := parseSizes(*serveBenchSizes)
	if err != nil {
		t.Fatalf("-sieve.servebench.sizes: %v", err)
	}
	if *serveBenchQueues <= 0 {
		t.Fatal("-sieve.servebench.queues must be positive")
	}
	bin := *serveBenchBin
	if bin == "" {
		bin = crawlerBinary(t)
	}
	var rows []serveScale
	for _, n := range sizes {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			r := measureServeScale(t, bin, n, *serveBenchQueues)
			t.Logf("%d URLs over %d queues: PutDiscovered %.0f URLs/s; RSS idle %.1f MB (%.1f B/URL), settled %.1f MB (%.1f B/URL); data dir %.1f MB (%.1f B/URL); "+
				"SIGTERM stop %v, restart %v; SIGKILL restart %v; RSS restarted %.1f MB (%.1f B/URL); "+
				"GetURLs + known %.0f URLs/s (%d completed); RSS after %.1f MB (%.1f B/URL)",
				n, *serveBenchQueues, r.putRate, mb(r.rssFilled), perURL(r.rssFilled, n), mb(r.rssSettled), perURL(r.rssSettled, n), mb(r.disk), perURL(r.disk, n),
				r.stop.Round(time.Millisecond), r.restart.Round(time.Millisecond), r.killed.Round(time.Millisecond),
				mb(r.rssRestart), perURL(r.rssRestart, n), r.getRate, r.completed, mb(r.rssHanded), perURL(r.rssHanded, n))
			rows = append(rows, r)
		})
	}
	if len(rows) > 0 {
		t.Log("crawler serve --embedded at growing sizes (ratios: to the first row, the same-run baseline; " +
			"B/added URL: the growth since the first row over the URLs added)\n" + serveScaleTable(rows, *serveBenchQueues))
	}
}

// serveScaleTable prints the rows, each figure with its ratio to the first
// row's.
func serveScaleTable(rows []serveScale, queues int) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "URLs (%d queues)\tPutDiscovered URLs/s\tRSS filled, idle 5 s\tRSS filled, settled\tdata dir\tSIGTERM stop\trestart after SIGTERM\trestart after SIGKILL\tRSS restarted\tGetURLs+known URLs/s\tRSS after hand-out\n", queues)
	base := rows[0]
	// bytes gives the total, per URL, its ratio, and beyond the first row
	// what each added URL cost: per URL, fixed costs hide a growth.
	bytes := func(v int64, n int, bv int64) string {
		s := fmt.Sprintf("%.1f MB, %.0f B/URL (%s)", mb(v), perURL(v, n), ratio(perURL(v, n), perURL(bv, base.n)))
		if n != base.n {
			s += fmt.Sprintf(", %+.0f B/added URL", float64(v-bv)/float64(n-base.n))
		}
		return s
	}
	dur := func(v, bv time.Duration) string {
		return fmt.Sprintf("%v (%s)", v.Round(time.Millisecond), ratio(v.Seconds(), bv.Seconds()))
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s (%s)\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s (%s)\t%s\n",
			thousands(float64(r.n)),
			thousands(r.putRate), ratio(r.putRate, base.putRate),
			bytes(r.rssFilled, r.n, base.rssFilled), bytes(r.rssSettled, r.n, base.rssSettled), bytes(r.disk, r.n, base.disk),
			dur(r.stop, base.stop), dur(r.restart, base.restart), dur(r.killed, base.killed),
			bytes(r.rssRestart, r.n, base.rssRestart),
			thousands(r.getRate), ratio(r.getRate, base.getRate),
			bytes(r.rssHanded, r.n, base.rssHanded))
	}
	w.Flush()
	return b.String()
}

// measureServeScale runs one row: fill, idle RSS and disk, the restarts,
// the hand-out.
func measureServeScale(t *testing.T, bin string, n, queues int) serveScale {
	s := &scaleServe{t: t, bin: bin, dir: t.TempDir(), addr: natstest.ClosedAddr(t)}
	r := serveScale{n: n}
	s.start()
	if _, err := s.stats("", 2*time.Minute); err != nil { // the crawl DEFAULT always exists
		s.fatalf("serve did not answer GetStats within 2 minutes of starting: %v", err)
	}

	// 1. Fill.
	ctx, cancel := phaseContext(t, 10*time.Minute+time.Duration(n)*time.Millisecond)
	start := time.Now()
	ok, other, err := s.fill(ctx, n, queues)
	took := time.Since(start)
	cancel()
	if err != nil {
		s.fatalf("PutDiscovered: %v (%d OK so far)", err, ok)
	}
	// A new URL the crawl's filter holds already (its false-positive
	// rate: the scalable Bloom filter's is far below 1e-4) is SKIPPED;
	// anything else, or more than that, is a failure.
	if skipped := n - ok; other[pb.AckMessage_FAIL] > 0 || float64(skipped) > 1e-4*float64(n) {
		s.fatalf("PutDiscovered: %d of %d URLs OK, want all but the filter's false positives (others: %v)", ok, n, other)
	}
	r.putRate = float64(n) / took.Seconds()
	n = ok // what is queued
	st := s.waitSize(n, time.Minute)
	t.Logf("filled %d URLs in %v; GetStats: size %d, %d queues, in process %d", n, took.Round(time.Millisecond), st.GetSize(), st.GetNumberOfQueues(), st.GetInProcess())

	// 2. RAM and disk.
	r.rssFilled = s.idleRSS()
	r.rssSettled = s.settledRSS()
	var parts string
	r.disk, parts = treeBytes(t, s.dir)
	t.Logf("data dir %.1f MB: %s", mb(r.disk), parts)

	// 3. Restarts: SIGTERM, then SIGKILL; both must keep the N URLs.
	r.stop = s.terminate()
	r.restart = s.startUntilSize(n)
	s.kill()
	r.killed = s.startUntilSize(n)
	r.rssRestart = s.idleRSS()

	// 4. Hand-out at no delay, each URL completed by a known update.
	ctx, cancel = phaseContext(t, 30*time.Second)
	_, err = s.client.SetDelay(ctx, &pb.QueueDelayParams{CrawlID: scaleCrawl, DelayRequestable: 0})
	cancel()
	if err != nil {
		s.fatalf("SetDelay 0: %v", err)
	}
	ctx, cancel = phaseContext(t, scaleHandFor+5*time.Minute)
	start = time.Now()
	completed, failed, err := s.handOut(ctx, 10, 500, min(scaleHandMax, n))
	took = time.Since(start)
	cancel()
	if err != nil {
		s.fatalf("hand-out: %v (%d completed)", err, completed)
	}
	if failed > 0 {
		s.fatalf("hand-out: %d known updates not OK (%d OK)", failed, completed)
	}
	r.completed = completed
	r.getRate = float64(completed) / took.Seconds()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := s.stats(scaleCrawl, 10*time.Second)
		if err == nil && st.GetCounts()["completed"] == uint64(completed) {
			t.Logf("handed out and completed %d URLs in %v; GetStats: size %d, in process %d, completed %d",
				completed, took.Round(time.Millisecond), st.GetSize(), st.GetInProcess(), st.GetCounts()["completed"])
			break
		}
		if time.Now().After(deadline) {
			s.fatalf("GetStats after the hand-out: %v (err %v), want completed %d", st, err, completed)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// 5. RAM after the hand-out.
	r.rssHanded = s.idleRSS()
	return r
}

// phaseContext bounds a phase by d, and by the test's own deadline less a
// minute so that a phase that hangs fails with its log rather than as a
// panic of go test's -timeout.
func phaseContext(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := t.Deadline(); ok {
		d = min(d, time.Until(dl)-time.Minute)
	}
	return context.WithTimeout(t.Context(), d)
}

// scaleServe is `crawler serve --embedded` on one data directory and port,
// started again on them after each stop, and a client of it.
type scaleServe struct {
	t              *testing.T
	bin, dir, addr string
	starts         int
	lastFill       time.Duration // how long the last fill took (TestServeRecovery)
	p              *proc
	conn           *grpc.ClientConn
	client         pb.URLFrontierClient
}

// start starts serve and connects a client (the connection is made by the
// first call). The client retries every 50 ms while serve is not listening.
func (s *scaleServe) start() {
	s.t.Helper()
	s.starts++
	s.p = startProc(s.t, fmt.Sprintf("serve-%d", s.starts), s.bin, []string{
		"serve", "--embedded", "--data-dir", s.dir, "--urlfrontier-addr", s.addr, "--http-addr", "",
	}, []string{"SIEVE_LOG_LEVEL=debug"}) // the log says when memory was returned (memtrim)
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1, MaxDelay: 50 * time.Millisecond},
			MinConnectTimeout: 10 * time.Second,
		}))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { conn.Close() })
	s.conn, s.client = conn, pb.NewURLFrontierClient(conn)
}

// fatalf fails the test with the tail of serve's log.
func (s *scaleServe) fatalf(format string, args ...any) {
	s.t.Helper()
	if s.p == nil {
		s.t.Fatalf(format, args...)
	}
	s.t.Fatalf(format+"\n%s's log (%s), its end:\n%s", append(args, s.p.name, s.p.log, s.p.logTail())...)
}

// stats is GetStats of crawl, waiting up to d for serve to answer.
func (s *scaleServe) stats(crawl string, d time.Duration) (*pb.Stats, error) {
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(s.t.Context(), min(5*time.Second, time.Until(deadline)))
		st, err := s.client.GetStats(ctx, &pb.QueueWithinCrawlParams{CrawlID: crawl}, grpc.WaitForReady(true))
		cancel()
		if err == nil {
			return st, nil
		}
		select {
		case <-s.p.done:
			return nil, fmt.Errorf("serve exited (%v); last GetStats: %w", s.p.err, err)
		default:
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitSize polls GetStats every 50 ms until the crawl's size is n.
func (s *scaleServe) waitSize(n int, d time.Duration) *pb.Stats {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for {
		st, err := s.stats(scaleCrawl, time.Until(deadline))
		if err == nil && st.GetSize() == uint64(n) {
			return st
		}
		if time.Now().After(deadline) {
			s.fatalf("GetStats: %v (err %v) within %v, want size %d", st, err, d, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startUntilSize starts serve and returns the time until GetStats reports
// the crawl's n URLs.
func (s *scaleServe) startUntilSize(n int) time.Duration {
	s.t.Helper()
	start := time.Now()
	s.start()
	s.waitSize(n, 10*time.Minute+time.Duration(n)*time.Millisecond)
	return time.Since(start)
}

// terminate stops serve with SIGTERM and returns the time until it exited,
// which must be with status 0.
func (s *scaleServe) terminate() time.Duration {
	s.t.Helper()
	s.conn.Close()
	start := time.Now()
	if err := s.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.fatalf("SIGTERM: %v", err)
	}
	select {
	case <-s.p.done:
	case <-time.After(2 * time.Minute):
		s.p.cmd.Process.Kill()
		<-s.p.done
		s.fatalf("serve did not exit within 2 minutes of SIGTERM")
	}
	took := time.Since(start)
	if s.p.err != nil {
		s.fatalf("serve after SIGTERM: %v", s.p.err)
	}
	return took
}

// kill stops serve with SIGKILL: nothing is saved on the way out.
func (s *scaleServe) kill() {
	s.t.Helper()
	s.conn.Close()
	if err := s.p.cmd.Process.Kill(); err != nil {
		s.fatalf("SIGKILL: %v", err)
	}
	<-s.p.done
}

// settledRSS reads serve's resident memory every 10 s for up to
// scaleSettle and returns the least, once it held for a minute after the
// runtime's forced collections had their chance (4 minutes).
func (s *scaleServe) settledRSS() int64 {
	s.t.Helper()
	least := int64(math.MaxInt64)
	start, since := time.Now(), time.Now()
	for time.Since(start) < scaleSettle {
		time.Sleep(10 * time.Second)
		rss, err := vmRSS(s.p.cmd.Process.Pid)
		if err != nil {
			s.fatalf("%v", err)
		}
		if rss < least*99/100 {
			since = time.Now()
		}
		least = min(least, rss)
		if time.Since(start) > 4*time.Minute && time.Since(since) > time.Minute {
			break
		}
	}
	return least
}

// idleRSS waits scaleIdle and returns serve's resident memory.
func (s *scaleServe) idleRSS() int64 {
	s.t.Helper()
	return s.rssAt(time.Now().Add(scaleIdle))
}

// fill puts URLs 0 to n-1 into the crawl through PutDiscovered (putDiscovered)
// and returns the URLs acked OK and the others by status.
func (s *scaleServe) fill(ctx context.Context, n, queues int) (int, map[pb.AckMessage_Status]int, error) {
	ok, skipped, failed, err := s.putDiscovered(ctx, n, func(k int) int { return k }, queues)
	return ok, map[pb.AckMessage_Status]int{pb.AckMessage_SKIPPED: skipped, pb.AckMessage_FAIL: len(failed)}, err
}

// putDiscovered puts m URLs, the k-th being scaleURL(url(k)), into the
// crawl through scaleStreams PutDiscovered streams, batch b on stream b
// mod scaleStreams, generating each batch as it is sent; acks are read as
// they come. It returns the URLs acked OK and SKIPPED, and the k of those
// that failed.
func (s *scaleServe) putDiscovered(ctx context.Context, m int, url func(k int) int, queues int) (ok, skipped int, failed []int, err error) {
	batches := (m + scaleBatch - 1) / scaleBatch
	var nOK, nSkipped atomic.Int64
	var mu sync.Mutex
	g, ctx := errgroup.WithContext(ctx)
	for first := range scaleStreams {
		g.Go(func() error {
			stream, err := s.client.PutDiscovered(ctx)
			if err != nil {
				return err
			}
			sent := make(chan error, 1)
			go func() {
				sent <- func() error {
					for b := first; b < batches; b += scaleStreams {
						lo, hi := b*scaleBatch, min((b+1)*scaleBatch, m)
						items := make([]*pb.URLInfo, 0, hi-lo)
						for k := lo; k < hi; k++ {
							items = append(items, &pb.URLInfo{Url: scaleURL(url(k), queues), CrawlID: scaleCrawl})
						}
						if err := stream.Send(&pb.DiscoveredBatch{ID: strconv.Itoa(b), Items: items}); err != nil {
							return fmt.Errorf("send batch %d: %w", b, err)
						}
					}
					return stream.CloseSend()
				}()
			}()
			for b := first; b < batches; b += scaleStreams {
				a, err := stream.Recv()
				if err != nil {
					return fmt.Errorf("stream %d, ack of batch %d: %w", first, b, err)
				}
				if a.GetID() != strconv.Itoa(b) {
					return fmt.Errorf("stream %d: ack of batch %q, want %d", first, a.GetID(), b)
				}
				for j, v := range a.GetStatuses() {
					switch v {
					case pb.AckMessage_OK:
						nOK.Add(1)
					case pb.AckMessage_SKIPPED:
						nSkipped.Add(1)
					default:
						mu.Lock()
						failed = append(failed, b*scaleBatch+j)
						mu.Unlock()
					}
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

// handOut runs scaleWorkers clients, each asking GetURLs for up to
// perQueue URLs from each of up to queues queues of the crawl and
// completing every URL it gets with a known update (refetchable_from_date
// 0) on its own PutURLs stream, until scaleHandFor has passed or limit URLs
// are completed. It returns the URLs acked OK and the others.
func (s *scaleServe) handOut(ctx context.Context, perQueue, queues uint32, limit int) (completed, notOK int, err error) {
	end := time.Now().Add(scaleHandFor)
	var ok, bad atomic.Int64
	g, ctx := errgroup.WithContext(ctx)
	for w := range scaleWorkers {
		g.Go(func() error {
			acks, err := s.client.PutURLs(ctx)
			if err != nil {
				return err
			}
			for time.Now().Before(end) && ok.Load() < int64(limit) {
				get, err := s.client.GetURLs(ctx, &pb.GetParams{MaxUrlsPerQueue: perQueue, MaxQueues: queues, DelayRequestable: 60,
					Item: &pb.GetParams_CrawlID{CrawlID: scaleCrawl}})
				if err != nil {
					return err
				}
				var got []*pb.URLInfo
				for {
					u, err := get.Recv()
					if err == io.EOF {
						break
					}
					if err != nil {
						return fmt.Errorf("worker %d: GetURLs: %w", w, err)
					}
					got = append(got, u)
				}
				if len(got) == 0 {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				sent := make(chan error, 1)
				go func() {
					for _, u := range got {
						known := &pb.KnownURLItem{Info: &pb.URLInfo{Url: u.GetUrl(), Key: u.GetKey(), CrawlID: scaleCrawl}}
						if err := acks.Send(&pb.URLItem{Item: &pb.URLItem_Known{Known: known}}); err != nil {
							sent <- err
							return
						}
					}
					sent <- nil
				}()
				for range got {
					a, err := acks.Recv()
					if err != nil {
						return fmt.Errorf("worker %d: PutURLs ack: %w", w, err)
					}
					if a.GetStatus() == pb.AckMessage_OK {
						ok.Add(1)
					} else {
						bad.Add(1)
					}
				}
				if err := <-sent; err != nil {
					return fmt.Errorf("worker %d: PutURLs send: %w", w, err)
				}
			}
			if err := acks.CloseSend(); err != nil {
				return err
			}
			if _, err := acks.Recv(); err != io.EOF {
				return fmt.Errorf("worker %d: PutURLs end: %v", w, err)
			}
			return nil
		})
	}
	err = g.Wait()
	return int(ok.Load()), int(bad.Load()), err
}

// vmRSS returns the resident memory of process pid (VmRSS in
// /proc/pid/status), in bytes.
func vmRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status VmRSS %q: %w", pid, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmRSS in /proc/" + strconv.Itoa(pid) + "/status")
}

// treeBytes returns the bytes of the files under dir, and the share of
// each of its entries.
func treeBytes(tb testing.TB, dir string) (int64, string) {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var total int64
	var parts []string
	for _, e := range entries {
		n, err := walkBytes(filepath.Join(dir, e.Name()), nil)
		if err != nil {
			tb.Fatal(err)
		}
		total += n
		parts = append(parts, fmt.Sprintf("%s %.1f MB", e.Name(), mb(n)))
	}
	return total, strings.Join(parts, ", ")
}

// walkBytes adds up the sizes of the files under dir whose path keep
// accepts (nil: every file).
func walkBytes(dir string, keep func(path string) bool) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || (keep != nil && !keep(path)) {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	return n, err
}

func mb(b int64) float64 { return float64(b) / 1e6 }

// ratio is v/b as a table prints it ("-" without a baseline).
func ratio(v, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", v/b)
}

func perURL(b int64, n int) float64 { return float64(b) / float64(n) }

// thousands formats v rounded, with commas between thousands.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
