package dedup

import "fmt"

// redisCallKeys bounds the keys one Redis call (a script run or a native
// command) handles for one shard: Redis runs nothing else meanwhile, so a
// call must stay short (a thousand keys take Redis a few milliseconds at
// most).
const redisCallKeys = 1024

// maxRedisAttempts bounds the rounds in a row that answer none of a
// shard's keys: each such round follows a "stale" answer that either
// corrects the cached layer count or adds a layer, and a filter has at most
// maxLayers layers.
const maxRedisAttempts = 2*maxLayers + 4

// redisPart is the part of a batch one Redis call serves: keys of one
// shard, as indices into the batch, in batch order.
type redisPart struct {
	shard int
	idx   []int
}

// redisRounds is the driver the Redis-backed filters (RedisBloom under
// either protocol, RedisCuckoo) share for sharded calls. groups holds each
// shard's keys in batch order. Each round cuts every shard's pending keys
// into parts of at most redisCallKeys and hands them all to round, which
// sends them (typically in one pipeline: one round trip) and returns, per
// part, the keys it did not answer — a stale shard's, or those past a
// layer's room — in batch order. Those go first in the shard's next round, before its
// later keys, so every shard's keys are answered in batch order, as the
// filters' "a repeated key is new at most once" needs. It fails when a
// shard makes no progress for maxRedisAttempts rounds in a row.
func redisRounds(groups [][]int, round func(parts []redisPart) ([][]int, error)) error {
	pending := make([][]int, len(groups))
	copy(pending, groups)
	idle := make([]int, len(groups))
	for {
		var parts []redisPart
		for j, idx := range pending {
			for at := 0; at < len(idx); at += redisCallKeys {
				parts = append(parts, redisPart{shard: j, idx: idx[at:min(at+redisCallKeys, len(idx))]})
			}
		}
		if len(parts) == 0 {
			return nil
		}
		left, err := round(parts)
		if err != nil {
			return err
		}
		for j := range pending {
			pending[j] = nil
		}
		answered := make(map[int]bool, len(parts))
		for p, part := range parts {
			j := part.shard
			if len(left[p]) < len(part.idx) {
				answered[j] = true
			}
			pending[j] = append(pending[j], left[p]...)
		}
		for j, idx := range pending {
			if len(idx) == 0 || answered[j] {
				idle[j] = 0
				continue
			}
			if idle[j]++; idle[j] == maxRedisAttempts {
				return fmt.Errorf("shard %d still stale after %d attempts", j, idle[j])
			}
		}
	}
}
