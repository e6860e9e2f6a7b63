package dedup

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
)

// ErrClosed is returned by a filter's methods after its Close.
var ErrClosed = errors.New("dedup: filter closed")

// Defaults for the sizing fields of BloomOptions and ScalableOptions left zero.
const (
	defaultCapacity  = 1_000_000
	defaultTargetFPP = 0.001
)

// maxLayerWords bounds one in-memory bit array to 2³¹−1 64-bit words
// (16 GiB, 2³⁷ bits), the most Guava's int-indexed LockFreeBitArray and its
// writeTo stream can describe. A larger request is refused with
// ErrInvalidParams instead of failing inside the allocator.
const maxLayerWords = math.MaxInt32

// layer is one Bloom bit array in Guava's layout: bit j lives in word j/64 at
// bit j%64, the array has bitSize = 64·len(words) addressable bits, and a key
// sets the k bits Hash.BitIndex(0..k−1, bitSize). Words are read and written
// with atomic operations, so concurrent adds and lookups are safe; deciding
// which of two concurrent adds of one key was first is the caller's job.
type layer struct {
	capacity int64   // items the layer was sized for
	fpp      float64 // design false-positive rate at capacity
	k        int
	bitSize  uint64
	words    []uint64
	ones     atomic.Uint64 // bits set
	items    atomic.Uint64 // keys admitted as new
}

// layerSize is Guava's sizing of one bit array.
type layerSize struct {
	bits  int64 // m
	words int   // ceil(m / 64)
	k     int
}

// newLayerParams sizes a bit array for capacity items at rate fpp with
// Guava's formulas, refusing sizes Guava would refuse (no bits) or that do
// not fit maxLayerWords.
func newLayerParams(capacity int64, fpp float64) (layerSize, error) {
	m, err := OptimalBits(capacity, fpp)
	if err != nil {
		return layerSize{}, err
	}
	if m < 1 {
		return layerSize{}, fmt.Errorf("%w: capacity %d at rate %v needs no bits", ErrInvalidParams, capacity, fpp)
	}
	w := wordsFor(m)
	if w > maxLayerWords {
		return layerSize{}, fmt.Errorf("%w: capacity %d at rate %v needs %d words, more than %d", ErrInvalidParams, capacity, fpp, w, maxLayerWords)
	}
	return layerSize{bits: m, words: int(w), k: OptimalHashes(capacity, m)}, nil
}

// newLayer returns an empty layer for capacity items at rate fpp.
func newLayer(capacity int64, fpp float64) (*layer, error) {
	sz, err := newLayerParams(capacity, fpp)
	if err != nil {
		return nil, err
	}
	return &layer{
		capacity: capacity,
		fpp:      fpp,
		k:        sz.k,
		bitSize:  uint64(sz.words) * 64,
		words:    make([]uint64, sz.words),
	}, nil
}

// clone returns a copy of l. The caller must keep writers out.
func (l *layer) clone() *layer {
	c := &layer{capacity: l.capacity, fpp: l.fpp, k: l.k, bitSize: l.bitSize, words: append([]uint64(nil), l.words...)}
	c.ones.Store(l.ones.Load())
	c.items.Store(l.items.Load())
	return c
}

// contains reports whether all k bits of h are set.
func (l *layer) contains(h Hash) bool {
	for i := range l.k {
		j := h.BitIndex(i, l.bitSize)
		if atomic.LoadUint64(&l.words[j>>6])&(1<<(j&63)) == 0 {
			return false
		}
	}
	return true
}

// add sets the k bits of h and returns how many of them were clear before,
// as Guava's put does (a key is new iff that is non-zero). It does not
// update ones or items.
func (l *layer) add(h Hash) uint64 {
	var flipped uint64
	for i := range l.k {
		j := h.BitIndex(i, l.bitSize)
		mask := uint64(1) << (j & 63)
		w := &l.words[j>>6]
		if atomic.LoadUint64(w)&mask != 0 {
			continue // already set: skip the locked write
		}
		if atomic.OrUint64(w, mask)&mask == 0 {
			flipped++
		}
	}
	return flipped
}

// fill returns the fraction of bits set.
func (l *layer) fill() float64 {
	return float64(l.ones.Load()) / float64(l.bitSize)
}

// estimatedFPP returns Guava's expectedFpp: fill^k.
func (l *layer) estimatedFPP() float64 {
	return math.Pow(l.fill(), float64(l.k))
}

// approximateItems returns Guava's approximateElementCount:
// round(−ln(1 − fill) · bitSize / k), saturating when every bit is set.
func (l *layer) approximateItems() uint64 {
	x := -math.Log1p(-l.fill()) * float64(l.bitSize) / float64(l.k)
	if math.IsInf(x, 0) || x >= math.MaxUint64 {
		return math.MaxUint64
	}
	return uint64(math.Floor(x + 0.5))
}

// countOnes recomputes ones from the words (after an import or restore).
func (l *layer) countOnes() {
	var n uint64
	for _, w := range l.words {
		n += uint64(bits.OnesCount64(w))
	}
	l.ones.Store(n)
}

func (l *layer) stats() LayerStats {
	return LayerStats{
		Capacity:     uint64(l.capacity),
		Items:        l.items.Load(),
		Bits:         l.bitSize,
		Hashes:       l.k,
		FPP:          l.fpp,
		Fill:         l.fill(),
		EstimatedFPP: l.estimatedFPP(),
	}
}

// stripeCount is the number of key-striped locks that make a concurrent
// TestAndAdd of one key report it new exactly once (see BenchmarkBloomParallel
// for one lock against 256).
const stripeCount = 256

// stripes serializes operations on the same key: a key always maps to the
// same mutex, so two callers adding it cannot both see bits they flipped.
// Different keys rarely share a mutex; their bits are merged with atomic ORs.
type stripes struct {
	mu []paddedMutex
}

// paddedMutex keeps each mutex on its own cache line.
type paddedMutex struct {
	sync.Mutex
	_ [64 - 8]byte
}

func newStripes(n int) stripes { return stripes{mu: make([]paddedMutex, n)} }

func (s stripes) of(h Hash) *sync.Mutex { return &s.mu[h.H2%uint64(len(s.mu))].Mutex }

// BloomOptions configures a fixed-size Bloom filter. The zero value means
// 1,000,000 items at a false-positive rate of 0.001, with no policy.
type BloomOptions struct {
	// Capacity is the number of insertions the filter is sized for (Guava's
	// expectedInsertions); 0 means 1,000,000.
	Capacity int64
	// FPP is the false-positive rate at Capacity, in (0, 1); 0 means 0.001.
	FPP float64
	// Policy is stored with the filter: the version of the normalize policy
	// whose canonical URLs it holds.
	Policy string
	// Force opens a snapshot stored under another Policy, adopting this one.
	Force bool

	// stripes overrides stripeCount (benchmarks only).
	stripes int
}

func (o BloomOptions) withDefaults() BloomOptions {
	if o.Capacity == 0 {
		o.Capacity = defaultCapacity
	}
	if o.FPP == 0 {
		o.FPP = defaultTargetFPP
	}
	if o.stripes <= 0 {
		o.stripes = stripeCount
	}
	return o
}

// Bloom is a fixed-size in-memory Bloom filter, bit-for-bit compatible with
// Guava's BloomFilter over Funnels.stringFunnel(UTF_8) with the
// MURMUR128_MITZ_64 strategy: the same keys set the same bits, and
// WriteGuava and ReadGuava exchange filters with Java.
//
// A Bloom is safe for concurrent use. Bits are set with atomic word ORs (as
// Guava's LockFreeBitArray does), and adds of one key are serialized by a
// key-striped lock, so a key that was absent is reported new to exactly one
// caller. It does not grow: past its capacity its false-positive rate rises
// above the design rate (ScalableBloom grows instead).
type Bloom struct {
	// mu is held shared by every operation and exclusively by Close and by
	// the copy a snapshot takes, so a snapshot sees no half-applied batch.
	mu     sync.RWMutex
	closed bool
	l      *layer
	locks  stripes
	policy string
}

// NewBloom returns an empty filter sized by opts with Guava's formulas.
func NewBloom(opts BloomOptions) (*Bloom, error) {
	opts = opts.withDefaults()
	l, err := newLayer(opts.Capacity, opts.FPP)
	if err != nil {
		return nil, err
	}
	return newBloomFromLayer(l, opts), nil
}

func newBloomFromLayer(l *layer, opts BloomOptions) *Bloom {
	return &Bloom{l: l, locks: newStripes(opts.withDefaults().stripes), policy: opts.Policy}
}

// TestAndAdd adds keys and reports, per key, whether it was new: true when
// adding it set at least one bit (Guava's put returning true). Within a
// batch and across concurrent callers, an absent key is reported new once.
// A false positive reports a new key as already present.
func (b *Bloom) TestAndAdd(ctx context.Context, keys [][]byte) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, ErrClosed
	}
	out := make([]bool, len(keys))
	var items, ones uint64
	for i, key := range keys {
		h := HashKey(key)
		mu := b.locks.of(h)
		mu.Lock()
		n := b.l.add(h)
		mu.Unlock()
		if n > 0 {
			out[i] = true
			items++
			ones += n
		}
	}
	b.l.items.Add(items)
	b.l.ones.Add(ones)
	return out, nil
}

// Contains reports, per key, whether the filter might hold it (Guava's
// mightContain). It changes nothing.
func (b *Bloom) Contains(ctx context.Context, keys [][]byte) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, ErrClosed
	}
	out := make([]bool, len(keys))
	for i, key := range keys {
		out[i] = b.l.contains(HashKey(key))
	}
	return out, nil
}

// Stats reports the filter's single layer. EstimatedFPP is Guava's
// expectedFpp, (bits set / bit size)^k.
func (b *Bloom) Stats(ctx context.Context) (Stats, error) {
	if err := ctx.Err(); err != nil {
		return Stats{}, err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return Stats{}, ErrClosed
	}
	ls := b.l.stats()
	return newStats(b.l.fpp, []LayerStats{ls}, 0), nil
}

// ApproximateItems estimates how many distinct keys were added from the
// fraction of bits set, as Guava's approximateElementCount does. Unlike
// Stats.Items it is meaningful for a filter imported with ReadGuava, whose
// stream carries no count.
func (b *Bloom) ApproximateItems() uint64 {
	return b.l.approximateItems()
}

// Policy returns the normalize policy version stored with the filter.
func (b *Bloom) Policy() string { return b.policy }

// Close releases the filter's bits. Later calls return ErrClosed. Close is
// idempotent and safe to call concurrently with other methods.
func (b *Bloom) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.l.words = nil
	return nil
}

// freeze returns a copy of the filter's layer and its policy, taken while no
// batch is in flight.
func (b *Bloom) freeze() (*layer, string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, "", ErrClosed
	}
	return b.l.clone(), b.policy, nil
}

// newStats sums layer stats into a Stats: EstimatedFPP is 1 − Π(1 − fpp_i).
func newStats(target float64, layers []LayerStats, next int64) Stats {
	s := Stats{Kind: "bloom", TargetFPP: target, Layers: layers, NextLayerCapacity: uint64(next)}
	pass := 1.0
	for _, l := range layers {
		s.Items += l.Items
		s.MemoryBytes += l.Bits / 8
		pass *= 1 - l.EstimatedFPP
	}
	s.EstimatedFPP = 1 - pass
	if s.Items > 0 {
		s.BytesPerItem = float64(s.MemoryBytes) / float64(s.Items)
	}
	return s
}
