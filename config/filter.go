package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/dedup"
)

// SeenFilter is a dedup filter opened from a Filter section: any of dedup's
// four (Bloom or cuckoo, in memory or in Redis).
type SeenFilter interface {
	// Contains reports, per key, whether the filter holds it (read-only).
	Contains(ctx context.Context, keys [][]byte) ([]bool, error)
	// TestAndAdd adds the keys and reports, per key, whether it was new.
	TestAndAdd(ctx context.Context, keys [][]byte) ([]bool, error)
	// Stats reports the filter's fill, memory and estimated error rate.
	Stats(ctx context.Context) (dedup.Stats, error)
	Close() error
}

var (
	_ SeenFilter = (*dedup.ScalableBloom)(nil)
	_ SeenFilter = (*dedup.Cuckoo)(nil)
	_ SeenFilter = (*dedup.RedisBloom)(nil)
	_ SeenFilter = (*dedup.RedisCuckoo)(nil)
)

// growth is the section's layer schedule.
func (f Filter) growth() dedup.Growth {
	return dedup.Growth{InitialCapacity: f.Capacity, TargetFPP: f.FPP, Factor: f.Growth, Tightening: f.Tightening}
}

// Open opens the filter the section describes, storing policy (the
// normalize policy version) with it: in Redis when rdb is not nil (the
// filter does not close rdb), else in memory, loaded from the Snapshot file
// when one is set and exists.
func (f Filter) Open(ctx context.Context, rdb redis.UniversalClient, policy string) (SeenFilter, error) {
	var (
		sf  SeenFilter
		err error
	)
	switch {
	case rdb != nil && f.Kind == "bloom":
		sf, err = dedup.OpenRedisBloom(ctx, rdb, f.Name, dedup.RedisBloomOptions{
			InitialCapacity: f.Capacity, TargetFPP: f.FPP, Factor: f.Growth, Tightening: f.Tightening,
			Shards: f.Shards, Policy: policy, Force: f.Force,
		})
	case rdb != nil && f.Kind == "cuckoo":
		sf, err = dedup.OpenRedisCuckoo(ctx, rdb, f.Name, dedup.RedisCuckooOptions{
			CuckooOptions: dedup.CuckooOptions{Growth: f.growth(), Policy: policy, Force: f.Force},
			Shards:        f.Shards,
		})
	case f.Kind == "bloom":
		o := dedup.ScalableOptions{Growth: f.growth(), Policy: policy, Force: f.Force}
		sf, err = loadOr(ctx, f.Snapshot, o, dedup.LoadScalableBloom, dedup.NewScalableBloom)
	case f.Kind == "cuckoo":
		o := dedup.CuckooOptions{Growth: f.growth(), Policy: policy, Force: f.Force}
		sf, err = loadOr(ctx, f.Snapshot, o, dedup.LoadCuckoo, dedup.NewCuckoo)
	default:
		return nil, &FieldError{Field: "filter.kind", Err: fmt.Errorf("unknown filter kind %q (bloom or cuckoo)", f.Kind)}
	}
	if errors.Is(err, dedup.ErrCorrupt) && rdb == nil {
		if k := snapshotKind(f.Snapshot); k != "" && k != f.Kind {
			err = &kindError{stored: k, given: f.Kind}
		}
	}
	if err != nil {
		where := "in memory"
		if rdb != nil {
			where = "in redis"
		} else if f.Snapshot != "" {
			where = f.Snapshot
		}
		return nil, fmt.Errorf("%s filter %q (%s): %w", f.Kind, f.Name, where, err)
	}
	return sf, nil
}

// loadOr loads an in-memory filter from path, or makes a new one when path
// is empty or does not exist.
func loadOr[F SeenFilter, O any](ctx context.Context, path string, o O,
	load func(context.Context, string, O) (F, error), create func(O) (F, error)) (SeenFilter, error) {
	if path != "" {
		sf, err := load(ctx, path, o)
		if !errors.Is(err, fs.ErrNotExist) {
			return sf, err
		}
	}
	return create(o)
}

// Save writes an in-memory filter to the section's Snapshot file. It does
// nothing for a Redis filter or without a snapshot file.
func (f Filter) Save(ctx context.Context, sf SeenFilter) error {
	s, ok := sf.(interface {
		Save(ctx context.Context, path string) error
	})
	if f.Snapshot == "" || !ok {
		return nil
	}
	if err := s.Save(ctx, f.Snapshot); err != nil {
		return fmt.Errorf("save %s filter %q to %s: %w", f.Kind, f.Name, f.Snapshot, err)
	}
	return nil
}

// kindError is a snapshot of another filter kind than filter.kind.
type kindError struct{ stored, given string }

func (e *kindError) Error() string {
	return fmt.Sprintf("%s snapshot, filter.kind is %s", e.stored, e.given)
}

// Unwrap returns dedup.ErrMismatch: waiting will not help.
func (e *kindError) Unwrap() error { return dedup.ErrMismatch }

// snapshotKind names the filter kind a snapshot file holds, from its magic
// bytes (see dedup's snapshot formats), or "" if it is neither.
func snapshotKind(path string) string {
	file, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer file.Close()
	var magic [8]byte
	if _, err := io.ReadFull(file, magic[:]); err != nil {
		return ""
	}
	switch string(magic[:]) {
	case "SIEVEBF\n":
		return "bloom"
	case "SIEVECKO":
		return "cuckoo"
	}
	return ""
}
