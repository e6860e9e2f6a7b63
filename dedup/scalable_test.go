package dedup

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"
)

func newTestScalable(tb testing.TB, opts ScalableOptions) *ScalableBloom {
	tb.Helper()
	s, err := NewScalableBloom(opts)
	if err != nil {
		tb.Fatalf("NewScalableBloom(%+v): %v", opts, err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// TestScalableFalsePositiveRate grows filters to 100 times their first
// layer's capacity and, at 1×, 10× and 100×, measures the false-positive
// rate on 100,000 keys never inserted. The bound is the target plus a
// 4-sigma binomial margin (binomialUpper): a filter meeting its target
// fails with probability about 3e-5 per check. It also checks the layers
// follow the schedule and Stats' estimate stays under the target.
func TestScalableBloomFalsePositiveRate(t *testing.T) {
	ctx := context.Background()
	const probes = 100_000
	tests := []Growth{
		{InitialCapacity: 1000, TargetFPP: 0.01},
		{InitialCapacity: 1000, TargetFPP: 0.001, Factor: 4, Tightening: 0.5},
		{InitialCapacity: 1000, TargetFPP: 0.05, Factor: 1.5, Tightening: 0.9},
	}
	for _, g := range tests {
		t.Run(fmt.Sprintf("P=%v,s=%v,r=%v", g.TargetFPP, g.Factor, g.Tightening), func(t *testing.T) {
			s := newTestScalable(t, ScalableOptions{Growth: g})
			g = s.Growth()
			inserted := 0
			for round, mult := range []int{1, 10, 100} {
				keys := testKeys("in", mult*int(g.InitialCapacity))[inserted:]
				if _, err := s.TestAndAdd(ctx, keys); err != nil {
					t.Fatal(err)
				}
				inserted += len(keys)

				got, err := s.Contains(ctx, testKeys(fmt.Sprintf("out%d", round), probes))
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
				limit := binomialUpper(g.TargetFPP, probes)
				st, err := s.Stats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%3d×: %d layers, measured %.5f, estimated %.5f, target %v", mult, len(st.Layers), rate, st.EstimatedFPP, g.TargetFPP)
				if rate > limit {
					t.Errorf("%d×: false-positive rate %v > %v (target + 4σ over %d probes)", mult, rate, limit, probes)
				}
				if st.EstimatedFPP > g.TargetFPP {
					t.Errorf("%d×: Stats().EstimatedFPP = %v > target %v", mult, st.EstimatedFPP, g.TargetFPP)
				}
				checkLayers(t, g, st, inserted)
			}
		})
	}
}

// checkLayers checks st's layers follow g: layer i sized by g.Layer(i), all
// but the newest full, none over capacity (one caller), and just enough of
// them for the keys admitted.
func checkLayers(tb testing.TB, g Growth, st Stats, inserted int) {
	tb.Helper()
	var sum uint64
	for i, l := range st.Layers {
		lp, err := g.Layer(i)
		if err != nil {
			tb.Fatal(err)
		}
		if l.Capacity != uint64(lp.Capacity) || l.FPP != lp.FPP {
			tb.Errorf("layer %d sized %d at %v, schedule says %d at %v", i, l.Capacity, l.FPP, lp.Capacity, lp.FPP)
		}
		if l.Items > l.Capacity || (i < len(st.Layers)-1 && l.Items != l.Capacity) {
			tb.Errorf("layer %d holds %d of %d items", i, l.Items, l.Capacity)
		}
		// A layer's rate at capacity exceeds its design rate by up to 1.1%
		// from rounding k to an integer, plus the noise of its fill.
		if l.EstimatedFPP > l.FPP*1.1 {
			tb.Errorf("layer %d estimated rate %v above its design rate %v", i, l.EstimatedFPP, l.FPP)
		}
		sum += l.Items
	}
	// Each insert is a false positive (and not admitted) with probability
	// below the target: admitted ≥ inserted − (P·inserted + 4σ).
	n := float64(inserted)
	low := n - (g.TargetFPP*n + 4*math.Sqrt(n*g.TargetFPP))
	if sum != st.Items || st.Items > uint64(inserted) || float64(st.Items) < low {
		tb.Errorf("Stats().Items = %d (layers sum %d), want in [%.0f, %d]", st.Items, sum, low, inserted)
	}
	lp, _ := g.Layer(len(st.Layers))
	if st.NextLayerCapacity != uint64(lp.Capacity) {
		tb.Errorf("NextLayerCapacity = %d, want %d", st.NextLayerCapacity, lp.Capacity)
	}
}

// TestScalableConcurrentNewOnce races writers through several layer
// additions: each key must be reported new exactly once, but for rare false
// positives. Run with -race.
func TestScalableBloomConcurrentNewOnce(t *testing.T) {
	ctx := context.Background()
	const workers, n, batch = 8, 6000, 50
	s := newTestScalable(t, ScalableOptions{Growth: Growth{InitialCapacity: 200, TargetFPP: 1e-7}})
	keys := testKeys("srace", n)
	// Stats and snapshots run alongside.
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 5 {
			if _, err := s.Stats(ctx); err != nil {
				t.Error(err)
			}
			if err := s.Save(ctx, filepath.Join(t.TempDir(), "s.snap")); err != nil {
				t.Error(err)
			}
		}
	})
	counts := raceNewOnce(t, repeat(s, workers), keys, batch, 11, func(s *ScalableBloom, kb [][]byte) error {
		_, err := s.Contains(ctx, kb)
		return err
	})
	wg.Wait()
	// Racing callers must never both see a key as new. A key may be seen
	// as new by none only as a false positive, whose rate here is tiny:
	// 1e-7 by design, but Guava's double hashing gives a rare key only a
	// few distinct bits in some array sizes (H2 nearly a multiple of the
	// size), so allow a few, and no more.
	lost := checkNewOnce(t, keys, counts, 2)
	st, _ := s.Stats(ctx)
	if st.Items != uint64(n-lost) {
		t.Errorf("Stats().Items = %d, want %d", st.Items, n-lost)
	}
	// 200+400+800+1600 < 6000 ≤ 200+…+3200: five layers, each over its
	// capacity by less than the number of writers.
	if len(st.Layers) != 5 {
		t.Errorf("%d layers, want 5", len(st.Layers))
	}
	for i, l := range st.Layers {
		if l.Items > l.Capacity+workers {
			t.Errorf("layer %d holds %d items, capacity %d + %d writers", i, l.Items, l.Capacity, workers)
		}
	}
}

func TestScalableBloomSnapshotRoundTrip(t *testing.T) {
	ctx := context.Background()
	opts := ScalableOptions{Growth: Growth{InitialCapacity: 500, TargetFPP: 0.01, Factor: 3, Tightening: 0.7}, Policy: "p7"}
	s := newTestScalable(t, opts)
	keys := testKeys("ssnap", 10_000)
	if _, err := s.TestAndAdd(ctx, keys[:6000]); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "s.snap")
	if err := s.Save(ctx, path); err != nil {
		t.Fatal(err)
	}
	r, err := LoadScalableBloom(ctx, path, opts)
	if err != nil {
		t.Fatalf("LoadScalableBloom: %v", err)
	}
	defer r.Close()
	before, _ := s.Stats(ctx)
	after, _ := r.Stats(ctx)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("Stats after restore = %+v\nwant %+v", after, before)
	}
	if len(after.Layers) < 3 {
		t.Errorf("%d layers, want the test to cover several", len(after.Layers))
	}
	got, err := r.Contains(ctx, keys[:6000])
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range got {
		if !ok {
			t.Fatalf("Contains(%q) = false after restore", keys[i])
		}
	}
	// Both continue identically: the same keys are new in each.
	a, err := s.TestAndAdd(ctx, keys[4000:])
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.TestAndAdd(ctx, keys[4000:])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Error("restored filter answers TestAndAdd differently from the original")
	}
	for i, isNew := range b[:2000] {
		if isNew {
			t.Fatalf("TestAndAdd(%q) = new after restore, was added before", keys[4000+i])
		}
	}
}

func TestLoadScalableBloomMismatch(t *testing.T) {
	ctx := context.Background()
	g := Growth{InitialCapacity: 1000, TargetFPP: 0.01}
	s := newTestScalable(t, ScalableOptions{Growth: g, Policy: "v1"})
	path := filepath.Join(t.TempDir(), "s.snap")
	if err := s.Save(ctx, path); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		opts  ScalableOptions
		field string // "" = opens
	}{
		{ScalableOptions{Growth: g, Policy: "v1"}, ""},
		// Explicit defaults equal zero values.
		{ScalableOptions{Growth: Growth{InitialCapacity: 1000, TargetFPP: 0.01, Factor: 2, Tightening: 0.8}, Policy: "v1"}, ""},
		{ScalableOptions{Growth: Growth{InitialCapacity: 2000, TargetFPP: 0.01}, Policy: "v1"}, "initial_capacity"},
		{ScalableOptions{Growth: Growth{InitialCapacity: 1000, TargetFPP: 0.001}, Policy: "v1"}, "target_fpp"},
		{ScalableOptions{Growth: Growth{InitialCapacity: 1000, TargetFPP: 0.01, Factor: 4}, Policy: "v1"}, "growth_factor"},
		{ScalableOptions{Growth: Growth{InitialCapacity: 1000, TargetFPP: 0.01, Tightening: 0.5}, Policy: "v1"}, "tightening"},
		// Zero fields adopt the stored schedule.
		{ScalableOptions{Policy: "v1"}, ""},
		{ScalableOptions{Growth: Growth{TargetFPP: 0.01}, Policy: "v1"}, ""},
		{ScalableOptions{Growth: Growth{InitialCapacity: 2000}, Policy: "v1"}, "initial_capacity"},
		{ScalableOptions{Growth: g, Policy: "v2"}, "policy"},
		{ScalableOptions{Growth: g}, "policy"},
		{ScalableOptions{Growth: g, Policy: "v2", Force: true}, ""},
		// Force is for the policy only.
		{ScalableOptions{Growth: Growth{InitialCapacity: 1000, TargetFPP: 0.02}, Policy: "v1", Force: true}, "target_fpp"},
	}
	for _, tt := range tests {
		r, err := LoadScalableBloom(ctx, path, tt.opts)
		if tt.field == "" {
			if err != nil {
				t.Errorf("LoadScalableBloom(%+v): %v", tt.opts, err)
				continue
			}
			if r.Policy() != tt.opts.Policy {
				t.Errorf("LoadScalableBloom(%+v).Policy() = %q, want %q", tt.opts, r.Policy(), tt.opts.Policy)
			}
			r.Close()
			continue
		}
		var me *MismatchError
		if !errors.As(err, &me) || me.Field != tt.field || !errors.Is(err, ErrMismatch) {
			t.Errorf("LoadScalableBloom(%+v) = %v, want *MismatchError on %s", tt.opts, err, tt.field)
		}
	}
	// Invalid options are refused before the file is read.
	if _, err := LoadScalableBloom(ctx, path, ScalableOptions{Growth: Growth{InitialCapacity: -1}}); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("LoadScalableBloom(invalid) = %v, want ErrInvalidParams", err)
	}
	// A Bloom snapshot is not a scalable one.
	b := newTestBloom(t, BloomOptions{Capacity: 10, FPP: 0.1})
	if err := b.Save(ctx, path); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadScalableBloom(ctx, path, ScalableOptions{Growth: g, Policy: "v1"}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("LoadScalableBloom(bloom snapshot) = %v, want ErrCorrupt", err)
	}
}

func TestNewScalableBloomOptions(t *testing.T) {
	s := newTestScalable(t, ScalableOptions{})
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Defaults: C0 = 1e6, P = 0.001, r = 0.8, so fpp_0 = P(1 − r) = 0.0002.
	want, _ := s.Growth().Layer(0)
	if l := st.Layers[0]; len(st.Layers) != 1 || l.Capacity != 1_000_000 || l.FPP != want.FPP || math.Abs(l.FPP-0.0002) > 1e-12 || st.TargetFPP != 0.001 || st.NextLayerCapacity != 2_000_000 {
		t.Errorf("default Stats = %+v", st)
	}
	for _, g := range []Growth{
		{InitialCapacity: -1, TargetFPP: 0.01},
		{InitialCapacity: 10, TargetFPP: 1.5},
		{InitialCapacity: 10, TargetFPP: 0.01, Factor: 0.5},
		{InitialCapacity: 10, TargetFPP: 0.01, Tightening: 1},
		{InitialCapacity: 1 << 40, TargetFPP: 1e-12}, // first layer beyond 2^31 words
	} {
		if s, err := NewScalableBloom(ScalableOptions{Growth: g}); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("NewScalableBloom(%+v) = %v, %v; want ErrInvalidParams", g, s, err)
		}
	}
}

func TestScalableBloomClose(t *testing.T) {
	ctx := context.Background()
	s, err := NewScalableBloom(ScalableOptions{Growth: Growth{InitialCapacity: 10, TargetFPP: 0.01}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	keys := byteKeys([]string{"a"})
	if _, err := s.TestAndAdd(ctx, keys); !errors.Is(err, ErrClosed) {
		t.Errorf("TestAndAdd after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Contains(ctx, keys); !errors.Is(err, ErrClosed) {
		t.Errorf("Contains after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Stats(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Stats after Close = %v, want ErrClosed", err)
	}
	if err := s.Save(ctx, filepath.Join(t.TempDir(), "x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Save after Close = %v, want ErrClosed", err)
	}
}

// TestScalableFull drives a filter to its last layer (Factor 1 keeps every
// layer at one item, so 64 layers fill quickly): the keys it cannot add are
// listed in a *BatchError wrapping ErrFull, and the others are handled.
func TestScalableBloomFull(t *testing.T) {
	ctx := context.Background()
	s := newTestScalable(t, ScalableOptions{Growth: Growth{InitialCapacity: 1, TargetFPP: 0.5, Factor: 1, Tightening: 0.5}})
	keys := testKeys("full", 200)
	got, err := s.TestAndAdd(ctx, keys)
	var be *BatchError
	if !errors.As(err, &be) || !errors.Is(err, ErrFull) {
		t.Fatalf("TestAndAdd past the last layer = %v, want a *BatchError wrapping ErrFull", err)
	}
	first := be.Keys[0]
	for i, k := range be.Keys {
		if k != first+i || got[k] {
			t.Fatalf("BatchError.Keys = %v, want the contiguous tail of the batch, reported not new", be.Keys)
		}
	}
	if be.Keys[len(be.Keys)-1] != len(keys)-1 {
		t.Errorf("BatchError.Keys ends at %d, want %d", be.Keys[len(be.Keys)-1], len(keys)-1)
	}
	st, _ := s.Stats(ctx)
	if len(st.Layers) != maxLayers || st.Items != uint64(maxLayers) || st.NextLayerCapacity != 0 {
		t.Errorf("full filter: %d layers, %d items, next %d; want %d layers of one item, next 0", len(st.Layers), st.Items, st.NextLayerCapacity, maxLayers)
	}
	added := 0
	for _, isNew := range got[:first] {
		if isNew {
			added++
		}
	}
	if added != maxLayers {
		t.Errorf("%d keys reported new before the filter filled, want %d", added, maxLayers)
	}
	// Keys already present are still answered.
	again, err := s.TestAndAdd(ctx, keys[:1])
	if err != nil || again[0] {
		t.Errorf("TestAndAdd of a held key on a full filter = %v, %v; want [false], nil", again, err)
	}
}
