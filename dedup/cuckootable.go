package dedup

import (
	"fmt"
	"math"
	"math/bits"
)

// Cuckoo filter geometry. The values are part of the storage format of both
// the in-memory snapshot and the Redis layout: changing them invalidates every
// persisted cuckoo filter.
const (
	// DefaultCuckooBucketSize is the number of fingerprint slots per bucket
	// (b). With b = 4 a cuckoo filter reaches about 95% load before an
	// insertion fails (Fan et al. 2014, §4).
	DefaultCuckooBucketSize = 4
	// DefaultCuckooMaxKicks bounds the evictions one insertion may make
	// before the layer is declared full.
	DefaultCuckooMaxKicks = 500
	// MinCuckooFingerprintBits and MaxCuckooFingerprintBits bound the
	// fingerprint size f of a layer.
	MinCuckooFingerprintBits = 4
	MaxCuckooFingerprintBits = 32
	// maxCuckooBucketSize bounds b (the Redis script reads a bucket with one
	// BITFIELD call of b GETs).
	maxCuckooBucketSize = 16
	// cuckooSizingLoad is the load a layer is sized to reach at its scheduled
	// capacity: the number of buckets is the smallest power of two with
	// buckets·b·cuckooSizingLoad ≥ capacity.
	cuckooSizingLoad = 0.95
	// maxCuckooBuckets keeps bucket indexes within 32 bits, which is what
	// the Redis script's arithmetic handles exactly.
	maxCuckooBuckets = 1 << 32
)

// cuckooFingerprintBits returns the smallest fingerprint size f ≥ floor whose
// worst-case false-positive rate 2b/(2^f − 1) is at most fpp. A lookup
// compares the fingerprint with at most 2b occupied slots, each holding a
// fingerprint uniform over [1, 2^f − 1], so its false-positive rate is at most
// 1 − (1 − 1/(2^f − 1))^{2b} ≤ 2b/(2^f − 1), whatever the layer's load.
func cuckooFingerprintBits(fpp float64, b, floor int) (int, error) {
	if !(fpp > 0 && fpp < 1) {
		return 0, fmt.Errorf("%w: false-positive rate %v must be in (0, 1)", ErrInvalidParams, fpp)
	}
	f := max(floor, MinCuckooFingerprintBits)
	for ; f <= MaxCuckooFingerprintBits; f++ {
		if cuckooWorstFPP(b, f) <= fpp {
			return f, nil
		}
	}
	return 0, fmt.Errorf("%w: false-positive rate %v needs a fingerprint longer than %d bits", ErrInvalidParams, fpp, MaxCuckooFingerprintBits)
}

// cuckooWorstFPP is the false-positive bound 2b/(2^f − 1) of a layer with
// buckets of b slots and f-bit fingerprints.
func cuckooWorstFPP(b, f int) float64 {
	return 2 * float64(b) / (math.Exp2(float64(f)) - 1)
}

// cuckooLoadFPP estimates the false-positive rate of a layer at the given load
// (fraction of slots used): the 2b slots a lookup reads hold 2b·load
// fingerprints on average, each matching with probability 1/(2^f − 1).
func cuckooLoadFPP(b, f int, load float64) float64 {
	return -math.Expm1(2 * float64(b) * load * math.Log1p(-1/(math.Exp2(float64(f))-1)))
}

// cuckooBuckets returns the number of buckets of a layer scheduled to hold
// capacity items: the smallest power of two with buckets·b·0.95 ≥ capacity.
func cuckooBuckets(capacity int64, b int) (uint64, error) {
	need := math.Ceil(float64(capacity) / (float64(b) * cuckooSizingLoad))
	if !(need >= 1) {
		need = 1
	}
	if need > maxCuckooBuckets {
		return 0, fmt.Errorf("%w: capacity %d needs more than 2^32 buckets", ErrInvalidParams, capacity)
	}
	n := uint64(need)
	if n&(n-1) != 0 {
		n = 1 << bits.Len64(n)
	}
	return n, nil
}

// cuckooFingerprint derives the f-bit fingerprint of a key from the high 53
// bits of H2, 1 + (H2 >> 11) mod (2^f − 1): uniform over [1, 2^f − 1] (to
// within 2^-21), never 0, which marks an empty slot. 53 bits, because the
// Redis script computes the same fingerprint with Lua's doubles, exactly.
func cuckooFingerprint(h Hash, f int) uint32 {
	return uint32(1 + (h.H2>>11)%(uint64(1)<<f-1))
}

// cuckooIndex derives the key's first bucket, i1, from the low bits of H1.
// buckets must be a power of two, at most 2^32 (so only the low 32 bits of
// H1 matter, which is what the Redis script is given).
func cuckooIndex(h Hash, buckets uint64) uint64 {
	return h.H1 & (buckets - 1)
}

// cuckooAltIndex returns the other bucket of a fingerprint stored in bucket
// i (partial-key cuckoo hashing): i ⊕ (fmix32(fp) mod buckets). It is its own
// inverse, so either bucket gives the other without the key.
func cuckooAltIndex(i uint64, fp uint32, buckets uint64) uint64 {
	return i ^ (uint64(fmix32(fp)) & (buckets - 1))
}

// fmix32 is murmur3's 32-bit finalizer, used to spread a fingerprint over
// the bucket index bits. The Redis script computes the same function.
func fmix32(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// cuckooTable is one layer of a cuckoo filter: buckets·b slots of f bits,
// packed little-endian into 64-bit words (slot s occupies bits
// [s·f, (s+1)·f)). It is not safe for concurrent use.
type cuckooTable struct {
	buckets uint64
	b       int
	f       int
	count   uint64 // occupied slots
	words   []uint64
}

func newCuckooTable(buckets uint64, b, f int) *cuckooTable {
	return &cuckooTable{buckets: buckets, b: b, f: f, words: make([]uint64, cuckooWords(buckets, b, f))}
}

// cuckooWords is the number of 64-bit words a table of the given geometry
// occupies.
func cuckooWords(buckets uint64, b, f int) uint64 {
	return (buckets*uint64(b)*uint64(f) + 63) / 64
}

func (t *cuckooTable) slots() uint64 { return t.buckets * uint64(t.b) }

func (t *cuckooTable) get(slot uint64) uint32 {
	pos := slot * uint64(t.f)
	w, off := pos>>6, pos&63
	v := t.words[w] >> off
	if off+uint64(t.f) > 64 {
		v |= t.words[w+1] << (64 - off)
	}
	return uint32(v & (uint64(1)<<t.f - 1))
}

func (t *cuckooTable) set(slot uint64, fp uint32) {
	pos := slot * uint64(t.f)
	w, off := pos>>6, pos&63
	mask := uint64(1)<<t.f - 1
	v := uint64(fp) & mask
	t.words[w] = t.words[w]&^(mask<<off) | v<<off
	if off+uint64(t.f) > 64 {
		sh := 64 - off
		t.words[w+1] = t.words[w+1]&^(mask>>sh) | v>>sh
	}
}

// has reports whether bucket i holds fp.
func (t *cuckooTable) has(i uint64, fp uint32) bool {
	base := i * uint64(t.b)
	for j := range uint64(t.b) {
		if t.get(base+j) == fp {
			return true
		}
	}
	return false
}

// contains reports whether either bucket of the key holds its fingerprint.
func (t *cuckooTable) contains(h Hash) bool {
	fp := cuckooFingerprint(h, t.f)
	i1 := cuckooIndex(h, t.buckets)
	return t.has(i1, fp) || t.has(cuckooAltIndex(i1, fp, t.buckets), fp)
}

// put stores fp in a free slot of bucket i, reporting whether there was one.
func (t *cuckooTable) put(i uint64, fp uint32) bool {
	base := i * uint64(t.b)
	for j := range uint64(t.b) {
		if t.get(base+j) == 0 {
			t.set(base+j, fp)
			t.count++
			return true
		}
	}
	return false
}

// remove clears one slot of bucket i holding fp, reporting whether there was
// one.
func (t *cuckooTable) remove(i uint64, fp uint32) bool {
	base := i * uint64(t.b)
	for j := range uint64(t.b) {
		if t.get(base+j) == fp {
			t.set(base+j, 0)
			t.count--
			return true
		}
	}
	return false
}

// delete removes one copy of the key's fingerprint from either bucket.
func (t *cuckooTable) delete(h Hash) bool {
	fp := cuckooFingerprint(h, t.f)
	i1 := cuckooIndex(h, t.buckets)
	return t.remove(i1, fp) || t.remove(cuckooAltIndex(i1, fp, t.buckets), fp)
}

// saturated reports whether every slot of the key's buckets holds the key's
// own fingerprint, so that no eviction can make room for another copy.
func (t *cuckooTable) saturated(h Hash) bool {
	fp := cuckooFingerprint(h, t.f)
	i1 := cuckooIndex(h, t.buckets)
	for _, i := range []uint64{i1, cuckooAltIndex(i1, fp, t.buckets)} {
		base := i * uint64(t.b)
		for j := range uint64(t.b) {
			if t.get(base+j) != fp {
				return false
			}
		}
	}
	return true
}

// cuckooKick records one eviction so a failed insertion can be undone.
type cuckooKick struct {
	slot uint64
	old  uint32
}

// insert stores the key's fingerprint, evicting and relocating at most
// maxKicks resident fingerprints (a random slot of the current bucket each
// time, as in Fan et al.'s Algorithm 1). If that fails, every eviction is
// undone, so the table is left exactly as it was, and insert reports false.
// path is scratch space, returned for reuse; rnd returns a uniform int in
// [0, n).
func (t *cuckooTable) insert(h Hash, maxKicks int, rnd func(n int) int, path []cuckooKick) (bool, []cuckooKick) {
	fp := cuckooFingerprint(h, t.f)
	i1 := cuckooIndex(h, t.buckets)
	i2 := cuckooAltIndex(i1, fp, t.buckets)
	if t.put(i1, fp) || t.put(i2, fp) {
		return true, path
	}
	i := i1
	if rnd(2) == 1 {
		i = i2
	}
	path = path[:0]
	for range maxKicks {
		slot := i*uint64(t.b) + uint64(rnd(t.b))
		old := t.get(slot)
		t.set(slot, fp)
		path = append(path, cuckooKick{slot: slot, old: old})
		fp = old
		i = cuckooAltIndex(i, fp, t.buckets)
		if t.put(i, fp) {
			return true, path
		}
	}
	for k := len(path) - 1; k >= 0; k-- {
		t.set(path[k].slot, path[k].old)
	}
	return false, path
}
