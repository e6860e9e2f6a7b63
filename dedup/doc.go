// Package dedup decides whether a canonical URL has been seen before. Its
// filters answer "new" or "seen" for batches of keys with a bounded rate of
// false "seen" answers (a new URL wrongly skipped) and no false "new" ones.
//
// Every filter kind has the same four methods: TestAndAdd (per key, true if
// it was new and is now added; a key repeated in a batch is new at most
// once), Contains, Stats and Close. The kinds are:
//
//   - Bloom: a fixed-size in-memory Bloom filter, bit-for-bit compatible
//     with Guava's BloomFilter (WriteGuava, ReadGuava).
//   - ScalableBloom: in-memory layers of Bloom filters that grow without
//     bound; the filter of the single-machine embedded mode, persisted with
//     Save and LoadScalableBloom.
//   - RedisBloom: the same scalable layers kept in Redis and sharded across
//     keys (its documentation describes the sharding), shared by many
//     workers; each process keeps a local mirror of the bits it can prove
//     set, which answers repeated keys without Redis.
//   - Cuckoo and RedisCuckoo: growing cuckoo filters, in memory and in
//     Redis, which can also forget keys.
//
// # Sizing a Bloom filter
//
// A Bloom filter of m bits with k hash functions that holds n keys answers
// a key it does not hold with "seen" with probability about
// (1 − e^(−kn/m))^k. For n expected keys and a target rate p this package
// sizes every layer exactly as Guava does (OptimalBits, OptimalHashes):
//
//	m = floor(−n · ln p / (ln 2)²)
//	k = max(1, round(m/n · ln 2))
//
// k = m/n·ln 2 minimizes the rate for a given m, where it equals 2^(−k) =
// p; rounding k to an integer costs at most about 1% over p. The bits are
// held in ceil(m/64) 64-bit words, and all 64·ceil(m/64) of them are
// addressed. For n = 500 and p = 0.003, m = 6045, k = 8, and the array has
// 95 words (6080 bits).
//
// # Hashing: Guava's MURMUR128_MITZ_64
//
// A key (the UTF-8 bytes of the URL, as Guava's Funnels.stringFunnel(UTF_8)
// feeds them) is hashed once with murmur3 x64_128, seed 0 (HashKey). H1 is
// the digest's first eight bytes read little-endian, H2 the last eight. Its
// k bit positions are, by Kirsch–Mitzenmacher double hashing,
//
//	index_i = ((H1 + i·H2) mod 2⁶⁴ & (2⁶³ − 1)) mod bitSize,   i = 0 … k−1
//
// and bit j lives in word j/64 at bit j%64 (Hash.BitIndex). These choices
// are a storage format: they are pinned by tests, and a Bloom reads and
// writes the stream of Guava's BloomFilter.writeTo, answering every query as
// Guava does.
//
// # Growing: scalable filters
//
// A fixed filter past its n degrades quickly, and a crawl's n is unknown.
// The growing filters (ScalableBloom, RedisBloom, Cuckoo, RedisCuckoo)
// follow one schedule, Growth, after Almeida et al., "Scalable Bloom Filters" (2007):
// layer i (from 0) is sized for
//
//	capacity_i = ceil(C0 · s^i)       (InitialCapacity, Factor s ≥ 1)
//	fpp_i      = P · (1 − r) · r^i     (TargetFPP P, Tightening r in (0, 1))
//
// New keys go to the newest layer; a Bloom layer is full when it holds
// capacity_i keys, a cuckoo layer when an insertion finds no free slot within
// its kick budget, and then a new layer is added. Older layers are only read. A key is seen if any layer holds it,
// so a key never added is wrongly seen with probability
//
//	1 − Π (1 − fpp_i)  ≤  Σ fpp_i  =  P · (1 − r) · Σ r^i  <  P
//
// however many layers there are: the layers' error budgets form a geometric
// series that sums to P. (A Bloom layer's real rate at capacity is its
// fpp_i within about 1%, from rounding k; the unspent budget P·r^L of the
// layers not yet added absorbs that up to L ≈ 20 layers with the default r,
// 2²⁰ times the first layer's capacity with the default s.) Growing by s
// keeps the number of layers, and so the cost of a lookup, logarithmic in the number of keys; each new layer needs
// about ln(1/r)/(ln 2)² ≈ 0.46 more bits per key (r = 0.8) than the last for
// its tighter rate. For a Bloom layer, Stats reports its fill (the fraction
// of bits set) and its current rate fill^k, and for the filter
// 1 − Π(1 − fill_i^k_i).
//
// # Persistence and policy
//
// Filters store their parameters with their bits, plus an opaque policy
// string: the version of the normalize policy that produced the canonical
// URLs they hold. Reopening a stored filter with other parameters, or another
// policy without Force, fails with a *MismatchError, since other parameters
// would address other bits and another policy other keys.
package dedup
