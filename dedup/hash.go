package dedup

import (
	"errors"
	"fmt"
	"math"

	"github.com/spaolacci/murmur3"
)

// ErrInvalidParams is returned (wrapped with the offending field) when a filter
// is sized or opened with parameters that cannot describe a filter.
var ErrInvalidParams = errors.New("dedup: invalid parameters")

// Hash is the 128-bit murmur3 (x64 variant, seed 0) hash of a key, split as
// Guava splits it: H1 is the low eight bytes of the digest read little-endian,
// H2 the high eight. Every filter in this package derives its positions from
// it, so it is part of the storage format: changing it invalidates every
// persisted filter.
type Hash struct {
	H1, H2 uint64
}

// HashKey hashes key with murmur3 x64_128, seed 0, exactly as Guava's
// Hashing.murmur3_128() does over the same bytes (for a Java String funneled
// with Funnels.stringFunnel(UTF_8), the bytes are its UTF-8 encoding).
func HashKey(key []byte) Hash {
	h1, h2 := murmur3.Sum128(key)
	return Hash{H1: h1, H2: h2}
}

// BitIndex returns the i-th (0-based) bit position of h in a bit array of
// bitSize bits, by Kirsch–Mitzenmacher double hashing laid out exactly as
// Guava's MURMUR128_MITZ_64 strategy:
//
//	combined = H1 + i·H2          (64-bit wrap-around)
//	index    = (combined & MaxInt64) mod bitSize
//
// bitSize is the length of the addressable array (m rounded up to a multiple
// of 64 in Guava's layout), and must be positive.
func (h Hash) BitIndex(i int, bitSize uint64) uint64 {
	combined := h.H1 + uint64(i)*h.H2
	return (combined & math.MaxInt64) % bitSize
}

// OptimalBits returns Guava's bit count for n expected insertions at
// false-positive probability p:
//
//	m = floor(−n · ln p / (ln 2)²)
//
// n must be positive and p in the open interval (0, 1).
func OptimalBits(n int64, p float64) (int64, error) {
	if n <= 0 {
		return 0, fmt.Errorf("%w: capacity %d must be positive", ErrInvalidParams, n)
	}
	if !(p > 0 && p < 1) { // also rejects NaN
		return 0, fmt.Errorf("%w: false-positive rate %v must be in (0, 1)", ErrInvalidParams, p)
	}
	m := -float64(n) * math.Log(p) / (math.Ln2 * math.Ln2)
	if m >= math.MaxInt64/2 {
		return 0, fmt.Errorf("%w: capacity %d at rate %v needs too many bits", ErrInvalidParams, n, p)
	}
	return int64(m), nil
}

// OptimalHashes returns Guava's hash-function count for n insertions into m
// bits, k = max(1, round(m/n · ln 2)).
func OptimalHashes(n, m int64) int {
	k := int(math.Round(float64(m) / float64(n) * math.Ln2))
	return max(1, k)
}

// wordsFor returns the number of 64-bit words that hold m bits (Guava's
// LockFreeBitArray rounds the same way).
func wordsFor(m int64) int64 {
	return (m + 63) / 64
}
