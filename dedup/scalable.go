package dedup

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ScalableOptions configures a ScalableBloom. The zero value means a first
// layer of 1,000,000 items, a total false-positive bound of 0.001, the
// default growth factor and tightening, and no policy. Loading a snapshot
// (LoadScalableBloom) instead adopts the stored value of every Growth field
// left zero; a field given must equal the stored one.
type ScalableOptions struct {
	// Growth is the layer schedule. Zero InitialCapacity means 1,000,000 and
	// zero TargetFPP 0.001; zero Factor and Tightening mean
	// DefaultGrowthFactor and DefaultTightening.
	Growth Growth
	// Policy is stored with the filter: the version of the normalize policy
	// whose canonical URLs it holds.
	Policy string
	// Force opens a snapshot stored under another Policy, adopting this one.
	Force bool

	// stripes overrides stripeCount (benchmarks only).
	stripes int
}

func (o ScalableOptions) withDefaults() ScalableOptions {
	if o.Growth.InitialCapacity == 0 {
		o.Growth.InitialCapacity = defaultCapacity
	}
	if o.Growth.TargetFPP == 0 {
		o.Growth.TargetFPP = defaultTargetFPP
	}
	o.Growth = o.Growth.WithDefaults()
	if o.stripes <= 0 {
		o.stripes = stripeCount
	}
	return o
}

// ScalableBloom is an in-memory Bloom filter that grows without bound while
// keeping its false-positive rate below Growth.TargetFPP: a stack of Bloom
// layers (each in Guava's layout) sized by the Growth schedule. New keys go
// to the newest layer; when it holds its capacity a larger, tighter layer is
// added. A key is present if any layer holds it. It is the filter of
// Sieve's single-machine embedded mode; Save and LoadScalableBloom
// persist it.
//
// A ScalableBloom is safe for concurrent use, and an absent key is reported
// new to exactly one caller (adds of one key are serialized by a key-striped
// lock). Concurrent callers can each add one key past a layer's capacity
// before the layer is replaced, so a layer may exceed its capacity by fewer
// items than there are concurrent callers.
type ScalableBloom struct {
	// mu is held shared by every operation, and exclusively to add a layer,
	// to take a snapshot's copy, and to close. Layers other than the newest
	// are never written again.
	mu     sync.RWMutex
	closed bool
	layers []*layer
	growth Growth
	policy string
	locks  stripes
}

// NewScalableBloom returns an empty filter with its first layer allocated.
func NewScalableBloom(opts ScalableOptions) (*ScalableBloom, error) {
	opts = opts.withDefaults()
	if err := opts.Growth.Validate(); err != nil {
		return nil, err
	}
	lp, err := opts.Growth.Layer(0)
	if err != nil {
		return nil, err
	}
	l, err := newLayer(lp.Capacity, lp.FPP)
	if err != nil {
		return nil, err
	}
	return newScalable([]*layer{l}, opts), nil
}

func newScalable(layers []*layer, opts ScalableOptions) *ScalableBloom {
	return &ScalableBloom{layers: layers, growth: opts.Growth, policy: opts.Policy, locks: newStripes(opts.stripes)}
}

// TestAndAdd adds keys and reports, per key, whether it was new: absent from
// every layer and setting at least one bit of the newest. Within a batch and
// across concurrent callers, an absent key is reported new once. When the
// newest layer is full, TestAndAdd adds a layer and continues. If no
// further layer can be sized (64 layers, or one beyond 2³¹ words), it
// returns the results with a *BatchError wrapping ErrFull that lists the
// keys it could not add; the keys before them were handled.
func (s *ScalableBloom) TestAndAdd(ctx context.Context, keys [][]byte) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]bool, len(keys))
	for i := 0; i < len(keys); {
		n, err := s.addUntilFull(keys[i:], out[i:])
		if err != nil {
			return nil, err
		}
		i += n
		if i == len(keys) {
			break
		}
		if err := s.grow(); errors.Is(err, ErrClosed) {
			return nil, err
		} else if err != nil {
			be := &BatchError{Err: fmt.Errorf("%w: cannot add a layer: %w", ErrFull, err)}
			for j := i; j < len(keys); j++ {
				be.Keys = append(be.Keys, j)
			}
			return out, be
		}
	}
	return out, nil
}

// addUntilFull adds keys to the current layers until the newest is full,
// and returns how many it handled.
func (s *ScalableBloom) addUntilFull(keys [][]byte, out []bool) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	active := s.layers[len(s.layers)-1]
	older := s.layers[:len(s.layers)-1]
	var ones uint64
	defer func() { active.ones.Add(ones) }()
	for i, key := range keys {
		h := HashKey(key)
		mu := s.locks.of(h)
		mu.Lock()
		seen := false
		for j := len(older) - 1; j >= 0 && !seen; j-- {
			seen = older[j].contains(h)
		}
		if !seen && active.items.Load() >= uint64(active.capacity) {
			// Full: a key it holds is answered, a new one needs a layer.
			if seen = active.contains(h); !seen {
				mu.Unlock()
				return i, nil
			}
		}
		var n uint64
		if !seen {
			n = active.add(h)
		}
		if n > 0 {
			active.items.Add(1)
		}
		mu.Unlock()
		out[i] = n > 0
		ones += n
	}
	return len(keys), nil
}

// grow adds the next layer if the newest is full (another caller may have
// grown it already).
func (s *ScalableBloom) grow() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	active := s.layers[len(s.layers)-1]
	if active.items.Load() < uint64(active.capacity) {
		return nil
	}
	lp, err := s.growth.Layer(len(s.layers))
	if err != nil {
		return err
	}
	l, err := newLayer(lp.Capacity, lp.FPP)
	if err != nil {
		return err
	}
	s.layers = append(s.layers, l)
	return nil
}

// Contains reports, per key, whether any layer might hold it. It changes
// nothing.
func (s *ScalableBloom) Contains(ctx context.Context, keys [][]byte) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	out := make([]bool, len(keys))
	for i, key := range keys {
		h := HashKey(key)
		// Newest first: it is the largest and holds the most keys.
		for j := len(s.layers) - 1; j >= 0 && !out[i]; j-- {
			out[i] = s.layers[j].contains(h)
		}
	}
	return out, nil
}

// Stats reports every layer with its fill and estimated rate fill^k, and the
// filter's estimated rate 1 − Π(1 − fill_i^k_i).
func (s *ScalableBloom) Stats(ctx context.Context) (Stats, error) {
	if err := ctx.Err(); err != nil {
		return Stats{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return Stats{}, ErrClosed
	}
	ls := make([]LayerStats, len(s.layers))
	for i, l := range s.layers {
		ls[i] = l.stats()
	}
	var next int64
	if lp, err := s.growth.Layer(len(s.layers)); err == nil {
		next = lp.Capacity
	}
	return newStats(s.growth.TargetFPP, ls, next), nil
}

// Growth returns the filter's schedule, with defaults filled in.
func (s *ScalableBloom) Growth() Growth { return s.growth }

// Policy returns the normalize policy version stored with the filter.
func (s *ScalableBloom) Policy() string { return s.policy }

// Close releases the filter's layers. Later calls return ErrClosed. Close
// is idempotent and safe to call concurrently with other methods.
func (s *ScalableBloom) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.layers = nil
	return nil
}

// Save writes every layer, the schedule and the policy to path
// atomically (temporary file, fsync, rename; see the format in
// snapshot.go). Only the newest layer is copied under the lock, since older
// ones are never written again; the file is written while other calls
// proceed, and holds whole batches only.
func (s *ScalableBloom) Save(ctx context.Context, path string) error {
	snap, err := s.snapshot()
	if err != nil {
		return err
	}
	return writeSnapshot(ctx, path, snap)
}

// snapshot returns the filter's content for a snapshot file: the older
// layers shared (never written again) and a copy of the newest.
func (s *ScalableBloom) snapshot() (*snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	layers := append([]*layer(nil), s.layers...)
	layers[len(layers)-1] = layers[len(layers)-1].clone()
	return &snapshot{kind: snapshotKindScalable, policy: s.policy, growth: s.growth, layers: layers}, nil
}

// LoadScalableBloom restores a filter written by ScalableBloom.Save. A
// zero field of opts.Growth takes the stored schedule's value (it is
// adopted, never a mismatch); a field given must equal the stored one, and
// opts.Policy the stored policy, or LoadScalableBloom returns a
// *MismatchError naming the field and both values; with opts.Force a
// different policy is accepted and opts.Policy replaces the stored one. A truncated or damaged
// file gives ErrCorrupt, a missing one an error matching
// fs.ErrNotExist.
func LoadScalableBloom(ctx context.Context, path string, opts ScalableOptions) (*ScalableBloom, error) {
	if err := opts.withDefaults().Growth.Validate(); err != nil {
		return nil, err
	}
	s, err := readSnapshot(ctx, path, snapshotKindScalable)
	if err != nil {
		return nil, err
	}
	return scalableFromSnapshot(path, s, opts)
}

// scalableFromSnapshot makes a filter of a decoded snapshot if it was stored
// with opts, as LoadScalableBloom describes.
func scalableFromSnapshot(path string, s *snapshot, opts ScalableOptions) (*ScalableBloom, error) {
	opts.Growth = opts.Growth.adopt(s.growth)
	opts = opts.withDefaults()
	stored, given := s.growth, opts.Growth
	mismatch := func(field string, a, b any) error {
		return &MismatchError{Name: path, Field: field, Stored: fmt.Sprint(a), Given: fmt.Sprint(b)}
	}
	switch {
	case stored.InitialCapacity != given.InitialCapacity:
		return nil, mismatch("initial_capacity", stored.InitialCapacity, given.InitialCapacity)
	case stored.TargetFPP != given.TargetFPP:
		return nil, mismatch("target_fpp", stored.TargetFPP, given.TargetFPP)
	case stored.Factor != given.Factor:
		return nil, mismatch("growth_factor", stored.Factor, given.Factor)
	case stored.Tightening != given.Tightening:
		return nil, mismatch("tightening", stored.Tightening, given.Tightening)
	case s.policy != opts.Policy && !opts.Force:
		return nil, mismatch("policy", fmt.Sprintf("%q", s.policy), fmt.Sprintf("%q", opts.Policy))
	}
	return newScalable(s.layers, opts), nil
}
