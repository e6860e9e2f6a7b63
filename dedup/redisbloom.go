package dedup

import (
	"context"
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Defaults of RedisBloomOptions.
const (
	DefaultRedisBloomCapacity   = 1_000_000
	DefaultRedisBloomFPP        = 0.01
	DefaultRedisBloomShards     = 16
	DefaultRedisBloomChunkBytes = 64 << 20
	DefaultRedisBloomMaxWriters = 64
	// maxRedisChunkBytes is Redis's limit on a string (proto-max-bulk-len).
	maxRedisChunkBytes = 512 << 20
)

// redisBloomLayout versions the Redis layout of a RedisBloom (key names,
// state fields, bit positions, frozen flags). It is stored in the
// metadata. Layout 3 is the native protocol with its layers sized for
// MaxWriters; a filter written under layout 1 (the script protocol, before
// frozen flags) is still served, with that protocol. Layout 2 (the native
// protocol before MaxWriters, whose bound did not hold for concurrent
// writers; only development builds made it) is refused with an error
// saying so, and any other layout with a *MismatchError on "layout".
const (
	redisBloomLayout        = "3"
	redisBloomLayoutScript  = "1"
	redisBloomLayoutNoBound = "2"
)

// redisBloomHash names the hash and bit layout, stored in the metadata.
const redisBloomHash = "murmur3_x64_128/guava_mitz64"

//go:embed redisbloom.lua
var redisBloomLua string

var redisBloomScript = newRedisScript(redisBloomLua)

// RedisBloomOptions configures a RedisBloom. Every field but Force,
// Existing and MirrorBytes is stored with the filter; see OpenRedisBloom.
// A zero field of those stored means the existing filter's value when the
// filter exists (it is adopted, never a mismatch), and its default when the
// filter is created; a field given (non-zero) must equal the stored value.
type RedisBloomOptions struct {
	// InitialCapacity is the number of keys the first layer holds, over all
	// shards; 0 means DefaultRedisBloomCapacity.
	InitialCapacity int64
	// TargetFPP bounds the false-positive rate however far the filter grows;
	// 0 means DefaultRedisBloomFPP (1%).
	TargetFPP float64
	// Factor multiplies each new layer's capacity (Growth.Factor); 0 means
	// DefaultGrowthFactor.
	Factor float64
	// Tightening multiplies each new layer's error rate (Growth.Tightening);
	// 0 means DefaultTightening.
	Tightening float64
	// Shards is the number of independent sub-filters the keys are spread
	// over (by hash), each in its own Redis Cluster hash slot; 0 means
	// DefaultRedisBloomShards.
	Shards int
	// ChunkBytes caps the size of one Redis string: a layer's bit array
	// larger than this is split over several keys. 0 means
	// DefaultRedisBloomChunkBytes (64 MiB); at most 512 MiB.
	ChunkBytes int64
	// Policy is stored with the filter: the version of the normalize policy
	// whose canonical keys it holds.
	Policy string
	// Force opens a filter stored under another Policy, replacing the stored
	// policy with this one. It does not override any other parameter.
	Force bool
	// Existing opens only a filter that exists, and writes nothing (no
	// metadata; Force does not replace the stored policy): a missing filter
	// is an error matching ErrNotFound. Read-only callers use it.
	Existing bool
	// MaxWriters is the most TestAndAdd calls the false-positive bound
	// covers running at once: summed over every process (every open
	// RedisBloom value) using the filter, the most calls each runs at once.
	// Each layer's bits are sized for its capacity plus what that many
	// racing calls may set in it after it is full (see RedisBloom, "The
	// bound under concurrent writers"); past it the bound may not hold. 0
	// means DefaultRedisBloomMaxWriters (64: sixteen dedup workers of
	// concurrency 4). Layout-1 filters ignore it: their script is exact.
	MaxWriters int
	// MirrorBytes bounds this process's local copy of the filter's bits,
	// which answers repeated keys without Redis and spares the script the
	// frozen layers (see bloomMirror); layers are copied oldest first while
	// they fit. 0 means DefaultRedisBloomMirrorBytes (256 MiB); negative:
	// no copy. It is not stored with the filter: each process chooses.
	MirrorBytes int64
}

func (o RedisBloomOptions) withDefaults() RedisBloomOptions {
	if o.InitialCapacity == 0 {
		o.InitialCapacity = DefaultRedisBloomCapacity
	}
	if o.TargetFPP == 0 {
		o.TargetFPP = DefaultRedisBloomFPP
	}
	if o.Factor == 0 {
		o.Factor = DefaultGrowthFactor
	}
	if o.Tightening == 0 {
		o.Tightening = DefaultTightening
	}
	if o.Shards == 0 {
		o.Shards = DefaultRedisBloomShards
	}
	if o.ChunkBytes == 0 {
		o.ChunkBytes = DefaultRedisBloomChunkBytes
	}
	if o.MirrorBytes == 0 {
		o.MirrorBytes = DefaultRedisBloomMirrorBytes
	}
	if o.MaxWriters == 0 {
		o.MaxWriters = DefaultRedisBloomMaxWriters
	}
	return o
}

// RedisBloom is a scalable Bloom filter kept in Redis: a single server or a
// Redis Cluster. Any number of processes may open the same filter by name and
// use it at once; a RedisBloom is also safe for concurrent use by goroutines.
//
// # Growth
//
// The filter is a list of Bloom layers following Growth: layer i holds
// InitialCapacity·Factor^i keys at error rate TargetFPP·(1−r)·r^i, so the
// false-positive rate stays below TargetFPP however many layers are added. A
// layer has m = OptimalBits(capacity, fpp) bits rounded up to a multiple of
// 64 and k = OptimalHashes(capacity, m) hash functions; a key's bits in it are
// Hash.BitIndex(0..k−1, m), Guava's layout. A key is present if any layer
// holds all its bits. A new key is added to the newest layer only; when that
// layer has admitted its capacity, the next new key opens a new layer.
//
// # Sharding and Redis layout
//
// The keys are spread by hash over Shards independent scalable filters, each
// sized for InitialCapacity/Shards plus four standard deviations of the
// binomial count of keys a shard receives (see redisShardCapacity), so the
// whole grows like one filter of InitialCapacity. For a filter named N,
// shard j keeps, all under the Cluster hash tag {N:j} (one slot, so one
// transaction can touch them all):
//
//	{N:j}:state        hash: "n<i>" = keys admitted into layer i; "layers"
//	                   = a lower bound of the layer count (written once a
//	                   shard grows; absent = 1)
//	{N:j}:bits:<i>:<c> string: chunk c of layer i's bit array, bits
//	                   [c·8·ChunkBytes, (c+1)·8·ChunkBytes); bit b of the
//	                   array is Redis bit (b mod 8·ChunkBytes) of its chunk;
//	                   then an 8-byte tail: in chunk 0, the layer's
//	                   admission counter, whose first bit is its frozen
//	                   flag (see below)
//
// and N:meta, a hash, holds the parameters (see OpenRedisBloom), among them
// the layout version, 3, and MaxWriters. A chunk is allocated at its full size by its first
// write. Filters written by earlier versions (layout 1: no tails, a Lua
// script per batch) are still served, by that script; see OpenRedisBloom.
//
// # The native protocol
//
// TestAndAdd and Contains hash the batch in Go and compute every key's bit
// positions (Guava's layout, 64-bit arithmetic); Redis computes nothing, so
// the layout needs no Lua twin. Each process first answers what its local
// mirror of the bits can prove (see bloomMirror and MirrorBytes): a key
// whose bits are all set in a mirrored layer is present, and older layers
// the mirror holds whole copies of are checked in Go. Older layers it does
// not hold are read with BITFIELD_RO, one round trip more. The rest go to
// the shard's newest layer in one BITFIELD per shard (per chunk), all
// shards in one pipeline: one round trip a batch, one per master on a
// cluster. A TestAndAdd call there is, in order:
//
//	HINCRBY {N:j}:state n<i> <keys>                 the count, for Stats
//	BITFIELD {N:j}:bits:<i>:0 GET u1 <flag>          frozen before this call?
//	    OVERFLOW SAT INCRBY u63 <flag> <keys·step>   count the keys
//	    SET u1 <tail's last bit> 0                   allocate
//	    SET u1 <bit> 1 …                             each key's bits
//
// BITFIELD SET answers each bit's old value and runs its operations in
// order, so a key is new exactly when some of its bits was 0, and a key
// repeated in the call finds the bits its first copy set. Bits the mirror
// already holds as 1 are left out (they would answer 1). Keys that were not
// new are taken off both counts in a second round trip, only when there are
// any; Contains sends the same with GET instead of SET, and no counting.
//
// # Growth without a script: the frozen flag
//
// The counter counts step = floor(2⁶²/(cap_i − b_i)) per key, so its first
// bit, the frozen flag, turns 1 when it has counted cap_i − b_i keys (or
// one more), and saturation keeps it 1. A call counts at most b_i keys
// (b_i, below, at most cap_i/64 and 128; a shard's further keys wait for
// the next round), and reads the flag before it counts: a call that read 0
// ran while at most cap_i − b_i keys were counted, so at most cap_i keys are
// ever counted into layer i, whatever the concurrency. A call that read 1
// ran on a frozen layer: its keys whose bits were all 1 are held by the
// layer (not new), and the others go again to layer i+1, known absent from
// layer i. Frozen layers are read only, so the mirror copies them whole once
// it sees them frozen.
//
// # The bound under concurrent writers
//
// A call that reads the flag as 1 has still set its keys' bits in the
// frozen layer (BITFIELD is not conditional), uncounted; its keys go to
// the next layer too, so they are no loss, but layer i's bits may stand for
// more keys than it counted. Each layer's bits are therefore sized, with
// OptimalBits and OptimalHashes at fpp_i, for
//
//	n_i = cap_i + (W − 1)·b_i          W = MaxWriters
//
// keys, and b_i is kept small enough that the reserve is small: b_i =
// min(128, cap_i/64, max(16, cap_i/(32·(W−1)))) (for W = 1, min(128,
// cap_i/64) and no reserve), so the reserve is at most cap_i/32 once cap_i
// ≥ 512·(W−1) keys (a layer of 32,256 keys for W = 64; a smaller layer has
// a larger reserve in share, of at most (W−1)·16 keys), and most keys
// still go in one call per shard a batch.
//
// Claim: if, summed over every process (every open RedisBloom value) that
// writes while layer i freezes, the most TestAndAdd calls each runs at
// once is at most W, then at most n_i distinct keys have set bits in layer
// i, so its rate is at most fpp_i (within the 1% of rounding k, as
// everywhere) and the package's bound Σ fpp_i < TargetFPP holds. Proof: the
// keys counted into layer i are at most cap_i (above), and keys whose bits
// were all 1 already set none. An uncounted key's bits were set by a call
// C that read the flag as 1: C ran in Redis after the call X that froze
// the layer. A process learns that the layer is frozen from the reply to
// any of its calls that met the freeze (X's included), and from then on it
// sends no call to layer i (its shard's layer count is raised before the
// reply is returned, and every call reads it when it is built). So every
// such C of process p was built before p's first such reply and answered
// no earlier than it: all of them are in flight together just before it,
// at most c_p of them, c_p the most calls p runs at once, and at most c_p
// − 1 when X is p's own (X counts its keys). Summed, at most Σ c_p − 1 ≤ W
// − 1 calls set uncounted bits, each of at most b_i keys (a call never
// sends more than the guard's batch to one layer). A call from a process
// that does not know of layer i at all (it reads the shard's layer count
// first) is such a call too, built before its first reply. With more
// writers than MaxWriters a layer may hold up to (extra writers)·b_i more
// keys than it was sized for, raising its rate by about the factor (1 +
// extra·b_i/n_i)^(k_i·ln 2); MaxWriters is stored with the filter, so
// every process sizes and reads the same layers.
//
// A design strict for any number of writers needs a write that is
// conditional on the counter, which plain Redis offers only per key at the
// cost of a round trip (reserve first, then set: WATCH, or a counter read
// before the BITFIELD) or a script; this package keeps one round trip and
// no script, and bounds the writers instead.
//
// # Atomicity
//
// Each BITFIELD is atomic, and a call on a layer of several chunks runs
// its commands in one MULTI/EXEC. So of two processes adding the same key
// at once to the same layer exactly one sees a 0 bit and is told "new"
// (unless the key was a false positive before either added it; then none
// is). They cannot add it to two different layers both as new: a call that
// reads layer i unfrozen runs before layer i froze, and a call on layer i+1
// runs after; it checks layer i (frozen, read in Redis or from a complete
// mirror copy taken after the freeze) and finds the key there. Within a
// batch the keys are answered as if added in order, so a repeated key is new
// at most once.
//
// A failed call (Redis down, a timeout) returns an error and an unknown
// outcome: some shards' commands may have run. Calling again is safe but may
// report as present keys that the failed call added; callers that must not
// lose a key should act on it before adding it or tolerate that window.
type RedisBloom struct {
	client redis.UniversalClient
	shards redisShards
	opts   RedisBloomOptions
	layout string // redisBloomLayout or redisBloomLayoutScript
	layers []redisBloomLayer
	chunk  uint64 // bits per chunk key
	fetch  int    // see redisbloom.lua, ARGV[5]
	// seen is each shard's layer count as last answered by Redis (0: not
	// read yet, native layout); a guess, corrected by a "stale" answer.
	seen   []atomic.Int32
	guards []layerGuard // per layer (native layout)
	mirror *bloomMirror // nil: none
	closed atomic.Bool
}

// native reports whether the filter uses the native protocol (layout 3).
func (f *RedisBloom) native() bool { return f.layout != redisBloomLayoutScript }

// redisBloomLayer sizes layer i of one shard.
type redisBloomLayer struct {
	capacity int64
	fpp      float64
	bits     uint64 // m rounded up to a multiple of 64
	k        int
}

// OpenRedisBloom opens the filter named name in Redis, creating it if it does
// not exist (under layout 3, the native protocol). A filter stored under
// layout 1 (the script protocol of earlier versions) is served with that
// protocol, unchanged; any other stored layout fails with a *MismatchError
// on "layout". Its parameters (opts after defaults but Force, Existing and
// MirrorBytes, and the hash and layout versions) are stored in the hash
// "<name>:meta", created atomically by the first opener. Opening an
// existing filter adopts the stored value of every parameter left zero in
// opts; a parameter given that differs from the stored one fails with a
// *MismatchError naming the field and both values, except a different
// Policy with opts.Force, which replaces the stored policy. With
// opts.Existing a missing filter is an error (ErrNotFound) and nothing is
// written. The name may not be empty or hold '{' or '}'.
//
// client may be a *redis.Client or a *redis.ClusterClient (which a Redis
// Cluster needs: given any other client, the filter lets one script serve
// several shards, which a cluster node refuses as CROSSSLOT); the filter
// does not close it.
func OpenRedisBloom(ctx context.Context, client redis.UniversalClient, name string, opts RedisBloomOptions) (*RedisBloom, error) {
	return openRedisBloomLayout(ctx, client, name, opts, redisBloomLayout)
}

// openRedisBloomLayout opens the filter, creating it under layout if it
// does not exist. An existing layout-1 filter is served under layout 1.
func openRedisBloomLayout(ctx context.Context, client redis.UniversalClient, name string, opts RedisBloomOptions, layout string) (*RedisBloom, error) {
	f, err := openRedisBloomMeta(ctx, client, name, opts, layout)
	if err != nil {
		return nil, fmt.Errorf("dedup: open redis bloom %q: %w", name, err)
	}
	return f, nil
}

// openRedisBloomMeta is openRedisBloomLayout, without the error's context.
func openRedisBloomMeta(ctx context.Context, client redis.UniversalClient, name string, given RedisBloomOptions, layout string) (*RedisBloom, error) {
	return openWithMeta(ctx, client, name, given.Existing, given.Force, func(stored map[string]string) (*RedisBloom, []redisMetaField, error) {
		opts, layout := given, layout
		err := adoptStored(stored,
			storedParam{"initial_capacity", &opts.InitialCapacity}, storedParam{"target_fpp", &opts.TargetFPP},
			storedParam{"growth_factor", &opts.Factor}, storedParam{"tightening", &opts.Tightening},
			storedParam{"shards", &opts.Shards}, storedParam{"chunk_bytes", &opts.ChunkBytes},
			storedParam{"max_writers", &opts.MaxWriters},
		)
		if err != nil {
			return nil, nil, err
		}
		switch stored["layout"] {
		case redisBloomLayoutScript:
			layout = redisBloomLayoutScript
		case redisBloomLayoutNoBound:
			return nil, nil, fmt.Errorf("%w: stored under layout 2, the native protocol before MaxWriters (made only by development builds; its false-positive bound did not hold for concurrent writers): delete its keys and create it again", ErrInvalidParams)
		}
		f, err := newRedisBloom(client, name, opts.withDefaults(), layout)
		if err != nil {
			return nil, nil, err
		}
		return f, f.metaFields(), nil
	})
}

func newRedisBloom(client redis.UniversalClient, name string, opts RedisBloomOptions, layout string) (*RedisBloom, error) {
	shards, err := newRedisShards(name, opts.Shards)
	if err != nil {
		return nil, err
	}
	if opts.ChunkBytes < 8 || opts.ChunkBytes > maxRedisChunkBytes {
		return nil, fmt.Errorf("%w: chunk size %d bytes must be in [8, %d]", ErrInvalidParams, opts.ChunkBytes, maxRedisChunkBytes)
	}
	if opts.MaxWriters < 0 {
		return nil, fmt.Errorf("%w: max writers %d must be positive", ErrInvalidParams, opts.MaxWriters)
	}
	if opts.InitialCapacity < 0 {
		return nil, fmt.Errorf("%w: initial capacity %d must be positive", ErrInvalidParams, opts.InitialCapacity)
	}
	g := Growth{
		InitialCapacity: redisShardCapacity(opts.InitialCapacity, opts.Shards),
		TargetFPP:       opts.TargetFPP,
		Factor:          opts.Factor,
		Tightening:      opts.Tightening,
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	f := &RedisBloom{
		client: client,
		shards: shards,
		opts:   opts,
		layout: layout,
		chunk:  uint64(opts.ChunkBytes) * 8,
		fetch:  redisBloomFetch,
		seen:   make([]atomic.Int32, opts.Shards),
	}
	// Size every layer the schedule allows now; a filter never needs more
	// than maxLayers, and the list ends early where sizes overflow.
	for i := 0; i < maxLayers; i++ {
		p, err := g.Layer(i)
		if err != nil {
			break
		}
		guard := newLayerGuard(p.Capacity, max(opts.MaxWriters, 1))
		sized := p.Capacity // the most keys whose bits the layer may hold
		if f.native() {
			sized += guard.reserve
		}
		m, err := OptimalBits(sized, p.FPP)
		if err != nil {
			break
		}
		bits := uint64(wordsFor(max(m, 1))) * 64
		if bits >= 1<<53 { // positions must be exact in Lua's doubles
			break
		}
		f.layers = append(f.layers, redisBloomLayer{capacity: p.Capacity, fpp: p.FPP, bits: bits, k: OptimalHashes(sized, m)})
		f.guards = append(f.guards, guard)
	}
	if len(f.layers) == 0 {
		return nil, fmt.Errorf("%w: first layer of %d keys at rate %v cannot be sized", ErrInvalidParams, g.InitialCapacity, g.TargetFPP)
	}
	if !f.native() {
		for j := range f.seen {
			f.seen[j].Store(1)
		}
	}
	if opts.MirrorBytes > 0 {
		f.mirror = newBloomMirror(opts.Shards, opts.MirrorBytes)
	}
	return f, nil
}

// redisShardCapacity returns the first-layer capacity of each of shards
// shards of a filter meant to hold capacity keys before it grows. The keys
// of a full filter fall in a shard as a binomial count, mean capacity/shards
// and standard deviation σ = √(capacity·(1/shards)·(1−1/shards)); sized
// for the mean alone, about half the shards would open a second layer (and
// allocate its bits, twice the first's) before the filter held capacity
// keys. Sized for the mean plus 4σ, no shard does, but with probability
// about shards·3e-5; it costs 4σ/mean more bits in every layer (5% for
// 6,250 keys a shard, 1% for 160,000).
func redisShardCapacity(capacity int64, shards int) int64 {
	n, s := float64(capacity), float64(shards)
	return int64(math.Ceil(n/s + 4*math.Sqrt(n*(1/s)*(1-1/s))))
}

// metaFields returns the stored parameters, in their stored order.
func (f *RedisBloom) metaFields() []redisMetaField {
	o := f.opts
	fields := []redisMetaField{
		{"kind", "bloom"},
		{"layout", f.layout},
		{"hash", redisBloomHash},
		{"target_fpp", formatFloat(o.TargetFPP)},
		{"initial_capacity", strconv.FormatInt(o.InitialCapacity, 10)},
		{"growth_factor", formatFloat(o.Factor)},
		{"tightening", formatFloat(o.Tightening)},
		{"shards", strconv.Itoa(o.Shards)},
		{"chunk_bytes", strconv.FormatInt(o.ChunkBytes, 10)},
		{redisMetaPolicy, o.Policy},
	}
	if f.native() {
		fields = append(fields, redisMetaField{"max_writers", strconv.Itoa(o.MaxWriters)})
	}
	return fields
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// Script modes.
const (
	redisBloomAdd      = "a"
	redisBloomContains = "c"
)

// redisBloomFetch is how many bytes of a layer the script reads whole for
// each BITFIELD operation that spares: a bit costs Redis about 500 ns in
// BITFIELD from Lua, a byte about 1.8 ns in GET (measured on Redis 7.0;
// break-even near 280, less the Lua work of testing the bits read).
const redisBloomFetch = 200

// TestAndAdd adds keys and reports, per key, whether it was new (in no layer
// before this call). Within the batch the keys are answered as if added one
// by one, so a repeated key is new at most once. It takes one round trip per
// Redis master in the common case (see RedisBloom). It is safe for concurrent
// use, also with other processes using the same filter.
func (f *RedisBloom) TestAndAdd(ctx context.Context, keys [][]byte) ([]bool, error) {
	out, err := f.run(ctx, keys, redisBloomAdd)
	if err != nil {
		return nil, fmt.Errorf("dedup: redis bloom %q: test-and-add: %w", f.shards.name, err)
	}
	return out, nil
}

// Contains reports, per key, whether the filter holds it (or a false
// positive of it). It writes nothing. It is safe for concurrent use.
func (f *RedisBloom) Contains(ctx context.Context, keys [][]byte) ([]bool, error) {
	out, err := f.run(ctx, keys, redisBloomContains)
	if err != nil {
		return nil, fmt.Errorf("dedup: redis bloom %q: contains: %w", f.shards.name, err)
	}
	return out, nil
}

// redisShardWork is the part of a batch that falls in one shard: the indices
// of its keys in the batch, in batch order.
type redisShardWork struct {
	shard int
	idx   []int
	// skip is the number of oldest layers the mirror answered for.
	skip int
	// layers is the layer count the script call was built for.
	layers int
}

func (f *RedisBloom) run(ctx context.Context, keys [][]byte, mode string) ([]bool, error) {
	if f.closed.Load() {
		return nil, ErrClosed
	}
	if len(keys) == 0 {
		return []bool{}, nil
	}
	if f.native() {
		return f.runNative(ctx, keys, mode == redisBloomAdd)
	}
	out := make([]bool, len(keys))
	hashes := make([]Hash, len(keys))
	for i, k := range keys {
		hashes[i] = HashKey(k)
	}
	groups := f.shards.group(hashes, nil)
	skip := make([]int, f.opts.Shards)
	if f.mirror != nil {
		for j, idx := range groups {
			if len(idx) == 0 {
				continue
			}
			var err error
			if groups[j], skip[j], err = f.mirrorAnswers(ctx, j, hashes, idx, mode, out); err != nil {
				return nil, err
			}
		}
	}
	// The driver sends a shard's keys in parts of at most redisCallKeys, in
	// batch order: Redis runs the parts in that order (one script call, or
	// one connection's pipeline on a cluster), so the batch keeps its
	// sequential semantics, and no script call runs for too long. A stale
	// shard's unanswered keys go again, with its new layer count (and
	// without the mirror's skip, which held for the old count only).
	stale := make([]bool, f.opts.Shards)
	err := redisRounds(groups, func(parts []redisPart) ([][]int, error) {
		todo := make([]redisShardWork, len(parts))
		for p, part := range parts {
			todo[p] = redisShardWork{shard: part.shard, idx: part.idx}
			if !stale[part.shard] {
				todo[p].skip = skip[part.shard]
			}
		}
		groups := f.groupCalls(todo)
		calls := make([]redisCall, len(groups))
		for g, ws := range groups {
			call, err := f.call(mode, hashes, ws)
			if err != nil {
				return nil, err
			}
			calls[g] = call
		}
		replies, err := redisBloomScript.run(ctx, f.client, calls)
		if err != nil {
			return nil, err
		}
		left := make([][]int, 0, len(parts))
		for g, ws := range groups {
			flat, ok := replies[g].([]any)
			if !ok || len(flat) != 4*len(ws) {
				return nil, fmt.Errorf("unexpected script reply %v", replies[g])
			}
			for s, w := range ws {
				r, err := parseRedisBloomReply(flat[4*s:4*s+4], len(w.idx))
				if err != nil {
					return nil, fmt.Errorf("shard %d: %w", w.shard, err)
				}
				for x := 0; x < r.done; x++ {
					out[w.idx[x]] = r.flags[x] == '1'
				}
				if f.mirror != nil && mode == redisBloomAdd {
					f.mirrorLearn(w, hashes, out, r.done)
				}
				f.seen[w.shard].Store(int32(r.layers))
				if r.stale {
					stale[w.shard] = true
				}
				left = append(left, w.idx[r.done:])
			}
		}
		return left, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// groupCalls splits the shards' work into script calls. On a Redis Cluster
// each shard needs its own call (a script may only touch one hash slot); on
// a single server one call serves several shards, up to redisCallKeys
// keys, which spares Redis the fixed cost of a call per shard.
func (f *RedisBloom) groupCalls(todo []redisShardWork) [][]redisShardWork {
	if _, cluster := f.client.(*redis.ClusterClient); cluster {
		groups := make([][]redisShardWork, len(todo))
		for i := range todo {
			groups[i] = todo[i : i+1]
		}
		return groups
	}
	var groups [][]redisShardWork
	start, n := 0, 0
	for i, w := range todo {
		if n > 0 && n+len(w.idx) > redisCallKeys {
			groups = append(groups, todo[start:i])
			start, n = i, 0
		}
		n += len(w.idx)
	}
	return append(groups, todo[start:])
}

// call builds one script call for the work of one or more shards, each with
// the layer count last seen.
func (f *RedisBloom) call(mode string, hashes []Hash, ws []redisShardWork) (redisCall, error) {
	var keys []string
	args := []any{mode, f.chunk, f.fetch, len(ws)}
	for x := range ws {
		w := &ws[x]
		L := int(f.seen[w.shard].Load())
		if L < 1 || L > len(f.layers) {
			return redisCall{}, fmt.Errorf("shard %d has %d layers, more than the %d its schedule can size", w.shard, L, len(f.layers))
		}
		w.layers = L
		keys = append(keys, f.shards.key(w.shard, "state"))
		args = append(args, L, len(w.idx), w.skip)
		for i, l := range f.layers[:L] {
			for c := uint64(0); c*f.chunk < l.bits; c++ {
				keys = append(keys, f.shards.key(w.shard, "bits:"+strconv.Itoa(i)+":"+strconv.FormatUint(c, 10)))
			}
			args = append(args, l.k, l.capacity, l.bits)
		}
		for i, l := range f.layers[:L] {
			if i < w.skip {
				args = append(args, "")
				continue
			}
			args = append(args, msgpackPositions(hashes, w.idx, l.k, l.bits))
		}
	}
	return redisCall{keys: keys, args: args}, nil
}

// msgpackPositions encodes, as one MessagePack array, the k bit positions in
// a bit array of size bits of each key idx of hashes, key by key. The script
// decodes it in one C call (cmsgpack.unpack), far cheaper for Redis than one
// argument per position.
func msgpackPositions(hashes []Hash, idx []int, k int, bits uint64) string {
	n := len(idx) * k
	b := make([]byte, 5, 5+9*n)
	b[0] = 0xdd // array 32
	binary.BigEndian.PutUint32(b[1:], uint32(n))
	for _, q := range idx {
		h := hashes[q]
		for t := 0; t < k; t++ {
			p := h.BitIndex(t, bits)
			if p <= math.MaxUint32 {
				b = append(b, 0xce) // uint 32
				b = binary.BigEndian.AppendUint32(b, uint32(p))
			} else {
				b = append(b, 0xcf) // uint 64
				b = binary.BigEndian.AppendUint64(b, p)
			}
		}
	}
	return string(b)
}

// redisBloomReply is the script's answer for one shard.
type redisBloomReply struct {
	stale  bool
	layers int
	done   int
	flags  string
}

func parseRedisBloomReply(a []any, n int) (redisBloomReply, error) {
	status, ok1 := a[0].(int64)
	layers, ok2 := a[1].(int64)
	done, ok3 := a[2].(int64)
	flags, ok4 := a[3].(string)
	if !ok1 || !ok2 || !ok3 || !ok4 || done < 0 || done > int64(n) || len(flags) != int(done) || layers < 1 || layers > maxLayers {
		return redisBloomReply{}, fmt.Errorf("unexpected script reply %v", a)
	}
	return redisBloomReply{stale: status != 0, layers: int(layers), done: int(done), flags: flags}, nil
}

// Stats reports the filter's items, layers (each summed over the shards that
// have it), memory and estimated false-positive rate. It reads every shard's
// state and counts every chunk's bits (BITCOUNT): two pipelined round trips
// and O(memory) work in Redis, meant for monitoring, not the hot path.
//
// MemoryBytes is the length of the bit arrays in Redis (Redis adds a few
// dozen bytes per key). NextLayerCapacity sums, over the shards, the
// capacity of the layer each would add next. It is safe for concurrent use.
func (f *RedisBloom) Stats(ctx context.Context) (Stats, error) {
	if f.closed.Load() {
		return Stats{}, ErrClosed
	}
	wrap := func(err error) error { return fmt.Errorf("dedup: redis bloom %q: stats: %w", f.shards.name, err) }
	pipe := f.client.Pipeline()
	states := make([]*redis.MapStringStringCmd, f.opts.Shards)
	for j := range states {
		states[j] = pipe.HGetAll(ctx, f.shards.key(j, "state"))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return Stats{}, wrap(err)
	}
	type shardLayer struct {
		items        int64
		ones, length []*redis.IntCmd
	}
	layers, counts, err := f.layerCounts(ctx, states)
	if err != nil {
		return Stats{}, wrap(err)
	}
	perShard := make([][]shardLayer, f.opts.Shards)
	pipe = f.client.Pipeline()
	for j := range states {
		// A shard no key reached yet has an empty layer 0 all the same:
		// counted, its capacity is the filter's, not the busy shards'.
		for i := 0; i < max(layers[j], 1); i++ {
			var sl shardLayer
			if i < len(counts[j]) {
				sl.items = counts[j][i]
			}
			for c := uint64(0); c < f.chunks(i); c++ {
				key := f.chunkKey(j, i, c)
				var bytes *redis.BitCount // native layout: the frozen flag's byte is no filter bit
				if f.native() {
					bytes = &redis.BitCount{Start: 0, End: int64(f.chunkBits(i, c)/8) - 1}
				}
				sl.ones = append(sl.ones, pipe.BitCount(ctx, key, bytes))
				sl.length = append(sl.length, pipe.StrLen(ctx, key))
			}
			perShard[j] = append(perShard[j], sl)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return Stats{}, wrap(err)
	}
	s := Stats{Kind: "bloom", TargetFPP: f.opts.TargetFPP}
	var ones []uint64
	var shardFPP float64 // Σ over shards of each shard's estimated rate
	for _, layers := range perShard {
		pass := 1.0 // probability a never-added key passes every layer of the shard
		for i, sl := range layers {
			l := f.layers[i]
			if i == len(s.Layers) {
				s.Layers = append(s.Layers, LayerStats{Hashes: l.k, FPP: l.fpp})
				ones = append(ones, 0)
			}
			var set uint64
			for c := range sl.ones {
				set += uint64(sl.ones[c].Val())
				s.MemoryBytes += uint64(sl.length[c].Val())
			}
			ls := &s.Layers[i]
			ls.Capacity += uint64(l.capacity)
			ls.Items += uint64(sl.items)
			ls.Bits += l.bits
			ones[i] += set
			p := math.Pow(float64(set)/float64(l.bits), float64(l.k))
			ls.EstimatedFPP += p // a sum over shards for now
			pass *= 1 - p
			s.Items += uint64(sl.items)
		}
		shardFPP += 1 - pass
		if next := len(layers); next < len(f.layers) {
			s.NextLayerCapacity += uint64(f.layers[next].capacity)
		}
	}
	for i := range s.Layers {
		ls := &s.Layers[i]
		ls.Fill = float64(ones[i]) / float64(ls.Bits)
		ls.EstimatedFPP /= float64(ls.Bits / f.layers[i].bits) // mean over the shards with layer i
	}
	// A key falls in each shard with equal probability.
	s.EstimatedFPP = shardFPP / float64(f.opts.Shards)
	if s.Items > 0 {
		s.BytesPerItem = float64(s.MemoryBytes) / float64(s.Items)
	}
	return s, nil
}

// layerCounts parses every shard's state: its layer count (0 if it never
// admitted a key) and each layer's count of keys. Under the native layout the stored
// layer count is a hint (see growFull), so it follows frozen flags up to
// the newest layer: one round trip, more only while a shard grows.
func (f *RedisBloom) layerCounts(ctx context.Context, states []*redis.MapStringStringCmd) ([]int, [][]int64, error) {
	layers := make([]int, len(states))
	counts := make([][]int64, len(states))
	for j, st := range states {
		m := st.Val()
		if len(m) == 0 {
			continue
		}
		parsed, err := f.parseState(j, m)
		if err != nil {
			return nil, nil, err
		}
		layers[j], counts[j] = parsed.layers, parsed.counts
	}
	for f.native() {
		pipe := f.client.Pipeline()
		flags := make([]*redis.IntCmd, len(states))
		for j, L := range layers {
			if L > 0 && L < len(f.layers) {
				flags[j] = pipe.GetBit(ctx, f.chunkKey(j, L-1, 0), int64(f.chunkBits(L-1, 0)))
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, nil, err
		}
		grew := false
		for j, flag := range flags {
			if flag != nil && flag.Val() == 1 {
				layers[j]++
				grew = true
			}
		}
		if !grew {
			break
		}
	}
	return layers, counts, nil
}

// Close marks the filter closed: later calls return ErrClosed. It does not
// close the Redis client, which the caller owns, and leaves the filter in
// Redis. It is idempotent and safe for concurrent use.
func (f *RedisBloom) Close() error {
	f.closed.Store(true)
	return nil
}
