package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/testsite"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// crawlerBinary builds the crawler once per test process.
func crawlerBinary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "sieve-e2e-bin")
		if buildErr == nil {
			out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, "crawler"), "github.com/sievecrawl/sieve/cmd/crawler").CombinedOutput()
			if err != nil {
				buildErr = &buildError{err, out}
			}
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return filepath.Join(binDir, "crawler")
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + string(e.out) }

func TestMain(m *testing.M) {
	if spec := os.Getenv(collyChildEnv); spec != "" {
		os.Exit(collyChild(spec))
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func startSite(tb testing.TB, opts testsite.Options) *testsite.Site {
	tb.Helper()
	s, err := testsite.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// testRunFlags are crawl settings for a loopback test site: no politeness
// delay, quick retries, a depth that bounds the calendar trap.
func testRunFlags(maxDepth int) []string {
	return []string{
		"--crawl-host-delay", "0", "--crawl-host-parallel", "4",
		"--crawl-retry-backoff", "100ms", "--crawl-max-retries", "2",
		"--crawl-max-depth", strconv.Itoa(maxDepth), "--crawl-lease-ttl", "3s",
		"--filter-capacity", "100000", "--progress", "never", "--log-level", "warn",
	}
}

// runCrawler runs the crawler binary to its end and decodes its --json
// summary.
func runCrawler(tb testing.TB, ctx context.Context, bin string, args ...string) runSummary {
	tb.Helper()
	cmd := exec.CommandContext(ctx, bin, append(args, "--json")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = cleanEnv()
	if err := cmd.Run(); err != nil {
		tb.Fatalf("crawler %q: %v\nstderr:\n%s", args, err, stderr.String())
	}
	var sum runSummary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		tb.Fatalf("crawler summary: %v\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return sum
}

// cleanEnv is the environment without SIEVE_ and COLLY_ variables, so the
// test's settings are only its flags.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SIEVE_") && !strings.HasPrefix(kv, "COLLY_") {
			env = append(env, kv)
		}
	}
	return env
}

// checkPlan asserts the fetch counts of a finished crawl of site, made of
// runs crawler runs (a URL being retried when a run stops gets a fresh
// retry budget in the next one).
func checkPlan(t *testing.T, site *testsite.Site, maxDepth, retries, runs int) {
	t.Helper()
	plan := site.Plan(maxDepth)
	got := site.Fetches()
	for _, p := range plan.Once {
		if got[p] != 1 {
			t.Errorf("%s%s fetched %d times, want 1 (requests %q)", site.Host(), p, got[p], site.Requests(p))
		}
	}
	for _, p := range plan.Never {
		if got[p] != 0 {
			t.Errorf("%s%s (disallowed or not a link) fetched %d times, want 0", site.Host(), p, got[p])
		}
	}
	for _, p := range plan.Broken {
		if got[p] < 1+retries || got[p] > runs*(1+retries) {
			t.Errorf("%s%s (always 500) fetched %d times, want %d (up to %d over %d runs)", site.Host(), p, got[p], 1+retries, runs*(1+retries), runs)
		}
	}
	for _, p := range plan.Flaky {
		if got[p] != 2 {
			t.Errorf("%s%s (503 once) fetched %d times, want 2", site.Host(), p, got[p])
		}
	}
	for _, p := range plan.RedirectTrap(5) {
		if got[p] != 1 {
			t.Errorf("%s%s (redirect chain) fetched %d times, want 1", site.Host(), p, got[p])
		}
	}
	known := map[string]bool{"/robots.txt": true}
	for _, p := range append(append(append(append(append([]string{}, plan.Once...), plan.Never...), plan.Broken...), plan.Flaky...), plan.RedirectTrap(5)...) {
		known[p] = true
	}
	cal := 0
	var unexpected []string
	for p, n := range got {
		switch {
		case strings.HasPrefix(p, "/calendar/"):
			cal += n
			if n != 1 {
				t.Errorf("%s%s fetched %d times, want 1", site.Host(), p, n)
			}
		case !known[p]:
			unexpected = append(unexpected, p)
		}
	}
	if cal != plan.Calendar {
		t.Errorf("calendar trap: %d months fetched, want %d (max depth %d)", cal, plan.Calendar, maxDepth)
	}
	sort.Strings(unexpected)
	if len(unexpected) > 0 {
		t.Errorf("%s: unexpected paths fetched: %q", site.Host(), unexpected)
	}
	if n := site.OffScopeFetches(); n != 0 {
		t.Errorf("off-scope host of %s fetched %d times, want 0", site.Host(), n)
	}
}

// siteRequests counts the requests a site served, robots.txt apart.
func siteRequests(sites ...*testsite.Site) (pages, robots int64) {
	for _, s := range sites {
		for p, n := range s.Fetches() {
			if p == "/robots.txt" {
				robots += int64(n)
			} else {
				pages += int64(n)
			}
		}
	}
	return pages, robots
}

// checkAccounting asserts that the runs' counts add up: every admitted URL
// was handled once (fetched, refused by robots.txt, or skipped), every
// response was counted, every link and page message published reached
// dedup. Every run must leave the discovered stream empty, and the frontier
// too unless it stopped at its page limit (the URLs it left are the next
// run's work); the last run must leave nothing.
func checkAccounting(t *testing.T, sums []runSummary, seeds int64, sites ...*testsite.Site) {
	t.Helper()
	var fetched, retried, robots, skipped, admitted, links, dedupLinks, dedupPages, published, dups, rejected int64
	for _, s := range sums {
		c := s.Crawler
		fetched += c.Fetched
		retried += crawl.Sum(c.Retried)
		robots += c.Failed[crawl.ReasonRobots]
		skipped += crawl.Sum(c.Skipped)
		links += c.Links
		published += c.Published
		if s.Dedup != nil {
			admitted += s.Dedup.Totals.Admitted
			dedupLinks += s.Dedup.Totals.Links
			dedupPages += s.Dedup.Totals.Pages
			dups += s.Dedup.Totals.Duplicates
			rejected += s.Dedup.Totals.RejectedTotal()
		}
		switch {
		case s.Left == nil:
			t.Errorf("run ended (%s) without reporting the messages left", s.End)
		case s.Left.Discovered != 0 || (s.Left.Frontier != 0 && s.End != "max pages reached"):
			t.Errorf("run ended (%s) with messages left: %+v", s.End, s.Left)
		}
	}
	if last := sums[len(sums)-1]; last.Left != nil && last.Left.Frontier != 0 {
		t.Errorf("the last run left %d URLs on the frontier, unfetched", last.Left.Frontier)
	}
	served, _ := siteRequests(sites...)
	if fetched != served {
		t.Errorf("crawlers counted %d responses, the sites served %d requests", fetched, served)
	}
	if handled := fetched - retried + robots + skipped; admitted != handled {
		t.Errorf("dedup admitted %d URLs, crawlers handled %d (fetched %d − retries %d + robots.txt refusals %d + skipped %d)",
			admitted, handled, fetched, retried, robots, skipped)
	}
	if dedupLinks != links+seeds {
		t.Errorf("dedup received %d links, crawlers published %d (+%d seeds)", dedupLinks, links, seeds)
	}
	if dedupLinks != admitted+dups+rejected {
		t.Errorf("dedup: %d links ≠ %d admitted + %d duplicates + %d rejected", dedupLinks, admitted, dups, rejected)
	}
	// Dedup processed the crawlers' page messages and the seed messages:
	// at least one, and at most one per seed.
	if seedMsgs := dedupPages - published; seedMsgs < min(1, seeds) || seedMsgs > seeds {
		t.Errorf("dedup processed %d page messages, crawlers published %d: %d left for %d seeds",
			dedupPages, published, seedMsgs, seeds)
	}
	t.Logf("runs: fetched %d (retries %d), admitted %d, links %d in %d messages, duplicates dropped %d, rejected %d, robots refusals %d",
		fetched, retried, admitted, dedupLinks, dedupPages, dups, rejected, robots)
}

// TestEmbeddedRun runs `crawler run --embedded` twice over one data
// directory: the first run stops at a page limit, the second continues
// where it stopped. Together they fetch every in-scope, allowed page of the
// site exactly once. A third run, given the seed again, finds it seen and
// has nothing to do.
func TestEmbeddedRun(t *testing.T) {
	bin := crawlerBinary(t)
	site := startSite(t, testsite.Options{Pages: 200})
	const maxDepth = 8
	if site.Depth()+2 > maxDepth {
		t.Fatalf("site depth %d too close to max depth %d", site.Depth(), maxDepth)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	data := t.TempDir()
	args := append([]string{"run", "--embedded", "--seed", site.URL, "--data-dir", data, "--idle-exit", "1s"}, testRunFlags(maxDepth)...)

	first := runCrawler(t, ctx, bin, append(args, "--crawl-max-pages", "60")...)
	if first.End != "max pages reached" || first.Crawler.Fetched > 60 || first.Crawler.Fetched < 30 {
		t.Fatalf("first run: ended %q after %d fetches, want max pages reached at ≤ 60", first.End, first.Crawler.Fetched)
	}
	if _, err := os.Stat(crawlSnapshot(data, "bloom")); err != nil {
		t.Fatalf("filter snapshot after the first run: %v", err)
	}
	second := runCrawler(t, ctx, bin, args...)
	if second.End != "frontier empty" {
		t.Fatalf("second run ended %q, want frontier empty", second.End)
	}
	// The first run stopped at its page limit with URLs on the frontier:
	// the second run's work.
	if first.Left == nil || first.Left.Frontier == 0 {
		t.Errorf("first run: stopped at its page limit with nothing left on the frontier (%+v)", first.Left)
	}
	checkPlan(t, site, maxDepth, 2, 2)

	// The seed once more, on a finished crawl: one link in, that link a
	// duplicate, nothing admitted or fetched.
	third := runCrawler(t, ctx, bin, args...)
	if third.End != "frontier empty" {
		t.Errorf("third run ended %q, want frontier empty", third.End)
	}
	if third.Dedup == nil {
		t.Fatal("third run: no dedup counts")
	}
	if d := third.Dedup.Totals; d.Pages != 1 || d.Links != 1 || d.Duplicates != 1 || d.Admitted != 0 || third.Crawler.Fetched != 0 {
		t.Errorf("third run: %d messages, %d links, %d duplicates, %d admitted, %d fetched; want the seed alone, a duplicate, nothing fetched",
			d.Pages, d.Links, d.Duplicates, d.Admitted, third.Crawler.Fetched)
	}
	checkAccounting(t, []runSummary{first, second, third}, 3, site)
	_, robots := siteRequests(site)
	if robots != 2 {
		t.Errorf("robots.txt fetched %d times over 3 runs, want 2 (cached within a run, none in the run that fetched nothing)", robots)
	}
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestNATSUnreachable pins issue 10 item 5: with nothing listening at the
// NATS address, `crawler seed` (one-shot) fails at once with the address
// and the cause, where it used to wait 30 s and say "context deadline
// exceeded"; `crawler run` (long-running) waits, saying what for, where it
// used to fail after 5 s.
func TestNATSUnreachable(t *testing.T) {
	bin := crawlerBinary(t)
	addr := natstest.ClosedAddr(t)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	seed := exec.CommandContext(ctx, bin, "seed", "--nats-url", "nats://"+addr, "https://example.com/")
	seed.Env = cleanEnv()
	out, err := seed.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("crawler seed still running after 20 s with NATS unreachable; output:\n%s", out)
	}
	if err == nil || !strings.Contains(string(out), addr) || !strings.Contains(string(out), "connection refused") {
		t.Errorf("crawler seed with NATS unreachable: %v, output %q; want a failure naming %s and the cause", err, out, addr)
	}

	run := exec.Command(bin, "run", "--nats-url", "nats://"+addr, "--progress", "never")
	run.Env = cleanEnv()
	stderr := &syncBuffer{}
	run.Stdout, run.Stderr = stderr, stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	defer func() {
		_ = run.Process.Kill()
		<-exited
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), "waiting for NATS") {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("crawler run exited (%v) instead of waiting for NATS; output:\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("crawler run logged no wait for NATS in 20 s; output:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if line := stderr.String(); !strings.Contains(line, addr) || !strings.Contains(line, "connection refused") {
		t.Errorf("crawler run's wait does not name %s and the cause: %q", addr, line)
	}
	// Still waiting, not failed, well past the 5 s it used to give up after.
	select {
	case err := <-exited:
		exited <- err
		t.Errorf("crawler run exited (%v) while NATS was unreachable; output:\n%s", err, stderr.String())
	case <-time.After(7 * time.Second):
	}
}
