package dedup

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// filterContract is the filter contract of COMMON.md, and cuckooContract what
// a cuckoo filter adds; both filter kinds are used through interfaces like
// these, declared by their consumers.
type filterContract interface {
	TestAndAdd(ctx context.Context, keys [][]byte) ([]bool, error)
	Contains(ctx context.Context, keys [][]byte) ([]bool, error)
	Stats(ctx context.Context) (Stats, error)
	Close() error
}

type cuckooContract interface {
	filterContract
	Add(ctx context.Context, keys [][]byte) error
	Delete(ctx context.Context, keys [][]byte) ([]bool, error)
	Forget(ctx context.Context, keys [][]byte) ([]bool, error)
	Count(ctx context.Context) (uint64, error)
}

var _ cuckooContract = (*Cuckoo)(nil)

// cuckooKeys returns n distinct URL-like keys under prefix, starting at from.
func cuckooKeys(prefix string, from, n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "https://%s.example/page/%d", prefix, from+i)
	}
	return keys
}

func newTestCuckoo(tb testing.TB, opts CuckooOptions) *Cuckoo {
	tb.Helper()
	c, err := NewCuckoo(opts)
	if err != nil {
		tb.Fatalf("NewCuckoo(%+v): %v", opts, err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// numTrue counts the true results.
func numTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// binomialCountUpper is the 4-sigma upper bound on the count of successes in n
// trials of probability p (plus one, so that p·n ≪ 1 still allows a hit).
func binomialCountUpper(n int, p float64) float64 {
	mean := float64(n) * p
	return mean + 4*math.Sqrt(mean*(1-p)) + 1
}

// TestCuckooFormatPinned pins what a persisted cuckoo filter depends on: the
// fingerprint, first bucket and alternate bucket of known keys, and fmix32.
// If this fails, every stored cuckoo filter (snapshot or Redis) reads wrong.
func TestCuckooFormatPinned(t *testing.T) {
	// murmur3's fmix32 reference values.
	for _, c := range []struct{ in, want uint32 }{
		{0, 0},
		{1, 0x514e28b7},
		{0xdeadbeef, 0x0de5c6a9},
	} {
		if got := fmix32(c.in); got != c.want {
			t.Errorf("fmix32(%#x) = %#x, want %#x", c.in, got, c.want)
		}
	}
	for _, c := range []struct {
		key     string
		f       int
		buckets uint64
		fp      uint32
		i1, i2  uint64
	}{
		{"https://example.com/", 12, 1 << 10, 1275, 159, 218},
		{"https://example.com/", 32, 1 << 20, 3060245460, 799903, 449114},
		{"", 8, 1 << 4, 1, 0, 7}, // murmur3("") = 0: fingerprint 1, i2 = fmix32(1) mod 16
	} {
		h := HashKey([]byte(c.key))
		fp := cuckooFingerprint(h, c.f)
		i1 := cuckooIndex(h, c.buckets)
		i2 := cuckooAltIndex(i1, fp, c.buckets)
		if fp != c.fp || i1 != c.i1 || i2 != c.i2 {
			t.Errorf("key %q f=%d buckets=%d: fp, i1, i2 = %d, %d, %d; want %d, %d, %d", c.key, c.f, c.buckets, fp, i1, i2, c.fp, c.i1, c.i2)
		}
	}
}

func TestCuckooAltIndexInvolution(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		buckets := uint64(1) << r.IntN(33)
		i := r.Uint64() & (buckets - 1)
		fp := r.Uint32() | 1
		j := cuckooAltIndex(i, fp, buckets)
		if j >= buckets {
			t.Fatalf("cuckooAltIndex(%d, %d, %d) = %d, out of range", i, fp, buckets, j)
		}
		if back := cuckooAltIndex(j, fp, buckets); back != i {
			t.Fatalf("cuckooAltIndex(cuckooAltIndex(%d, %d, %d)) = %d, want %d", i, fp, buckets, back, i)
		}
	}
}

func TestCuckooFingerprintNeverZero(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for f := MinCuckooFingerprintBits; f <= MaxCuckooFingerprintBits; f++ {
		for range 2000 {
			h := Hash{H1: r.Uint64(), H2: r.Uint64()}
			if fp := cuckooFingerprint(h, f); fp == 0 || uint64(fp) >= 1<<f {
				t.Fatalf("cuckooFingerprint(%v, %d) = %d, want in [1, 2^%d)", h, f, fp, f)
			}
		}
		// The hash that is 0 mod 2^f − 1 still gets a nonzero fingerprint.
		if fp := cuckooFingerprint(Hash{H2: (uint64(1)<<f - 1) << 11}, f); fp != 1 {
			t.Errorf("cuckooFingerprint(H2=2^%d−1) = %d, want 1", f, fp)
		}
	}
}

// TestCuckooFingerprintBits checks the fingerprint size chosen for a rate:
// the smallest f with 2b/(2^f − 1) ≤ fpp (Fan et al. §5.1: f ≥ log2(2b/ε)).
func TestCuckooFingerprintBits(t *testing.T) {
	for _, c := range []struct {
		fpp     float64
		b, min  int
		want    int
		wantErr bool
	}{
		{fpp: 0.01, b: 4, want: 10},            // 8/1023 = 0.0078
		{fpp: 0.001, b: 4, want: 13},           // 8/8191 = 0.00098
		{fpp: 0.002, b: 4, want: 12},           // layer 0 of a 1% filter
		{fpp: 0.0002, b: 4, want: 16},          // layer 0 of a 0.1% filter
		{fpp: 0.01, b: 2, want: 9},             // 4/511
		{fpp: 0.01, b: 4, min: 16, want: 16},   // a floor above the need
		{fpp: 0.5, b: 4, want: 5},              // 8/31; never below 4 bits
		{fpp: 0.9, b: 1, want: 4},              // the minimum size
		{fpp: 2e-9, b: 4, want: 32},            // 8/(2^32−1) = 1.86e-9
		{fpp: 1e-10, b: 4, wantErr: true},      // needs 37 bits
		{fpp: 0, b: 4, wantErr: true},          // not a rate
		{fpp: math.NaN(), b: 4, wantErr: true}, // not a rate
	} {
		got, err := cuckooFingerprintBits(c.fpp, c.b, c.min)
		if c.wantErr {
			if !errors.Is(err, ErrInvalidParams) {
				t.Errorf("cuckooFingerprintBits(%v, %d, %d) = %d, %v; want ErrInvalidParams", c.fpp, c.b, c.min, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("cuckooFingerprintBits(%v, %d, %d) = %d, %v; want %d", c.fpp, c.b, c.min, got, err, c.want)
		}
		if cuckooWorstFPP(c.b, got) > c.fpp {
			t.Errorf("f=%d: bound %v exceeds %v", got, cuckooWorstFPP(c.b, got), c.fpp)
		}
	}
}

func TestCuckooBuckets(t *testing.T) {
	for _, c := range []struct {
		capacity int64
		b        int
		want     uint64
	}{
		{1, 4, 1},
		{3, 4, 1},            // 3/(4·0.95) = 0.79
		{4, 4, 2},            // 4/3.8 = 1.05
		{996147, 4, 1 << 18}, // exactly 95% of 2^20 slots
		{996148, 4, 1 << 19},
		{1000000, 4, 1 << 19},
		{1000, 2, 1 << 10},
	} {
		got, err := cuckooBuckets(c.capacity, c.b)
		if err != nil || got != c.want {
			t.Errorf("cuckooBuckets(%d, %d) = %d, %v; want %d", c.capacity, c.b, got, err, c.want)
		}
	}
	if _, err := cuckooBuckets(1<<40, 1); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("cuckooBuckets(2^40, 1) error = %v, want ErrInvalidParams", err)
	}
}

func TestCuckooTableSlots(t *testing.T) {
	// Every slot of every geometry reads back what was written, without
	// disturbing its neighbours (slots straddle word boundaries when f does
	// not divide 64).
	r := rand.New(rand.NewPCG(5, 6))
	for f := MinCuckooFingerprintBits; f <= MaxCuckooFingerprintBits; f++ {
		tb := newCuckooTable(16, 3, f)
		want := make([]uint32, tb.slots())
		for round := range 3 {
			for s := range want {
				want[s] = uint32(r.Uint64() & (1<<f - 1))
				if round == 2 {
					want[s] = 0
				}
				tb.set(uint64(s), want[s])
			}
			for s, w := range want {
				if got := tb.get(uint64(s)); got != w {
					t.Fatalf("f=%d round %d: slot %d = %d, want %d", f, round, s, got, w)
				}
			}
		}
	}
}

func TestNewCuckooInvalid(t *testing.T) {
	for _, c := range []struct {
		name string
		opts CuckooOptions
	}{
		{"negative capacity", CuckooOptions{Growth: Growth{InitialCapacity: -1}}},
		{"fpp 1", CuckooOptions{Growth: Growth{TargetFPP: 1}}},
		{"fpp NaN", CuckooOptions{Growth: Growth{TargetFPP: math.NaN()}}},
		{"factor below 1", CuckooOptions{Growth: Growth{Factor: 0.5}}},
		{"tightening 1", CuckooOptions{Growth: Growth{Tightening: 1}}},
		{"bucket size 17", CuckooOptions{BucketSize: 17}},
		{"bucket size negative", CuckooOptions{BucketSize: -4}},
		{"fingerprint 3 bits", CuckooOptions{FingerprintBits: 3}},
		{"fingerprint 33 bits", CuckooOptions{FingerprintBits: 33}},
		{"max layers 65", CuckooOptions{MaxLayers: 65}},
		{"negative kicks", CuckooOptions{MaxKicks: -1}},
		{"fpp needs > 32 bits", CuckooOptions{Growth: Growth{TargetFPP: 1e-10}}},
		{"too many buckets", CuckooOptions{Growth: Growth{InitialCapacity: 1 << 40}, BucketSize: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c, err := NewCuckoo(c.opts); !errors.Is(err, ErrInvalidParams) {
				t.Errorf("NewCuckoo = %v, %v; want ErrInvalidParams", c, err)
			}
		})
	}
}

func TestCuckooTestAndAdd(t *testing.T) {
	ctx := context.Background()
	c := newTestCuckoo(t, CuckooOptions{Growth: Growth{InitialCapacity: 1000, TargetFPP: 0.01}})
	a, b := []byte("https://a.example/"), []byte("https://b.example/")
	for _, step := range []struct {
		keys [][]byte
		want []bool
	}{
		{[][]byte{a}, []bool{true}},
		{[][]byte{a}, []bool{false}},
		{[][]byte{b, b, a, b}, []bool{true, false, false, false}}, // sequential within a batch
		{nil, []bool{}},
	} {
		got, err := c.TestAndAdd(ctx, step.keys)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(step.want) {
			t.Errorf("TestAndAdd(%q) = %v, %v; want %v", step.keys, got, err, step.want)
		}
	}
	if n, err := c.Count(ctx); n != 2 || err != nil {
		t.Errorf("Count = %d, %v; want 2", n, err)
	}
	got, err := c.Contains(ctx, [][]byte{a, b, []byte("https://c.example/")})
	if err != nil || !got[0] || !got[1] {
		t.Errorf("Contains(a, b, c) = %v, %v; want a and b present", got, err)
	}
}

// TestCuckooDeleteAddedKeys adds keys, deletes half and checks what happens
// to the other half. In one layer nothing is lost: two keys with the same
// fingerprint sharing a bucket share both buckets, so whichever copy a Delete
// removes, the one left serves the other key. Across layers a key stored in
// one layer can also match (falsely) in a newer one, where Delete looks
// first, and then another key's fingerprint goes: at most a target-rate share
// of the deletes.
func TestCuckooDeleteAddedKeys(t *testing.T) {
	const n = 20000
	for _, c := range []struct {
		name      string
		opts      CuckooOptions
		minLayers int
		maxLost   float64
	}{
		{"one layer", CuckooOptions{Growth: Growth{InitialCapacity: n, TargetFPP: 0.05}, MaxLayers: 1}, 1, 0},
		{"growing", CuckooOptions{Growth: Growth{InitialCapacity: 500, TargetFPP: 0.05}}, 4, binomialCountUpper(n/2, 0.05)},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			f := newTestCuckoo(t, c.opts)
			keys := cuckooKeys("fn", 0, n)
			if err := f.Add(ctx, keys); err != nil {
				t.Fatalf("Add: %v", err)
			}
			if st, _ := f.Stats(ctx); len(st.Layers) < c.minLayers {
				t.Fatalf("filter has %d layers, want ≥ %d", len(st.Layers), c.minLayers)
			}
			del, err := f.Delete(ctx, keys[:n/2])
			if err != nil {
				t.Fatal(err)
			}
			got, _ := f.Contains(ctx, keys[n/2:])
			lost := n/2 - numTrue(got)
			if float64(lost) > c.maxLost {
				t.Errorf("after deleting the first half, %d of the second half read absent, want ≤ %.0f", lost, c.maxLost)
			}
			if missed := n/2 - numTrue(del); float64(missed) > c.maxLost {
				t.Errorf("%d deletes of added keys found nothing (their fingerprint taken by another's delete), want ≤ %.0f", missed, c.maxLost)
			}
			// The deleted half reads absent, but for false positives.
			got, _ = f.Contains(ctx, keys[:n/2])
			if k, limit := numTrue(got), binomialCountUpper(n/2, 0.05); float64(k) > limit {
				t.Errorf("%d of %d deleted keys read present, want ≤ %.0f (4σ over the 5%% target)", k, n/2, limit)
			}
			st, _ := f.Stats(ctx)
			if cnt, _ := f.Count(ctx); cnt != n-st.Deletes || st.Items != cnt || st.Deletes != uint64(numTrue(del)) {
				t.Errorf("Count %d, Stats.Items %d, Stats.Deletes %d after %d found deletes of %d keys", cnt, st.Items, st.Deletes, numTrue(del), n)
			}
			t.Logf("%d layers: %d of %d deletes found a fingerprint, %d kept keys lost theirs", len(st.Layers), numTrue(del), n/2, lost)
		})
	}
}

// TestCuckooDeleteAndForget checks that a deleted key reads absent, that
// Delete removes one copy of a multiply-added key and Forget all of them.
func TestCuckooDeleteAndForget(t *testing.T) {
	ctx := context.Background()
	c := newTestCuckoo(t, CuckooOptions{Growth: Growth{InitialCapacity: 1000, TargetFPP: 0.001}})
	k := [][]byte{[]byte("https://twice.example/")}
	one := [][]byte{[]byte("https://once.example/")}
	if err := c.Add(ctx, append(append([][]byte{}, k[0], k[0], k[0]), one...)); err != nil {
		t.Fatal(err)
	}
	check := func(step string, keys [][]byte, want bool) {
		t.Helper()
		got, err := c.Contains(ctx, keys)
		if err != nil || got[0] != want {
			t.Errorf("%s: Contains(%q) = %v, %v; want %v", step, keys[0], got, err, want)
		}
	}
	if got, _ := c.Delete(ctx, one); !got[0] {
		t.Errorf("Delete(once) = false, want true")
	}
	check("after Delete", one, false)
	if got, _ := c.Delete(ctx, one); got[0] {
		t.Errorf("second Delete(once) = true, want false")
	}
	if got, _ := c.Delete(ctx, k); !got[0] {
		t.Errorf("Delete(thrice) = false, want true")
	}
	check("thrice-added key after one Delete", k, true)
	if got, _ := c.Forget(ctx, k); !got[0] {
		t.Errorf("Forget(thrice) = false, want true")
	}
	check("after Forget", k, false)
	if got, _ := c.Forget(ctx, k); got[0] {
		t.Errorf("second Forget = true, want false")
	}
	if n, _ := c.Count(ctx); n != 0 {
		t.Errorf("Count = %d, want 0", n)
	}
	// A forgotten key is new again.
	if got, _ := c.TestAndAdd(ctx, k); !got[0] {
		t.Errorf("TestAndAdd after Forget = false, want true")
	}
}

// TestCuckooDeleteFalsePositiveTrap shows the trap the documentation warns
// of: deleting (or forgetting) a key that was never added but is a false
// positive removes the fingerprint of the key it collides with, which then
// reads as absent. A small fingerprint makes the collision easy to find.
func TestCuckooDeleteFalsePositiveTrap(t *testing.T) {
	for _, op := range []string{"Delete", "Forget"} {
		t.Run(op, func(t *testing.T) {
			ctx := context.Background()
			c := newTestCuckoo(t, CuckooOptions{Growth: Growth{InitialCapacity: 200, TargetFPP: 0.5}, MaxLayers: 1})
			added := cuckooKeys("added", 0, 150)
			if res, err := c.TestAndAdd(ctx, added); err != nil || numTrue(res) == 0 {
				t.Fatalf("TestAndAdd: %v", err)
			}
			var stored [][]byte
			res, _ := c.Contains(ctx, added)
			for i, ok := range res {
				if ok {
					stored = append(stored, added[i])
				}
			}
			// Find a never-added key that reads present.
			var ghost []byte
			for i := 0; ghost == nil && i < 100000; i++ {
				k := fmt.Appendf(nil, "https://ghost.example/%d", i)
				if got, _ := c.Contains(ctx, [][]byte{k}); got[0] {
					ghost = k
				}
			}
			if ghost == nil {
				t.Fatal("no false positive among 100000 keys at a 50% target rate")
			}
			var removed []bool
			if op == "Delete" {
				removed, _ = c.Delete(ctx, [][]byte{ghost})
			} else {
				removed, _ = c.Forget(ctx, [][]byte{ghost})
			}
			if !removed[0] {
				t.Fatalf("%s(false positive) = false, want true (membership cannot tell it apart)", op)
			}
			got, _ := c.Contains(ctx, stored)
			if lost := len(stored) - numTrue(got); lost < 1 {
				t.Errorf("%s of a false positive: %d added keys read absent, want ≥ 1 (the trap)", op, lost)
			}
		})
	}
}

// TestCuckooTooManyCopies: the same key added more than 2b times cannot be
// stored (both its buckets hold only its fingerprint); the filter says so
// rather than growing a layer per 2b copies.
func TestCuckooTooManyCopies(t *testing.T) {
	for _, c := range []struct {
		b         int
		maxLayers int
	}{{4, 1}, {4, 0}, {2, 0}, {1, 0}} {
		t.Run(fmt.Sprintf("b=%d,maxLayers=%d", c.b, c.maxLayers), func(t *testing.T) {
			ctx := context.Background()
			f := newTestCuckoo(t, CuckooOptions{Growth: Growth{InitialCapacity: 1 << 12, TargetFPP: 0.01}, BucketSize: c.b, MaxLayers: c.maxLayers})
			k := []byte("https://same.example/")
			h := HashKey(k)
			tb := f.layers[0]
			fp := cuckooFingerprint(h, tb.f)
			i1 := cuckooIndex(h, tb.buckets)
			limit := 2 * c.b
			if cuckooAltIndex(i1, fp, tb.buckets) == i1 {
				limit = c.b
			}
			for i := range limit {
				if err := f.Add(ctx, [][]byte{k}); err != nil {
					t.Fatalf("Add copy %d of %d: %v", i+1, limit, err)
				}
			}
			err := f.Add(ctx, [][]byte{k, []byte("https://other.example/")})
			var be *BatchError
			if !errors.As(err, &be) || !errors.Is(err, ErrTooManyCopies) || fmt.Sprint(be.Keys) != "[0]" {
				t.Fatalf("Add copy %d = %v, want *BatchError{Keys: [0]} wrapping ErrTooManyCopies", limit+1, err)
			}
			if st, _ := f.Stats(ctx); len(st.Layers) != 1 || st.Items != uint64(limit)+1 {
				t.Errorf("after the refused copy: %d layers, %d items; want 1 layer, %d items (the other key stored)", len(st.Layers), st.Items, limit+1)
			}
		})
	}
}

// TestCuckooFull fills a filter that may not grow: it reaches the load the
// paper reports for b = 4 (about 95%), then reports ErrFull for the keys it
// cannot store, and the undone evictions lose no key already stored.
func TestCuckooFull(t *testing.T) {
	ctx := context.Background()
	c := newTestCuckoo(t, CuckooOptions{Growth: Growth{InitialCapacity: 1 << 14, TargetFPP: 0.001}, MaxLayers: 1})
	keys := cuckooKeys("full", 0, 1<<15)
	res, err := c.TestAndAdd(ctx, keys)
	var be *BatchError
	if !errors.As(err, &be) || !errors.Is(err, ErrFull) {
		t.Fatalf("TestAndAdd over capacity: err = %v, want *BatchError wrapping ErrFull", err)
	}
	failed := map[int]bool{}
	for _, i := range be.Keys {
		failed[i] = true
		if res[i] {
			t.Fatalf("key %d is listed as not stored but reported new", i)
		}
	}
	st, _ := c.Stats(ctx)
	if load := st.Layers[0].Fill; load < 0.93 {
		t.Errorf("load when full = %.3f, want ≥ 0.93 (Fan et al.: ~0.95 for b = 4)", load)
	}
	t.Logf("full at load %.4f with %d items; %d keys refused", st.Layers[0].Fill, st.Items, len(be.Keys))
	var stored [][]byte
	for i, k := range keys {
		if res[i] {
			stored = append(stored, k)
		} else if !failed[i] {
			// Reported not new: a false positive of the keys before it.
			continue
		}
	}
	if uint64(len(stored)) != st.Items {
		t.Errorf("%d keys reported new, Stats.Items = %d", len(stored), st.Items)
	}
	got, _ := c.Contains(ctx, stored)
	if n := numTrue(got); n != len(stored) {
		t.Errorf("%d of %d stored keys read present after failed insertions, want all", n, len(stored))
	}
}

// TestCuckooGrowthFPP measures the false-positive rate on keys never inserted
// at 1×, 10× and 50× the initial capacity: it stays within the target
// (4-sigma binomial margin), and within 4 sigma of the rate Stats estimates,
// while the fingerprints of later layers grow longer. (A cuckoo filter that
// keeps its fingerprint size as it expands, like RedisBloom's, would have
// about as many times the rate as it has layers.)
func TestCuckooGrowthFPP(t *testing.T) {
	const (
		capacity = 2000
		queries  = 400000
	)
	for _, target := range []float64{0.01, 0.001} {
		t.Run(fmt.Sprint(target), func(t *testing.T) {
			ctx := context.Background()
			c := newTestCuckoo(t, CuckooOptions{Growth: Growth{InitialCapacity: capacity, TargetFPP: target}})
			absent := cuckooKeys("never", 0, queries)
			added, stored := 0, 0
			for _, mult := range []int{1, 10, 50} {
				n := mult*capacity - added
				res, err := c.TestAndAdd(ctx, cuckooKeys("inserted", added, n))
				if err != nil {
					t.Fatal(err)
				}
				added += n
				stored += numTrue(res)
				st, _ := c.Stats(ctx)
				if st.Items != uint64(stored) {
					t.Fatalf("Stats.Items = %d after %d keys", st.Items, added)
				}
				got, _ := c.Contains(ctx, absent)
				fp := numTrue(got)
				rate := float64(fp) / queries
				if limit := binomialCountUpper(queries, target); float64(fp) > limit {
					t.Errorf("%d×: %d false positives in %d (%.5f), want ≤ %.0f (target %v + 4σ)", mult, fp, queries, rate, limit, target)
				}
				est := st.EstimatedFPP
				if lo, hi := float64(queries)*est-4*math.Sqrt(queries*est)-1, binomialCountUpper(queries, est); float64(fp) < lo || float64(fp) > hi {
					t.Errorf("%d×: %d false positives, Stats estimate %v predicts %.0f (4σ: [%.0f, %.0f])", mult, fp, est, est*queries, lo, hi)
				}
				var sum float64
				bitsList := make([]int, len(st.Layers))
				for i, l := range st.Layers {
					sum += l.FPP
					bitsList[i] = l.Hashes
					if i > 0 && l.Hashes < st.Layers[i-1].Hashes {
						t.Errorf("layer %d has %d-bit fingerprints, shorter than layer %d's %d", i, l.Hashes, i-1, st.Layers[i-1].Hashes)
					}
				}
				if sum > target {
					t.Errorf("%d×: worst-case layer rates sum to %v > target %v", mult, sum, target)
				}
				t.Logf("%d× (%d items): measured FPP %.5f, estimated %.5f, bound %.5f, target %v; %d layers, fingerprint bits %v, %.2f bytes/item",
					mult, st.Items, rate, est, sum, target, len(st.Layers), bitsList, st.BytesPerItem)
			}
		})
	}
}

// TestCuckooConcurrent runs several goroutines adding overlapping keys: each
// key is reported new by at most one of them, and by exactly one unless it
// was a false positive before the race (checked with Contains first). With
// 32-bit fingerprints no key can become a false positive during the race
// (probability ~1e-9 per lookup), so that exception is exact.
func TestCuckooConcurrent(t *testing.T) {
	for _, fbits := range []int{0, 32} {
		t.Run(fmt.Sprintf("fingerprint bits %d", fbits), func(t *testing.T) {
			ctx := context.Background()
			c := newTestCuckoo(t, CuckooOptions{Growth: Growth{InitialCapacity: 1000, TargetFPP: 0.01}, FingerprintBits: fbits})
			if _, err := c.TestAndAdd(ctx, cuckooKeys("before", 0, 3000)); err != nil {
				t.Fatal(err)
			}
			keys := cuckooKeys("race", 0, 20000)
			before, _ := c.Contains(ctx, keys)
			const workers = 4
			wins := raceNewOnce(t, repeat(c, workers), keys, 100, 7, func(c *Cuckoo, _ [][]byte) error {
				_, err := c.Stats(ctx)
				return err
			})
			never := 0
			for i, n := range wins {
				switch {
				case n > 1:
					t.Fatalf("key %q reported new %d times", keys[i], n)
				case n == 0 && !before[i]:
					if fbits == 32 {
						t.Fatalf("key %q never reported new and was not a false positive before the race", keys[i])
					}
					never++ // became a false positive of keys added during the race
				}
			}
			if limit := binomialCountUpper(len(keys), 0.01); float64(never) > limit {
				t.Errorf("%d keys never reported new, want ≤ %.0f (false positives at the 1%% target, 4σ)", never, limit)
			}
		})
	}
}

func TestCuckooClosed(t *testing.T) {
	ctx := context.Background()
	c := newTestCuckoo(t, CuckooOptions{Growth: Growth{InitialCapacity: 100}})
	for range 2 {
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	k := [][]byte{[]byte("k")}
	_, e1 := c.TestAndAdd(ctx, k)
	_, e2 := c.Contains(ctx, k)
	_, e3 := c.Delete(ctx, k)
	_, e4 := c.Forget(ctx, k)
	e5 := c.Add(ctx, k)
	_, e6 := c.Stats(ctx)
	_, e7 := c.Count(ctx)
	for i, err := range []error{e1, e2, e3, e4, e5, e6, e7} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("call %d after Close: %v, want ErrClosed", i+1, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := newTestCuckoo(t, CuckooOptions{}).TestAndAdd(cctx, k); !errors.Is(err, context.Canceled) {
		t.Errorf("TestAndAdd with a canceled context: %v, want context.Canceled", err)
	}
}

func TestCuckooStats(t *testing.T) {
	ctx := context.Background()
	c := newTestCuckoo(t, CuckooOptions{Growth: Growth{InitialCapacity: 1000, TargetFPP: 0.01}, Policy: "p1"})
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// 1000/(4·0.95) → 512 buckets; fpp_0 = 0.002 → 12 bits.
	want := LayerStats{Capacity: 1000, Bits: 512 * 4 * 12, Hashes: 12, FPP: cuckooWorstFPP(4, 12)}
	if st.Kind != "cuckoo" || len(st.Layers) != 1 || st.Layers[0] != want || st.MemoryBytes != 512*4*12/8 || st.NextLayerCapacity != 2000 || st.EstimatedFPP != 0 {
		t.Errorf("Stats of an empty filter = %+v, want one layer %+v", st, want)
	}
	if _, err := c.TestAndAdd(ctx, cuckooKeys("stats", 0, 1024)); err != nil {
		t.Fatal(err)
	}
	st, _ = c.Stats(ctx)
	l := st.Layers[0]
	if l.Fill != float64(l.Items)/2048 || st.BytesPerItem != float64(st.MemoryBytes)/float64(st.Items) || l.EstimatedFPP <= 0 || l.EstimatedFPP > l.FPP {
		t.Errorf("Stats after 1024 keys = %+v", st)
	}
}

// TestCuckooLayerBudget: a filter that may grow gives its first layer the
// first share of the target, P(1 − r); one that may not gives it all of P.
func TestCuckooLayerBudget(t *testing.T) {
	for _, c := range []struct {
		maxLayers int
		fpp       float64
		wantBits  int
	}{
		{0, 0.01, 12},  // 0.002 → 8/4095
		{1, 0.01, 10},  // 0.01 → 8/1023
		{0, 0.001, 16}, // 0.0002 → 8/65535
		{1, 0.001, 13}, // 0.001 → 8/8191
		{2, 0.001, 16},
	} {
		c0 := newTestCuckoo(t, CuckooOptions{Growth: Growth{InitialCapacity: 1000, TargetFPP: c.fpp}, MaxLayers: c.maxLayers})
		st, _ := c0.Stats(context.Background())
		if got := st.Layers[0].Hashes; got != c.wantBits {
			t.Errorf("MaxLayers %d, target %v: layer 0 has %d-bit fingerprints, want %d", c.maxLayers, c.fpp, got, c.wantBits)
		}
	}
}
