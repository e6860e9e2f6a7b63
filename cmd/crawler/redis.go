package main

import (
	"context"
	"fmt"

	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/stats"
)

// openRedisFilter opens the shared filter and stats in Redis, for an
// embedded run that continues (or joins) a Redis-backed deployment.
func openRedisFilter(ctx context.Context, s settings, policy string) (frontier.Filter, statsStore, func() error, error) {
	client, err := s.Redis.Client()
	if err != nil {
		return nil, nil, nil, err
	}
	g := dedup.Growth{InitialCapacity: s.Filter.Capacity, TargetFPP: s.Filter.FPP, Factor: s.Filter.Growth, Tightening: s.Filter.Tightening}
	var f interface {
		frontier.Filter
		Close() error
	}
	switch s.Filter.Kind {
	case "cuckoo":
		f, err = dedup.OpenRedisCuckoo(ctx, client, s.Filter.Name, dedup.RedisCuckooOptions{
			CuckooOptions: dedup.CuckooOptions{Growth: g, Policy: policy, Force: s.Filter.Force},
			Shards:        s.Filter.Shards,
		})
	default:
		f, err = dedup.OpenRedisBloom(ctx, client, s.Filter.Name, dedup.RedisBloomOptions{
			InitialCapacity: s.Filter.Capacity, TargetFPP: s.Filter.FPP, Factor: s.Filter.Growth,
			Tightening: s.Filter.Tightening, Shards: s.Filter.Shards, Policy: policy, Force: s.Filter.Force,
		})
	}
	if err != nil {
		client.Close()
		return nil, nil, nil, fmt.Errorf("filter %s in redis: %w", s.Filter.Name, err)
	}
	closeFn := func() error {
		err := f.Close()
		client.Close()
		return err
	}
	return f, stats.NewRedis(client, s.Frontier.Prefix), closeFn, nil
}
