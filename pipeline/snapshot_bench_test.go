package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/pipeline"
)

// BenchmarkSnapshotSave measures saving an in-memory Bloom filter, half
// full, at sizes from a small crawl to a large one, against the baseline of
// writing and syncing as many bytes with os.File (measured in the same
// run). The time of a save bounds how often the snapshot loop saves: a save
// taking d waits 9d for the next.
func BenchmarkSnapshotSave(b *testing.B) {
	for _, capacity := range []int64{100_000, 1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("capacity=%d", capacity), func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			fc := config.Default().Filter
			fc.Capacity = capacity
			fc.Snapshot = filepath.Join(dir, "seen.bloom")
			f, err := pipeline.OpenFilter(ctx, fc, nil, "p")
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			keys := make([][]byte, 0, 10_000)
			for i := int64(0); i < capacity/2; i++ {
				keys = append(keys, fmt.Appendf(nil, "https://example.com/%d", i))
				if len(keys) == cap(keys) || i == capacity/2-1 {
					if _, err := f.TestAndAdd(ctx, keys); err != nil {
						b.Fatal(err)
					}
					keys = keys[:0]
				}
			}
			if err := pipeline.SaveFilter(ctx, fc, f); err != nil {
				b.Fatal(err)
			}
			fi, err := os.Stat(fc.Snapshot)
			if err != nil {
				b.Fatal(err)
			}
			size := fi.Size()
			raw := make([]byte, size)
			base := baseline(b, filepath.Join(dir, "raw"), raw)
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				if err := pipeline.SaveFilter(ctx, fc, f); err != nil {
					b.Fatal(err)
				}
			}
			per := time.Since(start) / time.Duration(b.N)
			b.ReportMetric(float64(size), "bytes/save")
			b.ReportMetric(float64(base.Microseconds())/1000, "baseline-ms/write")
			b.ReportMetric(float64(per)/float64(base), "ratio")
		})
	}
}

// baseline times writing data to a new file and syncing it, best of 3.
func baseline(tb testing.TB, path string, data []byte) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range 3 {
		start := time.Now()
		f, err := os.Create(path)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			tb.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			tb.Fatal(err)
		}
		f.Close()
		best = min(best, time.Since(start))
	}
	return best
}
