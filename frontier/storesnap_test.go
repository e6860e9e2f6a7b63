package frontier_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/urlstore"
)

// TestStoreCompactsOnJetStream: on JetStream, compaction keeps the store's
// log to about two periods of work (the stream's messages and bytes fall
// once the first trims run) and a store opened in an empty directory
// starts from the snapshot in the object store and holds what the writer
// holds.
func TestStoreCompactsOnJetStream(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	js := srv.JetStream()
	topo := frontier.Topology{Prefix: "t"}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	open := func(dir string) *urlstore.Store {
		t.Helper()
		log, err := frontier.OpenStoreLog(ctx, js, topo, "test")
		if err != nil {
			t.Fatal(err)
		}
		snaps, err := frontier.OpenStoreSnapshots(ctx, js, topo, "test")
		if err != nil {
			t.Fatal(err)
		}
		s, err := urlstore.Open(ctx, dir, log, urlstore.Options{Logf: t.Logf, Snapshots: snaps, CompactEvery: time.Minute, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	}
	streamMsgs := func() uint64 {
		st, err := js.Stream(ctx, topo.StoreStream())
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}

	a := open(t.TempDir())
	const keys = 300
	for round := 1; round <= 4; round++ {
		for i := range keys {
			var b urlstore.Batch
			b.Set(fmt.Appendf(nil, "k%05d", i), fmt.Appendf(nil, "round %d", round))
			if err := a.Write(ctx, i%4, &b); err != nil {
				t.Fatal(err)
			}
		}
		c, err := a.Compact(ctx)
		if err != nil || c.Snapshot == "" {
			t.Fatalf("Compact after round %d = %+v, %v", round, c, err)
		}
		t.Logf("round %d: snapshot %s, %d bytes in %v; %d partitions trimmed; %d entries in the stream",
			round, c.Snapshot, c.Bytes, c.Took, c.Trimmed, streamMsgs())
		mu.Lock()
		now = now.Add(time.Minute)
		mu.Unlock()
	}
	// Rounds 1 and 2 are trimmed (below the points announced in round 3),
	// but for each partition's entry at its trim point.
	if n := streamMsgs(); n > 2*keys+4 {
		t.Errorf("the stream keeps %d of %d entries; want at most the last two rounds' %d and a trim point each", n, 4*keys, 2*keys)
	}
	want := storeDump(t, a)
	if len(want) != keys || want["k00000"] != "round 4" {
		t.Fatalf("the writer holds %d keys, k00000 %q", len(want), want["k00000"])
	}
	if got := storeDump(t, open(t.TempDir())); !maps.Equal(got, want) {
		t.Errorf("a store restored from the snapshot holds %d keys (k00000 %q), want %d", len(got), got["k00000"], len(want))
	}
}
