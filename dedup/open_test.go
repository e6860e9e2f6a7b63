package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/redistest"
)

// TestOpen opens every kind × storage × window through the one
// constructor, checks it is the filter the specific constructor makes,
// and that it keeps what it holds across a close and reopen (in memory
// through its snapshot file, whose format Open does not change), and that
// Existing opens only what exists.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	dir := t.TempDir()
	week := &dedup.WindowOptions{After: 7 * 24 * time.Hour}
	tests := []struct {
		kind   string
		redis  bool
		window *dedup.WindowOptions
		want   string // the concrete type
	}{
		{"bloom", false, nil, "*dedup.ScalableBloom"},
		{"cuckoo", false, nil, "*dedup.Cuckoo"},
		{"bloom", true, nil, "*dedup.RedisBloom"},
		{"cuckoo", true, nil, "*dedup.RedisCuckoo"},
		{"bloom", false, week, "*dedup.Window"},
		{"cuckoo", false, week, "*dedup.Window"},
		{"bloom", true, week, "*dedup.Window"},
		{"cuckoo", true, week, "*dedup.Window"},
	}
	for i, tt := range tests {
		name := fmt.Sprintf("%s redis=%v window=%v", tt.kind, tt.redis, tt.window != nil)
		t.Run(name, func(t *testing.T) {
			s := dedup.Spec{Kind: tt.kind, Name: fmt.Sprintf("open%d", i), Policy: "p1", Window: tt.window,
				Growth: dedup.Growth{InitialCapacity: 1000, TargetFPP: 1e-6}}
			if tt.redis {
				s.Redis = rdb
			} else {
				s.Snapshot = filepath.Join(dir, fmt.Sprintf("f%d.%s", i, tt.kind))
			}
			existing := s
			existing.Existing = true
			if _, err := dedup.Open(ctx, existing); !errors.Is(err, dedup.ErrNotFound) {
				t.Fatalf("Open(Existing) of no filter = %v, want ErrNotFound", err)
			}
			f, err := dedup.Open(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%T", f); got != tt.want {
				t.Errorf("Open made a %s, want %s", got, tt.want)
			}
			if _, err := f.TestAndAdd(ctx, [][]byte{[]byte("https://a.example/")}); err != nil {
				t.Fatal(err)
			}
			if sv, ok := f.(interface {
				Save(context.Context, string) error
			}); ok && !tt.redis {
				if err := sv.Save(ctx, s.Snapshot); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if tt.window != nil {
				existing.Window = &dedup.WindowOptions{} // the stored window's
			}
			g, err := dedup.Open(ctx, existing)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer g.Close()
			got, err := g.Contains(ctx, [][]byte{[]byte("https://a.example/"), []byte("https://b.example/")})
			if err != nil || !got[0] || got[1] {
				t.Errorf("reopened: Contains(a, b) = %v, %v; want [true false]", got, err)
			}
		})
	}
}

// TestOpenUnknownKind: a kind Open does not know is invalid, never a
// default.
func TestOpenUnknownKind(t *testing.T) {
	_, err := dedup.Open(context.Background(), dedup.Spec{Kind: "trie"})
	if !errors.Is(err, dedup.ErrUnknownKind) || !errors.Is(err, dedup.ErrInvalidParams) {
		t.Errorf("Open(kind trie) = %v, want ErrUnknownKind and ErrInvalidParams", err)
	}
}
