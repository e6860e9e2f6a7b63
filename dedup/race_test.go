package dedup

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
)

// testAndAdder is what a racing caller needs of a filter.
type testAndAdder interface {
	TestAndAdd(ctx context.Context, keys [][]byte) ([]bool, error)
}

// raceNewOnce has one goroutine per filter of filters (the same filter
// repeated, or one per simulated process) add all keys at once, each in its
// own order (a permutation seeded by seed and its index) in batches of
// batch, calling after(f, batch) after each batch when it is not nil (for
// readers running alongside). It returns, per key, how many goroutines were
// told the key was new; errors fail the test.
func raceNewOnce[F testAndAdder](t *testing.T, filters []F, keys [][]byte, batch int, seed uint64, after func(f F, kb [][]byte) error) []int {
	t.Helper()
	ctx := context.Background()
	news := make([][]bool, len(filters))
	var wg sync.WaitGroup
	for w, f := range filters {
		wg.Go(func() {
			order := rand.New(rand.NewPCG(uint64(w), seed)).Perm(len(keys))
			seen := make([]bool, len(keys))
			for start := 0; start < len(order); start += batch {
				idx := order[start:min(start+batch, len(order))]
				kb := make([][]byte, len(idx))
				for i, j := range idx {
					kb[i] = keys[j]
				}
				got, err := f.TestAndAdd(ctx, kb)
				if err != nil {
					t.Error(err)
					return
				}
				for i, j := range idx {
					seen[j] = got[i]
				}
				if after != nil {
					if err := after(f, kb); err != nil {
						t.Error(err)
						return
					}
				}
			}
			news[w] = seen
		})
	}
	wg.Wait()
	counts := make([]int, len(keys))
	for _, seen := range news {
		for j, isNew := range seen {
			if isNew {
				counts[j]++
			}
		}
	}
	return counts
}

// repeat returns a slice of n copies of f.
func repeat[F any](f F, n int) []F {
	s := make([]F, n)
	for i := range s {
		s[i] = f
	}
	return s
}

// checkNewOnce fails the test for any key counted new by more than one
// racing caller, and when more than maxLost keys were new to none (each a
// false positive, logged). It returns how many keys were new to none.
func checkNewOnce(t *testing.T, keys [][]byte, counts []int, maxLost int) int {
	t.Helper()
	lost := 0
	for j, count := range counts {
		switch {
		case count > 1:
			t.Errorf("key %q reported new %d times, want once", keys[j], count)
		case count == 0:
			lost++
			t.Logf("key %q reported new by no caller (a false positive)", keys[j])
		}
	}
	if lost > maxLost {
		t.Errorf("%d of %d keys reported new by no caller, want at most %d false positives", lost, len(keys), maxLost)
	}
	return lost
}
