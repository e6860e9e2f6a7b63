package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/internal/leaktest"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/redistest"
)

// testConfig is a configuration for tests: small filter, fast retries.
func testConfig(natsURL, redisURL string) config.Config {
	cfg := config.Default()
	cfg.NATS.URL = natsURL
	cfg.NATS.ReconnectWait = 50 * time.Millisecond
	cfg.Redis.URL = redisURL
	cfg.Filter.Capacity = 10_000
	cfg.Frontier.AckWait = 3 * time.Second
	cfg.Frontier.DuplicateWindow = time.Minute
	cfg.Worker.BackoffMin = 10 * time.Millisecond
	cfg.Worker.BackoffMax = 200 * time.Millisecond
	cfg.Worker.FetchWait = 20 * time.Millisecond
	cfg.Worker.StatsInterval = 20 * time.Millisecond
	cfg.HTTP.Addr = ""
	return cfg
}

// testLog writes the worker's log to the test log.
type testLog struct{ tb testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.tb.Logf("%s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

// start opens w and runs it; the returned function stops it and returns
// Run's and Close's errors.
func start(tb testing.TB, w *pipeline.Worker) func() error {
	tb.Helper()
	if w.Logger == nil {
		w.Logger = slog.New(slog.NewTextHandler(testLog{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if err := w.Config.Validate(); err != nil {
		tb.Fatal(err)
	}
	if err := w.Open(context.Background()); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	var stopped bool
	var err error
	stop := func() error {
		if stopped {
			return err
		}
		stopped = true
		cancel()
		select {
		case err = <-errc:
		case <-time.After(30 * time.Second):
			err = errors.New("Run did not return")
		}
		return errors.Join(err, w.Close(), w.Close()) // Close is idempotent
	}
	tb.Cleanup(func() { _ = stop() })
	return stop
}

func waitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func publish(tb testing.TB, js jetstream.JetStream, topo frontier.Topology, page int, links ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := frontier.Discovered{Crawl: "t", URL: fmt.Sprintf("https://site.example/p/%d", page), Depth: 1, Links: links}
	if err := topo.PublishDiscovered(ctx, js, d); err != nil {
		tb.Fatal(err)
	}
}

// drained reports whether the workers' consumer has acknowledged
// everything published so far.
func drained(js jetstream.JetStream, topo frontier.Topology) bool {
	return natstest.Drained(js, topo.DiscoveredStream(), topo.Consumer())
}

// ensure creates the streams and the crawl registry, and returns the
// crawls.
func ensure(tb testing.TB, js jetstream.JetStream, topo frontier.Topology) *crawls.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := topo.Ensure(ctx, js); err != nil {
		tb.Fatal(err)
	}
	// The crawl registry too: its stream's goroutines are the server's.
	store, err := crawls.Open(ctx, js, topo, crawls.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return store
}

// TestWorkerWithRedis runs a Worker on real NATS and Redis and reads what a
// status page shows: readiness, status, filter health, shared statistics.
func TestWorkerWithRedis(t *testing.T) {
	nsrv := natstest.Start(t, natstest.Options{})
	rsrv := redistest.Start(t, redistest.Options{})
	js := nsrv.JetStream()
	cfg := testConfig(nsrv.URL(), rsrv.URL())
	topo := cfg.Frontier.Topology()
	ensure(t, js, topo)

	w := &pipeline.Worker{Config: cfg, Registerer: prometheus.NewRegistry()}
	if r := w.Readiness(); r.Ready {
		t.Errorf("Readiness before Open = %+v, want not ready", r)
	}
	if _, err := w.FilterStats(context.Background()); !errors.Is(err, pipeline.ErrNotOpen) {
		t.Errorf("FilterStats before Open: %v, want ErrNotOpen", err)
	}
	stop := start(t, w)
	waitFor(t, 10*time.Second, "ready", func() bool { return w.Readiness().Ready })
	publish(t, js, topo, 1, "/a", "/b", "/c")
	publish(t, js, topo, 2, "/a", "/d")
	waitFor(t, 10*time.Second, "drain", func() bool { return drained(js, topo) })

	ctx := context.Background()
	fs, err := w.FilterStats(ctx)
	if err != nil || fs.Items != 4 {
		t.Errorf("FilterStats = %+v, %v; want 4 items", fs, err)
	}
	waitFor(t, 5*time.Second, "shared counts", func() bool {
		s, err := w.StatsSnapshot(ctx, 5)
		return err == nil && s.Totals.Admitted == 4 && s.Totals.Duplicates == 1 && s.Totals.Pages == 2
	})
	st, ok := w.Status()
	if !ok || st.Totals.Admitted != 4 {
		t.Errorf("Status = %+v, %v; want 4 admitted", st, ok)
	}
	if _, ok := w.SnapshotStatus(); ok {
		t.Error("a Redis filter reports a snapshot file")
	}
	r := w.Readiness()
	if !r.Ready || r.State != pipeline.StateRunning || !r.Dependencies[frontier.DepFilter].Up {
		t.Errorf("Readiness = %+v, want ready and running with the filter up", r)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if r := w.Readiness(); r.Ready || r.State != pipeline.StateStopping {
		t.Errorf("Readiness after stop = %+v, want stopping, not ready", r)
	}
}

// TestWorkerSeenCache checks that worker.seen_cache reaches the worker: 0
// is no cache at all (issue 10 item 12: the embedded mode used the
// worker's default instead).
func TestWorkerSeenCache(t *testing.T) {
	nsrv := natstest.Start(t, natstest.Options{})
	js := nsrv.JetStream()
	tests := []struct {
		seenCache int
		hits      bool
	}{
		{0, false},
		{1000, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.seenCache), func(t *testing.T) {
			cfg := testConfig(nsrv.URL(), "")
			cfg.Frontier.Prefix = fmt.Sprintf("cache%d", tt.seenCache)
			cfg.Worker.SeenCache = tt.seenCache
			topo := cfg.Frontier.Topology()
			ensure(t, js, topo)
			reg := prometheus.NewRegistry()
			w := &pipeline.Worker{Config: cfg, Registerer: reg}
			stop := start(t, w)
			for i := range 5 {
				publish(t, js, topo, i, "/x", "/y")
				waitFor(t, 10*time.Second, "drain", func() bool { return drained(js, topo) })
			}
			hits := metric(t, reg, "sieve_dedup_seen_cache_hits_total")
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if (hits > 0) != tt.hits {
				t.Errorf("worker.seen_cache %d: %v cache hits", tt.seenCache, hits)
			}
		})
	}
}

func metric(tb testing.TB, g prometheus.Gatherer, name string) float64 {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	tb.Fatalf("no metric %s", name)
	return 0
}

// TestWorkerSavesSnapshotSoon checks that an in-memory filter's snapshot
// follows the filter within the interval (issue 10 item 3: it lagged a
// minute), and is not rewritten while nothing changes.
func TestWorkerSavesSnapshotSoon(t *testing.T) {
	nsrv := natstest.Start(t, natstest.Options{})
	js := nsrv.JetStream()
	cfg := testConfig(nsrv.URL(), "")
	cfg.Filter.Snapshot = filepath.Join(t.TempDir(), "seen.bloom")
	cfg.Filter.SnapshotInterval = 50 * time.Millisecond
	topo := cfg.Frontier.Topology()
	ensure(t, js, topo)
	w := &pipeline.Worker{Config: cfg}
	stop := start(t, w)
	publish(t, js, topo, 1, "/a", "/b", "/c")
	waitFor(t, 10*time.Second, "a snapshot holding 3 URLs", func() bool {
		s, ok := w.SnapshotStatus()
		return ok && s.Items == 3 && s.Error == ""
	})
	s1, _ := w.SnapshotStatus()
	fi, err := os.Stat(pipeline.CrawlSnapshot(cfg.Filter.Snapshot, "t")) // crawl t's filter
	if err != nil || fi.Size() != s1.Bytes {
		t.Fatalf("snapshot file: %v (size %v, status says %d bytes)", err, fi, s1.Bytes)
	}
	time.Sleep(5 * cfg.Filter.SnapshotInterval) // unchanged: no save
	if s2, _ := w.SnapshotStatus(); s2.Saves != s1.Saves {
		t.Errorf("saves went from %d to %d while the filter did not change", s1.Saves, s2.Saves)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestWorkerSnapshotFailure checks that a snapshot that cannot be written
// shows in Readiness at once and makes Close fail (issue 10 item 3: it was
// silent).
func TestWorkerSnapshotFailure(t *testing.T) {
	nsrv := natstest.Start(t, natstest.Options{})
	js := nsrv.JetStream()
	cfg := testConfig(nsrv.URL(), "")
	// Its directory does not exist (a read-only one does not stop root).
	cfg.Filter.Snapshot = filepath.Join(t.TempDir(), "gone", "seen.bloom")
	cfg.Filter.SnapshotInterval = 50 * time.Millisecond
	topo := cfg.Frontier.Topology()
	ensure(t, js, topo)
	var logBuf syncBuffer
	w := &pipeline.Worker{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logBuf, nil))}
	stop := start(t, w)
	publish(t, js, topo, 1, "/a")
	waitFor(t, 10*time.Second, "not ready for the snapshot", func() bool {
		r := w.Readiness()
		return !r.Ready && strings.Contains(r.Error, "filter snapshot") && r.Snapshot != nil && r.Snapshot.Failures > 0
	})
	err := stop()
	if file := pipeline.CrawlSnapshot(cfg.Filter.Snapshot, "t"); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("stop: %v, want the failed save of %s", err, file)
	}
	if !strings.Contains(logBuf.String(), "level=ERROR msg=\"filter snapshot failed") {
		t.Errorf("no error logged:\n%s", logBuf.String())
	}
}

// TestWorkerOpenErrors checks that Open returns the filter's own error for
// a snapshot it cannot use, of a crawl it opens at once.
func TestWorkerOpenErrors(t *testing.T) {
	nsrv := natstest.Start(t, natstest.Options{})
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt.c.bloom")
	if err := os.WriteFile(corrupt, []byte("SIEVEBF\nnot a snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(nsrv.URL(), "")
	cfg.Filter.Snapshot = filepath.Join(dir, "corrupt.bloom")
	w := &pipeline.Worker{Config: cfg, Crawls: []string{"c"}}
	err := w.Open(context.Background())
	if err == nil || !strings.Contains(err.Error(), corrupt) {
		t.Errorf("Open with a corrupt snapshot: %v, want an error naming it", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("Close after a failed Open: %v", err)
	}
}

// TestWorkerCleanShutdownLogsNoDisconnect checks that closing the worker's
// own NATS connection is not logged as a disconnection (issue 10 item 6: a
// clean shutdown logged "WARN nats disconnected error=<nil>").
func TestWorkerCleanShutdownLogsNoDisconnect(t *testing.T) {
	nsrv := natstest.Start(t, natstest.Options{})
	cfg := testConfig(nsrv.URL(), "")
	ensure(t, nsrv.JetStream(), cfg.Frontier.Topology())
	var logBuf syncBuffer
	w := &pipeline.Worker{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logBuf, nil))}
	stop := start(t, w)
	waitFor(t, 10*time.Second, "ready", func() bool { return w.Readiness().Ready })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if s := logBuf.String(); strings.Contains(s, "disconnected") || strings.Contains(s, "WARN") {
		t.Errorf("a clean shutdown logged:\n%s", s)
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWorkerCloseLeaksNoGoroutine checks that Close ends every goroutine
// Open and Run started: the worker's, the snapshot loop, the NATS client's.
func TestWorkerCloseLeaksNoGoroutine(t *testing.T) {
	nsrv := natstest.Start(t, natstest.Options{})
	js := nsrv.JetStream()
	cfg := testConfig(nsrv.URL(), "")
	cfg.Filter.Snapshot = filepath.Join(t.TempDir(), "seen.bloom")
	cfg.Filter.SnapshotInterval = 20 * time.Millisecond
	topo := cfg.Frontier.Topology()
	ensure(t, js, topo)
	noLeak := leaktest.Check(t)
	w := &pipeline.Worker{Config: cfg}
	stop := start(t, w)
	publish(t, js, topo, 1, "/a", "/b")
	waitFor(t, 10*time.Second, "a snapshot", func() bool { s, _ := w.SnapshotStatus(); return s.Items == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	noLeak()
}
