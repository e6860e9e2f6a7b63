package frontier_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/redistest"
	"github.com/sievecrawl/sieve/stats"
)

// replOffset returns a Redis node's master_repl_offset.
func replOffset(tb testing.TB, addr string) int64 {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "replication").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "master_repl_offset:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	tb.Fatalf("no master_repl_offset from %s", addr)
	return 0
}

// killLaggingMaster kills a master of rc while its replica lags: the
// replica is paused and the master drops its link, so that the master goes
// on acknowledging writes the replica never gets (what it had sent waits
// in the paused replica's socket and is kept). Once the master has taken
// 4 KiB of such writes it is killed (atKill runs then) and the replica
// resumed; when the replica has been promoted the old master is started
// again, to rejoin as its replica. It returns when the master died and how
// long the promotion took.
func killLaggingMaster(t *testing.T, rc *redistest.Cluster, atKill func()) (killed time.Time, promoted time.Duration) {
	t.Helper()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: timed out", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	var master, replica redistest.Node
	for _, n := range rc.Nodes() {
		if n.Master && master.ID == "" {
			master = n
		}
	}
	for _, n := range rc.Nodes() {
		if n.MasterID == master.ID {
			replica = n
		}
	}
	msrv, rsrv := rc.Server(master.Addr), rc.Server(replica.Addr)
	rsrv.Pause()
	mc := redis.NewClient(&redis.Options{Addr: master.Addr})
	if err := mc.ClientKillByFilter(context.Background(), "TYPE", "replica").Err(); err != nil {
		t.Fatalf("drop the replica's link: %v", err)
	}
	mc.Close()
	from := replOffset(t, master.Addr)
	waitFor("writes on the master the replica lacks", func() bool { return replOffset(t, master.Addr) > from+4096 })
	msrv.Kill()
	killed = time.Now()
	atKill()
	rsrv.Resume()
	waitFor("the replica promoted", func() bool {
		for _, n := range rc.Nodes() {
			if n.Addr == replica.Addr && n.Master {
				return true
			}
		}
		return false
	})
	promoted = time.Since(killed)
	msrv.StartAgain()
	return killed, promoted
}

// failoverRun is what one Redis failover run measured.
type failoverRun struct {
	lostMarks   int           // frontier URLs the filter no longer holds: admitted again after the window
	republished int64         // publishes the duplicate window caught (re-admitted within it)
	resumed     time.Duration // from the master's death to the first batch admitted after it
}

// runRedisFailover runs a worker on a Redis Cluster of 3 masters with a
// replica each (cluster-node-timeout 1 s) and kills a master mid-run while
// its replica lags (paused and cut off, so that the master acknowledges
// marks the replica never receives), then lets the replica take over and brings the
// old master back as its replica. Every URL must reach the frontier once;
// it returns what the failover cost.
func runRedisFailover(t *testing.T, waitReplicas int) failoverRun {
	const nodeTimeout = time.Second
	rc := redistest.StartClusterWith(t, redistest.ClusterOptions{Masters: 3, Replicas: 1, NodeTimeout: nodeTimeout})
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Addrs, ReadTimeout: 5 * time.Second, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	// As the dedup worker opens it (dedup.Spec.NoMirror): with the wait,
	// no mirror.
	filter, err := dedup.Open(ctx, dedup.Spec{Kind: "bloom", Redis: client, Name: "failover",
		Growth: dedup.Growth{InitialCapacity: 1_000_000, TargetFPP: 1e-6}, Policy: normalize.PolicyVersion, NoMirror: waitReplicas > 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filter.Close() })

	p := newPipeline(t, frontier.Topology{Partitions: 4, AckWait: 5 * time.Second})
	s := site{host: "failover.example", pages: 6000}
	want := map[string]bool{}
	const pages = 800
	for i := 0; i < pages; i++ {
		var to []int
		for j := 0; j < 30; j++ {
			l := (i*7 + j*j) % s.pages
			to = append(to, l)
			want[s.canonical(l)] = true
		}
		p.publish(t, s.page("c", i, to, i))
	}
	o := frontier.WorkerOptions{Batch: 4, Concurrency: 2}
	if waitReplicas > 0 {
		o.Replicas = dedup.NewReplicaWait(client, waitReplicas, 500*time.Millisecond)
	}
	w := newWorker(t, p, filter, stats.NewMemory(), o)
	runWorker(t, w)
	waitFor := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: timed out after %v", what, timeout)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("100 pages", 30*time.Second, func() bool { return w.Status().Totals.Pages >= 100 })

	var pagesAtKill int64
	killed, promoted := killLaggingMaster(t, rc, func() { pagesAtKill = w.Status().Totals.Pages })
	var run failoverRun
	waitFor("the pipeline to resume", 60*time.Second, func() bool {
		return w.Status().Totals.Pages > pagesAtKill+int64(o.Batch*o.Concurrency)
	})
	run.resumed = time.Since(killed)
	t.Logf("wait_replicas=%d: replica promoted %v after the master's death; pipeline resumed after %v", waitReplicas, promoted.Round(time.Millisecond), run.resumed.Round(time.Millisecond))

	p.waitDrained(t, 90*time.Second)
	checkOnce(t, p, p.take(t, 0), want)
	run.republished = w.Status().Totals.Republished

	// A filter opened afresh (no mirror of this process's marks) says what
	// the cluster kept.
	check := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Addrs})
	t.Cleanup(func() { check.Close() })
	fresh, err := dedup.OpenRedisBloom(ctx, check, "failover", dedup.RedisBloomOptions{Policy: normalize.PolicyVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fresh.Close() })
	var keys [][]byte
	for u := range want {
		keys = append(keys, []byte(u))
	}
	held, err := fresh.Contains(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range held {
		if !h {
			run.lostMarks++
		}
	}
	return run
}

// TestWorkerRidesOutRedisFailover kills a Redis Cluster master mid-run,
// without and with redis.wait_replicas: nothing is lost or stored twice
// either way; without the wait the marks the dead master had not
// replicated are gone from the filter (those URLs would be admitted again
// after the duplicate window: the count is logged), with it none are.
func TestWorkerRidesOutRedisFailover(t *testing.T) {
	for _, wait := range []int{0, 1} {
		t.Run(fmt.Sprintf("wait_replicas=%d", wait), func(t *testing.T) {
			run := runRedisFailover(t, wait)
			t.Logf("wait_replicas=%d: %d frontier URLs lost from the filter (admitted again after the duplicate window), %d republished within it",
				wait, run.lostMarks, run.republished)
			if wait > 0 && run.lostMarks != 0 {
				t.Errorf("with wait_replicas=%d, %d marks lost in the failover, want 0", wait, run.lostMarks)
			}
		})
	}
}

var waitBench = flag.Bool("sieve.waitbench", false, "run the redis.wait_replicas cost table (TestWaitReplicasCost)")

// TestWaitReplicasCost prints what redis.wait_replicas costs: the pipeline
// benchmark's stream through one worker on a Redis Cluster of 3 masters
// with a replica each, without the wait (with and without the Bloom
// filter's mirror, which the wait turns off) and with it, median of 3 runs
// each, in the same run.
//
//	go test ./frontier -run TestWaitReplicasCost -sieve.waitbench -v
func TestWaitReplicasCost(t *testing.T) {
	if !*waitBench {
		t.Skip("the wait_replicas cost table runs with -sieve.waitbench")
	}
	stream, unique := crawlStream(*pipelineBenchPages)
	rc := redistest.StartClusterWith(t, redistest.ClusterOptions{Masters: 3, Replicas: 1})
	nsrv := natstest.Start(t, natstest.Options{})
	ctx := context.Background()
	type variant struct {
		name     string
		noMirror bool
		wait     int
	}
	variants := []variant{
		{"no wait, mirror (the default)", false, 0},
		{"no wait, no mirror", true, 0},
		{"wait_replicas=1 (no mirror)", true, 1},
	}
	rates := make([][]float64, len(variants))
	for round := 0; round < 3; round++ {
		for i, v := range variants {
			client := rc.Client()
			name := fmt.Sprintf("wait%d-%d", i, round)
			f, err := dedup.Open(ctx, dedup.Spec{Kind: "bloom", Redis: client, Name: name,
				Growth: dedup.Growth{InitialCapacity: 10_000_000, TargetFPP: 1e-6}, Policy: normalize.PolicyVersion, NoMirror: v.noMirror})
			if err != nil {
				t.Fatal(err)
			}
			r := pipelineRate(t, nsrv, f, name, stream, 1, 0, 0, func(o *frontier.WorkerOptions) {
				if v.wait > 0 {
					o.Replicas = dedup.NewReplicaWait(client, v.wait, time.Second)
				}
			})
			f.Close()
			if r.admitted != uint64(unique) {
				t.Errorf("%s: admitted %d, want %d", v.name, r.admitted, unique)
			}
			rates[i] = append(rates[i], r.rate)
		}
	}
	base := median(rates[0])
	fmt.Printf("stream: %d pages, %d unique URLs; 1 worker; Redis Cluster 3 masters + 1 replica each, all on loopback\n", len(stream), unique)
	for i, v := range variants {
		m := median(rates[i])
		fmt.Printf("%-32s %8.0f URLs/s  %.2f× the default  (runs %.0f)\n", v.name, m, m/base, rates[i])
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
