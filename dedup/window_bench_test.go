package dedup

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkWindowTestAndAdd measures TestAndAdd of batches of 1000 keys on
// an in-memory Bloom window whose g older generations each hold 50,000
// keys, for g = 1, 4 and 16, against a ScalableBloom holding the same keys
// (the baseline, run first) with the same bound. Half of each batch repeats
// keys of older generations, half is new. A window reads every live
// generation a key is not found in, so its cost grows with g; the ratio on
// each window line is ×scalable.
func BenchmarkWindowTestAndAdd(b *testing.B) {
	ctx := context.Background()
	const perGen, fpp = 50_000, 0.001
	const D = time.Hour
	for _, g := range []int{1, 4, 16} {
		old := testKeys(fmt.Sprintf("old%d", g), g*perGen)
		fresh := testKeys(fmt.Sprintf("new%d", g), 1<<18)
		batch := func(i int) [][]byte {
			kb := make([][]byte, 0, benchBatch)
			for j := range benchBatch / 2 {
				kb = append(kb, old[(i*benchBatch/2+j)%len(old)], fresh[(i*benchBatch/2+j)%len(fresh)])
			}
			return kb
		}
		var base float64
		b.Run(fmt.Sprintf("g=%d/scalable", g), func(b *testing.B) {
			s := newTestScalable(b, ScalableOptions{Growth: Growth{InitialCapacity: perGen, TargetFPP: fpp}})
			if _, err := s.TestAndAdd(ctx, old); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := s.TestAndAdd(ctx, batch(i)); err != nil {
					b.Fatal(err)
				}
				i++
			}
			base = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(base/benchBatch, "ns/key")
		})
		b.Run(fmt.Sprintf("g=%d/window", g), func(b *testing.B) {
			clock := newFakeClock(windowStart)
			w := mustWindow(b)(NewBloomWindow(WindowOptions{After: D, Granularity: g, Clock: clock},
				ScalableOptions{Growth: Growth{InitialCapacity: perGen, TargetFPP: fpp}}))
			L := w.Options().period()
			for p := range g {
				clock.set(windowStart.Add(time.Duration(int64(p) * L)))
				if _, err := w.TestAndAdd(ctx, old[p*perGen:(p+1)*perGen]); err != nil {
					b.Fatal(err)
				}
			}
			clock.set(windowStart.Add(time.Duration(int64(g) * L)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := w.TestAndAdd(ctx, batch(i)); err != nil {
					b.Fatal(err)
				}
				i++
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(ns/benchBatch, "ns/key")
			if base > 0 {
				b.ReportMetric(ns/base, "×scalable")
				b.Logf("g=%d: window %.0f ns/batch, scalable %.0f (×%.2f)", g, ns, base, ns/base)
			}
		})
	}
}
