package frontier_test

import (
	"context"
	"errors"
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
	"github.com/sievecrawl/sieve/urlstore/urlstoretest"
)

func openStore(t *testing.T, js jetstream.JetStream, topo frontier.Topology, dir string) *urlstore.Store {
	t.Helper()
	return openStoreWith(t, js, topo, dir, urlstore.Options{Logf: t.Logf}, false)
}

// openStoreWith opens store "test" with o, its snapshots in JetStream if
// compacting, and waits until it has caught up.
func openStoreWith(t *testing.T, js jetstream.JetStream, topo frontier.Topology, dir string, o urlstore.Options, compacting bool) *urlstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	log, err := frontier.OpenStoreLog(ctx, js, topo, "test")
	if err != nil {
		t.Fatal(err)
	}
	if compacting {
		if o.Snapshots, err = frontier.OpenStoreSnapshots(ctx, js, topo, "test"); err != nil {
			t.Fatal(err)
		}
	}
	s, err := urlstore.Open(ctx, dir, log, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func storeDump(t *testing.T, s *urlstore.Store) map[string]string {
	t.Helper()
	m := map[string]string{}
	if err := s.Scan(nil, func(k, v []byte) bool { m[string(k)] = string(v); return true }); err != nil {
		t.Fatal(err)
	}
	return m
}

// waitSame polls until every store holds want.
func waitSame(t *testing.T, want map[string]string, stores ...*urlstore.Store) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for i, s := range stores {
		for {
			got := storeDump(t, s)
			if maps.Equal(got, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("store %d holds %d keys, want %d", i, len(got), len(want))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// writeKeys writes keys from..from+n, each its own entry, over 4
// partitions; a write whose outcome was unknown (the server going away)
// is written again, as a caller would.
func writeKeys(t *testing.T, s *urlstore.Store, who string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		var b urlstore.Batch
		b.Set(fmt.Appendf(nil, "k%05d", i), []byte(who))
		b.SetIfAbsent(fmt.Appendf(nil, "first%d", i%4), []byte(who)) // a key lives in one partition
		for {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			err := s.Write(ctx, i%4, &b)
			cancel()
			if err == nil {
				break
			}
			if t.Context().Err() != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestStoreLogShared: stores sharing the log on a real server, writing the
// same partitions at once while the server restarts, end with one state;
// a store opened in an empty directory rebuilds it from the log.
func TestStoreLogShared(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	topo := frontier.Topology{Prefix: "t"}
	a := openStore(t, srv.JetStream(), topo, t.TempDir())
	b := openStore(t, srv.JetStream(), topo, t.TempDir())
	var wg sync.WaitGroup
	wg.Go(func() { writeKeys(t, a, "a", 0, 300) })
	wg.Go(func() { writeKeys(t, b, "b", 300, 300) })
	time.Sleep(100 * time.Millisecond)
	srv.Restart()
	wg.Wait()
	want := storeDump(t, a)
	if len(want) != 600+4 {
		t.Fatalf("%d keys, want %d", len(want), 604)
	}
	waitSame(t, want, b, openStore(t, srv.JetStream(), topo, t.TempDir()))
	// A command without a store reads a key from its partition's entries.
	log, err := frontier.OpenStoreLog(t.Context(), srv.JetStream(), topo, "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k00001", "k00302", "first3", "missing"} {
		part := int(k[len(k)-1]-'0') % 4 // as writeKeys chose
		v, ok, err := urlstore.Lookup(t.Context(), log, part, []byte(k))
		if err != nil || ok != (want[k] != "") || string(v) != want[k] {
			t.Errorf("Lookup(%s) = %q %v %v, want %q", k, v, ok, err, want[k])
		}
	}
}

// TestStoreLogChained: every entry read back from the server names the
// entry of its partition it was appended after (the compare-and-append's
// expected sequence, stored with it and kept across a restart), so a
// store opened on a log with a hole stops at it rather than apply past.
func TestStoreLogChained(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	topo := frontier.Topology{Prefix: "t"}
	a := openStore(t, srv.JetStream(), topo, t.TempDir())
	writeKeys(t, a, "a", 0, 40)
	srv.Restart()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	log, err := frontier.OpenStoreLog(ctx, srv.JetStream(), topo, "test")
	if err != nil {
		t.Fatal(err)
	}
	last := map[int]uint64{}
	n := 0
	rctx, stop := context.WithCancel(ctx)
	err = log.Read(rctx, 0, func() {}, func(e urlstore.Entry) error {
		if !e.Chained || e.Prev != last[e.Part] {
			t.Errorf("entry %d of partition %d: Prev %d (chained %v), want %d", e.Seq, e.Part, e.Prev, e.Chained, last[e.Part])
		}
		last[e.Part] = e.Seq
		if n++; e.Pending == 0 {
			stop()
		}
		return nil
	})
	if err != nil || n != 40 {
		t.Fatalf("read %d entries, %v; want 40", n, err)
	}
	// A hole: partition 1 loses its entries below its last, with no
	// snapshot that holds them.
	if err := log.Trim(ctx, 1, last[1]); err != nil {
		t.Fatal(err)
	}
	s, err := urlstore.Open(ctx, t.TempDir(), log, urlstore.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WaitReady(ctx); !errors.Is(err, urlstore.ErrStale) {
		t.Fatalf("a store opened on a log with a hole: WaitReady = %v, want ErrStale", err)
	}
	t.Logf("stopped: %v", s.Err())
}

// TestStoreLogContract runs the Log contract (package urlstoretest) on
// the JetStream log, as package urlstore runs it on MemLog: the test twin
// and the real log keep one behaviour.
func TestStoreLogContract(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	n := 0
	urlstoretest.TestLog(t, func(t *testing.T) urlstore.Log {
		n++ // a store of its own each: its subjects, in the one stream
		log, err := frontier.OpenStoreLog(t.Context(), srv.JetStream(), frontier.Topology{Prefix: "t"}, fmt.Sprintf("contract%d", n))
		if err != nil {
			t.Fatal(err)
		}
		return log
	})
}

// TestStoreLogBlocksUncompressed: the stores' stream and their snapshots'
// bucket are configured to store their blocks as they come, also when an
// earlier version made them compressed (nats-server applies that at its
// next start), and the entries are compressed by their writer:
// NATS decompresses every block of a stream it rebuilds after an unclean
// stop (the serve recovery benchmark, ./bench.sh recovery).
func TestStoreLogBlocksUncompressed(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	js := srv.JetStream()
	topo := frontier.Topology{Prefix: "t"}
	ctx := t.Context()
	// As an earlier version made them.
	old := topo.StoreConfig()
	old.Compression = jetstream.S2Compression
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: topo.StoreSnapshotsBucket(), Compression: true}); err != nil {
		t.Fatal(err)
	}
	s := openStoreWith(t, js, topo, t.TempDir(), urlstore.Options{}, true)
	for _, name := range []string{topo.StoreStream(), "OBJ_" + topo.StoreSnapshotsBucket()} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if c := st.CachedInfo().Config.Compression; c != jetstream.NoCompression {
			t.Errorf("stream %s: compression %v, want none", name, c)
		}
	}
	var b urlstore.Batch
	for i := range 100 {
		b.Set(fmt.Appendf(nil, "R/crawl/www.site%d.example/articles/%d.html", i%3, i), []byte("queued"))
	}
	if err := s.Write(ctx, 0, &b); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, topo.StoreStream())
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, topo.StoreSubject("test", 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Data) >= b.Size()/2 {
		t.Errorf("the log keeps a %d-byte batch of URLs as %d bytes, want under half", b.Size(), len(m.Data))
	}
	if got := storeDump(t, s); len(got) != 100 {
		t.Errorf("the store holds %d keys, want 100", len(got))
	}
}

// TestStoreLogNodeLost: on a 3-node cluster with 3 replicas, nodes that
// lose their disk lose nothing of the log. Each node in turn is stopped,
// its directory deleted, and started again empty while writes go on;
// once all three have been rebuilt no original disk is left, and a store
// opened in an empty directory still rebuilds every key.
func TestStoreLogNodeLost(t *testing.T) {
	c := natstest.StartCluster(t, 3, natstest.Options{})
	topo := frontier.Topology{Prefix: "t", Replicas: 3}
	a := openStore(t, c.JetStream(0), topo, t.TempDir())
	writeKeys(t, a, "a", 0, 100)
	for i, lost := range c.Servers {
		lost.Shutdown()
		if err := os.RemoveAll(lost.StoreDir); err != nil {
			t.Fatal(err)
		}
		writeKeys(t, a, "a", 100*(i+1), 100)
		lost.StartAgain()
		c.WaitReady()
		waitReplicasCurrent(t, c.JetStream(0), topo.StoreStream())
	}
	want := storeDump(t, a)
	if len(want) != 400+4 {
		t.Fatalf("%d keys, want %d", len(want), 404)
	}
	waitSame(t, want, openStore(t, c.JetStream(1), topo, t.TempDir()))
}

// waitReplicasCurrent polls until every replica of stream is current.
func waitReplicasCurrent(t *testing.T, js jetstream.JetStream, stream string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		st, err := js.Stream(ctx, stream)
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = st.Info(ctx)
		}
		cancel()
		ok := err == nil && info.Cluster != nil && len(info.Cluster.Replicas) == 2
		if ok {
			for _, r := range info.Cluster.Replicas {
				ok = ok && r.Current && !r.Offline
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if info != nil && info.Cluster != nil {
				for _, r := range info.Cluster.Replicas {
					t.Logf("replica %s current %v offline %v lag %d", r.Name, r.Current, r.Offline, r.Lag)
				}
			}
			t.Fatalf("stream %s: replicas not current after 60 s (%v)", stream, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
