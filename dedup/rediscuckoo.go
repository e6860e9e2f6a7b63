package dedup

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// DefaultRedisCuckooShards is the shard count of a RedisCuckoo whose options
// leave it zero.
const DefaultRedisCuckooShards = 16

// redisCuckooLayout versions the Redis layout of a RedisCuckoo (key names,
// state fields, slot layout, fingerprint and index derivation). It is stored
// in the metadata; a filter written under another layout is refused.
const redisCuckooLayout = "1"

// redisCuckooHash names the hash and fingerprint derivation, stored in the
// metadata.
const redisCuckooHash = "murmur3_x64_128/cuckoo_pk1"

// maxRedisCuckooLayerBits is the largest slot string of one layer of one
// shard: a Redis string holds at most 512 MiB.
const maxRedisCuckooLayerBits = 1 << 32

//go:embed rediscuckoo.lua
var redisCuckooLua string

var redisCuckooScript = newRedisScript(redisCuckooLua)

// Script modes (see rediscuckoo.lua).
const (
	redisCuckooTestAndAdd = "a"
	redisCuckooAdd        = "A"
	redisCuckooContains   = "c"
	redisCuckooDelete     = "d"
	redisCuckooForget     = "f"
)

// RedisCuckooOptions configures a RedisCuckoo: the cuckoo filter's options,
// for the whole filter (Growth.InitialCapacity is over all shards), and the
// shard count. Every field but Force, MaxKicks and Existing is stored with
// the filter; see OpenRedisCuckoo. A zero field of those stored means the
// existing filter's value when the filter exists (it is adopted, never a
// mismatch), and its default when the filter is created; a field given
// (non-zero) must equal the stored value.
type RedisCuckooOptions struct {
	CuckooOptions
	// Shards is the number of independent sub-filters the keys are spread
	// over (by hash), each in its own Redis Cluster hash slot; 0 means
	// DefaultRedisCuckooShards.
	Shards int
	// Existing opens only a filter that exists, and writes nothing (no
	// metadata; Force does not replace the stored policy): a missing filter
	// is an error matching ErrNotFound. Read-only callers use it.
	Existing bool
}

func (o RedisCuckooOptions) withDefaults() RedisCuckooOptions {
	o.CuckooOptions = o.CuckooOptions.withDefaults()
	if o.Shards == 0 {
		o.Shards = DefaultRedisCuckooShards
	}
	return o
}

// RedisCuckoo is a growing cuckoo filter kept in Redis, a single server or a
// Redis Cluster: the filter of Cuckoo (same hashing, fingerprints, buckets,
// growth schedule and error bound; see Cuckoo for the algorithm and the traps
// of deletion), split into shards. Any number of processes may open the same
// filter by name and use it at once; a RedisCuckoo is also safe for
// concurrent use by goroutines.
//
// # Sharding and Redis layout
//
// Keys are spread by hash over Shards independent growing cuckoo filters
// (the same shard function as RedisBloom), each scheduled for
// ceil(InitialCapacity/Shards) keys in its first layer. For a filter named N,
// shard j keeps, under the Cluster hash tag {N:j} (one slot, so one script
// can touch them all):
//
//	{N:j}:state      hash: "layers" = layer count, "n<i>" = fingerprints
//	                 in layer i, "deletes" = fingerprints deleted
//	{N:j}:slots:<i>  string: layer i's buckets·b slots of f bits, slot s at
//	                 BITFIELD u<f> offset s·f; 0 is an empty slot
//
// and N:meta, a hash, holds the parameters. A layer's string is allocated at
// its full size when the layer is added; a layer of one shard may not exceed
// 512 MiB (Redis's string limit), which caps how many layers a shard can
// have.
//
// # Atomicity and round trips
//
// Each batch is hashed in Go; the script gets, per key, the low 32 bits of
// H1 and the high 53 bits of H2, and derives fingerprint and buckets for any
// layer itself with exact arithmetic on Lua's doubles (fmix32 included), so
// it can relocate evicted fingerprints and add layers without asking the
// caller. A batch is one EVALSHA per shard that has keys, all in one
// pipeline: one round trip on a single server, one per master (in parallel)
// on a cluster. A shard's keys beyond 1,024 go in further calls of the same
// pipeline, in batch order, so that no call keeps Redis busy for long (the
// driver RedisBloom shares). Redis runs each script to completion before
// any other command, so each call — lookups in every layer, the insertion
// with its evictions, the growth — is one atomic step: of two
// processes adding the same absent key at once, exactly one is told "new"
// (unless the key was already a false positive; then neither is).
//
// A failed call (Redis down, a timeout) returns an error and an unknown
// outcome: some shards' scripts may have run. A lost script cache (restart,
// failover, SCRIPT FLUSH) is reloaded transparently.
type RedisCuckoo struct {
	client redis.UniversalClient
	shards redisShards
	opts   RedisCuckooOptions // with defaults
	shard  CuckooOptions      // one shard's options (its share of the capacity)
	layers []cuckooLayerParams
	args   []any // the script's layer table: buckets, f per layer
	closed atomic.Bool
}

// OpenRedisCuckoo opens the cuckoo filter named name in Redis, creating it if
// it does not exist. Its parameters (opts after defaults, but Force,
// MaxKicks and Existing, and the hash and layout versions) are stored in the
// hash "<name>:meta", created atomically by the first opener. Opening an
// existing filter adopts the stored value of every parameter left zero in
// opts; a parameter given that differs from the stored one fails with a
// *MismatchError naming the field and both values, except a different
// Policy with opts.Force, which replaces the stored policy. With
// opts.Existing a missing filter is an error (ErrNotFound) and nothing is
// written. The name may not be empty or hold '{' or '}'.
//
// client may be a *redis.Client or a *redis.ClusterClient; the filter does
// not close it.
func OpenRedisCuckoo(ctx context.Context, client redis.UniversalClient, name string, opts RedisCuckooOptions) (*RedisCuckoo, error) {
	f, err := openRedisCuckooMeta(ctx, client, name, opts)
	if err != nil {
		return nil, fmt.Errorf("dedup: open redis cuckoo %q: %w", name, err)
	}
	return f, nil
}

// openRedisCuckooMeta is OpenRedisCuckoo, without the error's context.
func openRedisCuckooMeta(ctx context.Context, client redis.UniversalClient, name string, given RedisCuckooOptions) (*RedisCuckoo, error) {
	return openWithMeta(ctx, client, name, given.Existing, given.Force, func(stored map[string]string) (*RedisCuckoo, []redisMetaField, error) {
		opts := given
		err := adoptStored(stored,
			storedParam{"initial_capacity", &opts.Growth.InitialCapacity}, storedParam{"target_fpp", &opts.Growth.TargetFPP},
			storedParam{"growth_factor", &opts.Growth.Factor}, storedParam{"tightening", &opts.Growth.Tightening},
			storedParam{"shards", &opts.Shards}, storedParam{"bucket_size", &opts.BucketSize},
			storedParam{"fingerprint_bits", &opts.FingerprintBits}, storedParam{"max_layers", &opts.MaxLayers},
		)
		if err != nil {
			return nil, nil, err
		}
		f, err := newRedisCuckoo(client, name, opts.withDefaults())
		if err != nil {
			return nil, nil, err
		}
		return f, f.metaFields(), nil
	})
}

func newRedisCuckoo(client redis.UniversalClient, name string, opts RedisCuckooOptions) (*RedisCuckoo, error) {
	shards, err := newRedisShards(name, opts.Shards)
	if err != nil {
		return nil, err
	}
	if err := opts.CuckooOptions.validate(); err != nil {
		return nil, err
	}
	shard := opts.CuckooOptions
	shard.Growth.InitialCapacity = (opts.Growth.InitialCapacity + int64(opts.Shards) - 1) / int64(opts.Shards)
	f := &RedisCuckoo{client: client, shards: shards, opts: opts, shard: shard}
	// Size every layer a shard may have: up to MaxLayers, ending early where
	// the schedule or Redis's string size gives out.
	for i := range opts.MaxLayers {
		p, err := shard.layer(i)
		if err != nil || p.Buckets*uint64(opts.BucketSize)*uint64(p.Bits) > maxRedisCuckooLayerBits {
			if i == 0 {
				return nil, fmt.Errorf("%w: first layer of a shard (%d keys) cannot be sized for Redis: %v", ErrInvalidParams, shard.Growth.InitialCapacity, err)
			}
			break
		}
		f.layers = append(f.layers, p)
		f.args = append(f.args, p.Buckets, p.Bits)
	}
	return f, nil
}

// metaFields returns the stored parameters, in their stored order.
func (f *RedisCuckoo) metaFields() []redisMetaField {
	o := f.opts
	ftoa := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return []redisMetaField{
		{"kind", "cuckoo"},
		{"layout", redisCuckooLayout},
		{"hash", redisCuckooHash},
		{"target_fpp", ftoa(o.Growth.TargetFPP)},
		{"initial_capacity", strconv.FormatInt(o.Growth.InitialCapacity, 10)},
		{"growth_factor", ftoa(o.Growth.Factor)},
		{"tightening", ftoa(o.Growth.Tightening)},
		{"shards", strconv.Itoa(o.Shards)},
		{"bucket_size", strconv.Itoa(o.BucketSize)},
		{"fingerprint_bits", strconv.Itoa(o.FingerprintBits)},
		{"max_layers", strconv.Itoa(o.MaxLayers)},
		{redisMetaPolicy, o.Policy},
	}
}

// TestAndAdd adds each key the filter does not already hold and reports, per
// key, whether it was new. Within the batch the keys are answered as if added
// one by one, so a repeated key is new at most once. Keys that could not be
// stored (ErrFull: a shard has all the layers it may have and its newest is
// full) are reported false and listed in a *BatchError; the others' results
// stand. It is safe for concurrent use, also with other processes.
func (f *RedisCuckoo) TestAndAdd(ctx context.Context, keys [][]byte) ([]bool, error) {
	return f.run(ctx, keys, redisCuckooTestAndAdd, "test-and-add")
}

// Add stores every key, even one already present (see Cuckoo.Add). Keys that
// could not be stored (ErrFull, ErrTooManyCopies) are listed in a
// *BatchError.
func (f *RedisCuckoo) Add(ctx context.Context, keys [][]byte) error {
	_, err := f.run(ctx, keys, redisCuckooAdd, "add")
	return err
}

// Contains reports, per key, whether the filter holds it (or a false
// positive of it). It writes nothing.
func (f *RedisCuckoo) Contains(ctx context.Context, keys [][]byte) ([]bool, error) {
	return f.run(ctx, keys, redisCuckooContains, "contains")
}

// Delete removes one copy of each key's fingerprint, newest layer first, and
// reports per key whether one was found. Deleting a key that was never added
// removes another key's fingerprint when it is a false positive; see Cuckoo.
func (f *RedisCuckoo) Delete(ctx context.Context, keys [][]byte) ([]bool, error) {
	return f.run(ctx, keys, redisCuckooDelete, "delete")
}

// Forget makes each key read as absent: for a key the filter holds, it
// removes every copy of its fingerprint from both its buckets in every layer,
// in one atomic step per shard. It reports per key whether the key was
// present. What it can still get wrong is what Cuckoo.Forget can: a false
// positive is "present", and forgetting it removes the fingerprint of the
// key it collides with.
func (f *RedisCuckoo) Forget(ctx context.Context, keys [][]byte) ([]bool, error) {
	return f.run(ctx, keys, redisCuckooForget, "forget")
}

func (f *RedisCuckoo) run(ctx context.Context, keys [][]byte, mode, op string) ([]bool, error) {
	if f.closed.Load() {
		return nil, ErrClosed
	}
	out := make([]bool, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	hashes := make([]Hash, len(keys))
	for i, k := range keys {
		hashes[i] = HashKey(k)
	}
	// A shard's keys go in calls of at most redisCallKeys, in batch order
	// (one pipeline: Redis runs them in that order); the script never
	// answers "stale", so one round answers all.
	var full, copies []int
	err := redisRounds(f.shards.group(hashes, nil), func(parts []redisPart) ([][]int, error) {
		calls := make([]redisCall, len(parts))
		for p, part := range parts {
			calls[p] = f.call(part.shard, mode, hashes, part.idx)
		}
		replies, err := redisCuckooScript.run(ctx, f.client, calls)
		if err != nil {
			return nil, err
		}
		for p, part := range parts {
			flags, ok := replies[p].(string)
			if !ok || len(flags) != len(part.idx) {
				return nil, fmt.Errorf("unexpected script reply %v", replies[p])
			}
			for x, i := range part.idx {
				switch flags[x] {
				case '1':
					out[i] = true
				case '0':
				case 'F':
					full = append(full, i)
				case 'T':
					copies = append(copies, i)
				default:
					return nil, fmt.Errorf("unexpected script reply %q", flags)
				}
			}
		}
		return make([][]int, len(parts)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("dedup: redis cuckoo %q: %s: %w", f.shards.name, op, err)
	}
	if len(full)+len(copies) > 0 {
		cause := ErrFull
		if len(copies) > 0 {
			cause = ErrTooManyCopies
		}
		failed := append(full, copies...)
		sort.Ints(failed)
		return out, &BatchError{Keys: failed, Err: cause}
	}
	return out, nil
}

// call builds the script call for the keys idx of shard j.
func (f *RedisCuckoo) call(j int, mode string, hashes []Hash, idx []int) redisCall {
	keys := make([]string, 1, 1+len(f.layers))
	keys[0] = f.shards.key(j, "state")
	for i := range f.layers {
		keys = append(keys, f.shards.key(j, "slots:"+strconv.Itoa(i)))
	}
	args := make([]any, 0, 6+len(f.args)+2*len(idx))
	seed := 1 + rand.Int64N(math.MaxInt32-2)
	args = append(args, mode, f.opts.BucketSize, f.opts.MaxKicks, seed, len(f.layers), len(idx))
	args = append(args, f.args...)
	for _, q := range idx {
		h := hashes[q]
		args = append(args, h.H1&math.MaxUint32, h.H2>>11)
	}
	return redisCall{keys: keys, args: args}
}

// redisCuckooShard is one shard's state as stored in Redis.
type redisCuckooShard struct {
	items   []uint64 // per layer
	bytes   uint64   // length of its slot strings
	deletes uint64
}

// shardStates reads every shard's state and the length of its slot strings:
// two pipelined round trips.
func (f *RedisCuckoo) shardStates(ctx context.Context) ([]redisCuckooShard, error) {
	pipe := f.client.Pipeline()
	states := make([]*redis.MapStringStringCmd, f.opts.Shards)
	for j := range states {
		states[j] = pipe.HGetAll(ctx, f.shards.key(j, "state"))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	out := make([]redisCuckooShard, f.opts.Shards)
	lens := make([][]*redis.IntCmd, f.opts.Shards)
	pipe = f.client.Pipeline()
	for j, st := range states {
		m := st.Val()
		if s, ok := m["layers"]; ok {
			L, err := strconv.Atoi(s)
			if err != nil || L < 0 || L > len(f.layers) {
				return nil, fmt.Errorf("shard %d: bad layer count %q", j, s)
			}
			out[j].items = make([]uint64, L)
		}
		for i := range out[j].items {
			if s, ok := m["n"+strconv.Itoa(i)]; ok {
				n, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("shard %d: bad item count %q for layer %d", j, s, i)
				}
				out[j].items[i] = n
			}
			lens[j] = append(lens[j], pipe.StrLen(ctx, f.shards.key(j, "slots:"+strconv.Itoa(i))))
		}
		if s, ok := m["deletes"]; ok {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("shard %d: bad delete count %q", j, s)
			}
			out[j].deletes = n
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	for j := range out {
		for _, c := range lens[j] {
			out[j].bytes += uint64(c.Val())
		}
	}
	return out, nil
}

// Count returns the number of fingerprints stored, summed over the shards.
func (f *RedisCuckoo) Count(ctx context.Context) (uint64, error) {
	if f.closed.Load() {
		return 0, ErrClosed
	}
	shards, err := f.shardStates(ctx)
	if err != nil {
		return 0, fmt.Errorf("dedup: redis cuckoo %q: count: %w", f.shards.name, err)
	}
	var n uint64
	for _, s := range shards {
		for _, c := range s.items {
			n += c
		}
	}
	return n, nil
}

// Stats reports the filter's items, deletes, layers (each summed over the
// shards that have it: capacity, slots, fingerprints and load factor), the
// memory of its slot strings and its estimated false-positive rate (the mean
// over shards, as a key falls in each shard with equal probability). It reads
// every shard's state: two pipelined round trips.
func (f *RedisCuckoo) Stats(ctx context.Context) (Stats, error) {
	if f.closed.Load() {
		return Stats{}, ErrClosed
	}
	shards, err := f.shardStates(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("dedup: redis cuckoo %q: stats: %w", f.shards.name, err)
	}
	var layers []cuckooLayerStats
	var deletes, memory uint64
	var shardFPP, next float64
	b := f.opts.BucketSize
	for _, s := range shards {
		deletes += s.deletes
		memory += s.bytes
		pass := 1.0
		items := s.items
		if len(items) == 0 {
			// A shard no key reached yet has an empty layer 0 all the
			// same: counted, the capacity is the filter's.
			items = make([]uint64, 1)
		}
		for i, n := range items {
			p := f.layers[i]
			if i == len(layers) {
				layers = append(layers, cuckooLayerStats{Bits: p.Bits})
			}
			layers[i].Buckets += p.Buckets
			layers[i].Items += n
			pass *= 1 - cuckooLoadFPP(b, p.Bits, float64(n)/float64(p.Buckets*uint64(b)))
		}
		shardFPP += 1 - pass
		if L := len(items); L < len(f.layers) {
			next += float64(f.layers[L].Capacity)
		}
	}
	st := cuckooStats(f.shard, layers, deletes, memory)
	// cuckooStats sized capacities for one shard; scale to the shards that
	// have each layer, and use the per-shard rates.
	for i := range st.Layers {
		st.Layers[i].Capacity *= layers[i].Buckets / f.layers[i].Buckets
	}
	st.EstimatedFPP = shardFPP / float64(len(shards))
	st.NextLayerCapacity = uint64(next)
	st.TargetFPP = f.opts.Growth.TargetFPP
	return st, nil
}

// Close marks the filter closed: later calls return ErrClosed. It does not
// close the Redis client, which the caller owns, and leaves the filter in
// Redis. It is idempotent and safe for concurrent use.
func (f *RedisCuckoo) Close() error {
	f.closed.Store(true)
	return nil
}
