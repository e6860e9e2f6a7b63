package frontier_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/urlstore"
)

var (
	compactBench       = flag.Bool("sieve.compactbench", false, "run TestCompactionCost (./bench.sh compact)")
	compactBenchN      = flag.Int("sieve.compactbench.n", 1_000_000, "records TestCompactionCost keeps")
	compactBenchRounds = flag.Int("sieve.compactbench.rounds", 4, "rounds of work (every record rewritten) TestCompactionCost runs")
)

// TestCompactionCost measures what compaction (urlstore.Compact) saves and
// costs, on one embedded NATS server: two stores of N records (a 40-byte
// key, a 60-byte value, as a queue's URL record), each round rewriting
// every record in batches of 256 over 32 partitions (the work of hand-outs
// and acknowledgements), one store compacted after each round (one period
// each), the other not: the same-run baseline. It prints per round each
// log's bytes per record, the snapshot's size and time, and at the end
// how long a store in an empty directory takes to be ready: restored from
// the snapshot and the log's tail, against rebuilt from the whole log.
func TestCompactionCost(t *testing.T) {
	if !*compactBench {
		t.Skip("a benchmark: ./bench.sh compact")
	}
	n, rounds := *compactBenchN, *compactBenchRounds
	srv := natstest.Start(t, natstest.Options{})
	js := srv.JetStream()
	topo := frontier.Topology{Prefix: "bench"}
	ctx := t.Context()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	open := func(name, dir string, compacting bool) (*urlstore.Store, time.Duration) {
		t.Helper()
		log, err := frontier.OpenStoreLog(ctx, js, topo, name)
		if err != nil {
			t.Fatal(err)
		}
		o := urlstore.Options{CacheBytes: 64 << 20, Now: clock, CompactEvery: time.Minute}
		if compacting {
			if o.Snapshots, err = frontier.OpenStoreSnapshots(ctx, js, topo, name); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		s, err := urlstore.Open(ctx, dir, log, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		t.Cleanup(func() { s.Close() })
		return s, took
	}
	// logBytes is what each store's subjects hold in the stream.
	logBytes := func(name string) uint64 {
		st, err := js.Stream(ctx, topo.StoreStream())
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(topo.StoreFilter(name)))
		if err != nil {
			t.Fatal(err)
		}
		var msgs uint64
		for _, c := range info.State.Subjects {
			msgs += c
		}
		// The stream's bytes are shared: apportioned by messages, whose
		// sizes are alike in both stores.
		if info.State.Msgs == 0 {
			return 0
		}
		return info.State.Bytes * msgs / info.State.Msgs
	}
	stores := map[string]*urlstore.Store{}
	stores["plain"], _ = open("plain", t.TempDir(), false)
	stores["compacted"], _ = open("compacted", t.TempDir(), true)
	write := func(s *urlstore.Store, round int) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for p := range 32 {
			wg.Go(func() {
				var b urlstore.Batch
				flush := func() {
					if b.Len() > 0 {
						if err := s.Write(ctx, p, &b); err != nil {
							t.Error(err)
						}
						b = urlstore.Batch{}
					}
				}
				for i := p; i < n; i += 32 {
					b.Set(fmt.Appendf(nil, "U crawl-0000 part-%02d queue-%06d url-%09d", p, i%20000, i),
						fmt.Appendf(nil, "state=queued round=%04d lease=0000000000 meta=%026d", round, i))
					if b.Len() == 256 {
						flush()
					}
				}
				flush()
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	t.Logf("%d records, %d rounds of rewriting all of them, one compaction period a round", n, rounds)
	t.Logf("| round | writes/s, plain | writes/s, compacted | plain log B/record | compacted log B/record | snapshot B/record | snapshot took |")
	t.Logf("|---|---|---|---|---|---|---|")
	for round := 1; round <= rounds; round++ {
		plain := write(stores["plain"], round)
		comp := write(stores["compacted"], round)
		c, err := stores["compacted"].Compact(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		now = now.Add(time.Minute)
		mu.Unlock()
		t.Logf("| %d | %.0f | %.0f (%.2f×) | %.1f | %.1f (%.2f×) | %.1f | %v |", round,
			float64(n)/plain.Seconds(), float64(n)/comp.Seconds(), plain.Seconds()/comp.Seconds(),
			float64(logBytes("plain"))/float64(n), float64(logBytes("compacted"))/float64(n),
			float64(logBytes("compacted"))/float64(logBytes("plain")),
			float64(c.Bytes)/float64(n), c.Took.Round(time.Millisecond))
	}
	for _, s := range stores {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	_, rebuilt := open("plain", t.TempDir(), false)
	dir := t.TempDir()
	_, restored := open("compacted", dir, true)
	t.Logf("a store in an empty directory ready: rebuilt from the whole log %v; restored from the snapshot and the tail %v (%.2f×)",
		rebuilt.Round(time.Millisecond), restored.Round(time.Millisecond), restored.Seconds()/rebuilt.Seconds())
	var disk int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			disk += fi.Size()
		}
		return nil
	})
	t.Logf("the restored index: %.1f B/record on disk", float64(disk)/float64(n))
}
