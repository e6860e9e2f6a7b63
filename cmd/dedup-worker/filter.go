package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
)

// seenFilter is what the binary needs of a dedup filter.
type seenFilter interface {
	frontier.Filter
	Stats(ctx context.Context) (dedup.Stats, error)
	Close() error
}

// snapshotter is an in-memory filter that can be saved.
type snapshotter interface {
	Save(ctx context.Context, path string) error
}

var (
	_ seenFilter  = (*dedup.ScalableBloom)(nil)
	_ seenFilter  = (*dedup.Cuckoo)(nil)
	_ seenFilter  = (*dedup.RedisBloom)(nil)
	_ seenFilter  = (*dedup.RedisCuckoo)(nil)
	_ snapshotter = (*dedup.ScalableBloom)(nil)
)

func growth(f config.Filter) dedup.Growth {
	return dedup.Growth{InitialCapacity: f.Capacity, TargetFPP: f.FPP, Factor: f.Growth, Tightening: f.Tightening}
}

// openFilter opens the filter the settings describe: in Redis if rdb is
// set, else in memory (loaded from the snapshot file, if one is set and
// exists). policy is the normalize policy version stored with the filter.
func openFilter(ctx context.Context, f config.Filter, rdb redis.UniversalClient, policy string) (seenFilter, error) {
	if rdb != nil {
		switch f.Kind {
		case "bloom":
			return dedup.OpenRedisBloom(ctx, rdb, f.Name, dedup.RedisBloomOptions{
				InitialCapacity: f.Capacity, TargetFPP: f.FPP, Factor: f.Growth, Tightening: f.Tightening,
				Shards: f.Shards, Policy: policy, Force: f.Force,
			})
		case "cuckoo":
			return dedup.OpenRedisCuckoo(ctx, rdb, f.Name, dedup.RedisCuckooOptions{
				CuckooOptions: dedup.CuckooOptions{Growth: growth(f), Policy: policy, Force: f.Force},
				Shards:        f.Shards,
			})
		}
		return nil, fmt.Errorf("unknown filter kind %q", f.Kind)
	}
	switch f.Kind {
	case "bloom":
		o := dedup.ScalableOptions{Growth: growth(f), Policy: policy, Force: f.Force}
		if f.Snapshot != "" {
			b, err := dedup.LoadScalableBloom(ctx, f.Snapshot, o)
			if !errors.Is(err, fs.ErrNotExist) {
				return b, err
			}
		}
		return dedup.NewScalableBloom(o)
	case "cuckoo":
		o := dedup.CuckooOptions{Growth: growth(f), Policy: policy, Force: f.Force}
		if f.Snapshot != "" {
			c, err := dedup.LoadCuckoo(ctx, f.Snapshot, o)
			if !errors.Is(err, fs.ErrNotExist) {
				return c, err
			}
		}
		return dedup.NewCuckoo(o)
	}
	return nil, fmt.Errorf("unknown filter kind %q", f.Kind)
}

// saveFilter writes an in-memory filter to its snapshot file; it does
// nothing for a Redis filter or without a snapshot file.
func saveFilter(ctx context.Context, f seenFilter, path string) error {
	if path == "" {
		return nil
	}
	switch s := f.(type) {
	case *dedup.ScalableBloom:
		return s.Save(ctx, path)
	case *dedup.Cuckoo:
		return s.Save(ctx, path)
	}
	return nil
}
