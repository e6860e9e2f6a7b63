package config

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/redistest"
)

// TestLoaderGiven checks that the Loader tells settings given in a file, the
// environment or a flag from defaults, and fills Filter.Given.
func TestLoaderGiven(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sieve.yaml")
	if err := os.WriteFile(file, []byte("filter:\n  fpp: 0.02\n  shards:\nredis:\n  url: redis://x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		given []string // Filter.Given
	}{
		{name: "nothing given"},
		{name: "flag", args: []string{"--filter-capacity", "10000"}, given: []string{"capacity"}},
		{name: "flag equal to the default", args: []string{"--filter-capacity", "10000000"}, given: []string{"capacity"}},
		{name: "env", env: map[string]string{"SIEVE_FILTER_KIND": "cuckoo"}, given: []string{"kind"}},
		{name: "file (a null value is not given)", args: []string{"--config", file}, given: []string{"fpp"}},
		{name: "all three", args: []string{"--config", file, "--filter-growth", "3"}, env: map[string]string{"SIEVE_FILTER_TIGHTENING": "0.5"},
			given: []string{"fpp", "growth", "tightening"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Default()
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			l := NewLoader(fs, &cfg)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if err := l.Load(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.Filter.Given, tt.given) {
				t.Errorf("Filter.Given = %q, want %q", cfg.Filter.Given, tt.given)
			}
			for _, k := range tt.given {
				if !l.Given("filter." + k) {
					t.Errorf("Given(filter.%s) = false", k)
				}
			}
			if l.Given("filter.name") {
				t.Errorf("Given(filter.name) = true, never given")
			}
		})
	}
}

// TestLoaderOmit checks that a setting a command does not take has no
// flag, and that the file and the environment leave it at its default.
func TestLoaderOmit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sieve.yaml")
	if err := os.WriteFile(file, []byte("filter:\n  force: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Default()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	l := NewLoader(fs, &cfg, "filter.force")
	if err := fs.Parse([]string{"--filter-force"}); err == nil || !strings.Contains(err.Error(), "filter-force") {
		t.Errorf("Parse(--filter-force) = %v, want an undefined flag error", err)
	}
	if err := fs.Parse([]string{"--config", file}); err != nil {
		t.Fatal(err)
	}
	if err := l.Load(func(k string) (string, bool) { return "true", k == "SIEVE_FILTER_FORCE" }); err != nil {
		t.Fatal(err)
	}
	if cfg.Filter.Force || l.Given("filter.force") {
		t.Errorf("omitted filter.force = %v (given %v), want the default false", cfg.Filter.Force, l.Given("filter.force"))
	}
	var help bytes.Buffer
	l.PrintSettings(&help, fs)
	if strings.Contains(help.String(), "filter-force") {
		t.Errorf("help lists the omitted --filter-force")
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
// creation; OpenExisting writes nothing and refuses a missing filter and
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
				section := func(given ...string) Filter {
					f := Default().Filter
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
				f, err := created.Open(ctx, w.rdb, "p1")
				if err != nil {
					t.Fatal(err)
				}
				key := [][]byte{[]byte("https://describe.example/")}
				if _, err := f.TestAndAdd(ctx, key); err != nil {
					t.Fatal(err)
				}
				if err := created.Save(ctx, f); err != nil {
					t.Fatal(err)
				}
				f.Close()
				before := w.state(t)
				if logs.Len() != 0 {
					t.Errorf("creating the filter logged %q", logs.String())
				}

				type opener func(Filter, context.Context, redis.UniversalClient, string) (SeenFilter, error)
				for _, tt := range []struct {
					name    string
					open    opener
					section Filter
					field   string // "": opens; else the FieldError's field
					want    []string
					log     string
				}{
					{name: "defaults adopt", open: Filter.OpenExisting, section: section()},
					{name: "defaults adopt (run)", open: Filter.Open, section: section()},
					{name: "capacity conflicts", open: Filter.OpenExisting, section: with(section("capacity"), func(f *Filter) { f.Capacity = 10_000_000 }),
						field: "filter.capacity", want: []string{"10000", "10000000"}},
					{name: "fpp conflicts", open: Filter.Open, section: with(section("fpp"), func(f *Filter) { f.FPP = 0.02 }),
						field: "filter.fpp", want: []string{"1e-06", "0.02"}},
					{name: "kind conflicts", open: Filter.OpenExisting, section: with(section("kind"), func(f *Filter) { f.Kind = other(kind) }),
						field: "", want: []string{kind, other(kind)}},
					{name: "capacity given equal", open: Filter.Open, section: with(section("capacity"), func(f *Filter) { f.Capacity = 10_000 }),
						log: "filter.capacity"},
					{name: "force on a read-only open", open: Filter.OpenExisting, section: with(section(), func(f *Filter) { f.Force = true }),
						field: "filter.force"},
				} {
					logs.Reset()
					g, err := tt.open(tt.section, ctx, w.rdb, "p1")
					switch {
					case tt.field != "" || tt.want != nil:
						var fe *FieldError
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
				if _, err := missing.OpenExisting(ctx, w.rdb, "p1"); !errors.Is(err, dedup.ErrNotFound) {
					t.Errorf("OpenExisting(missing) = %v, want ErrNotFound", err)
				}
				if after := w.state(t); !maps.Equal(before, after) {
					t.Errorf("OpenExisting of a missing filter wrote something")
				}
			})
		}
	}
}

func with(f Filter, change func(*Filter)) Filter {
	change(&f)
	return f
}

func other(kind string) string {
	if kind == "bloom" {
		return "cuckoo"
	}
	return "bloom"
}
