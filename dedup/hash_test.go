package dedup

import (
	"errors"
	"math"
	"testing"
)

// TestOptimalSizing pins Guava's sizing (BloomFilter.optimalNumOfBits and
// optimalNumOfHashFunctions): a persisted filter's layout depends on it.
func TestOptimalSizing(t *testing.T) {
	tests := []struct {
		n     int64
		p     float64
		m     int64
		k     int
		words int64
	}{
		// The Guava 31.1 reference filter in testdata/guava: k is 8,
		// not the 5 one early design note claimed.
		{n: 500, p: 0.003, m: 6045, k: 8, words: 95},
		{n: 1000, p: 0.01, m: 9585, k: 7, words: 150},
		// Guava's default fpp (0.03).
		{n: 1_000_000, p: 0.03, m: 7298440, k: 5, words: 114039},
		{n: 1_000_000, p: 0.001, m: 14377587, k: 10, words: 224650},
		// Layer 0 of the default schedule for C0 = 1000, P = 0.001.
		{n: 1000, p: 0.0002, m: 17727, k: 12, words: 277},
		{n: 100_000_000, p: 1e-6, m: 2875517513, k: 20, words: 44929962},
		// Tiny filters: k is clamped to at least 1.
		{n: 1, p: 0.5, m: 1, k: 1, words: 1},
		{n: 10, p: 0.9, m: 2, k: 1, words: 1},
	}
	for _, tt := range tests {
		m, err := OptimalBits(tt.n, tt.p)
		if err != nil {
			t.Fatalf("OptimalBits(%d, %v): %v", tt.n, tt.p, err)
		}
		if m != tt.m {
			t.Errorf("OptimalBits(%d, %v) = %d, want %d", tt.n, tt.p, m, tt.m)
		}
		if k := OptimalHashes(tt.n, m); k != tt.k {
			t.Errorf("OptimalHashes(%d, %d) = %d, want %d", tt.n, m, k, tt.k)
		}
		if w := wordsFor(m); w != tt.words {
			t.Errorf("wordsFor(%d) = %d, want %d", m, w, tt.words)
		}
	}
}

func TestOptimalBitsInvalid(t *testing.T) {
	tests := []struct {
		n int64
		p float64
	}{
		{0, 0.01},
		{-5, 0.01},
		{100, 0},
		{100, 1},
		{100, -0.1},
		{100, 1.5},
		{100, math.NaN()},
		{100, math.Inf(1)},
		{math.MaxInt64, 1e-300}, // too many bits
	}
	for _, tt := range tests {
		if m, err := OptimalBits(tt.n, tt.p); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("OptimalBits(%d, %v) = %d, %v; want ErrInvalidParams", tt.n, tt.p, m, err)
		}
	}
}

// TestNewBloomInvalid checks that every unusable size is an error, never a
// panic or a giant allocation.
func TestNewBloomInvalid(t *testing.T) {
	tests := []BloomOptions{
		{Capacity: -1, FPP: 0.01},
		{Capacity: 100, FPP: 1},
		{Capacity: 100, FPP: -0.5},
		{Capacity: 100, FPP: math.NaN()},
		{Capacity: 1, FPP: 0.9},                // m = 0 bits: Guava refuses it too
		{Capacity: 1 << 40, FPP: 1e-9},         // more than 2^31 words
		{Capacity: math.MaxInt64, FPP: 1e-300}, // overflows m
	}
	for _, o := range tests {
		if b, err := NewBloom(o); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("NewBloom(%+v) = %v, %v; want ErrInvalidParams", o, b, err)
		}
	}
}

// TestHashKeyPinned pins murmur3 x64_128 (seed 0) as Guava's
// Hashing.murmur3_128 splits it, and the MURMUR128_MITZ_64 bit indexes: both
// are a storage format. "hell" and the fox are Guava's own test vectors
// (Murmur3Hash128Test); the URLs pin what Sieve stores.
func TestHashKeyPinned(t *testing.T) {
	tests := []struct {
		key    string
		h1, h2 uint64
		// The first 8 indexes in a 6080-bit array (the reference filter).
		idx [8]uint64
	}{
		{"", 0, 0, [8]uint64{}},
		{"hell", 0x629942693e10f867, 0x92db0b82baeb5347, [8]uint64{2791, 2094, 5749, 5052, 4355, 3658, 2961, 2264}},
		{"hello", 0xcbd8a7b341bd9b02, 0x5b1e906a48ae1d19, [8]uint64{5058, 3931, 2804, 3405, 2278, 1151, 1752, 625}},
		{"The quick brown fox jumps over the lazy dog", 0xe34bbc7bbc071b6c, 0x7a433ca9c49a9347, [8]uint64{1900, 2803, 3706, 4609, 5512, 335, 1238, 2141}},
		{"https://example.com/", 0xb50a9b26c28c349f, 0xa4cb5db2985341bd, [8]uint64{5791, 3420, 1049, 3030, 659, 4368, 269, 3978}},
		{"https://site0.example.com/path/0?q=0", 0xddee9e754f9ee208, 0x8922c7c1eb79d64e, [8]uint64{2632, 4950, 1188, 3506, 4096, 334, 2652, 4970}},
	}
	for _, tt := range tests {
		h := HashKey([]byte(tt.key))
		if h.H1 != tt.h1 || h.H2 != tt.h2 {
			t.Errorf("HashKey(%q) = {%#x, %#x}, want {%#x, %#x}", tt.key, h.H1, h.H2, tt.h1, tt.h2)
		}
		for i, want := range tt.idx {
			if got := h.BitIndex(i, 6080); got != want {
				t.Errorf("HashKey(%q).BitIndex(%d, 6080) = %d, want %d", tt.key, i, got, want)
			}
		}
	}
}

// TestBitIndexSignBit pins Guava's "& Long.MAX_VALUE" (not Math.abs, not an
// unsigned modulus): the combined hash's sign bit is dropped before mod.
func TestBitIndexSignBit(t *testing.T) {
	h := Hash{H1: 1<<63 | 5, H2: 1 << 63}
	tests := []struct {
		i       int
		bitSize uint64
		want    uint64
	}{
		{0, 64, 5},  // 0x8000…05 & MaxInt64 = 5
		{1, 64, 5},  // H1+H2 wraps to 5
		{0, 7, 5},   // 5 mod 7
		{2, 100, 5}, // H1 + 2·H2 = H1 (mod 2^64), sign dropped
	}
	for _, tt := range tests {
		if got := h.BitIndex(tt.i, tt.bitSize); got != tt.want {
			t.Errorf("BitIndex(%d, %d) = %d, want %d", tt.i, tt.bitSize, got, tt.want)
		}
	}
}
