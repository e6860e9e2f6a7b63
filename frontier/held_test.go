package frontier_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/redistest"
)

// TestHeldBatchesVisible runs a worker with redis.wait_replicas 1 on a
// real Redis that has no replica, as after a failover promoted a master
// with none: every batch is held. The worker must say so past the bound
// (Status.Held: how many, since when, "redis WAIT 0/1 replicas"), stay
// ready (degraded, not dead), log it once, not once per attempt; and once
// a replica follows the master, release the batches and say so.
func TestHeldBatchesVisible(t *testing.T) {
	p := newPipeline(t, frontier.Topology{Partitions: 2})
	srv := redistest.Start(t, redistest.Options{})
	logs := &logBuffer{}
	const bound = time.Second
	w := newWorker(t, p, newMemoryFilter(t), nil, frontier.WorkerOptions{
		Replicas:  dedup.NewReplicaWait(srv.Client(), 1, 100*time.Millisecond),
		HeldBound: bound, Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	runWorker(t, w)
	s := site{host: "held.example", pages: 50}
	for i := 0; i < 10; i++ {
		p.publish(t, s.page("c", i, []int{i + 1, i + 2}, 0))
	}
	deadline := time.Now().Add(20 * time.Second)
	var held *frontier.Held
	for {
		if held = w.Status().Held; held != nil && held.Reason != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Status().Held = %+v 20 s after the pages came, want batches held with a reason", held)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if age := time.Since(held.Since); held.Batches < 1 || age < bound || held.Reason != "redis WAIT 0/1 replicas" {
		t.Errorf("Status().Held = %+v (%v old), want ≥ 1 batch older than %v held by %q", held, age, bound, "redis WAIT 0/1 replicas")
	}
	if s := held.String(); !strings.HasPrefix(s, "held ") || !strings.HasSuffix(s, ": redis WAIT 0/1 replicas") {
		t.Errorf("Held.String() = %q, want \"held N batches Ts: redis WAIT 0/1 replicas\"", s)
	}
	// Held for 3 s more: a WAIT fails every 100 ms and more, yet the
	// worker stays ready and the log says it once.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		if err := w.Ready(); err != nil {
			t.Fatalf("Ready() = %v while batches are held for replicas, want nil (degraded, not dead)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	lines := logs.lines("batches held")
	if len(lines) != 1 || !strings.Contains(lines[0], "redis WAIT 0/1 replicas") {
		t.Errorf("logged %d lines of held batches in 4 s, want one naming the reason:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	retries := len(logs.lines(""))
	t.Logf("held: %s; log lines in all: %d", held, retries)

	// A replica follows the master: WAIT succeeds, the batches go.
	replica := redistest.Start(t, redistest.Options{})
	host, port, err := net.SplitHostPort(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := replica.Client().Do(ctx, "replicaof", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	p.waitDrained(t, 30*time.Second)
	for w.Status().Held != nil {
		if ctx.Err() != nil {
			t.Fatalf("Status().Held = %+v with a replica and the stream drained, want nil", w.Status().Held)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(logs.lines("batches no longer held")); n != 1 {
		t.Errorf("logged %d lines of the batches released, want 1", n)
	}
}
