package dedup

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/bits-and-blooms/bloom/v3"
)

// benchPool is the key population of the Bloom benchmarks: 2^18 URL-like
// keys, cycled in batches of 1000, so the first pass adds and later passes
// find duplicates, as a crawl's link stream mostly does.
const (
	benchPoolSize = 1 << 18
	benchBatch    = 1000
)

// batchAdder is one TestAndAdd implementation under benchmark.
type batchAdder func(keys [][]byte) []bool

// BenchmarkBloomTestAndAdd measures TestAndAdd of a batch of 1000 keys on a
// Bloom sized for the pool at 0.001, against two baselines measured in the
// same run: a map[string]struct{} set (exact, far larger) and
// github.com/bits-and-blooms/bloom/v3 (not safe for concurrent use, so
// without the locks Bloom pays for). The baselines run first, and sieve's
// line reports its time per batch as a multiple of each (×map,
// ×bits-and-blooms).
func BenchmarkBloomTestAndAdd(b *testing.B) {
	keys := testKeys("bench", benchPoolSize)
	impls := []struct {
		name string
		make func(tb testing.TB) batchAdder
	}{
		{"map", func(tb testing.TB) batchAdder {
			set := make(map[string]struct{})
			return func(keys [][]byte) []bool {
				out := make([]bool, len(keys))
				for i, k := range keys {
					if _, ok := set[string(k)]; !ok {
						set[string(k)] = struct{}{}
						out[i] = true
					}
				}
				return out
			}
		}},
		{"bits-and-blooms", func(tb testing.TB) batchAdder {
			f := bloom.NewWithEstimates(benchPoolSize, 0.001)
			return func(keys [][]byte) []bool {
				out := make([]bool, len(keys))
				for i, k := range keys {
					out[i] = !f.TestAndAdd(k)
				}
				return out
			}
		}},
		{"sieve", func(tb testing.TB) batchAdder {
			f := newTestBloom(tb, BloomOptions{Capacity: benchPoolSize, FPP: 0.001})
			return func(keys [][]byte) []bool {
				out, err := f.TestAndAdd(context.Background(), keys)
				if err != nil {
					tb.Fatal(err)
				}
				return out
			}
		}},
	}
	nsPerBatch := map[string]float64{}
	for _, impl := range impls {
		b.Run(impl.name, func(b *testing.B) {
			add := impl.make(b)
			b.ReportAllocs()
			b.ResetTimer()
			off := 0
			for b.Loop() {
				add(keys[off : off+benchBatch])
				off += benchBatch
				if off+benchBatch > len(keys) {
					off = 0
				}
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(ns/benchBatch, "ns/key")
			nsPerBatch[impl.name] = ns
			// The baselines ran first: report the ratios on sieve's line.
			if m, bb := nsPerBatch["map"], nsPerBatch["bits-and-blooms"]; impl.name == "sieve" && m > 0 && bb > 0 {
				b.ReportMetric(ns/m, "×map")
				b.ReportMetric(ns/bb, "×bits-and-blooms")
				b.Logf("TestAndAdd(1000): sieve %.0f ns/batch, map set %.0f (×%.2f), bits-and-blooms %.0f (×%.2f)", ns, m, ns/m, bb, ns/bb)
			}
		})
	}
}

// BenchmarkBloomParallel measures concurrent TestAndAdd batches with the
// key-striped locks (256) against a single lock (run first), the choice
// stripeCount records, reporting the ratio as ×one-lock. Striping matters
// only with more cores than callers contend on; on two busy cores the two
// are close.
func BenchmarkBloomParallel(b *testing.B) {
	keys := testKeys("bench", benchPoolSize)
	nsPerBatch := map[int]float64{}
	for _, stripes := range []int{1, stripeCount} {
		b.Run(fmt.Sprintf("stripes=%d", stripes), func(b *testing.B) {
			f := newTestBloom(b, BloomOptions{Capacity: benchPoolSize, FPP: 0.001, stripes: stripes})
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					off := int(next.Add(benchBatch)) % (benchPoolSize - benchBatch)
					if _, err := f.TestAndAdd(ctx, keys[off:off+benchBatch]); err != nil {
						b.Error(err)
						return
					}
				}
			})
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(ns/benchBatch, "ns/key")
			nsPerBatch[stripes] = ns
			if one := nsPerBatch[1]; stripes != 1 && one > 0 {
				b.ReportMetric(ns/one, "×one-lock")
			}
		})
	}
}
