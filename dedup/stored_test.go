package dedup_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/dedup"
)

// saver returns a func saving the filter f (made with err) to a path.
func saver[F interface {
	Save(context.Context, string) error
}](f F, err error) func(path string) error {
	return func(path string) error {
		if err != nil {
			return err
		}
		return f.Save(context.Background(), path)
	}
}

// TestStoredSnapshotKind names the kind of every snapshot format from its
// magic bytes (pinned: snapshots on disk depend on them), a window's by its
// generations', and tells a file of none of them from no file.
func TestStoredSnapshotKind(t *testing.T) {
	dir := t.TempDir()
	write := func(b string) func(path string) error {
		return func(path string) error { return os.WriteFile(path, []byte(b), 0o644) }
	}
	wo := dedup.WindowOptions{After: time.Hour}
	for _, tt := range []struct {
		name   string
		make   func(path string) error // nil: no file
		kind   string
		window bool
	}{
		{"scalable bloom", saver(dedup.NewScalableBloom(dedup.ScalableOptions{})), "bloom", false},
		{"cuckoo", saver(dedup.NewCuckoo(dedup.CuckooOptions{})), "cuckoo", false},
		{"bloom window", saver(dedup.NewBloomWindow(wo, dedup.ScalableOptions{})), "bloom", true},
		{"cuckoo window", saver(dedup.NewCuckooWindow(wo, dedup.CuckooOptions{})), "cuckoo", true},
		{"bloom magic only", write("SIEVEBF\n"), "bloom", false},
		{"window header of another kind", write("SIEVEWIN\x00\x01\x09"), "unknown", false},
		{"short window header", write("SIEVEWIN"), "unknown", false},
		{"other bytes", write("not a filter"), "unknown", false},
		{"empty file", write(""), "unknown", false},
		{"no file", nil, "", false},
	} {
		path := filepath.Join(dir, tt.name)
		if tt.make != nil {
			if err := tt.make(path); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
		}
		kind, window, err := dedup.StoredSnapshotKind(path)
		if err != nil || kind != tt.kind || window != tt.window {
			t.Errorf("StoredSnapshotKind(%s) = %q, %v, %v; want %q, %v", tt.name, kind, window, err, tt.kind, tt.window)
		}
	}
}
