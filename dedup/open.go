package dedup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/redis/go-redis/v9"
)

// Filter is what every filter Open returns can do: the operations of a
// seen-URL filter, its statistics, and Close. *ScalableBloom, *Cuckoo,
// *RedisBloom, *RedisCuckoo and *Window implement it.
type Filter interface {
	// Contains reports, per key, whether the filter holds it (read-only).
	Contains(ctx context.Context, keys [][]byte) ([]bool, error)
	// TestAndAdd adds the keys and reports, per key, whether it was new.
	TestAndAdd(ctx context.Context, keys [][]byte) ([]bool, error)
	// Stats reports the filter's fill, memory and estimated error rate.
	Stats(ctx context.Context) (Stats, error)
	Close() error
}

var (
	_ Filter = (*ScalableBloom)(nil)
	_ Filter = (*Cuckoo)(nil)
	_ Filter = (*RedisBloom)(nil)
	_ Filter = (*RedisCuckoo)(nil)
	_ Filter = (*Window)(nil)
)

// ErrUnknownKind is returned (wrapped) by Open for a Spec.Kind other than
// "bloom" or "cuckoo". It wraps ErrInvalidParams.
var ErrUnknownKind = fmt.Errorf("%w: unknown filter kind", ErrInvalidParams)

// Spec says which filter Open opens: its kind, where it is stored, and the
// parameters it is created with. A zero parameter means "the stored value"
// for a filter that exists and the default for one that is created; a
// given one that differs from the stored value is a *MismatchError.
type Spec struct {
	// Kind is "bloom" (ScalableBloom, RedisBloom) or "cuckoo" (Cuckoo,
	// RedisCuckoo).
	Kind string
	// Redis, when not nil, stores the filter under Name (Open does not
	// close it); nil keeps it in memory, loaded from Snapshot when that
	// file exists.
	Redis redis.UniversalClient
	Name  string
	// Snapshot is the file an in-memory filter is loaded from (and saved
	// to by its owner); empty: a new filter every time.
	Snapshot string
	// Growth sizes the layers; Shards spreads a Redis filter over shards.
	Growth Growth
	Shards int
	// Policy is the normalization policy version stored with the filter.
	Policy string
	// Force opens a filter stored under another policy, replacing it.
	Force bool
	// Existing opens only a filter that exists, and writes nothing; a
	// missing one is an error matching ErrNotFound.
	Existing bool
	// NoMirror turns off a Redis Bloom filter's local mirror of its bits
	// (RedisBloomOptions.MirrorBytes < 0). A mirror trusts that a bit
	// Redis set stays set; a failover to a replica that missed the write
	// breaks that, and a filter whose marks are waited on (ReplicaWait)
	// must then write them again rather than trust its mirror.
	NoMirror bool
	// Window, when not nil, makes the filter a revisit window of filters
	// of Kind (a *Window). With Existing its zero fields adopt the stored
	// window's.
	Window *WindowOptions
}

// Open opens the filter s describes: the one constructor for every kind
// and storage, so that callers map their settings to a Spec and never
// switch on kind × storage × window themselves. The formats are those of
// the constructors it calls (OpenRedisBloom, LoadScalableBloom,
// OpenRedisCuckooWindow, ...), unchanged.
func Open(ctx context.Context, s Spec) (Filter, error) {
	if s.Kind != "bloom" && s.Kind != "cuckoo" {
		return nil, fmt.Errorf("%w %q (bloom or cuckoo)", ErrUnknownKind, s.Kind)
	}
	if s.Redis != nil {
		return s.openRedis(ctx)
	}
	bloom := ScalableOptions{Growth: s.Growth, Policy: s.Policy, Force: s.Force}
	cuckoo := CuckooOptions{Growth: s.Growth, Policy: s.Policy, Force: s.Force}
	switch {
	case s.Window != nil && s.Kind == "bloom":
		return loadOr(ctx, s, func(ctx context.Context, path string) (*Window, error) {
			return LoadBloomWindow(ctx, path, *s.Window, bloom)
		},
			func() (*Window, error) { return NewBloomWindow(*s.Window, bloom) })
	case s.Window != nil:
		return loadOr(ctx, s, func(ctx context.Context, path string) (*Window, error) {
			return LoadCuckooWindow(ctx, path, *s.Window, cuckoo)
		},
			func() (*Window, error) { return NewCuckooWindow(*s.Window, cuckoo) })
	case s.Kind == "bloom":
		return loadOr(ctx, s, func(ctx context.Context, path string) (*ScalableBloom, error) {
			return LoadScalableBloom(ctx, path, bloom)
		},
			func() (*ScalableBloom, error) { return NewScalableBloom(bloom) })
	default:
		return loadOr(ctx, s, func(ctx context.Context, path string) (*Cuckoo, error) { return LoadCuckoo(ctx, path, cuckoo) },
			func() (*Cuckoo, error) { return NewCuckoo(cuckoo) })
	}
}

func (s Spec) openRedis(ctx context.Context) (Filter, error) {
	bloom := RedisBloomOptions{
		InitialCapacity: s.Growth.InitialCapacity, TargetFPP: s.Growth.TargetFPP, Factor: s.Growth.Factor, Tightening: s.Growth.Tightening,
		Shards: s.Shards, Policy: s.Policy, Force: s.Force, Existing: s.Existing,
	}
	if s.NoMirror {
		bloom.MirrorBytes = -1
	}
	cuckoo := RedisCuckooOptions{
		CuckooOptions: CuckooOptions{Growth: s.Growth, Policy: s.Policy, Force: s.Force}, Shards: s.Shards, Existing: s.Existing,
	}
	switch {
	case s.Window != nil && s.Kind == "bloom":
		return OpenRedisBloomWindow(ctx, s.Redis, s.Name, *s.Window, bloom)
	case s.Window != nil:
		return OpenRedisCuckooWindow(ctx, s.Redis, s.Name, *s.Window, cuckoo)
	case s.Kind == "bloom":
		return OpenRedisBloom(ctx, s.Redis, s.Name, bloom)
	default:
		return OpenRedisCuckoo(ctx, s.Redis, s.Name, cuckoo)
	}
}

// loadOr loads an in-memory filter from s.Snapshot, or makes a new one when
// there is no snapshot file (and s.Existing does not require one).
func loadOr[F Filter](ctx context.Context, s Spec, load func(context.Context, string) (F, error), create func() (F, error)) (Filter, error) {
	if s.Snapshot != "" {
		f, err := load(ctx, s.Snapshot)
		if !errors.Is(err, fs.ErrNotExist) {
			if err != nil {
				return nil, err
			}
			return f, nil
		}
	}
	if s.Existing {
		return nil, fmt.Errorf("%w: no snapshot %q", ErrNotFound, s.Snapshot)
	}
	f, err := create()
	if err != nil {
		return nil, err
	}
	return f, nil
}
