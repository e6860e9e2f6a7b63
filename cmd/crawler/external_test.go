package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/redistest"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/testsite"
)

var (
	workerOnce sync.Once
	workerBin  string
	workerErr  error
)

// workerBinary builds cmd/dedup-worker once per test process, beside the
// crawler.
func workerBinary(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Dir(crawlerBinary(tb))
	workerOnce.Do(func() {
		workerBin = filepath.Join(dir, "dedup-worker")
		if out, err := exec.Command("go", "build", "-o", workerBin, "github.com/sievecrawl/sieve/cmd/dedup-worker").CombinedOutput(); err != nil {
			workerErr = &buildError{err, out}
		}
	})
	if workerErr != nil {
		tb.Fatal(workerErr)
	}
	return workerBin
}

// proc is a started binary, its output going to a log file.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdout bytes.Buffer
	log    string
	done   chan struct{}
	err    error
}

func startProc(tb testing.TB, name, bin string, args []string, env []string) *proc {
	tb.Helper()
	p := &proc{name: name, log: filepath.Join(tb.TempDir(), name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		tb.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(cleanEnv(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		tb.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); f.Close(); close(p.done) }()
	tb.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for the process to exit and fails on a non-zero status.
func (p *proc) wait(tb testing.TB, d time.Duration) {
	tb.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.cmd.Process.Kill()
		<-p.done
		tb.Fatalf("%s did not finish in %v; log:\n%s", p.name, d, p.logTail())
	}
	if p.err != nil {
		tb.Fatalf("%s: %v; log:\n%s", p.name, p.err, p.logTail())
	}
}

func (p *proc) logTail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func (p *proc) summary(tb testing.TB) runSummary {
	tb.Helper()
	var s runSummary
	if err := json.Unmarshal(p.stdout.Bytes(), &s); err != nil {
		tb.Fatalf("%s summary: %v\n%s", p.name, err, p.stdout.String())
	}
	return s
}

// otherPartition returns a loopback address whose frontier partition
// differs from localhost's.
func otherPartition(tb testing.TB, topo frontier.Topology) string {
	for i := 3; i < 250; i++ {
		if a := fmt.Sprintf("127.0.0.%d", i); topo.Partition(a) != topo.Partition("localhost") {
			return a
		}
	}
	tb.Fatal("no loopback address in another partition")
	return ""
}

// deployment is an external NATS server, a real Redis and dedup worker
// processes, as compose.yaml runs them.
type deployment struct {
	nats    *natstest.Server
	redis   *redistest.Server
	env     []string
	workers []*proc
}

func startDeployment(tb testing.TB, workers int, partitions int) *deployment {
	tb.Helper()
	d := &deployment{
		nats:  natstest.Start(tb, natstest.Options{}),
		redis: redistest.Start(tb, redistest.Options{}),
	}
	d.env = []string{
		"SIEVE_NATS_URL=" + d.nats.URL(),
		"SIEVE_REDIS_URL=" + d.redis.URL(),
		"SIEVE_FRONTIER_PARTITIONS=" + fmt.Sprint(partitions),
		"SIEVE_FILTER_CAPACITY=100000",
		"SIEVE_LOG_LEVEL=warn",
	}
	bin := workerBinary(tb)
	for i := range workers {
		d.workers = append(d.workers, startProc(tb, fmt.Sprintf("dedup-worker-%d", i), bin,
			[]string{"run", "--http-addr", "127.0.0.1:0"}, d.env))
	}
	return d
}

// stop ends the workers with SIGTERM (they finish their batches and exit 0)
// and returns the shared statistics they left in Redis.
func (d *deployment) stop(tb testing.TB) stats.Snapshot {
	tb.Helper()
	for _, w := range d.workers {
		w.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, w := range d.workers {
		w.wait(tb, 30*time.Second)
	}
	snap, err := stats.NewRedis(d.redis.Client(), frontier.DefaultPrefix).Snapshot(context.Background(), 5)
	if err != nil {
		tb.Fatal(err)
	}
	return snap
}

// TestExternalPipeline runs the deployment compose.yaml describes, with real
// processes: an external NATS server, Redis, two dedup workers and two
// crawlers, over two sites on hosts in different frontier partitions.
func TestExternalPipeline(t *testing.T) {
	crawler := crawlerBinary(t)
	topo := frontier.Topology{Partitions: 2}
	siteA := startSite(t, testsite.Options{Pages: 150, Latency: time.Millisecond})
	// Another link graph (Seed): the same generated pages under the same
	// paths would be a mirror of siteA, which a crawl fetches once.
	siteB := startSite(t, testsite.Options{Pages: 150, Latency: time.Millisecond, Addr: otherPartition(t, topo), Seed: 2})
	d := startDeployment(t, 2, 2)
	const maxDepth = 7

	seed := exec.Command(crawler, "seed", "--crawl-id", "e2e", siteA.URL, siteB.URL)
	seed.Env = append(cleanEnv(), d.env...)
	if out, err := seed.CombinedOutput(); err != nil {
		t.Fatalf("crawler seed: %v\n%s", err, out)
	}
	flags := append(append([]string{"run", "--json", "--idle-exit", "2s"}, testRunFlags(maxDepth)...), "--crawl-host-parallel", "1")
	var crawlers []*proc
	for i := range 2 {
		crawlers = append(crawlers, startProc(t, fmt.Sprintf("crawler-%d", i), crawler, flags, d.env))
	}
	var sums []runSummary
	for _, c := range crawlers {
		c.wait(t, 90*time.Second)
		sums = append(sums, c.summary(t))
	}
	snap := d.stop(t)

	for _, site := range []*testsite.Site{siteA, siteB} {
		checkPlan(t, site, maxDepth, 2, 1)
		if n, reqs := site.MaxInFlight(); n != 1 {
			t.Errorf("%s served %d requests at once (one crawler per host, one request at a time): %q", site.Host(), n, reqs)
		}
	}
	for i, s := range sums {
		t.Logf("crawler %d: %s, fetched %d", i, s.End, s.Crawler.Fetched)
		s.Dedup = nil
		sums[i] = s
	}
	// The workers' shared stats stand for the whole deployment.
	sums[0].Dedup = &snap
	checkAccounting(t, sums, 2, siteA, siteB)
}

// TestExternalCrawlerKilled SIGKILLs a crawler in the middle of a crawl and
// starts another: nothing is lost (every page is fetched), and only what the
// killed crawler had in hand may be fetched twice.
func TestExternalCrawlerKilled(t *testing.T) {
	crawler := crawlerBinary(t)
	site := startSite(t, testsite.Options{Pages: 150, Latency: 3 * time.Millisecond})
	d := startDeployment(t, 1, 4)
	const maxDepth, inFlight = 7, 8

	seed := exec.Command(crawler, "seed", "--crawl-id", "kill", site.URL)
	seed.Env = append(cleanEnv(), d.env...)
	if out, err := seed.CombinedOutput(); err != nil {
		t.Fatalf("crawler seed: %v\n%s", err, out)
	}
	flags := append([]string{"run", "--json", "--idle-exit", "2s", "--crawl-ack-wait", "3s",
		"--crawl-in-flight", fmt.Sprint(inFlight)}, testRunFlags(maxDepth)...)
	victim := startProc(t, "crawler-killed", crawler, flags, d.env)
	deadline := time.Now().Add(30 * time.Second)
	for served, _ := siteRequests(site); served < 60; served, _ = siteRequests(site) {
		if time.Now().After(deadline) {
			t.Fatalf("crawler never got going; log:\n%s", victim.logTail())
		}
		time.Sleep(5 * time.Millisecond)
	}
	victim.cmd.Process.Signal(syscall.SIGKILL)
	<-victim.done
	before, _ := siteRequests(site)

	heir := startProc(t, "crawler-heir", crawler, flags, d.env)
	heir.wait(t, 90*time.Second)
	d.stop(t)

	plan := site.Plan(maxDepth)
	got := site.Fetches()
	twice := 0
	for _, p := range plan.Once {
		switch n := got[p]; {
		case n == 0:
			t.Errorf("%s never fetched: lost when the crawler was killed", p)
		case n > 2:
			t.Errorf("%s fetched %d times", p, n)
		case n == 2:
			twice++
		}
	}
	for _, p := range plan.Never {
		if got[p] != 0 {
			t.Errorf("%s fetched %d times, want 0", p, got[p])
		}
	}
	if twice > inFlight {
		t.Errorf("%d pages fetched twice; only the %d in the killed crawler's hands may be", twice, inFlight)
	}
	sum := heir.summary(t)
	t.Logf("killed after %d requests; the heir fetched %d more (%s); %d pages fetched twice", before, sum.Crawler.Fetched, sum.End, twice)
	if !strings.Contains(sum.End, "frontier empty") || sum.Left == nil || sum.Left.Frontier != 0 {
		t.Errorf("heir ended %q with %+v left", sum.End, sum.Left)
	}
}

// TestExternalSummaryIsThisRuns runs two crawls one after the other on one
// deployment: the second run's summary names its own crawl and counts only
// the dedup work done during it (issue 10 item 6: it showed the all-time
// totals of every crawl under the configured crawl id).
func TestExternalSummaryIsThisRuns(t *testing.T) {
	crawler := crawlerBinary(t)
	siteA := startSite(t, testsite.Options{Pages: 40})
	siteB := startSite(t, testsite.Options{Pages: 10, Addr: "127.0.0.2"})
	d := startDeployment(t, 1, 2)
	var sums []runSummary
	for i, c := range []struct{ id, seed string }{{"one", siteA.URL}, {"two", siteB.URL}} {
		flags := append([]string{"run", "--json", "--idle-exit", "2s", "--crawl-id", c.id, "--seed", c.seed}, testRunFlags(4)...)
		p := startProc(t, fmt.Sprintf("crawler-%d", i), crawler, flags, d.env)
		p.wait(t, 60*time.Second)
		sums = append(sums, p.summary(t))
	}
	d.stop(t)
	first, second := sums[0], sums[1]
	if first.Dedup == nil || second.Dedup == nil {
		t.Fatalf("summaries without dedup counts: %+v, %+v", first.Dedup, second.Dedup)
	}
	// The dedup side counts every page message published, plus the seed
	// message; the first run's are not the second's.
	if got, own := second.Dedup.Totals.Pages, second.Crawler.Published+1; got > own {
		t.Errorf("second run: dedup counted %d page messages, its crawler published %d (+1 seed): the first run's %d are in it",
			got, second.Crawler.Published, first.Crawler.Published)
	}
	var out bytes.Buffer
	second.print(&out, "default")
	if !strings.Contains(out.String(), `Sieve crawl "two":`) {
		t.Errorf("second run's summary does not name crawl \"two\":\n%s", out.String())
	}
}
