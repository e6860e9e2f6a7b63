package dedup

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// redisShards spreads one logical Redis-backed filter over a fixed number of
// shards and names each shard's Redis keys. Every key of shard j carries the
// Redis Cluster hash tag "{<name>:<j>}", so all of a shard's keys live in one
// hash slot and one Lua script may touch all of them; different shards land
// in different slots and so spread over a cluster's masters.
//
// The shard of a key is a function of its Hash chosen to be independent of
// the bit positions (see shard), so each shard is an ordinary filter over a
// uniform 1/n of the keys. The mapping is part of the storage format: a test
// pins it. A redisShards is a small immutable value, safe for concurrent use.
type redisShards struct {
	name string
	n    int
}

// newRedisShards validates name and n for a sharded filter. A name may not
// hold '{' or '}', which would change the hash tag, and may not be empty.
func newRedisShards(name string, n int) (redisShards, error) {
	switch {
	case name == "":
		return redisShards{}, fmt.Errorf("%w: empty filter name", ErrInvalidParams)
	case strings.ContainsAny(name, "{}"):
		return redisShards{}, fmt.Errorf("%w: filter name %q holds '{' or '}', which would break its Redis Cluster hash tags", ErrInvalidParams, name)
	case n < 1 || n > maxRedisShards:
		return redisShards{}, fmt.Errorf("%w: shard count %d must be in [1, %d]", ErrInvalidParams, n, maxRedisShards)
	}
	return redisShards{name: name, n: n}, nil
}

// maxRedisShards bounds Options.Shards: more shards than Redis Cluster has
// slots buys nothing.
const maxRedisShards = 16384

// shard returns the shard (in [0, n)) of a key with hash h.
//
// Bit positions are (H1 + i·H2) mod bitSize; taking the shard from H1 mod n
// directly would tie the shard to position 0 (with n dividing bitSize, every
// key of shard j would set bits ≡ j mod n). So both halves are first mixed
// with murmur3's 64-bit finalizer, whose every output bit depends on every
// input bit, and the shard is the high part of mix·n (Lemire's reduction).
func (s redisShards) shard(h Hash) int {
	x := fmix64(h.H2 ^ bits.RotateLeft64(h.H1, 31))
	hi, _ := bits.Mul64(x, uint64(s.n))
	return int(hi)
}

// fmix64 is murmur3's 64-bit finalizer.
func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// group appends the index of each hash to its shard's list in dst (reused
// when it has n lists) and returns dst.
func (s redisShards) group(hashes []Hash, dst [][]int) [][]int {
	if len(dst) != s.n {
		dst = make([][]int, s.n)
	}
	for j := range dst {
		dst[j] = dst[j][:0]
	}
	for i, h := range hashes {
		j := s.shard(h)
		dst[j] = append(dst[j], i)
	}
	return dst
}

// tag returns shard j's hash tag, "{<name>:<j>}".
func (s redisShards) tag(j int) string {
	return "{" + s.name + ":" + strconv.Itoa(j) + "}"
}

// key returns the Redis key of shard j with the given suffix, e.g.
// "{crawl:3}:state" for key(3, "state").
func (s redisShards) key(j int, suffix string) string {
	return s.tag(j) + ":" + suffix
}

// metaKey returns the key of the filter's metadata hash, "<name>:meta". It
// has no hash tag: it is read and written alone.
func (s redisShards) metaKey() string { return s.name + ":meta" }
