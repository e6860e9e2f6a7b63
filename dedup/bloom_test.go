package dedup

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
)

// Both in-memory Bloom filters satisfy the filter contract.
var (
	_ filterContract = (*Bloom)(nil)
	_ filterContract = (*ScalableBloom)(nil)
)

// testKeys returns n distinct URL-like keys with the given prefix.
func testKeys(prefix string, n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "https://%s.example.com/page/%d", prefix, i)
	}
	return keys
}

func newTestBloom(tb testing.TB, opts BloomOptions) *Bloom {
	tb.Helper()
	b, err := NewBloom(opts)
	if err != nil {
		tb.Fatalf("NewBloom(%+v): %v", opts, err)
	}
	tb.Cleanup(func() { b.Close() })
	return b
}

// TestBloomTestAndAdd checks the filter contract's sequential semantics.
func TestBloomTestAndAdd(t *testing.T) {
	ctx := context.Background()
	b := newTestBloom(t, BloomOptions{Capacity: 1000, FPP: 1e-6})
	steps := []struct {
		keys []string
		want []bool
	}{
		{nil, []bool{}},
		{[]string{"a", "b"}, []bool{true, true}},
		{[]string{"a", "c"}, []bool{false, true}},
		// A key repeated within one batch is new at most once.
		{[]string{"d", "d", "a", "d"}, []bool{true, false, false, false}},
		// The empty key is a key like any other.
		{[]string{"", ""}, []bool{true, false}},
	}
	for i, s := range steps {
		got, err := b.TestAndAdd(ctx, byteKeys(s.keys))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Errorf("step %d: TestAndAdd(%q) = %v, want %v", i, s.keys, got, s.want)
		}
	}
	got, err := b.Contains(ctx, byteKeys([]string{"a", "b", "c", "d", "", "e"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, true, true, true, true, false}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Contains = %v, want %v", got, want)
	}
	st, err := b.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Kind != "bloom" || st.Items != 5 || st.Layers[0].Items != 5 || st.TargetFPP != 1e-6 || st.NextLayerCapacity != 0 {
		t.Errorf("Stats = %+v, want kind bloom, 5 items, target 1e-6", st)
	}
	// The empty key hashes to H1 = H2 = 0 and sets a single bit, so the
	// bit-count estimate sees about 4 keys' worth of bits.
	if n := b.ApproximateItems(); n < 4 || n > 5 {
		t.Errorf("ApproximateItems() = %d, want 4 or 5", n)
	}
}

// TestBloomConcurrentNewOnce races goroutines adding the same keys in
// different orders: each key must be reported new exactly once. The filter
// is sized so a false positive among these keys is very unlikely. Run with
// -race.
func TestBloomConcurrentNewOnce(t *testing.T) {
	ctx := context.Background()
	const workers, n, batch = 8, 5000, 100
	b := newTestBloom(t, BloomOptions{Capacity: 100_000, FPP: 1e-9})
	keys := testKeys("race", n)
	// Readers run alongside the writers.
	counts := raceNewOnce(t, repeat(b, workers), keys, batch, 7, func(b *Bloom, kb [][]byte) error {
		_, err := b.Contains(ctx, kb)
		return err
	})
	// Racing callers must never both see a key as new. A key may be seen
	// as new by none only as a false positive, whose rate here is tiny:
	// 1e-9 by design, but Guava's double hashing gives a rare key only a
	// few distinct bits in some array sizes (H2 nearly a multiple of the
	// size), so allow a few, and no more.
	lost := checkNewOnce(t, keys, counts, 2)
	st, _ := b.Stats(ctx)
	if st.Items != uint64(n-lost) {
		t.Errorf("Stats().Items = %d, want %d", st.Items, n-lost)
	}
}

// binomialUpper returns p + 4σ of a rate measured over trials Bernoulli(p)
// samples: a correct filter exceeds it with probability about 3e-5.
func binomialUpper(p float64, trials int) float64 {
	return p + 4*math.Sqrt(p*(1-p)/float64(trials))
}

// TestBloomFalsePositiveRate fills filters to capacity and measures the
// false-positive rate on keys never inserted against the design rate plus a
// 4-sigma binomial margin.
func TestBloomFalsePositiveRate(t *testing.T) {
	ctx := context.Background()
	const probes = 200_000
	for _, tt := range []struct {
		n int64
		p float64
	}{{10_000, 0.01}, {20_000, 0.001}, {5_000, 0.05}} {
		b := newTestBloom(t, BloomOptions{Capacity: tt.n, FPP: tt.p})
		if _, err := b.TestAndAdd(ctx, testKeys("in", int(tt.n))); err != nil {
			t.Fatal(err)
		}
		got, err := b.Contains(ctx, testKeys("out", probes))
		if err != nil {
			t.Fatal(err)
		}
		fp := 0
		for _, ok := range got {
			if ok {
				fp++
			}
		}
		rate := float64(fp) / probes
		if limit := binomialUpper(tt.p, probes); rate > limit {
			t.Errorf("n=%d p=%v: false-positive rate %v > %v (p + 4σ over %d probes)", tt.n, tt.p, rate, limit, probes)
		}
		st, _ := b.Stats(ctx)
		t.Logf("n=%d p=%v: measured %.5f, estimated %.5f, items %d", tt.n, tt.p, rate, st.EstimatedFPP, st.Items)
	}
}

func TestBloomClose(t *testing.T) {
	ctx := context.Background()
	b, err := NewBloom(BloomOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := b.TestAndAdd(ctx, byteKeys([]string{"a"})); !errors.Is(err, ErrClosed) {
		t.Errorf("TestAndAdd after Close = %v, want ErrClosed", err)
	}
	if _, err := b.Contains(ctx, byteKeys([]string{"a"})); !errors.Is(err, ErrClosed) {
		t.Errorf("Contains after Close = %v, want ErrClosed", err)
	}
	if _, err := b.Stats(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Stats after Close = %v, want ErrClosed", err)
	}
	if err := b.WriteGuava(new(bytesDiscard)); !errors.Is(err, ErrClosed) {
		t.Errorf("WriteGuava after Close = %v, want ErrClosed", err)
	}
}

type bytesDiscard struct{}

func (bytesDiscard) Write(p []byte) (int, error) { return len(p), nil }

func TestBloomCanceledContext(t *testing.T) {
	b := newTestBloom(t, BloomOptions{Capacity: 100, FPP: 0.01})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.TestAndAdd(ctx, byteKeys([]string{"a"})); !errors.Is(err, context.Canceled) {
		t.Errorf("TestAndAdd(canceled) = %v, want context.Canceled", err)
	}
	got, err := b.Contains(context.Background(), byteKeys([]string{"a"}))
	if err != nil || got[0] {
		t.Errorf("Contains after a canceled add = %v, %v; want [false]", got, err)
	}
}

func TestBloomDefaults(t *testing.T) {
	b := newTestBloom(t, BloomOptions{})
	st, err := b.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Guava's sizing of 1,000,000 items at 0.001: m = 14377587, k = 10.
	if l := st.Layers[0]; l.Capacity != 1_000_000 || l.FPP != 0.001 || l.Hashes != 10 || l.Bits != 224650*64 {
		t.Errorf("default layer = %+v, want capacity 1e6, fpp 0.001, k 10, 224650 words", l)
	}
}
