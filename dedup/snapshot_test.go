package dedup

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the pinned snapshot files in testdata")

// snapshotBytes snapshots b into a temporary file and returns its bytes.
func snapshotBytes(tb testing.TB, b *Bloom) []byte {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "f.snap")
	if err := b.Save(context.Background(), path); err != nil {
		tb.Fatalf("Save: %v", err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

func TestBloomSnapshotRoundTrip(t *testing.T) {
	ctx := context.Background()
	opts := BloomOptions{Capacity: 3000, FPP: 0.005, Policy: "policy-v2"}
	b := newTestBloom(t, opts)
	keys := testKeys("snap", 2500)
	if _, err := b.TestAndAdd(ctx, keys); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bloom.snap")
	if err := b.Save(ctx, path); err != nil {
		t.Fatal(err)
	}
	r, err := LoadBloom(ctx, path, opts)
	if err != nil {
		t.Fatalf("LoadBloom: %v", err)
	}
	defer r.Close()
	got, err := r.Contains(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range got {
		if !ok {
			t.Fatalf("Contains(%q) = false after restore", keys[i])
		}
	}
	before, _ := b.Stats(ctx)
	after, _ := r.Stats(ctx)
	if before.Items != after.Items || before.EstimatedFPP != after.EstimatedFPP || before.Layers[0] != after.Layers[0] {
		t.Errorf("Stats after restore = %+v, want %+v", after, before)
	}
	if r.Policy() != "policy-v2" {
		t.Errorf("Policy() = %q, want policy-v2", r.Policy())
	}
	var g1, g2 bytes.Buffer
	if err := b.WriteGuava(&g1); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteGuava(&g2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g1.Bytes(), g2.Bytes()) {
		t.Error("restored bits differ from the snapshotted ones")
	}
	// Restored filters keep admitting: a new key is new, an old one is not.
	res, err := r.TestAndAdd(ctx, byteKeys([]string{"https://fresh.example.com/", string(keys[0])}))
	if err != nil || !res[0] || res[1] {
		t.Errorf("TestAndAdd after restore = %v, %v; want [true false]", res, err)
	}
	// No temporary file is left beside the snapshot.
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("snapshot directory holds %d entries, want only the snapshot", len(entries))
	}
}

// TestBloomSnapshotImportedGuava checks a filter read from a Guava stream,
// with inferred sizing, survives a snapshot.
func TestBloomSnapshotImportedGuava(t *testing.T) {
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(guavaDir(t), "filter.guava"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ReadGuava(bytes.NewReader(raw), BloomOptions{Policy: "java"})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := b.Stats(ctx)
	path := filepath.Join(t.TempDir(), "g.snap")
	if err := b.Save(ctx, path); err != nil {
		t.Fatal(err)
	}
	r, err := LoadBloom(ctx, path, BloomOptions{Capacity: int64(st.Layers[0].Capacity), FPP: st.Layers[0].FPP, Policy: "java"})
	if err != nil {
		t.Fatalf("LoadBloom: %v", err)
	}
	var out bytes.Buffer
	if err := r.WriteGuava(&out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), raw) {
		t.Error("Guava stream changed across snapshot and restore")
	}
}

func TestLoadBloomMismatch(t *testing.T) {
	ctx := context.Background()
	b := newTestBloom(t, BloomOptions{Capacity: 1000, FPP: 0.01, Policy: "v1"})
	path := filepath.Join(t.TempDir(), "b.snap")
	if err := b.Save(ctx, path); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		opts  BloomOptions
		field string // "" = opens
	}{
		{BloomOptions{Capacity: 1000, FPP: 0.01, Policy: "v1"}, ""},
		{BloomOptions{Capacity: 2000, FPP: 0.01, Policy: "v1"}, "capacity"},
		{BloomOptions{Capacity: 1000, FPP: 0.02, Policy: "v1"}, "fpp"},
		{BloomOptions{FPP: 0.01, Policy: "v1"}, "capacity"}, // zero = default 1e6
		{BloomOptions{Capacity: 1000, FPP: 0.01, Policy: "v2"}, "policy"},
		{BloomOptions{Capacity: 1000, FPP: 0.01, Policy: "v2", Force: true}, ""},
		// Force is for the policy only.
		{BloomOptions{Capacity: 999, FPP: 0.01, Policy: "v1", Force: true}, "capacity"},
	}
	for _, tt := range tests {
		r, err := LoadBloom(ctx, path, tt.opts)
		if tt.field == "" {
			if err != nil {
				t.Errorf("LoadBloom(%+v): %v", tt.opts, err)
				continue
			}
			if r.Policy() != tt.opts.Policy {
				t.Errorf("LoadBloom(%+v).Policy() = %q, want %q", tt.opts, r.Policy(), tt.opts.Policy)
			}
			r.Close()
			continue
		}
		var me *MismatchError
		if !errors.As(err, &me) || me.Field != tt.field || me.Name != path || !errors.Is(err, ErrMismatch) {
			t.Errorf("LoadBloom(%+v) = %v, want *MismatchError on %s", tt.opts, err, tt.field)
		}
	}
}

// TestLoadSnapshotCorrupt truncates a snapshot at every length and flips
// every byte: each must load as ErrCorrupt, never a panic or a
// filter with wrong bits.
func TestLoadSnapshotCorrupt(t *testing.T) {
	ctx := context.Background()
	opts := BloomOptions{Capacity: 100, FPP: 0.01, Policy: "v1"}
	b := newTestBloom(t, opts)
	if _, err := b.TestAndAdd(ctx, testKeys("c", 50)); err != nil {
		t.Fatal(err)
	}
	raw := snapshotBytes(t, b)
	dir := t.TempDir()
	path := filepath.Join(dir, "c.snap")
	load := func(data []byte) error {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := LoadBloom(ctx, path, opts)
		if err == nil {
			r.Close()
		}
		return err
	}
	if err := load(raw); err != nil {
		t.Fatalf("intact snapshot: %v", err)
	}
	for n := range len(raw) {
		err := load(raw[:n])
		if !errors.Is(err, ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("snapshot truncated to %d of %d bytes: %v, want ErrCorrupt and io.ErrUnexpectedEOF", n, len(raw), err)
		}
	}
	for i := range raw {
		bad := bytes.Clone(raw)
		bad[i] ^= 0x10
		if err := load(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("snapshot with byte %d flipped: %v, want ErrCorrupt", i, err)
		}
	}
	if err := load(append(bytes.Clone(raw), 0)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("snapshot with a trailing byte: %v, want ErrCorrupt", err)
	}
	// A scalable snapshot is not a Bloom snapshot.
	s := newTestScalable(t, ScalableOptions{Growth: Growth{InitialCapacity: 100, TargetFPP: 0.01}})
	if err := s.Save(ctx, path); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadBloom(ctx, path, opts); !errors.Is(err, ErrCorrupt) {
		t.Errorf("LoadBloom(scalable snapshot) = %v, want ErrCorrupt", err)
	}
	if _, err := LoadBloom(ctx, filepath.Join(dir, "missing"), opts); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadBloom(missing) = %v, want fs.ErrNotExist", err)
	}
}

// TestSnapshotFailureKeepsOld checks a failed snapshot leaves the previous
// file intact and no temporary file behind.
func TestSnapshotFailureKeepsOld(t *testing.T) {
	b := newTestBloom(t, BloomOptions{Capacity: 100, FPP: 0.01})
	dir := t.TempDir()
	path := filepath.Join(dir, "b.snap")
	if err := b.Save(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(path)
	if _, err := b.TestAndAdd(context.Background(), testKeys("x", 10)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Save(ctx, path); !errors.Is(err, context.Canceled) {
		t.Errorf("Save(canceled) = %v, want context.Canceled", err)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, old) {
		t.Error("a failed snapshot changed the previous one")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries after a failed snapshot, want 1", len(entries))
	}
	if err := b.Save(context.Background(), filepath.Join(dir, "no-such-dir", "b.snap")); err == nil {
		t.Error("Save into a missing directory succeeded")
	}
}

// TestSnapshotFormatPinned reads snapshots written by format version 1 and
// checks today's code writes them byte for byte: the format is persisted.
// Regenerate (only for a deliberate format change, with a new version) with
// go test ./dedup -run SnapshotFormatPinned -update.
func TestSnapshotFormatPinned(t *testing.T) {
	ctx := context.Background()
	bopts := BloomOptions{Capacity: 64, FPP: 0.05, Policy: "golden"}
	sopts := ScalableOptions{Growth: Growth{InitialCapacity: 16, TargetFPP: 0.05}, Policy: "golden"}
	keys := testKeys("golden", 100)

	b := newTestBloom(t, bopts)
	if _, err := b.TestAndAdd(ctx, keys[:60]); err != nil {
		t.Fatal(err)
	}
	s := newTestScalable(t, sopts)
	if _, err := s.TestAndAdd(ctx, keys); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		file string
		snap func(path string) error
		load func(path string) (io.Closer, error)
	}{
		{"bloom-v1.snap", func(p string) error { return b.Save(ctx, p) },
			func(p string) (io.Closer, error) { return LoadBloom(ctx, p, bopts) }},
		{"scalable-v1.snap", func(p string) error { return s.Save(ctx, p) },
			func(p string) (io.Closer, error) { return LoadScalableBloom(ctx, p, sopts) }},
	} {
		golden := filepath.Join("testdata", tt.file)
		if *update {
			if err := tt.snap(golden); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), tt.file)
		if err := tt.snap(path); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, want) {
			t.Errorf("%s: snapshot bytes differ from the pinned version-1 file", tt.file)
		}
		f, err := tt.load(golden)
		if err != nil {
			t.Fatalf("%s: load pinned file: %v", tt.file, err)
		}
		f.Close()
		if string(want[:8]) != "SIEVEBF\n" || want[8] != 0 || want[9] != 1 {
			t.Errorf("%s: header % x, want magic SIEVEBF\\n and version 1", tt.file, want[:10])
		}
	}
}

// FuzzDecodeSnapshot checks the snapshot reader never panics or
// over-allocates on any input, and that whatever it accepts encodes back to
// the same bytes.
func FuzzDecodeSnapshot(f *testing.F) {
	for _, name := range []string{"bloom-v1.snap", "scalable-v1.snap"} {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, kind := range []byte{snapshotKindBloom, snapshotKindScalable} {
			s, err := decodeSnapshot(context.Background(), bytes.NewReader(in), int64(len(in)), kind)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("decode: %v, want ErrCorrupt", err)
				}
				continue
			}
			var out bytes.Buffer
			if err := s.encode(context.Background(), &out); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), in) {
				t.Fatalf("encode(decode(%x)) = %x", in, out.Bytes())
			}
		}
	})
}
