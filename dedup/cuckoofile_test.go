package dedup

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// filledCuckoo returns a filter with several layers, some deletes and the
// keys it was given.
func filledCuckoo(tb testing.TB, opts CuckooOptions, n int) (*Cuckoo, [][]byte) {
	tb.Helper()
	ctx := context.Background()
	c := newTestCuckoo(tb, opts)
	keys := cuckooKeys("snap", 0, n)
	if _, err := c.TestAndAdd(ctx, keys); err != nil {
		tb.Fatal(err)
	}
	if _, err := c.Delete(ctx, keys[:n/10]); err != nil {
		tb.Fatal(err)
	}
	return c, keys
}

func TestCuckooSnapshotRoundTrip(t *testing.T) {
	ctx := context.Background()
	opts := CuckooOptions{Growth: Growth{InitialCapacity: 300, TargetFPP: 0.01}, FingerprintBits: 12, Policy: "v3"}
	c, keys := filledCuckoo(t, opts, 5000)
	path := filepath.Join(t.TempDir(), "filter.cuckoo")
	if err := c.Save(ctx, path); err != nil {
		t.Fatalf("Save: %v", err)
	}
	// MaxKicks is not part of the layout.
	opts.MaxKicks = 50
	d, err := LoadCuckoo(ctx, path, opts)
	if err != nil {
		t.Fatalf("LoadCuckoo: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	probe := append(keys, cuckooKeys("other", 0, 20000)...)
	want, _ := c.Contains(ctx, probe)
	got, _ := d.Contains(ctx, probe)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded filter answers Contains differently from the saved one")
	}
	ws, _ := c.Stats(ctx)
	gs, _ := d.Stats(ctx)
	if len(ws.Layers) < 3 {
		t.Fatalf("test filter has %d layers, want several", len(ws.Layers))
	}
	if !reflect.DeepEqual(gs, ws) {
		t.Errorf("loaded Stats = %+v\nwant %+v", gs, ws)
	}
	// The loaded filter keeps working: a deleted key is new again, a stored
	// one is not.
	res, err := d.TestAndAdd(ctx, [][]byte{keys[0], keys[len(keys)-1]})
	if err != nil || res[1] || (!res[0] && !want[0]) {
		t.Errorf("TestAndAdd(deleted, stored) on the loaded filter = %v, %v", res, err)
	}
}

func TestCuckooSnapshotMismatch(t *testing.T) {
	ctx := context.Background()
	base := CuckooOptions{Growth: Growth{InitialCapacity: 300, TargetFPP: 0.01}, Policy: "v1"}
	c, _ := filledCuckoo(t, base, 1000)
	path := filepath.Join(t.TempDir(), "f")
	if err := c.Save(ctx, path); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		field  string
		change func(*CuckooOptions)
	}{
		{"initial_capacity", func(o *CuckooOptions) { o.Growth.InitialCapacity = 301 }},
		{"target_fpp", func(o *CuckooOptions) { o.Growth.TargetFPP = 0.001 }},
		{"growth_factor", func(o *CuckooOptions) { o.Growth.Factor = 4 }},
		{"tightening", func(o *CuckooOptions) { o.Growth.Tightening = 0.5 }},
		{"bucket_size", func(o *CuckooOptions) { o.BucketSize = 2 }},
		{"fingerprint_bits", func(o *CuckooOptions) { o.FingerprintBits = 16 }},
		{"max_layers", func(o *CuckooOptions) { o.MaxLayers = 10 }},
		{"policy", func(o *CuckooOptions) { o.Policy = "v2" }},
	} {
		opts := base
		tc.change(&opts)
		_, err := LoadCuckoo(ctx, path, opts)
		var me *MismatchError
		if !errors.As(err, &me) || !errors.Is(err, ErrMismatch) || me.Field != tc.field || me.Name != path {
			t.Errorf("LoadCuckoo with %s changed: %v, want *MismatchError for %s naming %s", tc.field, err, tc.field, path)
		}
	}
	// Force accepts another policy and records it.
	forced := base
	forced.Policy, forced.Force = "v2", true
	d, err := LoadCuckoo(ctx, path, forced)
	if err != nil {
		t.Fatalf("LoadCuckoo with Force: %v", err)
	}
	if err := d.Save(ctx, path); err != nil {
		t.Fatal(err)
	}
	forced.Force = false
	if _, err := LoadCuckoo(ctx, path, forced); err != nil {
		t.Errorf("LoadCuckoo after a forced policy change was saved: %v", err)
	}
	if _, err := LoadCuckoo(ctx, filepath.Join(t.TempDir(), "missing"), base); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadCuckoo(missing) = %v, want fs.ErrNotExist", err)
	}
}

// TestCuckooSnapshotCorrupt flips every byte and truncates at every length of
// a small snapshot: each must fail with ErrCorrupt (or, for a flipped option,
// a mismatch), never panic, never load.
func TestCuckooSnapshotCorrupt(t *testing.T) {
	opts := CuckooOptions{Growth: Growth{InitialCapacity: 10, TargetFPP: 0.1}, BucketSize: 2, Policy: "p"}
	c, _ := filledCuckoo(t, opts, 40)
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	for n := range len(good) {
		if _, err := ReadCuckoo(bytes.NewReader(good[:n]), opts); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("ReadCuckoo(first %d of %d bytes) = %v, want ErrCorrupt", n, len(good), err)
		}
	}
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x10
		_, err := ReadCuckoo(bytes.NewReader(bad), opts)
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrMismatch) {
			t.Fatalf("ReadCuckoo with byte %d flipped = %v, want ErrCorrupt or ErrMismatch", i, err)
		}
	}
	if _, err := ReadCuckoo(bytes.NewReader(append(bytes.Clone(good), 0)), opts); err != nil {
		t.Errorf("ReadCuckoo with trailing bytes: %v (a stream may go on)", err)
	}
}

func TestCuckooSaveFailureKeepsOld(t *testing.T) {
	ctx := context.Background()
	c, _ := filledCuckoo(t, CuckooOptions{Growth: Growth{InitialCapacity: 100}}, 100)
	if err := c.Save(ctx, filepath.Join(t.TempDir(), "no-such-dir", "f")); err == nil {
		t.Error("Save into a missing directory succeeded")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := c.Save(ctx, path); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("Save left %d files in its directory, want 1", len(entries))
	}
}

// FuzzReadCuckoo feeds arbitrary bytes to the snapshot reader: it must fail
// cleanly or return a working filter, never panic.
func FuzzReadCuckoo(f *testing.F) {
	opts := CuckooOptions{Growth: Growth{InitialCapacity: 10, TargetFPP: 0.1}, BucketSize: 2}
	c, _ := filledCuckoo(f, opts, 30)
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(cuckooMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ReadCuckoo(bytes.NewReader(data), opts)
		if err != nil {
			return
		}
		if _, err := d.TestAndAdd(context.Background(), cuckooKeys("fuzz", 0, 50)); err != nil {
			t.Fatalf("TestAndAdd on a loaded filter: %v", err)
		}
	})
}

// TestCuckooSnapshotPinned reads a snapshot written by format version 1 and
// checks today's code writes the same filter byte for byte: the format is
// persisted. The filter grows to three layers, so evictions happen; its
// random choices come from a fixed seed. Regenerate (only for a deliberate
// format change, with a new version) with
// go test ./dedup -run CuckooSnapshotPinned -update.
func TestCuckooSnapshotPinned(t *testing.T) {
	ctx := context.Background()
	opts := CuckooOptions{Growth: Growth{InitialCapacity: 16, TargetFPP: 0.05}, Policy: "golden"}
	c := newTestCuckoo(t, opts)
	c.rng = rand.New(rand.NewPCG(1, 2))
	keys := cuckooKeys("golden", 0, 120)
	if _, err := c.TestAndAdd(ctx, keys); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, keys[:5]); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "cuckoo-v1.snap")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("snapshot of the golden filter differs from %s (%d bytes, want %d): the format changed", golden, buf.Len(), len(want))
	}
	d, err := LoadCuckoo(ctx, golden, opts)
	if err != nil {
		t.Fatalf("LoadCuckoo(%s): %v", golden, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	ws, _ := c.Stats(ctx)
	gs, _ := d.Stats(ctx)
	if !reflect.DeepEqual(gs, ws) || len(gs.Layers) < 3 {
		t.Errorf("golden Stats = %+v\nwant %+v (≥ 3 layers)", gs, ws)
	}
	probe := append(keys, cuckooKeys("golden-absent", 0, 1000)...)
	wc, _ := c.Contains(ctx, probe)
	gc, _ := d.Contains(ctx, probe)
	if !reflect.DeepEqual(gc, wc) {
		t.Error("golden filter answers Contains differently")
	}
}
