package frontier_test

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/stats"
)

// TestOutageLogsOncePerCause runs two dedup workers with routes on a
// 3-node cluster (replicas 3) while pages keep coming, shuts down the node
// leading the discovered stream for 10 s, brings it back, and counts the
// workers' warnings and errors: each cause (a message, and the dependency
// it names) is logged at most once in the outage, since its interval (a
// minute) is longer than the test, where before it was logged on every
// attempt or change of state.
func TestOutageLogsOncePerCause(t *testing.T) {
	c := natstest.StartCluster(t, 3, natstest.Options{})
	topo := frontier.Topology{Partitions: 4, Replicas: 3, Routes: 8, AckWait: 2 * time.Second}.WithDefaults()
	admin := clusterConn(t, c, 0)
	ajs, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := topo.Ensure(ctx, ajs); err != nil {
		t.Fatal(err)
	}
	if _, err := frontier.OpenCrawls(ctx, ajs, topo); err != nil {
		t.Fatal(err)
	}
	down, err := c.Leader(ctx, ajs, topo.DiscoveredStream())
	if err != nil {
		t.Fatal(err)
	}
	other := (down + 1) % 3
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	var workers []*frontier.Worker
	for i, node := range []int{down, other} {
		w, err := frontier.NewWorker(clusterConn(t, c, node), newMemoryFilter(t), newNormalizer(t), stats.NewMemory(), frontier.WorkerOptions{
			Topology: topo, Batch: 4, Concurrency: 2, FetchWait: 50 * time.Millisecond, ID: []string{"w1", "w2"}[i],
			BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond, StatsInterval: 50 * time.Millisecond,
			Logger: log.With("worker", i),
		})
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, w)
		workers = append(workers, w)
	}
	pjs, err := jetstream.New(clusterConn(t, c, (down+2)%3))
	if err != nil {
		t.Fatal(err)
	}
	crawler := &pipeline{js: pjs, topo: topo}
	defer keepPublishing(t, crawler, site{host: "outage.example", pages: 5000})()
	deadline := time.Now().Add(30 * time.Second)
	for workers[0].Status().Totals.Pages+workers[1].Status().Totals.Pages < 100 {
		if time.Now().After(deadline) {
			t.Fatal("the workers processed fewer than 100 pages within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := len(warnings(logs))
	c.Servers[down].Shutdown()
	outage := time.Now()
	for time.Since(outage) < 10*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	c.Servers[down].StartAgain()
	c.WaitReady()
	after := time.Now()
	for time.Since(after) < 5*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	lines := warnings(logs)[before:]
	causes := map[string]int{}
	for _, l := range lines {
		causes[cause(l)]++
	}
	var keys []string
	for k := range causes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%4d × %s", causes[k], k)
	}
	t.Logf("%d warnings and errors from 2 workers while one node of 3 was down 10 s (and 5 s after)", len(lines))
	for k, n := range causes {
		if n > 1 {
			t.Errorf("%d lines of %s, want at most one in the outage", n, k)
		}
	}
}

// warnings are the logged lines at WARN or ERROR.
func warnings(b *logBuffer) []string {
	var out []string
	for _, l := range b.lines("") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			out = append(out, l)
		}
	}
	return out
}

// cause is what names a line's cause: its worker, message and dependency.
func cause(line string) string {
	var parts []string
	for _, key := range []string{"worker=", "msg=", "dependency="} {
		i := strings.Index(line, key)
		if i < 0 {
			continue
		}
		v := line[i+len(key):]
		if strings.HasPrefix(v, `"`) {
			v = v[:strings.Index(v[1:], `"`)+2]
		} else if j := strings.IndexByte(v, ' '); j >= 0 {
			v = v[:j]
		}
		parts = append(parts, key+v)
	}
	return strings.Join(parts, " ")
}
