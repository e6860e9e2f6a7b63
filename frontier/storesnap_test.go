package frontier_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/urlstore"
)

// compactingRun is a store compacted one period per round, on a clock the
// test moves.
type compactingRun struct {
	t    *testing.T
	js   jetstream.JetStream
	topo frontier.Topology
	mu   sync.Mutex
	now  time.Time
}

func (r *compactingRun) clock() time.Time { r.mu.Lock(); defer r.mu.Unlock(); return r.now }

func (r *compactingRun) open(dir string) *urlstore.Store {
	return openStoreWith(r.t, r.js, r.topo, dir, urlstore.Options{Logf: r.t.Logf, CompactEvery: time.Minute, Now: r.clock}, true)
}

// round rewrites keys k00000…k(n-1) with the round's value, each its own
// entry over 4 partitions, then compacts and moves the clock a period on.
func (r *compactingRun) round(s *urlstore.Store, round, n int) {
	t := r.t
	t.Helper()
	for i := range n {
		var b urlstore.Batch
		b.Set(fmt.Appendf(nil, "k%05d", i), fmt.Appendf(nil, "round %d", round))
		if err := s.Write(t.Context(), i%4, &b); err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.Compact(t.Context())
	if err != nil || c.Snapshot == "" {
		t.Fatalf("Compact after round %d = %+v, %v", round, c, err)
	}
	t.Logf("round %d: snapshot %s, %d bytes in %v; %d partitions trimmed", round, c.Snapshot, c.Bytes, c.Took, c.Trimmed)
	r.mu.Lock()
	r.now = r.now.Add(time.Minute)
	r.mu.Unlock()
}

// streamMsgs is how many entries the stores' stream holds.
func (r *compactingRun) streamMsgs() uint64 {
	t := r.t
	t.Helper()
	st, err := r.js.Stream(t.Context(), r.topo.StoreStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// TestStoreCompactsOnJetStream: on JetStream, compaction keeps the store's
// log to about two periods of work (the stream's messages fall once the
// first trims run) and a store opened in an empty directory starts from
// the snapshot in the object store and holds what the writer holds.
func TestStoreCompactsOnJetStream(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	r := &compactingRun{t: t, js: srv.JetStream(), topo: frontier.Topology{Prefix: "t"}, now: time.Now()}
	a := r.open(t.TempDir())
	const keys = 300
	for round := 1; round <= 4; round++ {
		r.round(a, round, keys)
	}
	// Rounds 1 and 2 are trimmed (below the points announced in round 3),
	// but for each partition's entry at its trim point.
	if n := r.streamMsgs(); n > 2*keys+4 {
		t.Errorf("the stream keeps %d of %d entries; want at most the last two rounds' %d and a trim point each", n, 4*keys, 2*keys)
	}
	want := storeDump(t, a)
	if len(want) != keys || want["k00000"] != "round 4" {
		t.Fatalf("the writer holds %d keys, k00000 %q", len(want), want["k00000"])
	}
	if got := storeDump(t, r.open(t.TempDir())); !maps.Equal(got, want) {
		t.Errorf("a store restored from the snapshot holds %d keys (k00000 %q), want %d", len(got), got["k00000"], len(want))
	}
}

// TestStoreCompactsNodeLost: with 3 replicas, compaction loses nothing
// when NATS nodes lose their disks: each round, one node is stopped, its
// directory deleted, and started again empty while the store writes and
// compacts; once every node has been rebuilt, a store on an empty
// directory restores the snapshot (the object store's replicas) and the
// trimmed log's tail and holds what the writer holds.
func TestStoreCompactsNodeLost(t *testing.T) {
	c := natstest.StartCluster(t, 3, natstest.Options{})
	topo := frontier.Topology{Prefix: "t", Replicas: 3}
	r := &compactingRun{t: t, js: c.JetStream(0), topo: topo, now: time.Now()}
	a := r.open(t.TempDir())
	const keys = 100
	r.round(a, 1, keys)
	for i, lost := range c.Servers {
		lost.Shutdown()
		if err := os.RemoveAll(lost.StoreDir); err != nil {
			t.Fatal(err)
		}
		r.round(a, i+2, keys)
		lost.StartAgain()
		c.WaitReady()
		for _, stream := range []string{topo.StoreStream(), "OBJ_" + topo.StoreSnapshotsBucket(), "KV_" + topo.StoreMetaBucket()} {
			waitReplicasCurrent(t, c.JetStream(0), stream)
		}
	}
	if n := r.streamMsgs(); n > 2*keys+4 {
		t.Errorf("the stream keeps %d of %d entries; want at most the last two rounds' %d and a trim point each", n, 4*keys, 2*keys)
	}
	want := storeDump(t, a)
	if len(want) != keys || want["k00000"] != "round 4" {
		t.Fatalf("the writer holds %d keys, k00000 %q", len(want), want["k00000"])
	}
	b := openStoreWith(t, c.JetStream(1), topo, t.TempDir(), urlstore.Options{Logf: t.Logf, CompactEvery: time.Minute, Now: r.clock}, true)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for !maps.Equal(storeDump(t, b), want) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	if got := storeDump(t, b); !maps.Equal(got, want) {
		t.Errorf("a store restored after every node lost its disk holds %d keys (k00000 %q), want %d", len(got), got["k00000"], len(want))
	}
}
