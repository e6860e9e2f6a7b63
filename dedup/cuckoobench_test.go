package dedup

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/redistest"
)

// The cuckoo-versus-Bloom benchmark is a test that prints a table; it runs
// only when asked, as it takes a minute and measures speed on a machine
// that may be busy:
//
//	go test ./dedup -run TestCuckooBench -sieve.cuckoobench -v -timeout 30m
var (
	cuckooBenchFlag  = flag.Bool("sieve.cuckoobench", false, "run the cuckoo-vs-Bloom benchmark table (TestCuckooBench)")
	cuckooBenchN     = flag.Int("sieve.cuckoobench.n", 249024, "distinct keys per stream (249024 fills 2^16 buckets of 4, or 16 shards of 2^12, to 95%)")
	cuckooBenchRedis = flag.Bool("sieve.cuckoobench.redis", true, "include RedisBloom and RedisCuckoo (on a redis-server the test starts)")
)

// benchFilter is what the benchmark drives: the filter contract.
type benchFilter interface {
	TestAndAdd(ctx context.Context, keys [][]byte) ([]bool, error)
	Contains(ctx context.Context, keys [][]byte) ([]bool, error)
	Stats(ctx context.Context) (Stats, error)
	Close() error
}

// benchStream is a sequence of key indexes over distinct keys: "distinct"
// visits each once; "repeats" is ten times as long, each element a key seen
// before with probability 0.9, else the next new key.
type benchStream struct {
	name  string
	order []int
}

func benchStreams(n int) []benchStream {
	distinct := make([]int, n)
	for i := range distinct {
		distinct[i] = i
	}
	r := rand.New(rand.NewPCG(42, 43))
	repeats := make([]int, 0, 10*n)
	next := 0
	for next < n {
		if next > 0 && r.Float64() < 0.9 {
			repeats = append(repeats, r.IntN(next))
		} else {
			repeats = append(repeats, next)
			next++
		}
	}
	return []benchStream{{"distinct", distinct}, {"90% repeats", repeats}}
}

// benchResult is one row of the table.
type benchResult struct {
	keysPerSec  float64
	bytesPerKey float64
	bitsPerKey  float64
	fpp         float64
	load        float64
	layers      int
	items       uint64
}

// runBench feeds the stream to f in batches of 1000 and measures it.
func runBench(tb testing.TB, f benchFilter, keys [][]byte, s benchStream, absent [][]byte) benchResult {
	tb.Helper()
	ctx := context.Background()
	const batchSize = 1000
	batch := make([][]byte, 0, batchSize)
	start := time.Now()
	for i := 0; i < len(s.order); i += batchSize {
		batch = batch[:0]
		for _, k := range s.order[i:min(i+batchSize, len(s.order))] {
			batch = append(batch, keys[k])
		}
		if _, err := f.TestAndAdd(ctx, batch); err != nil {
			tb.Fatalf("TestAndAdd: %v", err)
		}
	}
	elapsed := time.Since(start)
	fp := 0
	for i := 0; i < len(absent); i += batchSize {
		got, err := f.Contains(ctx, absent[i:min(i+batchSize, len(absent))])
		if err != nil {
			tb.Fatalf("Contains: %v", err)
		}
		fp += numTrue(got)
	}
	st, err := f.Stats(ctx)
	if err != nil {
		tb.Fatalf("Stats: %v", err)
	}
	var bits, filled float64
	for _, l := range st.Layers {
		bits += float64(l.Bits)
		filled += l.Fill * float64(l.Bits)
	}
	return benchResult{
		keysPerSec:  float64(len(s.order)) / elapsed.Seconds(),
		bytesPerKey: st.BytesPerItem,
		bitsPerKey:  8 * st.BytesPerItem,
		fpp:         float64(fp) / float64(len(absent)),
		load:        filled / bits,
		layers:      len(st.Layers),
		items:       st.Items,
	}
}

// benchKind builds one filter kind for n distinct keys at target rate p.
type benchKind struct {
	name     string
	baseline string // the kind this one is compared with ("" = a baseline)
	open     func(tb testing.TB, n int, p float64) benchFilter
}

func memoryBenchKinds() []benchKind {
	growing := func(n int, p float64) Growth { return Growth{InitialCapacity: int64(n), TargetFPP: p} }
	return []benchKind{
		{name: "bloom", open: func(tb testing.TB, n int, p float64) benchFilter {
			return newTestBloom(tb, BloomOptions{Capacity: int64(n), FPP: p})
		}},
		{name: "cuckoo fixed", baseline: "bloom", open: func(tb testing.TB, n int, p float64) benchFilter {
			return newTestCuckoo(tb, CuckooOptions{Growth: growing(n, p), MaxLayers: 1})
		}},
		{name: "scalable bloom", open: func(tb testing.TB, n int, p float64) benchFilter {
			return newTestScalableBloom(tb, ScalableOptions{Growth: growing(n, p)})
		}},
		{name: "cuckoo growing", baseline: "scalable bloom", open: func(tb testing.TB, n int, p float64) benchFilter {
			return newTestCuckoo(tb, CuckooOptions{Growth: growing(n, p)})
		}},
		{name: "scalable bloom from n/16", open: func(tb testing.TB, n int, p float64) benchFilter {
			return newTestScalableBloom(tb, ScalableOptions{Growth: growing(n/16, p)})
		}},
		{name: "cuckoo growing from n/16", baseline: "scalable bloom from n/16", open: func(tb testing.TB, n int, p float64) benchFilter {
			return newTestCuckoo(tb, CuckooOptions{Growth: growing(n/16, p)})
		}},
	}
}

func newTestScalableBloom(tb testing.TB, opts ScalableOptions) *ScalableBloom {
	tb.Helper()
	f, err := NewScalableBloom(opts)
	if err != nil {
		tb.Fatalf("NewScalableBloom: %v", err)
	}
	tb.Cleanup(func() { _ = f.Close() })
	return f
}

// redisBenchKinds are RedisBloom and RedisCuckoo on one server, both with
// the default 16 shards and the same growth schedule.
func redisBenchKinds(client redis.UniversalClient) []benchKind {
	var runs atomic.Int64
	name := func(kind string) string { return fmt.Sprintf("bench-%s-%d", kind, runs.Add(1)) }
	return []benchKind{
		{name: "redis bloom", open: func(tb testing.TB, n int, p float64) benchFilter {
			f, err := OpenRedisBloom(context.Background(), client, name("bloom"), RedisBloomOptions{InitialCapacity: int64(n), TargetFPP: p})
			if err != nil {
				tb.Fatal(err)
			}
			return f
		}},
		{name: "redis cuckoo", baseline: "redis bloom", open: func(tb testing.TB, n int, p float64) benchFilter {
			return openRedisCuckoo(tb, client, name("cuckoo"), RedisCuckooOptions{CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: int64(n), TargetFPP: p}}})
		}},
	}
}

// TestCuckooBench prints, for each target rate and stream, every filter
// kind's throughput (TestAndAdd keys/s, batches of 1000, one caller; for
// Redis one round trip per batch on a local server), memory per distinct
// key, false-positive rate measured on 1,000,000 keys never inserted, load
// factor (slots or bits used), and the ratio to its Bloom baseline measured
// in the same run.
func TestCuckooBench(t *testing.T) {
	if !*cuckooBenchFlag {
		t.Skip("benchmark table; run with -sieve.cuckoobench")
	}
	kinds := memoryBenchKinds()
	if *cuckooBenchRedis {
		srv := redistest.Start(t, redistest.Options{})
		kinds = append(kinds, redisBenchKinds(srv.Client())...)
	}
	runBenchTable(t, *cuckooBenchN, kinds)
}

func runBenchTable(t *testing.T, n int, kinds []benchKind) {
	keys := cuckooKeys("bench", 0, n)
	absent := cuckooKeys("bench-absent", 0, 1_000_000)
	var out strings.Builder
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "target\tstream\tfilter\tkeys/s\tbytes/key\tbits/key\tFPP\tload\tlayers\tspeed vs base\tmemory vs base\t\n")
	for _, p := range []float64{0.01, 0.001} {
		for _, s := range benchStreams(n) {
			results := map[string]benchResult{}
			for _, k := range kinds {
				f := k.open(t, n, p)
				r := runBench(t, f, keys, s, absent)
				_ = f.Close()
				results[k.name] = r
				speed, mem := "baseline", "baseline"
				if b, ok := results[k.baseline]; ok {
					speed = fmt.Sprintf("%.2fx", r.keysPerSec/b.keysPerSec)
					mem = fmt.Sprintf("%.2fx", r.bytesPerKey/b.bytesPerKey)
				}
				fmt.Fprintf(w, "%v\t%s\t%s\t%.0f\t%.3f\t%.2f\t%.5f\t%.3f\t%d\t%s\t%s\t\n",
					p, s.name, k.name, r.keysPerSec, r.bytesPerKey, r.bitsPerKey, r.fpp, r.load, r.layers, speed, mem)
			}
		}
	}
	_ = w.Flush()
	t.Logf("%d distinct keys per stream; FPP over %d never-inserted keys\n%s", n, len(absent), out.String())
}
