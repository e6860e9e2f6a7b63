package dedup

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzReadWindow checks the revisit-window file reader (LoadBloomWindow,
// LoadCuckooWindow, adopting what the file stores) never panics on any
// input and fails only with the errors a damaged or foreign file gives:
// ErrCorrupt, a *MismatchError or ErrInvalidParams. The seeds are real
// window files of both kinds, one generation of two keys each.
func FuzzReadWindow(f *testing.F) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := ClockFunc(func() time.Time { return now })
	wo := WindowOptions{After: time.Hour, Granularity: 2, Clock: clock}
	growth := Growth{InitialCapacity: 64, TargetFPP: 0.01}
	dir := f.TempDir()
	seed := func(name string, w *Window, err error) {
		if err != nil {
			f.Fatal(err)
		}
		defer w.Close()
		if _, err := w.TestAndAdd(ctx, [][]byte{[]byte("https://a.example/"), []byte("https://b.example/")}); err != nil {
			f.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := w.Save(ctx, path); err != nil {
			f.Fatal(err)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	bw, err := NewBloomWindow(wo, ScalableOptions{Growth: growth})
	seed("bloom.window", bw, err)
	cw, err := NewCuckooWindow(wo, CuckooOptions{Growth: growth})
	seed("cuckoo.window", cw, err)

	f.Fuzz(func(t *testing.T, in []byte) {
		path := filepath.Join(t.TempDir(), "in.window")
		if err := os.WriteFile(path, in, 0o644); err != nil {
			t.Fatal(err)
		}
		wo := WindowOptions{Clock: clock} // every field adopted from the file
		check := func(w *Window, err error) {
			if err == nil {
				w.Close()
				return
			}
			var me *MismatchError
			if !errors.Is(err, ErrCorrupt) && !errors.As(err, &me) && !errors.Is(err, ErrInvalidParams) {
				t.Fatalf("load: %v, want ErrCorrupt, a *MismatchError or ErrInvalidParams", err)
			}
		}
		check(LoadBloomWindow(ctx, path, wo, ScalableOptions{}))
		check(LoadCuckooWindow(ctx, path, wo, CuckooOptions{}))
	})
}
