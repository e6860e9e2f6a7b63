package dedup

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// DeleteRedis deletes every key of the Redis filter or revisit window named
// name (RedisBloom, RedisCuckoo, a window's generations): "<name>:…" and its
// shards' "{<name>:…}…", on every master of a cluster. It returns how many
// keys it deleted. A filter whose name extends name with other characters
// than ':' is left alone. Processes that have the filter open must not use
// it any more.
func DeleteRedis(ctx context.Context, rdb redis.UniversalClient, name string) (int64, error) {
	esc := globEscape(name)
	var total int64
	sweep := func(ctx context.Context, c redis.Cmdable) error {
		for _, p := range []string{esc + ":*", "{" + esc + ":*"} {
			it := c.Scan(ctx, 0, p, 1000).Iterator()
			for it.Next(ctx) {
				n, err := c.Unlink(ctx, it.Val()).Result() // one key a command: they lie in different slots
				if err != nil {
					return err
				}
				total += n
			}
			if err := it.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu = make(chan struct{}, 1)
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu <- struct{}{}
			defer func() { <-mu }()
			return sweep(ctx, c)
		})
	} else {
		err = sweep(ctx, rdb)
	}
	if err != nil {
		return total, fmt.Errorf("dedup: delete redis filter %q: %w", name, err)
	}
	return total, nil
}
