package fingerprint

import (
	"encoding/binary"
	"math/bits"
)

// sum64 is murmur3.Sum64: the first 64 bits of MurmurHash3 x64_128 with
// seed 0. It is that function written out for short inputs (a shingle is a
// few dozen bytes), without its digest's interface calls. TestSum64
// compares the two.
func sum64(data []byte) uint64 {
	const c1, c2 = 0x87c37b91114253d5, 0x4cf5ad432745937f
	var h1, h2 uint64
	n := len(data)
	p := data
	for len(p) >= 16 {
		k1 := binary.LittleEndian.Uint64(p)
		k2 := binary.LittleEndian.Uint64(p[8:])
		h1 ^= bits.RotateLeft64(k1*c1, 31) * c2
		h1 = bits.RotateLeft64(h1, 27) + h2
		h1 = h1*5 + 0x52dce729
		h2 ^= bits.RotateLeft64(k2*c2, 33) * c1
		h2 = bits.RotateLeft64(h2, 31) + h1
		h2 = h2*5 + 0x38495ab5
		p = p[16:]
	}
	if len(p) > 8 {
		h2 ^= bits.RotateLeft64(load(p[8:])*c2, 33) * c1
		p = p[:8]
	}
	if len(p) > 0 {
		h1 ^= bits.RotateLeft64(load(p)*c1, 31) * c2
	}
	h1 ^= uint64(n)
	h2 ^= uint64(n)
	h1 += h2
	h2 += h1
	return fmix64(h1) + fmix64(h2)
}

func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// load reads 1 to 8 bytes little-endian, in two loads that may overlap
// (the bytes they share land on the same bits).
func load(p []byte) uint64 {
	switch n := len(p); {
	case n == 8:
		return binary.LittleEndian.Uint64(p)
	case n >= 4:
		return uint64(binary.LittleEndian.Uint32(p)) | uint64(binary.LittleEndian.Uint32(p[n-4:]))<<(8*(n-4))
	case n >= 2:
		return uint64(binary.LittleEndian.Uint16(p)) | uint64(binary.LittleEndian.Uint16(p[n-2:]))<<(8*(n-2))
	}
	return uint64(p[0])
}
