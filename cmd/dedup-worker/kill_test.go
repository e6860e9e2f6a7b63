package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/stats"
)

// buildBinary compiles this command into a temporary directory.
func buildBinary(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "dedup-worker")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		tb.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// proc is one dedup-worker process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  string
}

func startProc(tb testing.TB, bin string, env []string, log string) *proc {
	tb.Helper()
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(bin, "run")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), log: log}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	tb.Cleanup(p.kill)
	return p
}

func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// term sends SIGTERM and returns the exit error (nil for status 0).
func (p *proc) term(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.kill()
		return errors.New("did not exit after SIGTERM")
	}
}

// streamEmpty reports whether the discovered stream holds no message: with
// work-queue retention, every message was acknowledged or terminated. The
// consumer's pending count, which drained reads, is updated asynchronously
// and can read 0 just after a publish.
func (h *harness) streamEmpty(tb testing.TB) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := h.js.Stream(ctx, h.topo.DiscoveredStream())
	if err != nil {
		return false
	}
	info, err := s.Info(ctx)
	return err == nil && info.State.Msgs == 0
}

// respell writes the canonical URL u in one of several raw spellings.
func respell(u string, v int) string {
	switch v % 3 {
	case 0:
		return strings.Replace(u, "https://", "HTTPS://", 1)
	case 1:
		return u + "#again"
	default:
		return u + "?utm_source=again"
	}
}

func tailFile(path string, n int) string {
	data, _ := os.ReadFile(path)
	s := string(data)
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// TestKillWorkersLosesNothing runs three real dedup-worker processes while a
// crawl-shaped stream with many duplicates flows, SIGKILLs them at random
// moments and restarts them, and then checks that every unique admissible
// URL is on the frontier exactly once, allowing only the filter's false
// positives, which it counts against a binomial bound.
//
// The frontier's duplicate window is short (8 s), and a second phase, after
// it has passed, links every URL again while a worker is killed once more:
// JetStream no longer remembers any message ID, so only the filter can stop
// those links. Without that phase the window, longer than the run, hid a
// filter that held nothing.
func TestKillWorkersLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin := buildBinary(t)
	h := newHarness(t)
	const (
		workers  = 3
		pages    = 2400
		perPage  = 40
		hosts    = 40
		perHost  = 500 // a universe of 20,000 URLs
		fpp      = 1e-7
		capacity = 50_000
		window   = 8 * time.Second // ≥ 2 × AckWait (2 s), as config requires
	)
	env := []string{
		"SIEVE_NATS_URL=" + h.nats.URL(),
		"SIEVE_NATS_RECONNECT_WAIT=50ms",
		"SIEVE_REDIS_URL=" + h.redis.URL(),
		fmt.Sprintf("SIEVE_FILTER_CAPACITY=%d", capacity),
		fmt.Sprintf("SIEVE_FILTER_FPP=%g", fpp),
		"SIEVE_FILTER_SHARDS=4",
		"SIEVE_FRONTIER_ACK_WAIT=2s",
		"SIEVE_FRONTIER_DUPLICATE_WINDOW=" + window.String(),
		"SIEVE_WORKER_BATCH=16",
		"SIEVE_WORKER_CONCURRENCY=2",
		"SIEVE_WORKER_FETCH_WAIT=50ms",
		"SIEVE_WORKER_BACKOFF_MIN=10ms",
		"SIEVE_WORKER_BACKOFF_MAX=300ms",
		"SIEVE_WORKER_STATS_INTERVAL=100ms",
		"SIEVE_HTTP_ADDR=127.0.0.1:0",
		"SIEVE_LOG_LEVEL=info",
	}
	logs := t.TempDir()
	procs := make([]*proc, workers)
	starts := 0
	start := func(i int) {
		starts++
		procs[i] = startProc(t, bin, env, filepath.Join(logs, fmt.Sprintf("worker%d.log", i)))
	}
	for i := range procs {
		start(i)
	}
	defer func() {
		if t.Failed() {
			for i := range procs {
				t.Logf("worker %d log tail:\n%s", i, tailFile(filepath.Join(logs, fmt.Sprintf("worker%d.log", i)), 3000))
			}
		}
	}()

	// The stream: pages link to URLs of a fixed universe, in several
	// spellings, so most links are duplicates.
	rng := rand.New(rand.NewPCG(7, 11))
	want := map[string]bool{}
	spell := func(host, path int, v int) string {
		switch v % 5 {
		case 0:
			return fmt.Sprintf("https://h%d.example/p/%d", host, path)
		case 1:
			return fmt.Sprintf("HTTPS://H%d.EXAMPLE:443/p/%d#s", host, path)
		case 2:
			return fmt.Sprintf("https://h%d.example/p/%d?utm_campaign=k", host, path)
		case 3:
			return fmt.Sprintf("https://h%d.example/x/../p/%d", host, path)
		default:
			return fmt.Sprintf("https://h%d.example/p/%%3%d", host, path) // "%3" + digits: the first digit escaped
		}
	}
	var stream []frontier.Discovered
	links := 0
	for i := 0; i < pages; i++ {
		d := frontier.Discovered{Crawl: "kill", URL: fmt.Sprintf("https://h%d.example/p/%d", i%hosts, i), Depth: 1}
		for j := 0; j < perPage; j++ {
			host, path := rng.IntN(hosts), rng.IntN(perHost)
			if rng.IntN(10) < 7 { // crawls are local: most links stay small
				path = rng.IntN(perHost / 5)
			}
			d.Links = append(d.Links, spell(host, path, rng.IntN(5)))
			want[fmt.Sprintf("https://h%d.example/p/%d", host, path)] = true
		}
		if i%50 == 0 {
			d.Links = append(d.Links, "mailto:webmaster@example.com")
		}
		links += len(d.Links)
		stream = append(stream, d)
	}

	// Publish the stream over ~12 s while a chaos loop kills workers.
	var wg sync.WaitGroup
	wg.Go(func() {
		for i, d := range stream {
			h.publish(t, d)
			if i%20 == 19 {
				time.Sleep(100 * time.Millisecond)
			}
		}
	})
	kills := 0
	chaos := rand.New(rand.NewPCG(3, 5))
	deadline := time.Now().Add(14 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(200+chaos.IntN(500)) * time.Millisecond)
		i := chaos.IntN(workers)
		procs[i].kill()
		kills++
		if chaos.IntN(4) == 0 { // sometimes two die at once
			j := (i + 1) % workers
			procs[j].kill()
			kills++
			time.Sleep(time.Duration(chaos.IntN(300)) * time.Millisecond)
			start(j)
		}
		time.Sleep(time.Duration(chaos.IntN(300)) * time.Millisecond)
		start(i)
	}
	wg.Wait()

	waitFor(t, 45*time.Second, "every discovered message to be acknowledged", func() bool { return h.drained(t) && h.streamEmpty(t) })

	// Phase 2, past the duplicate window: every URL again, in other
	// spellings, on new pages. The filter holds them all (or reports them
	// by a false positive): nothing may be admitted or republished.
	rdb := h.redis.Client()
	shared := stats.NewRedis(rdb, "sieve")
	time.Sleep(window + time.Second) // the window is measured in time: nothing to poll
	before, err := shared.Snapshot(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var again []string
	for u := range want {
		again = append(again, u)
	}
	sort.Strings(again)
	log0 := filepath.Join(logs, "worker0.log")
	running := strings.Count(tailFile(log0, 1<<30), "worker running")
	for i := 0; i*100 < len(again); i++ {
		d := frontier.Discovered{Crawl: "kill", URL: fmt.Sprintf("https://h0.example/again/%d", i), Depth: 2}
		for j, u := range again[i*100 : min(len(again), (i+1)*100)] {
			d.Links = append(d.Links, respell(u, i+j))
		}
		h.publish(t, d)
		if i == len(again)/200 { // halfway: one more crash
			procs[0].kill()
			kills++
			start(0)
		}
	}
	waitFor(t, 45*time.Second, "the second phase to be acknowledged", func() bool { return h.drained(t) && h.streamEmpty(t) })
	// The restarted worker must be up before SIGTERM, or the signal ends
	// it before it can handle it.
	waitFor(t, 30*time.Second, "the restarted worker to run", func() bool {
		return strings.Count(tailFile(log0, 1<<30), "worker running") > running
	})

	// SIGTERM: each worker finishes its batch and exits 0.
	for i, p := range procs {
		if err := p.term(30 * time.Second); err != nil {
			t.Errorf("worker %d after SIGTERM: %v", i, err)
		}
	}

	got := map[string]int{}
	for _, u := range h.frontierURLs(t) {
		got[u]++
	}
	dups := 0
	for u, n := range got {
		if n > 1 {
			dups++
			if dups <= 5 {
				t.Errorf("%s on the frontier %d times", u, n)
			}
		}
		if !want[u] {
			t.Errorf("%s on the frontier, never discovered", u)
		}
	}

	// Missing URLs are allowed only as the filter's false positives: in
	// the filter (so once reported seen), never on the frontier.
	canon, _ := normalize.New(normalize.Options{})
	filter, err := dedup.OpenRedisBloom(context.Background(), rdb, "sieve:seen:kill", dedup.RedisBloomOptions{
		InitialCapacity: capacity, TargetFPP: fpp, Factor: 2, Tightening: 0.8, Shards: 4, Policy: canon.Version(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing [][]byte
	for u := range want {
		if got[u] == 0 {
			missing = append(missing, []byte(u))
		}
	}
	falsePositives := 0
	if len(missing) > 0 {
		in, err := filter.Contains(context.Background(), missing)
		if err != nil {
			t.Fatal(err)
		}
		for i, ok := range in {
			if ok {
				falsePositives++
			} else {
				t.Errorf("%s lost: neither on the frontier nor in the filter", missing[i])
			}
		}
	}
	// Binomial 4-sigma upper bound on false positives among len(want)
	// first-time lookups, each at most fpp.
	n := float64(len(want))
	bound := int(math.Floor(n*fpp + 4*math.Sqrt(n*fpp*(1-fpp))))
	if falsePositives > bound {
		t.Errorf("%d URLs missing and in the filter; the filter's false positives explain at most %d (n=%d, fpp=%g)",
			falsePositives, bound, len(want), fpp)
	}

	snap, err := shared.Snapshot(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := snap.Totals.Admitted - before.Totals.Admitted; n != 0 {
		t.Errorf("past the duplicate window, %d URLs admitted again", n)
	}
	if n := snap.Totals.Republished - before.Totals.Republished; n != 0 {
		t.Errorf("past the duplicate window, %d publishes caught by JetStream's window, want 0", n)
	}
	t.Logf("%d pages, %d links, %d unique URLs; %d worker starts, %d SIGKILLs; frontier: %d URLs, %d duplicates, "+
		"%d missing as false positives (bound %d); counters: admitted %d, republished (window hits, all during the kills) %d",
		pages, links, len(want), starts, kills, len(got), dups, falsePositives, bound,
		snap.Totals.Admitted, snap.Totals.Republished)
	if kills < 10 {
		t.Errorf("only %d kills: the test did not exercise crashes", kills)
	}
}
