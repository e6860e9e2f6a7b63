package dedup

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/redistest"
)

// adoptParams are the parameters an adoption test gives: zero means "not
// given".
type adoptParams struct {
	capacity int64
	fpp      float64
	factor   float64
	shards   int
	existing bool
}

// adoptKind opens one kind of stored filter by name, and reports the
// schedule (and shard count) the opened filter uses.
type adoptKind struct {
	open   func(ctx context.Context, name string, p adoptParams) (adoptFilter, error)
	growth func(f adoptFilter) (Growth, int)
	// state returns everything stored (Redis keys and values, or the
	// snapshot file's bytes), to show that opening wrote nothing.
	state func(tb testing.TB) map[string]string
}

// adoptFilter is the part of a filter the adoption tests use.
type adoptFilter interface {
	Contains(ctx context.Context, keys [][]byte) ([]bool, error)
	TestAndAdd(ctx context.Context, keys [][]byte) ([]bool, error)
	Close() error
}

func redisAdoptKinds(t *testing.T, kinds map[string]adoptKind) {
	clients := map[string]redis.UniversalClient{
		"single":  redistest.Start(t, redistest.Options{}).Client(),
		"cluster": redistest.StartCluster(t, 3).Client(),
	}
	for where, c := range clients {
		kinds["redis bloom "+where] = adoptKind{
			open: func(ctx context.Context, name string, p adoptParams) (adoptFilter, error) {
				return OpenRedisBloom(ctx, c, name, RedisBloomOptions{
					InitialCapacity: p.capacity, TargetFPP: p.fpp, Factor: p.factor, Shards: p.shards,
					Policy: "v1", Existing: p.existing,
				})
			},
			growth: func(f adoptFilter) (Growth, int) {
				o := f.(*RedisBloom).opts
				return Growth{InitialCapacity: o.InitialCapacity, TargetFPP: o.TargetFPP, Factor: o.Factor, Tightening: o.Tightening}, o.Shards
			},
			state: func(tb testing.TB) map[string]string { return redistest.Dump(tb, c) },
		}
		kinds["redis cuckoo "+where] = adoptKind{
			open: func(ctx context.Context, name string, p adoptParams) (adoptFilter, error) {
				return OpenRedisCuckoo(ctx, c, name, RedisCuckooOptions{
					CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: p.capacity, TargetFPP: p.fpp, Factor: p.factor}, Policy: "v1"},
					Shards:        p.shards, Existing: p.existing,
				})
			},
			growth: func(f adoptFilter) (Growth, int) {
				o := f.(*RedisCuckoo).opts
				return o.Growth, o.Shards
			},
			state: func(tb testing.TB) map[string]string { return redistest.Dump(tb, c) },
		}
	}
}

// snapshotAdoptKind opens a snapshot file in dir: loaded when it exists,
// else made and saved (unless p.existing).
func snapshotAdoptKind[F interface {
	adoptFilter
	Save(context.Context, string) error
}](dir string, load func(ctx context.Context, path string, g Growth) (F, error), create func(g Growth) (F, error), growth func(F) Growth) adoptKind {
	return adoptKind{
		open: func(ctx context.Context, name string, p adoptParams) (adoptFilter, error) {
			path := filepath.Join(dir, name)
			g := Growth{InitialCapacity: p.capacity, TargetFPP: p.fpp, Factor: p.factor}
			f, err := load(ctx, path, g)
			if err == nil || p.existing || !errors.Is(err, fs.ErrNotExist) {
				return f, err
			}
			f, err = create(g)
			if err != nil {
				return nil, err
			}
			return f, f.Save(ctx, path)
		},
		growth: func(f adoptFilter) (Growth, int) { return growth(f.(F)), 0 },
		state: func(tb testing.TB) map[string]string {
			out := map[string]string{}
			files, _ := filepath.Glob(filepath.Join(dir, "*"))
			for _, p := range files {
				data, err := os.ReadFile(p)
				if err != nil {
					tb.Fatal(err)
				}
				out[p] = string(data)
			}
			return out
		},
	}
}

// TestOpenAdoptsStoredParameters: every kind of stored filter, opened with
// no parameters given, takes those it was created with; a given parameter
// that differs is a *MismatchError naming both values; an open of an
// existing filter only writes nothing.
func TestOpenAdoptsStoredParameters(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	kinds := map[string]adoptKind{
		"scalable bloom snapshot": snapshotAdoptKind(dir,
			func(ctx context.Context, path string, g Growth) (*ScalableBloom, error) {
				return LoadScalableBloom(ctx, path, ScalableOptions{Growth: g, Policy: "v1"})
			},
			func(g Growth) (*ScalableBloom, error) {
				return NewScalableBloom(ScalableOptions{Growth: g, Policy: "v1"})
			},
			func(f *ScalableBloom) Growth { return f.growth }),
		"cuckoo snapshot": snapshotAdoptKind(dir,
			func(ctx context.Context, path string, g Growth) (*Cuckoo, error) {
				return LoadCuckoo(ctx, path, CuckooOptions{Growth: g, Policy: "v1"})
			},
			func(g Growth) (*Cuckoo, error) { return NewCuckoo(CuckooOptions{Growth: g, Policy: "v1"}) },
			func(f *Cuckoo) Growth { return f.opts.Growth }),
	}
	redisAdoptKinds(t, kinds)
	created := adoptParams{capacity: 10_000, fpp: 0.02, factor: 3, shards: 4}
	for kind, k := range kinds {
		t.Run(kind, func(t *testing.T) {
			name := "adopt-" + strings.ReplaceAll(kind, " ", "-")
			p := created
			if strings.Contains(kind, "snapshot") {
				p.shards = 0
			}
			f, err := k.open(ctx, name, p)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			key := [][]byte{[]byte("https://adopt.example/")}
			if _, err := f.TestAndAdd(ctx, key); err != nil {
				t.Fatal(err)
			}
			if s, ok := f.(interface {
				Save(context.Context, string) error
			}); ok {
				if err := s.Save(ctx, filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			f.Close()
			wantGrowth, wantShards := k.growth(f)

			before := k.state(t)
			for _, tt := range []struct {
				name  string
				given adoptParams
				field string // "": opens; else the *MismatchError's field
				value string // the given value it names
				store string // the stored value it names
			}{
				{name: "nothing given", given: adoptParams{existing: true}},
				{name: "same values given", given: adoptParams{capacity: 10_000, fpp: 0.02, existing: true}},
				{name: "capacity conflicts", given: adoptParams{capacity: 10_000_000, existing: true}, field: "initial_capacity", value: "10000000", store: "10000"},
				{name: "fpp conflicts", given: adoptParams{fpp: 0.001, existing: true}, field: "target_fpp", value: "0.001", store: "0.02"},
				{name: "growth conflicts", given: adoptParams{factor: 2, existing: true}, field: "growth_factor", value: "2", store: "3"},
				{name: "nothing given, may create", given: adoptParams{}},
			} {
				g, err := k.open(ctx, name, tt.given)
				if tt.field != "" {
					var me *MismatchError
					if !errors.As(err, &me) || me.Field != tt.field || me.Given != tt.value || me.Stored != tt.store {
						t.Errorf("%s: open = %v, want a *MismatchError on %s naming %s (stored) and %s (given)", tt.name, err, tt.field, tt.store, tt.value)
					} else if msg := err.Error(); !strings.Contains(msg, tt.value) || !strings.Contains(msg, tt.store) {
						t.Errorf("%s: error %q does not name both values", tt.name, msg)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: open: %v", tt.name, err)
					continue
				}
				gotGrowth, gotShards := k.growth(g)
				if gotGrowth != wantGrowth || gotShards != wantShards {
					t.Errorf("%s: opened with %+v and %d shards, want the stored %+v and %d", tt.name, gotGrowth, gotShards, wantGrowth, wantShards)
				}
				if held, err := g.Contains(ctx, key); err != nil || !held[0] {
					t.Errorf("%s: Contains(stored key) = %v, %v, want true", tt.name, held, err)
				}
				g.Close()
			}
			if after := k.state(t); !maps.Equal(before, after) {
				t.Errorf("opening the existing filter changed what is stored (%d entries before, %d after)", len(before), len(after))
			}
			// An open of an existing filter only fails on a missing one,
			// and creates nothing.
			if _, err := k.open(ctx, name+"-missing", adoptParams{existing: true}); err == nil {
				t.Errorf("open existing of a missing filter: no error")
			} else if strings.HasPrefix(kind, "redis") && !errors.Is(err, ErrNotFound) {
				t.Errorf("open existing of a missing filter = %v, want ErrNotFound", err)
			}
			if after := k.state(t); !maps.Equal(before, after) {
				t.Errorf("opening a missing filter with Existing wrote something (%d entries before, %d after)", len(before), len(after))
			}
		})
	}
}

// TestWindowAdoptsStoredParameters: a revisit window of each kind (in
// Redis, single and Cluster, and in a snapshot file), opened with nothing
// given, takes its stored window, granularity and target rate, and sizes a
// new generation as the stored ones; a parameter given otherwise is a
// *MismatchError naming both values.
func TestWindowAdoptsStoredParameters(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	type opener func(ctx context.Context, name string, w WindowOptions, capacity int64, fpp float64) (*Window, error)
	// loadOrNew loads a window file, or makes a new window if there is none.
	loadOrNew := func(load, create func() (*Window, error)) (*Window, error) {
		if win, err := load(); !errors.Is(err, fs.ErrNotExist) {
			return win, err
		}
		return create()
	}
	kinds := map[string]opener{
		"bloom snapshot": func(ctx context.Context, name string, w WindowOptions, capacity int64, fpp float64) (*Window, error) {
			gen := ScalableOptions{Growth: Growth{InitialCapacity: capacity, TargetFPP: fpp}, Policy: "v1"}
			return loadOrNew(func() (*Window, error) { return LoadBloomWindow(ctx, filepath.Join(dir, name), w, gen) },
				func() (*Window, error) { return NewBloomWindow(w, gen) })
		},
		"cuckoo snapshot": func(ctx context.Context, name string, w WindowOptions, capacity int64, fpp float64) (*Window, error) {
			gen := CuckooOptions{Growth: Growth{InitialCapacity: capacity, TargetFPP: fpp}, Policy: "v1"}
			return loadOrNew(func() (*Window, error) { return LoadCuckooWindow(ctx, filepath.Join(dir, name), w, gen) },
				func() (*Window, error) { return NewCuckooWindow(w, gen) })
		},
	}
	for where, c := range map[string]redis.UniversalClient{
		"single":  redistest.Start(t, redistest.Options{}).Client(),
		"cluster": redistest.StartCluster(t, 3).Client(),
	} {
		kinds["redis bloom "+where] = func(ctx context.Context, name string, w WindowOptions, capacity int64, fpp float64) (*Window, error) {
			return OpenRedisBloomWindow(ctx, c, name, w, RedisBloomOptions{InitialCapacity: capacity, TargetFPP: fpp, Shards: 2, Policy: "v1"})
		}
		kinds["redis cuckoo "+where] = func(ctx context.Context, name string, w WindowOptions, capacity int64, fpp float64) (*Window, error) {
			return OpenRedisCuckooWindow(ctx, c, name, w, RedisCuckooOptions{
				CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: capacity, TargetFPP: fpp}, Policy: "v1"}, Shards: 2,
			})
		}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for kind, open := range kinds {
		t.Run(kind, func(t *testing.T) {
			name := "window-" + strings.ReplaceAll(kind, " ", "-")
			clock := newFakeClock(t0)
			created := WindowOptions{After: time.Hour, Granularity: 4, Clock: clock}
			w, err := open(ctx, name, created, 10_000, 0.02)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			key := [][]byte{[]byte("https://window.example/")}
			if _, err := w.TestAndAdd(ctx, key); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(kind, "redis") {
				if err := w.Save(ctx, filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			w.Close()
			// A period later, nothing given: the stored parameters, and a new
			// generation sized as the stored one.
			clock.ns.Add(int64(15 * time.Minute))
			w, err = open(ctx, name, WindowOptions{Clock: clock}, 0, 0)
			if err != nil {
				t.Fatalf("reopen with nothing given: %v", err)
			}
			if o := w.Options(); o.After != time.Hour || o.Granularity != 4 || w.target != 0.02 {
				t.Errorf("reopened window: after %v, granularity %d, target %v; want the stored 1h, 4, 0.02", o.After, o.Granularity, w.target)
			}
			if _, err := w.TestAndAdd(ctx, [][]byte{[]byte("https://window.example/new")}); err != nil {
				t.Fatal(err)
			}
			if held, err := w.Contains(ctx, key); err != nil || !held[0] {
				t.Errorf("Contains(stored key) = %v, %v", held, err)
			}
			gens, err := w.Generations(ctx)
			if err != nil || len(gens) != 2 {
				t.Fatalf("Generations = %d, %v; want the stored one and a new one", len(gens), err)
			}
			for _, g := range gens {
				if c := g.Stats.Layers[0].Capacity; c > 20_000 {
					t.Errorf("generation %d: first layer of %d keys, want sized as the stored one (10,000 keys)", g.Epoch, c)
				}
			}
			w.Close()
			for _, tt := range []struct {
				w           WindowOptions
				capacity    int64
				fpp         float64
				field       string
				stored, got string
			}{
				{w: WindowOptions{After: 2 * time.Hour, Clock: clock}, field: "window", stored: "3600000000000", got: "7200000000000"},
				{w: WindowOptions{Granularity: 8, Clock: clock}, field: "granularity", stored: "4", got: "8"},
				{w: WindowOptions{Clock: clock}, fpp: 0.001, field: "target_fpp", stored: "0.02", got: "0.001"},
				{w: WindowOptions{Clock: clock}, capacity: 20_000, field: "initial_capacity", stored: "10000", got: "20000"},
			} {
				w, err := open(ctx, name, tt.w, tt.capacity, tt.fpp)
				if err == nil { // a window in Redis opens its generations on first use
					_, err = w.Contains(ctx, key)
					w.Close()
				}
				if tt.field == "window" && strings.HasPrefix(kind, "redis") {
					tt.field = "after_ns"
				}
				var me *MismatchError
				if !errors.As(err, &me) || me.Field != tt.field || !strings.Contains(me.Stored, tt.stored) || !strings.Contains(me.Given, tt.got) {
					t.Errorf("open with %s %s given: %v, want a *MismatchError naming %s (stored) and %s", tt.field, tt.got, err, tt.stored, tt.got)
				}
			}
		})
	}
}
