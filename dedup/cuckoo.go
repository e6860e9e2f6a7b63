package dedup

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
)

var (
	// ErrFull is returned (inside a *BatchError) for keys a filter could
	// not store because its newest layer is full and it may not add another
	// (for a cuckoo filter: CuckooOptions.MaxLayers, or a layer the
	// schedule cannot size).
	ErrFull = errors.New("dedup: filter full")
	// ErrTooManyCopies is returned (inside a *BatchError) by Add for a key
	// already stored 2b times: both of its buckets hold nothing but its
	// fingerprint, so another copy has nowhere to go.
	ErrTooManyCopies = errors.New("dedup: key stored too many times")
)

// BatchError reports the keys of a batch that a filter did not process. The
// results of every other key of the batch are valid (and their effects, such
// as an insertion, happened); the result of a listed key is false and its
// effect did not happen, or, for a Redis filter whose reply was lost, is
// unknown.
type BatchError struct {
	// Keys lists the indexes, ascending, of the keys not processed.
	Keys []int
	// Err is why.
	Err error
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("%v (%d keys of the batch)", e.Err, len(e.Keys))
}

// Unwrap returns the cause.
func (e *BatchError) Unwrap() error { return e.Err }

// CuckooOptions configures a cuckoo filter. The zero value of every field
// means its default when a filter is made; reading a stored one (ReadCuckoo,
// LoadCuckoo) instead adopts the stored value of every field left zero (but
// Policy), and a field given must equal the stored one.
type CuckooOptions struct {
	// Growth is the layer schedule: layer i is sized for Growth.Layer(i)
	// items and gets the fingerprint size that keeps its false-positive
	// rate within Growth.Layer(i).FPP. A zero InitialCapacity means
	// 1,000,000, a zero TargetFPP 0.001 (as for a Bloom filter).
	Growth Growth
	// MaxLayers bounds the number of layers; zero means 64. With 1 the
	// filter never grows (it reports ErrFull instead), and its one layer is
	// sized for the whole TargetFPP rather than the first share of it.
	MaxLayers int
	// BucketSize is the number of slots per bucket, b, in [1, 16]; zero
	// means DefaultCuckooBucketSize.
	BucketSize int
	// FingerprintBits is the smallest fingerprint size in bits, in [4, 32]
	// (8, 12 and 16 are the usual choices). Every layer uses at least this
	// many bits, more where its error budget needs more. Zero means the
	// size is chosen from the error budget alone.
	FingerprintBits int
	// MaxKicks bounds the evictions of one insertion before a layer is
	// declared full; zero means DefaultCuckooMaxKicks. It does not change
	// the stored layout, so a filter may be reopened with another value.
	MaxKicks int
	// Policy is an opaque string stored with the filter (the normalize
	// policy version that filled it).
	Policy string
	// Force accepts a stored filter whose Policy differs from Policy and
	// records Policy from then on.
	Force bool
}

// withDefaults returns o with zero fields set to their defaults.
func (o CuckooOptions) withDefaults() CuckooOptions {
	if o.Growth.InitialCapacity == 0 {
		o.Growth.InitialCapacity = defaultCapacity
	}
	if o.Growth.TargetFPP == 0 {
		o.Growth.TargetFPP = defaultTargetFPP
	}
	o.Growth = o.Growth.WithDefaults()
	if o.MaxLayers == 0 {
		o.MaxLayers = maxLayers
	}
	if o.BucketSize == 0 {
		o.BucketSize = DefaultCuckooBucketSize
	}
	if o.MaxKicks == 0 {
		o.MaxKicks = DefaultCuckooMaxKicks
	}
	return o
}

// validate reports the first field of o (after defaults) that cannot
// describe a filter, and checks that layer 0 can be built.
func (o CuckooOptions) validate() error {
	if err := o.Growth.Validate(); err != nil {
		return err
	}
	switch {
	case o.MaxLayers < 1 || o.MaxLayers > maxLayers:
		return fmt.Errorf("%w: max layers %d must be in [1, %d]", ErrInvalidParams, o.MaxLayers, maxLayers)
	case o.BucketSize < 1 || o.BucketSize > maxCuckooBucketSize:
		return fmt.Errorf("%w: bucket size %d must be in [1, %d]", ErrInvalidParams, o.BucketSize, maxCuckooBucketSize)
	case o.FingerprintBits != 0 && (o.FingerprintBits < MinCuckooFingerprintBits || o.FingerprintBits > MaxCuckooFingerprintBits):
		return fmt.Errorf("%w: fingerprint bits %d must be in [%d, %d]", ErrInvalidParams, o.FingerprintBits, MinCuckooFingerprintBits, MaxCuckooFingerprintBits)
	case o.MaxKicks < 1:
		return fmt.Errorf("%w: max kicks %d must be positive", ErrInvalidParams, o.MaxKicks)
	}
	_, err := o.layer(0)
	return err
}

// cuckooLayerParams sizes one layer of a cuckoo filter.
type cuckooLayerParams struct {
	LayerParams        // the schedule's capacity and error budget
	Buckets     uint64 // a power of two
	Bits        int    // fingerprint size f
}

// layer returns the geometry of layer i. o must have its defaults.
func (o CuckooOptions) layer(i int) (cuckooLayerParams, error) {
	lp, err := o.Growth.Layer(i)
	if err != nil {
		return cuckooLayerParams{}, err
	}
	if o.MaxLayers == 1 {
		lp.FPP = o.Growth.TargetFPP // no later layer needs a share
	}
	nb, err := cuckooBuckets(lp.Capacity, o.BucketSize)
	if err != nil {
		return cuckooLayerParams{}, fmt.Errorf("layer %d: %w", i, err)
	}
	f, err := cuckooFingerprintBits(lp.FPP, o.BucketSize, o.FingerprintBits)
	if err != nil {
		return cuckooLayerParams{}, fmt.Errorf("layer %d: %w", i, err)
	}
	return cuckooLayerParams{LayerParams: lp, Buckets: nb, Bits: f}, nil
}

// Cuckoo is an in-memory cuckoo filter (Fan, Andersen, Kaminsky and
// Mitzenmacher, "Cuckoo Filter: Practically Better Than Bloom", CoNEXT 2014)
// that grows in layers with a bounded false-positive rate and can forget keys.
//
// Each key is hashed once with HashKey. In a layer of 2^k buckets of b slots
// with f-bit fingerprints, the key's fingerprint is 1 + (H2 >> 11) mod
// (2^f − 1) (never 0, which marks an empty slot), its first bucket i1 is the low k bits
// of H1, and its second is i2 = i1 ⊕ (fmix32(fingerprint) mod 2^k) — partial-
// key cuckoo hashing: either bucket gives the other from the fingerprint
// alone, which is what lets an insertion evict a resident fingerprint to its
// other bucket without knowing its key. An insertion that finds both buckets
// full evicts a random resident and relocates it, at most MaxKicks times; if
// that fails the evictions are undone and the layer is full.
//
// A full layer is never overfilled: the filter adds a layer sized by the
// Growth schedule, with capacity C0·s^i and error budget
// fpp_i = P(1 − r)r^i, and a fingerprint long enough that its worst-case
// rate 2b/(2^f − 1) ≤ fpp_i — about log2(1/r) ≈ 0.32 more bits per layer
// with the default r = 0.8, up to 32 bits. A lookup reads every layer, so the
// filter's false-positive rate is at most Σ fpp_i < P however far it grows.
// (RedisBloom's CF keeps the fingerprint size when it expands, so its rate
// grows with every expansion; this filter's does not.)
//
// Keys can be removed, with two traps inherent to cuckoo filters:
//
//   - Delete removes one copy of a key's fingerprint. If the key was never
//     added but its fingerprint matches another key's in one of its buckets (a
//     false positive, probability ≤ P), that other key's fingerprint is
//     removed instead and the other key then reads as absent. Forget checks
//     membership first and removes every matching copy, so a forgotten key
//     reads as absent, but the same false positive still costs the other key.
//     For a crawler that means one URL fetched twice, never one lost.
//   - Add (unlike TestAndAdd) stores duplicates; a key added more than 2b
//     times fills both its buckets with its own fingerprint and cannot be
//     stored again (ErrTooManyCopies).
//
// A Cuckoo is safe for concurrent use: lookups share a read lock, updates
// take the write lock. Its zero value is not usable; call NewCuckoo or
// ReadCuckoo.
type Cuckoo struct {
	opts CuckooOptions // with defaults

	mu      sync.RWMutex
	layers  []*cuckooTable
	deletes uint64
	closed  bool
	rng     *rand.Rand
	path    []cuckooKick // scratch for insert, under mu
}

// NewCuckoo returns an empty cuckoo filter with one layer.
func NewCuckoo(opts CuckooOptions) (*Cuckoo, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	c := newCuckoo(opts)
	if err := c.grow(); err != nil {
		return nil, err
	}
	return c, nil
}

func newCuckoo(opts CuckooOptions) *Cuckoo {
	return &Cuckoo{opts: opts, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
}

// grow adds the next layer. c.mu must be held for writing.
func (c *Cuckoo) grow() error {
	n := len(c.layers)
	if n >= c.opts.MaxLayers {
		return ErrFull
	}
	p, err := c.opts.layer(n)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFull, err)
	}
	c.layers = append(c.layers, newCuckooTable(p.Buckets, c.opts.BucketSize, p.Bits))
	return nil
}

// containsHash reports whether any layer holds the key. c.mu must be held.
func (c *Cuckoo) containsHash(h Hash) bool {
	for _, t := range c.layers {
		if t.contains(h) {
			return true
		}
	}
	return false
}

// insertHash stores the key in the newest layer, adding layers as needed.
// c.mu must be held for writing.
func (c *Cuckoo) insertHash(h Hash) error {
	t := c.layers[len(c.layers)-1]
	var ok bool
	ok, c.path = t.insert(h, c.opts.MaxKicks, c.rng.IntN, c.path)
	if ok {
		return nil
	}
	if t.saturated(h) {
		return ErrTooManyCopies
	}
	if err := c.grow(); err != nil {
		return err
	}
	t = c.layers[len(c.layers)-1]
	// An empty layer takes any fingerprint without eviction.
	ok, c.path = t.insert(h, c.opts.MaxKicks, c.rng.IntN, c.path)
	if !ok {
		return ErrFull
	}
	return nil
}

// lock takes the write lock, failing if the filter is closed or ctx is done.
func (c *Cuckoo) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	return nil
}

func (c *Cuckoo) rlock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// insertBatch runs insert for each key, collecting the keys it could not
// store into a *BatchError (processing goes on: a later key may still be
// stored, or be found present).
func insertBatch(keys [][]byte, out []bool, insert func(i int, h Hash) (bool, error)) error {
	var failed []int
	var cause error
	for i, k := range keys {
		ok, err := insert(i, HashKey(k))
		if err != nil {
			failed = append(failed, i)
			if cause == nil {
				cause = err
			}
			continue
		}
		if out != nil {
			out[i] = ok
		}
	}
	if cause != nil {
		return &BatchError{Keys: failed, Err: cause}
	}
	return nil
}

// TestAndAdd adds each key the filter does not already hold and reports, per
// key, whether it was new. Within one batch a repeated key is new at most
// once. Keys that could not be stored (ErrFull) are reported false and listed
// in the returned *BatchError; the others' results stand.
func (c *Cuckoo) TestAndAdd(ctx context.Context, keys [][]byte) ([]bool, error) {
	if err := c.lock(ctx); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	out := make([]bool, len(keys))
	err := insertBatch(keys, out, func(_ int, h Hash) (bool, error) {
		if c.containsHash(h) {
			return false, nil
		}
		if err := c.insertHash(h); err != nil {
			return false, err
		}
		return true, nil
	})
	return out, err
}

// Add stores every key, even one already present (a cuckoo filter is a
// multiset of fingerprints: a key added twice needs two Deletes). Keys that
// could not be stored (ErrFull, ErrTooManyCopies) are listed in the returned
// *BatchError; the others were stored.
func (c *Cuckoo) Add(ctx context.Context, keys [][]byte) error {
	if err := c.lock(ctx); err != nil {
		return err
	}
	defer c.mu.Unlock()
	return insertBatch(keys, nil, func(_ int, h Hash) (bool, error) {
		return true, c.insertHash(h)
	})
}

// Contains reports, per key, whether the filter holds it: false means the key
// was never added (or was deleted); true may be a false positive, with
// probability at most the target rate.
func (c *Cuckoo) Contains(ctx context.Context, keys [][]byte) ([]bool, error) {
	if err := c.rlock(ctx); err != nil {
		return nil, err
	}
	defer c.mu.RUnlock()
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = c.containsHash(HashKey(k))
	}
	return out, nil
}

// Delete removes one copy of each key's fingerprint, looking in every layer
// (newest first), and reports per key whether one was found. Deleting a key
// that was never added removes another key's fingerprint when it is a false
// positive; see the type's documentation.
func (c *Cuckoo) Delete(ctx context.Context, keys [][]byte) ([]bool, error) {
	if err := c.lock(ctx); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	out := make([]bool, len(keys))
	for i, k := range keys {
		h := HashKey(k)
		for l := len(c.layers) - 1; l >= 0; l-- {
			if c.layers[l].delete(h) {
				out[i] = true
				c.deletes++
				break
			}
		}
	}
	return out, nil
}

// Forget makes each key read as absent: it checks membership and, for a key
// the filter holds, removes every copy of its fingerprint from both of its
// buckets in every layer. It reports per key whether the key was present.
// What it cannot tell apart: a key that was never added but is a false
// positive (probability at most the target rate) is reported present, and
// removing its fingerprint removes that of the key it collides with, which
// then reads as absent and would be admitted as new once more.
func (c *Cuckoo) Forget(ctx context.Context, keys [][]byte) ([]bool, error) {
	if err := c.lock(ctx); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	out := make([]bool, len(keys))
	for i, k := range keys {
		h := HashKey(k)
		if !c.containsHash(h) {
			continue
		}
		out[i] = true
		for _, t := range c.layers {
			for t.delete(h) {
				c.deletes++
			}
		}
	}
	return out, nil
}

// Count returns the number of fingerprints stored (keys added, counting
// duplicates from Add, minus keys deleted).
func (c *Cuckoo) Count(ctx context.Context) (uint64, error) {
	if err := c.rlock(ctx); err != nil {
		return 0, err
	}
	defer c.mu.RUnlock()
	return c.count(), nil
}

func (c *Cuckoo) count() uint64 {
	var n uint64
	for _, t := range c.layers {
		n += t.count
	}
	return n
}

// Stats reports the filter's layers, load and estimated false-positive rate.
// A layer's Capacity is the schedule's, Bits its slots × fingerprint bits,
// Hashes its fingerprint size, Fill its load factor (slots used / slots) and
// FPP its worst-case rate 2b/(2^f − 1).
func (c *Cuckoo) Stats(ctx context.Context) (Stats, error) {
	if err := c.rlock(ctx); err != nil {
		return Stats{}, err
	}
	defer c.mu.RUnlock()
	layers := make([]cuckooLayerStats, len(c.layers))
	for i, t := range c.layers {
		layers[i] = cuckooLayerStats{Buckets: t.buckets, Bits: t.f, Items: t.count}
	}
	return cuckooStats(c.opts, layers, c.deletes, 8*c.words()), nil
}

func (c *Cuckoo) words() uint64 {
	var n uint64
	for _, t := range c.layers {
		n += uint64(len(t.words))
	}
	return n
}

// cuckooLayerStats is what a cuckoo filter knows of one of its layers (for a
// sharded filter, summed over shards).
type cuckooLayerStats struct {
	Buckets uint64
	Bits    int
	Items   uint64
}

// cuckooStats fills Stats for a cuckoo filter with the given options
// (defaults applied) and layers.
func cuckooStats(opts CuckooOptions, layers []cuckooLayerStats, deletes, memory uint64) Stats {
	s := Stats{Kind: "cuckoo", Deletes: deletes, TargetFPP: opts.Growth.TargetFPP, MemoryBytes: memory}
	pass := 1.0
	for i, l := range layers {
		lp, _ := opts.Growth.Layer(i)
		slots := l.Buckets * uint64(opts.BucketSize)
		load := float64(l.Items) / float64(slots)
		est := cuckooLoadFPP(opts.BucketSize, l.Bits, load)
		s.Items += l.Items
		s.Layers = append(s.Layers, LayerStats{
			Capacity:     uint64(lp.Capacity),
			Items:        l.Items,
			Bits:         slots * uint64(l.Bits),
			Hashes:       l.Bits,
			FPP:          cuckooWorstFPP(opts.BucketSize, l.Bits),
			Fill:         load,
			EstimatedFPP: est,
		})
		pass *= 1 - est
	}
	s.EstimatedFPP = 1 - pass
	if s.Items > 0 {
		s.BytesPerItem = float64(s.MemoryBytes) / float64(s.Items)
	}
	if len(layers) < opts.MaxLayers {
		if lp, err := opts.Growth.Layer(len(layers)); err == nil {
			s.NextLayerCapacity = uint64(lp.Capacity)
		}
	}
	return s
}

// Policy returns the normalize policy version stored with the filter.
func (c *Cuckoo) Policy() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.opts.Policy
}

// Close releases the filter; later calls fail with ErrClosed. It is
// idempotent.
func (c *Cuckoo) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.layers = nil
	return nil
}
