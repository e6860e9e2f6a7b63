package config

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/dedup"
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
			fc := Default().Filter
			fc.Kind, fc.Name, fc.Capacity, fc.FPP = tt.kind, "t:"+tt.kind, 1000, 0.01
			if tt.rdb == nil {
				fc.Snapshot = filepath.Join(t.TempDir(), "seen")
			}
			key := [][]byte{[]byte("https://example.com/")}
			f, err := fc.Open(ctx, tt.rdb, "1")
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
			if err := fc.Save(ctx, f); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			f, err = fc.Open(ctx, tt.rdb, "1")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if got, err := f.Contains(ctx, key); err != nil || !got[0] {
				t.Fatalf("reopened Contains = %v, %v; want the key kept", got, err)
			}
			// Another policy version is refused, naming the mismatch.
			if _, err := fc.Open(ctx, tt.rdb, "2"); !errors.Is(err, dedup.ErrMismatch) {
				t.Fatalf("open under policy 2: err = %v, want ErrMismatch", err)
			}
		})
	}
}

func TestFilterOpenUnknownKind(t *testing.T) {
	fc := Default().Filter
	fc.Kind = "quotient"
	_, err := fc.Open(context.Background(), nil, "1")
	var fe *FieldError
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
		fc := Default().Filter
		fc.Kind, fc.Capacity = tt.stored, 1000
		fc.Snapshot = filepath.Join(t.TempDir(), "seen")
		f, err := fc.Open(ctx, nil, "p")
		if err != nil {
			t.Fatal(err)
		}
		if err := fc.Save(ctx, f); err != nil {
			t.Fatal(err)
		}
		f.Close()
		fc.Kind = tt.given
		// filter.kind not given explicitly: the snapshot's kind is used.
		f, err = fc.Open(ctx, nil, "p")
		if err != nil {
			t.Fatalf("open a %s snapshot, kind %s not given: %v", tt.stored, tt.given, err)
		}
		if st, err := f.Stats(ctx); err != nil || st.Kind != tt.stored {
			t.Errorf("open a %s snapshot, kind %s not given: Stats = %q, %v, want kind %s", tt.stored, tt.given, st.Kind, err, tt.stored)
		}
		f.Close()
		fc.Given = []string{"kind"}
		_, err = fc.Open(ctx, nil, "p")
		want := tt.stored + " snapshot, filter.kind is " + tt.given
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, dedup.ErrMismatch) {
			t.Errorf("open a %s snapshot as %s: %v, want %q (a mismatch)", tt.stored, tt.given, err, want)
		}
	}
}

// TestFilterWindow: a revisit window stored under a section's name (in
// Redis and in a snapshot file, of both kinds) exists, OpenExisting reads it
// (ReadWindow: its window, granularity, period and generations; Contains
// as the window holds keys) whatever filter.kind says when not given, and
// Open refuses it, since a window is written from its crawl's settings.
func TestFilterWindow(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	wo := dedup.WindowOptions{After: time.Hour, Granularity: 2}
	key := [][]byte{[]byte("https://example.com/")}
	for _, place := range []string{"redis", "snapshot"} {
		for _, kind := range []string{"bloom", "cuckoo"} {
			t.Run(place+" "+kind, func(t *testing.T) {
				fc := Default().Filter
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
				if ok, err := fc.Exists(ctx, rdb); !ok || err != nil {
					t.Errorf("Exists = %v, %v; want true", ok, err)
				}
				f, err := fc.OpenExisting(ctx, rdb, "")
				if err != nil {
					t.Fatalf("OpenExisting: %v", err)
				}
				defer f.Close()
				if got, err := f.Contains(ctx, key); err != nil || !got[0] {
					t.Errorf("Contains = %v, %v; want held", got, err)
				}
				ws, err := ReadWindow(ctx, f)
				if err != nil || ws == nil || ws.After != time.Hour || ws.Granularity != 2 || ws.Period != 30*time.Minute || len(ws.Generations) != 1 {
					t.Errorf("ReadWindow = %+v, %v; want 1h, g=2, period 30m, 1 generation", ws, err)
				}
				if st, err := f.Stats(ctx); err != nil || st.Kind != kind || st.Items != 1 {
					t.Errorf("Stats = %+v, %v; want 1 item of kind %s", st, err, kind)
				}
				if _, err := fc.Open(ctx, rdb, ""); !errors.Is(err, dedup.ErrMismatch) || !strings.Contains(err.Error(), "revisit window") {
					t.Errorf("Open = %v; want a refusal naming the revisit window", err)
				}
			})
		}
	}
}
