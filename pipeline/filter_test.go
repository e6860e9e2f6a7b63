package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/redistest"
)

// TestFilterOpen opens every kind of filter from a Filter section, in
// memory (with a snapshot that a second open reloads) and in a real Redis
// (which a second open finds filled), and checks that each remembers a key.
func TestFilterOpen(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	tests := []struct {
		name string
		kind string
		rdb  redis.UniversalClient
		want string // Stats().Kind
	}{
		{"bloom in memory", "bloom", nil, "bloom"},
		{"cuckoo in memory", "cuckoo", nil, "cuckoo"},
		{"bloom in redis", "bloom", rdb, "bloom"},
		{"cuckoo in redis", "cuckoo", rdb, "cuckoo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := config.Default().Filter
			fc.Kind, fc.Name, fc.Capacity, fc.FPP = tt.kind, "t:"+tt.kind, 1000, 0.01
			if tt.rdb == nil {
				fc.Snapshot = filepath.Join(t.TempDir(), "seen")
			}
			key := [][]byte{[]byte("https://example.com/")}
			f, err := pipeline.OpenFilter(ctx, fc, tt.rdb, "1")
			if err != nil {
				t.Fatal(err)
			}
			if got, err := f.TestAndAdd(ctx, key); err != nil || !got[0] {
				t.Fatalf("first TestAndAdd = %v, %v; want new", got, err)
			}
			st, err := f.Stats(ctx)
			if err != nil || st.Kind != tt.want || st.Items != 1 {
				t.Fatalf("Stats = kind %q, %d items, %v; want %q, 1 item", st.Kind, st.Items, err, tt.want)
			}
			if err := pipeline.SaveFilter(ctx, fc, f); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			f, err = pipeline.OpenFilter(ctx, fc, tt.rdb, "1")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if got, err := f.Contains(ctx, key); err != nil || !got[0] {
				t.Fatalf("reopened Contains = %v, %v; want the key kept", got, err)
			}
			// Another policy version is refused, naming the mismatch.
			if _, err := pipeline.OpenFilter(ctx, fc, tt.rdb, "2"); !errors.Is(err, dedup.ErrMismatch) {
				t.Fatalf("open under policy 2: err = %v, want ErrMismatch", err)
			}
		})
	}
}

func TestFilterOpenUnknownKind(t *testing.T) {
	fc := config.Default().Filter
	fc.Kind = "quotient"
	_, err := pipeline.OpenFilter(context.Background(), fc, nil, "1")
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Field != "filter.kind" {
		t.Fatalf("err = %v, want a FieldError for filter.kind", err)
	}
}

// TestFilterOpenOtherKind checks that a snapshot of the other filter kind
// is reported as such (issue 10 item 6: a cuckoo snapshot opened as a Bloom
// filter was "corrupt"), as a mismatch.
func TestFilterOpenOtherKind(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct{ stored, given string }{{"cuckoo", "bloom"}, {"bloom", "cuckoo"}} {
		fc := config.Default().Filter
		fc.Kind, fc.Capacity = tt.stored, 1000
		fc.Snapshot = filepath.Join(t.TempDir(), "seen")
		f, err := pipeline.OpenFilter(ctx, fc, nil, "p")
		if err != nil {
			t.Fatal(err)
		}
		if err := pipeline.SaveFilter(ctx, fc, f); err != nil {
			t.Fatal(err)
		}
		f.Close()
		fc.Kind = tt.given
		// filter.kind not given explicitly: the snapshot's kind is used.
		f, err = pipeline.OpenFilter(ctx, fc, nil, "p")
		if err != nil {
			t.Fatalf("open a %s snapshot, kind %s not given: %v", tt.stored, tt.given, err)
		}
		if st, err := f.Stats(ctx); err != nil || st.Kind != tt.stored {
			t.Errorf("open a %s snapshot, kind %s not given: Stats = %q, %v, want kind %s", tt.stored, tt.given, st.Kind, err, tt.stored)
		}
		f.Close()
		fc.Given = []string{"kind"}
		_, err = pipeline.OpenFilter(ctx, fc, nil, "p")
		want := tt.stored + " snapshot, filter.kind is " + tt.given
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, dedup.ErrMismatch) {
			t.Errorf("open a %s snapshot as %s: %v, want %q (a mismatch)", tt.stored, tt.given, err, want)
		}
	}
}

// TestFilterWindow: a revisit window stored under a section's name (in
// Redis and in a snapshot file, of both kinds) exists, OpenExistingFilter reads it
// (dedup.ReadWindow: its window, granularity, period and generations; Contains
// as the window holds keys) whatever filter.kind says when not given, and
// OpenFilter refuses it, since a window is written from its crawl's settings.
func TestFilterWindow(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	wo := dedup.WindowOptions{After: time.Hour, Granularity: 2}
	key := [][]byte{[]byte("https://example.com/")}
	for _, place := range []string{"redis", "snapshot"} {
		for _, kind := range []string{"bloom", "cuckoo"} {
			t.Run(place+" "+kind, func(t *testing.T) {
				fc := config.Default().Filter
				fc.Name, fc.Kind = "w:"+kind, other(kind)
				var rdb redis.UniversalClient
				var w *dedup.Window
				var err error
				switch {
				case place == "redis":
					rdb = srv.Client()
					if kind == "bloom" {
						w, err = dedup.OpenRedisBloomWindow(ctx, rdb, fc.Name, wo, dedup.RedisBloomOptions{InitialCapacity: 1000})
					} else {
						w, err = dedup.OpenRedisCuckooWindow(ctx, rdb, fc.Name, wo, dedup.RedisCuckooOptions{})
					}
				case kind == "bloom":
					w, err = dedup.NewBloomWindow(wo, dedup.ScalableOptions{})
				default:
					w, err = dedup.NewCuckooWindow(wo, dedup.CuckooOptions{})
				}
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.TestAndAdd(ctx, key); err != nil {
					t.Fatal(err)
				}
				if place == "snapshot" {
					fc.Snapshot = filepath.Join(t.TempDir(), "seen.w")
					if err := w.Save(ctx, fc.Snapshot); err != nil {
						t.Fatal(err)
					}
				}
				w.Close()
				if ok, err := pipeline.FilterExists(ctx, fc, rdb); !ok || err != nil {
					t.Errorf("Exists = %v, %v; want true", ok, err)
				}
				f, err := pipeline.OpenExistingFilter(ctx, fc, rdb, "")
				if err != nil {
					t.Fatalf("OpenExistingFilter: %v", err)
				}
				defer f.Close()
				if got, err := f.Contains(ctx, key); err != nil || !got[0] {
					t.Errorf("Contains = %v, %v; want held", got, err)
				}
				ws, err := dedup.ReadWindow(ctx, f)
				if err != nil || ws == nil || ws.After != time.Hour || ws.Granularity != 2 || ws.Period != 30*time.Minute || len(ws.Generations) != 1 {
					t.Errorf("ReadWindow = %+v, %v; want 1h, g=2, period 30m, 1 generation", ws, err)
				}
				if st, err := f.Stats(ctx); err != nil || st.Kind != kind || st.Items != 1 {
					t.Errorf("Stats = %+v, %v; want 1 item of kind %s", st, err, kind)
				}
				if _, err := pipeline.OpenFilter(ctx, fc, rdb, ""); !errors.Is(err, dedup.ErrMismatch) || !strings.Contains(err.Error(), "revisit window") {
					t.Errorf("Open = %v; want a refusal naming the revisit window", err)
				}
			})
		}
	}
}

// describeWhere is where a filter section's filter is stored.
type describeWhere struct {
	rdb   redis.UniversalClient // nil: a snapshot file
	state func(tb testing.TB) map[string]string
}

// TestFilterDescribesItself creates a filter of each kind in Redis (single
// and Cluster) and in a snapshot file with a small capacity given, then
// opens it as the commands do: with the defaults (a capacity of 10 million
// not given) it is adopted; a setting given that conflicts is an error
// naming both values; one given equal is logged as applying only at
// creation; OpenExistingFilter writes nothing and refuses a missing filter and
// filter.force.
func TestFilterDescribesItself(t *testing.T) {
	ctx := context.Background()
	single := redistest.Start(t, redistest.Options{}).Client()
	cluster := redistest.StartCluster(t, 3).Client()
	dir := t.TempDir()
	wheres := map[string]describeWhere{
		"redis":         {single, func(tb testing.TB) map[string]string { return redistest.Dump(tb, single) }},
		"redis cluster": {cluster, func(tb testing.TB) map[string]string { return redistest.Dump(tb, cluster) }},
		"snapshot": {nil, func(tb testing.TB) map[string]string {
			// The directory's files and their bytes.
			entries, err := os.ReadDir(dir)
			if err != nil {
				tb.Fatal(err)
			}
			out := map[string]string{}
			for _, e := range entries {
				data, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					tb.Fatal(err)
				}
				out[e.Name()] = string(data)
			}
			return out
		}},
	}
	for where, w := range wheres {
		for _, kind := range []string{"bloom", "cuckoo"} {
			t.Run(where+" "+kind, func(t *testing.T) {
				var logs bytes.Buffer
				section := func(given ...string) config.Filter {
					f := config.Default().Filter
					f.Name = "describe:" + kind
					if w.rdb == nil {
						f.Snapshot = filepath.Join(dir, "seen-"+kind)
					}
					f.Given = given
					f.Log = slog.New(slog.NewTextHandler(&logs, nil))
					return f
				}
				created := section("kind", "capacity")
				created.Kind, created.Capacity = kind, 10_000
				f, err := pipeline.OpenFilter(ctx, created, w.rdb, "p1")
				if err != nil {
					t.Fatal(err)
				}
				key := [][]byte{[]byte("https://describe.example/")}
				if _, err := f.TestAndAdd(ctx, key); err != nil {
					t.Fatal(err)
				}
				if err := pipeline.SaveFilter(ctx, created, f); err != nil {
					t.Fatal(err)
				}
				f.Close()
				before := w.state(t)
				if logs.Len() != 0 {
					t.Errorf("creating the filter logged %q", logs.String())
				}

				type opener func(context.Context, config.Filter, redis.UniversalClient, string) (dedup.Filter, error)
				for _, tt := range []struct {
					name    string
					open    opener
					section config.Filter
					field   string // "": opens; else the FieldError's field
					want    []string
					log     string
				}{
					{name: "defaults adopt", open: pipeline.OpenExistingFilter, section: section()},
					{name: "defaults adopt (run)", open: pipeline.OpenFilter, section: section()},
					{name: "capacity conflicts", open: pipeline.OpenExistingFilter, section: with(section("capacity"), func(f *config.Filter) { f.Capacity = 10_000_000 }),
						field: "filter.capacity", want: []string{"10000", "10000000"}},
					{name: "fpp conflicts", open: pipeline.OpenFilter, section: with(section("fpp"), func(f *config.Filter) { f.FPP = 0.02 }),
						field: "filter.fpp", want: []string{"1e-06", "0.02"}},
					{name: "kind conflicts", open: pipeline.OpenExistingFilter, section: with(section("kind"), func(f *config.Filter) { f.Kind = other(kind) }),
						field: "", want: []string{kind, other(kind)}},
					{name: "capacity given equal", open: pipeline.OpenFilter, section: with(section("capacity"), func(f *config.Filter) { f.Capacity = 10_000 }),
						log: "filter.capacity"},
					{name: "force on a read-only open", open: pipeline.OpenExistingFilter, section: with(section(), func(f *config.Filter) { f.Force = true }),
						field: "filter.force"},
				} {
					logs.Reset()
					g, err := tt.open(ctx, tt.section, w.rdb, "p1")
					switch {
					case tt.field != "" || tt.want != nil:
						var fe *config.FieldError
						if err == nil || (tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field)) {
							t.Errorf("%s: err = %v, want an error on %s", tt.name, err, tt.field)
						}
						for _, v := range tt.want {
							if err != nil && !strings.Contains(err.Error(), v) {
								t.Errorf("%s: error %q does not name %s", tt.name, err, v)
							}
						}
						if g != nil {
							g.Close()
						}
						continue
					case err != nil:
						t.Errorf("%s: %v", tt.name, err)
						continue
					}
					if held, err := g.Contains(ctx, key); err != nil || !held[0] {
						t.Errorf("%s: Contains(stored key) = %v, %v", tt.name, held, err)
					}
					if st, err := g.Stats(ctx); err != nil || st.Kind != kind || st.Layers[0].Capacity > 20_000 {
						// (a layer of a Redis filter is one shard's)
						t.Errorf("%s: Stats = %+v, %v, want the stored %s filter of 10,000 URLs, not 10 million", tt.name, st, err, kind)
					}
					g.Close()
					noted := strings.Contains(logs.String(), "only applies when a filter is created")
					if tt.log != "" && (!noted || !strings.Contains(logs.String(), tt.log)) {
						t.Errorf("%s: log %q, want a note that %s only applies when a filter is created", tt.name, logs.String(), tt.log)
					} else if tt.log == "" && noted {
						t.Errorf("%s: log %q, nothing was given", tt.name, logs.String())
					}
				}
				if after := w.state(t); !maps.Equal(before, after) {
					t.Errorf("opening the existing filter changed what is stored")
				}
				missing := section()
				missing.Name = "describe:missing"
				if w.rdb == nil {
					missing.Snapshot = filepath.Join(dir, "missing")
				}
				if _, err := pipeline.OpenExistingFilter(ctx, missing, w.rdb, "p1"); !errors.Is(err, dedup.ErrNotFound) {
					t.Errorf("OpenExistingFilter(missing) = %v, want ErrNotFound", err)
				}
				if after := w.state(t); !maps.Equal(before, after) {
					t.Errorf("OpenExistingFilter of a missing filter wrote something")
				}
			})
		}
	}
}

func with(f config.Filter, change func(*config.Filter)) config.Filter {
	change(&f)
	return f
}

func other(kind string) string {
	if kind == "bloom" {
		return "cuckoo"
	}
	return "bloom"
}
