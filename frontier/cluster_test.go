package frontier_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/stats"
)

// clusterConn connects through config, as the binaries do, with nats.url a
// list of the cluster's nodes starting with node first (tried first: the
// client does not shuffle it, so the test knows where it is connected).
func clusterConn(tb testing.TB, c interface{ URL(first int) string }, first int) *nats.Conn {
	tb.Helper()
	nc, err := config.NATS{URL: c.URL(first), ReconnectWait: 50 * time.Millisecond}.Connect("cluster-test", nats.DontRandomize())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// checkReplicas asserts that every stream in the account (the pipeline's
// two and every KV bucket's) and every consumer has want replicas.
func checkReplicas(t *testing.T, js jetstream.JetStream, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	names := js.StreamNames(ctx)
	n := 0
	for name := range names.Name() {
		n++
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info := s.CachedInfo()
		if info.Config.Replicas != want {
			t.Errorf("stream %s has %d replicas, want %d", name, info.Config.Replicas, want)
		}
		for ci := range s.ListConsumers(ctx).Info() {
			if got := len(ci.Cluster.Replicas) + 1; got != want {
				t.Errorf("consumer %s of %s has %d replicas, want %d", ci.Name, name, got, want)
			}
		}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no streams")
	}
}

// TestClusterSurvivesStreamLeaderDeath runs a worker and a publishing
// crawler, both connected to the node that leads the discovered stream,
// on a 3-node JetStream cluster with replicas 3; kills that node mid-run,
// brings it back, then kills the node leading the frontier stream. Every
// URL must reach the frontier exactly once, and the pipeline must resume
// after each death (the time it took is logged).
func TestClusterSurvivesStreamLeaderDeath(t *testing.T) {
	c := natstest.StartCluster(t, 3, natstest.Options{})
	topo := frontier.Topology{Partitions: 4, Replicas: 3, AckWait: 2 * time.Second}.WithDefaults()
	admin := clusterConn(t, c, 0)
	ajs, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := topo.Ensure(ctx, ajs); err != nil {
		t.Fatal(err)
	}
	if _, err := frontier.OpenCrawls(ctx, ajs, topo); err != nil {
		t.Fatal(err)
	}
	checkReplicas(t, ajs, 3)

	leader, err := c.Leader(ctx, ajs, topo.DiscoveredStream())
	if err != nil {
		t.Fatal(err)
	}
	// The worker and the crawler both start on the leader.
	wnc, cnc := clusterConn(t, c, leader), clusterConn(t, c, leader)
	cjs, err := jetstream.New(cnc)
	if err != nil {
		t.Fatal(err)
	}
	p := &pipeline{nc: admin, js: ajs, topo: topo}
	crawler := &pipeline{nc: cnc, js: cjs, topo: topo}

	s := site{host: "cluster.example", pages: 3000}
	want := map[string]bool{}
	page := func(i int) frontier.Discovered {
		var to []int
		for j := 0; j < 30; j++ {
			l := (i*31 + j*7) % s.pages
			to = append(to, l)
			want[s.canonical(l)] = true
		}
		return s.page("c", i, to, i)
	}
	const batch, concurrency = 4, 2
	w, err := frontier.NewWorker(wnc, newMemoryFilter(t), newNormalizer(t), stats.NewMemory(), frontier.WorkerOptions{
		Topology: topo, Batch: batch, Concurrency: concurrency, FetchWait: 50 * time.Millisecond,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond, StatsInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)

	// The crawler publishes all the time, through the deaths.
	const pages = 600
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; i < pages; i++ {
			crawler.publish(t, page(i))
			time.Sleep(2 * time.Millisecond)
		}
	})
	waitPages := func(n int64, what string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for w.Status().Totals.Pages < n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: worker processed %d pages within 60 s, want %d", what, w.Status().Totals.Pages, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// kill shuts down node i mid-run and returns how long the pipeline
	// took to resume: until a batch the worker fetched after the death was
	// admitted (Pages beyond what was done or in hand at the death).
	kill := func(i int, what string) time.Duration {
		t.Helper()
		start := time.Now()
		c.Servers[i].Shutdown()
		before := w.Status().Totals.Pages // batches in hand finish; one more is what resumes
		waitPages(before+batch*concurrency+1, what)
		return time.Since(start)
	}

	waitPages(50, "before the first death")
	resumeD := kill(leader, "after the discovered stream's leader died")
	t.Logf("discovered stream's leader %s killed: the pipeline resumed in %v", c.Servers[leader].Name(), resumeD.Round(time.Millisecond))
	c.Servers[leader].StartAgain()
	c.WaitReady()

	waitPages(300, "before the second death")
	fleader, err := c.Leader(ctx, ajs, topo.FrontierStream())
	if err != nil {
		t.Fatal(err)
	}
	resumeF := kill(fleader, "after the frontier stream's leader died")
	t.Logf("frontier stream's leader %s killed: the pipeline resumed in %v", c.Servers[fleader].Name(), resumeF.Round(time.Millisecond))
	if !wnc.IsConnected() || !cnc.IsConnected() {
		t.Errorf("worker connected %v, crawler connected %v: want both reconnected to the live nodes", wnc.IsConnected(), cnc.IsConnected())
	}

	wg.Wait()
	p.waitDrained(t, 60*time.Second)
	checkOnce(t, p, p.take(t, 0), want)
	// A page whose ack died with a node is redelivered and processed
	// again (its URLs then all duplicates): counted twice, stored once.
	if got := w.Status().Totals.Pages; got < pages {
		t.Errorf("worker processed %d pages, want at least %d", got, pages)
	}
	if err := w.Ready(); err != nil && !errors.Is(err, frontier.ErrNotReady) {
		t.Errorf("Ready() = %v", err)
	}
}
