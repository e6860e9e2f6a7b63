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
//     keys (its documentation describes the sharding and the protocol),
//     shared by many workers, on plain Redis: one pipelined BITFIELD per
//     shard a batch, no script; each process keeps a local mirror of the
//     bits it can prove set, which answers repeated keys without Redis.
//   - Cuckoo and RedisCuckoo: growing cuckoo filters, in memory and in
//     Redis, which can also forget keys.
//   - Window: a revisit window over any of the growing kinds, in which a
//     key is seen for a while and then new again (see below).
//
// Plan sizes any of them before it is created, with the functions the
// filters size themselves with.
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
// RedisBloom decides "full" without a script: a counter in Redis, bumped in
// the same BITFIELD command that sets a call's bits, freezes layer i at
// cap_i − b_i counted keys, and a call counts at most b_i keys and first
// reads whether the layer is frozen, so at most cap_i keys are ever counted
// into it. Calls already in flight when a layer freezes still set their
// keys' bits there (and add the keys to the next layer too), at most
// MaxWriters − 1 calls of at most b_i keys each when at most MaxWriters
// TestAndAdd calls run at once over all processes; so each layer's bits are
// sized for cap_i + (MaxWriters − 1)·b_i keys, with b_i small enough that
// this reserve is at most cap_i/32 for all but small layers. Under that
// condition every layer holds at most the keys it was sized for and the
// bound above holds as stated (RedisBloom's documentation has the proof).
//
// # Revisit windows
//
// A Window makes a key admitted at time t read as seen until at least t+D
// and new again when it is rediscovered after at most t+D·(1+1/g), for a
// window D and a granularity g ≥ 1 (WindowOptions). It is a
// rotating-generations scheme, a coarse relative of the Age-Partitioned
// Bloom Filters of Shtul, Baquero and Almeida (2020), which shift one
// single-hash slice at a time; generations instead reuse this package's
// growing filters unchanged (Bloom or cuckoo, in memory or sharded in
// Redis).
//
// Time is cut into periods of L = ceil(D/g) counted from the Unix epoch;
// generation e is a growing filter that holds the keys admitted during
// [e·L, (e+1)·L). In period c the g+1 generations c−g … c are live: a key is
// seen if a live generation holds it, and TestAndAdd adds a key to
// generation c only if none does (rediscovery does not extend a key's
// life). A key admitted at t, in period e = floor(t/L), is read until
// generation e stops being live at (e+g+1)·L, and e·L ≤ t < (e+1)·L gives
//
//	D ≤ g·L < (e+g+1)·L − t ≤ (g+1)·L ≤ D·(1+1/g) + (g+1) ns
//
// so it is a duplicate through t+D and new again from t+D·(1+1/g) at the
// latest (rounded up to the nanosecond).
//
// False positives. Each generation is sized for P/(g+1), with P the
// window's target, and as a growing filter keeps its rate below that
// however many keys it holds (see Growing). A lookup reads at most g+1
// generations, so a key not admitted within the window reads as seen with
// probability
//
//	1 − Π (1 − P/(g+1))  ≤  (g+1) · P/(g+1)  =  P
//
// at every moment: the set of generations read changes only at a period's
// boundary, each of them is within its own bound whatever its fill, and an
// expired generation is never read, even before its data is deleted.
//
// Memory. At a steady rate R of keys new to the window, a generation
// receives at most R·L keys, its period's; a generation's size is a function
// of how many keys it holds (its layers follow the schedule), so after the
// first g+1 periods (the first window, D·(1+1/g)) every new generation
// replaces an expired one of the same size and memory stops growing, at
// (g+1) times one generation of R·L keys. With InitialCapacity = R·L each
// generation is one layer at rate (1−r)·P/(g+1), about
//
//	(1+1/g) · R·D · ln((g+1)/((1−r)·P)) / (ln 2)²   bits
//
// for Bloom generations: a larger g brings the moment a key is new again
// closer to t+D (a factor 1+1/g of keys held) at ln(g+1)/(ln 2)² more bits a
// key and one more generation to read per lookup. Plan computes the figures.
//
// Clock. All processes sharing a window in Redis read one clock, the Redis
// server's TIME (RedisClock; on a cluster, the master holding the window's
// metadata), so they agree on the periods; the bounds above hold in that
// clock to within a process's error in reading it (half a round trip plus
// its local clock's drift since it last asked). The first process that
// sees a generation expire deletes its keys.
//
// # Persistence and policy
//
// Filters store their parameters with their bits, plus an opaque policy
// string: the version of the normalize policy that produced the canonical
// URLs they hold. A stored filter describes itself: reopening it adopts the
// stored value of every parameter left zero in the options (so a reader
// needs only its name, or its file), and fails with a *MismatchError naming
// the stored and the given value when a parameter is given otherwise, or
// another policy without Force, since other parameters would address other
// bits and another policy other keys. The Redis kinds' Existing option opens
// only an existing filter and writes nothing, for read-only callers.
package dedup
