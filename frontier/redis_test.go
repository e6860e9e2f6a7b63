package frontier_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/redistest"
	"github.com/sievecrawl/sieve/stats"
)

// logBuffer is a bytes.Buffer safe for the worker's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the logged lines that contain every one of parts.
func (b *logBuffer) lines(parts ...string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
next:
	for _, l := range strings.Split(b.buf.String(), "\n") {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

// counterSum sums a counter family of reg, over the label values that
// match labels.
func counterSum(tb testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue metric
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// TestWorkerRidesOutHungRedis pins issue 10 item 8. Redis is frozen with
// SIGSTOP (the kernel still accepts its connections, nothing answers) for
// longer than AckWait while URLs flow. The Redis client from config bounds
// each call by redis.timeout and does not retry it itself, so the worker's
// own loop sees each timeout: it counts it, logs the outage once (not once
// per retry), turns unready naming the filter, keeps its batches alive with
// InProgress (no message is redelivered), and after SIGCONT admits every URL
// once and turns ready again.
//
// The timeout (700 ms) is a third of AckWait (2 s): go-redis's own retries
// (four timeouts in one call) would hold a batch past AckWait without a
// keep-alive, so JetStream would redeliver it; the worker's loop touches the
// batch between attempts.
func TestWorkerRidesOutHungRedis(t *testing.T) {
	const (
		ackWait = 2 * time.Second
		timeout = 700 * time.Millisecond
	)
	p := newPipeline(t, frontier.Topology{AckWait: ackWait})
	rs := redistest.Start(t, redistest.Options{})
	rdb, err := config.Redis{URL: rs.URL(), Timeout: timeout}.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	filter, err := dedup.OpenRedisBloom(ctx, rdb, "hang:seen", dedup.RedisBloomOptions{
		InitialCapacity: 100_000, TargetFPP: 1e-7, Policy: normalize.PolicyVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filter.Close() })

	logs := &logBuffer{}
	reg := prometheus.NewRegistry()
	w := newWorker(t, p, filter, stats.NewMemory(), frontier.WorkerOptions{
		Batch: 4, Concurrency: 2,
		Logger:     slog.New(slog.NewTextHandler(logs, nil)),
		Registerer: reg,
	})
	runWorker(t, w)

	s := site{host: "hang.example", pages: 4000}
	want := map[string]bool{}
	// Each page links to 20 pages no earlier page linked to, so every
	// batch needs Redis: neither the seen cache nor the filter's local
	// mirror can answer for it.
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			var links []int
			for j := 0; j < 20; j++ {
				links = append(links, i*20+j)
				want[s.canonical(i*20+j)] = true
			}
			p.publish(t, s.page("c", i, links, i))
		}
	}
	publish(0, 10)
	p.waitDrained(t, 20*time.Second)

	rs.Pause()
	paused := true
	defer func() {
		if paused {
			rs.Resume()
		}
	}()
	publish(10, 40)
	// Within a few timeouts (one is enough: the first call to hang fails
	// after it); ten leave room for a loaded machine.
	deadline := time.Now().Add(10 * timeout)
	for w.Ready() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("worker still ready %v after Redis froze (redis.timeout %v)", 10*timeout, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := w.Ready(); !strings.Contains(err.Error(), frontier.DepFilter) {
		t.Errorf("Ready() = %v, want it to name the filter", err)
	}
	// Stay frozen past AckWait: the held batches must be kept alive.
	frozen := time.Now()
	for time.Since(frozen) < 2*ackWait {
		time.Sleep(50 * time.Millisecond)
	}
	retries := counterSum(t, reg, "sieve_dedup_retries_total", map[string]string{"op": "contains"}) +
		counterSum(t, reg, "sieve_dedup_retries_total", map[string]string{"op": "mark"})
	if retries == 0 {
		t.Error("no filter retry counted while Redis was frozen")
	}
	rs.Resume()
	paused = false

	p.waitDrained(t, 30*time.Second)
	checkOnce(t, p, p.take(t, 0), want)
	for deadline := time.Now().Add(10 * time.Second); w.Ready() != nil; {
		if time.Now().After(deadline) {
			t.Fatalf("Ready() = %v after Redis continued", w.Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := w.Status().Totals.Republished; n != 0 {
		t.Errorf("%d publishes caught as duplicates by JetStream, want 0", n)
	}
	// No message was redelivered: the consumer delivered each stream
	// message once.
	cons, err := p.js.Consumer(ctx, p.topo.DiscoveredStream(), p.topo.Consumer())
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Delivered.Consumer != info.Delivered.Stream {
		t.Errorf("consumer made %d deliveries of %d messages: batches held for Redis were redelivered",
			info.Delivered.Consumer, info.Delivered.Stream)
	}
	// One outage, logged as one (two if a call timing out raced the
	// recovery), however many retries it took.
	down := logs.lines("dependency unavailable", "dependency="+frontier.DepFilter)
	up := logs.lines("dependency recovered", "dependency="+frontier.DepFilter)
	if len(down) < 1 || len(down) > 2 || len(up) != len(down) || float64(len(down)) >= retries {
		t.Errorf("logged %d outages and %d recoveries of the filter for %g retries; want one of each (logs:\n%s)",
			len(down), len(up), retries, strings.Join(down, "\n"))
	}
	if len(down) > 0 && !strings.Contains(down[0], "timeout") {
		t.Errorf("outage logged as %q, want it to say timeout", down[0])
	}
	t.Logf("%g filter retries while frozen; outages logged: %q", retries, down)
}
