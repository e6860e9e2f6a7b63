package dedup

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// guavaDir returns the directory of the Guava 31.1 reference vectors,
// testdata/guava (see its README for how they were produced). They are part
// of the repository, so a missing file is a failure, never a skip.
func guavaDir(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join("testdata", "guava")
	if _, err := os.Stat(filepath.Join(dir, "filter.guava")); err != nil {
		tb.Fatalf("Guava reference vectors missing: %v", err)
	}
	return dir
}

// guavaLines returns the non-empty lines of a file in the reference vectors.
func guavaLines(tb testing.TB, name string) []string {
	tb.Helper()
	f, err := os.Open(filepath.Join(guavaDir(tb), name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sc.Text() != "" {
			lines = append(lines, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return lines
}

type guavaProbe struct {
	key   string
	guava bool // Guava's mightContain
}

func guavaProbes(tb testing.TB) []guavaProbe {
	tb.Helper()
	var probes []guavaProbe
	for _, line := range guavaLines(tb, "probes.tsv") {
		key, answer, ok := strings.Cut(line, "\t")
		if !ok || (answer != "true" && answer != "false") {
			tb.Fatalf("probes.tsv: bad line %q", line)
		}
		probes = append(probes, guavaProbe{key, answer == "true"})
	}
	return probes
}

func byteKeys(ss []string) [][]byte {
	keys := make([][]byte, len(ss))
	for i, s := range ss {
		keys[i] = []byte(s)
	}
	return keys
}

// TestGuavaRead reads the filter Guava 31.1 wrote and checks it answers as
// Guava did: every inserted string present, and each of the 10,000 probes
// (never inserted) exactly as Guava's mightContain answered, 47 of them true.
func TestGuavaRead(t *testing.T) {
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(guavaDir(t), "filter.guava"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ReadGuava(bytes.NewReader(raw), BloomOptions{Capacity: 500, FPP: 0.003})
	if err != nil {
		t.Fatalf("ReadGuava: %v", err)
	}
	defer b.Close()
	if b.l.k != 8 || len(b.l.words) != 95 || b.l.bitSize != 6080 {
		t.Errorf("ReadGuava: k=%d words=%d bitSize=%d, want 8, 95, 6080", b.l.k, len(b.l.words), b.l.bitSize)
	}

	inserted := guavaLines(t, "inserted.txt")
	if len(inserted) != 500 {
		t.Fatalf("inserted.txt has %d lines, want 500", len(inserted))
	}
	got, err := b.Contains(ctx, byteKeys(inserted))
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range got {
		if !ok {
			t.Errorf("Contains(%q) = false for an inserted key", inserted[i])
		}
	}

	probes := guavaProbes(t)
	if len(probes) != 10_000 {
		t.Fatalf("probes.tsv has %d lines, want 10000", len(probes))
	}
	keys := make([][]byte, len(probes))
	for i, p := range probes {
		keys[i] = []byte(p.key)
	}
	got, err = b.Contains(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	positives := 0
	for i, p := range probes {
		if got[i] != p.guava {
			t.Errorf("Contains(%q) = %v, Guava said %v", p.key, got[i], p.guava)
		}
		if got[i] {
			positives++
		}
	}
	if positives != 47 {
		t.Errorf("%d probes answered true, Guava answered 47", positives)
	}

	// Guava's approximateElementCount estimates the 500 inserts.
	if n := b.ApproximateItems(); n < 480 || n > 520 {
		t.Errorf("ApproximateItems() = %d, want about 500", n)
	}
}

// TestGuavaWrite fills a fresh filter sized as Guava sizes n=500, p=0.003
// with inserted.txt and checks WriteGuava is byte-identical to Guava's
// writeTo, and that expectedFpp matches Guava's (about 0.0031).
func TestGuavaWrite(t *testing.T) {
	ctx := context.Background()
	want, err := os.ReadFile(filepath.Join(guavaDir(t), "filter.guava"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBloom(BloomOptions{Capacity: 500, FPP: 0.003})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.TestAndAdd(ctx, byteKeys(guavaLines(t, "inserted.txt"))); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := b.WriteGuava(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("WriteGuava: %d bytes differ from Guava's %d-byte writeTo stream\n got %x\nwant %x", buf.Len(), len(want), buf.Bytes()[:min(32, buf.Len())], want[:32])
	}

	st, err := b.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Layers) != 1 || st.Layers[0].Bits != 6080 || st.Layers[0].Hashes != 8 {
		t.Fatalf("Stats().Layers = %+v, want one layer of 6080 bits, 8 hashes", st.Layers)
	}
	// expectedFpp = (bitCount / bitSize)^k, recomputed here from the bits.
	ones := 0
	for _, c := range buf.Bytes()[6:] {
		ones += bitsSet(c)
	}
	wantFPP := math.Pow(float64(ones)/6080, 8)
	if math.Abs(st.EstimatedFPP-wantFPP) > 1e-12 || math.Abs(st.EstimatedFPP-0.0031) > 0.0001 {
		t.Errorf("Stats().EstimatedFPP = %v, want Guava's expectedFpp %v ≈ 0.0031", st.EstimatedFPP, wantFPP)
	}
	if st.MemoryBytes != 760 {
		t.Errorf("Stats().MemoryBytes = %d, want 760", st.MemoryBytes)
	}
}

func bitsSet(c byte) int {
	n := 0
	for ; c != 0; c &= c - 1 {
		n++
	}
	return n
}

// TestGuavaRoundTrip checks WriteGuava then ReadGuava keeps every bit, and
// that ReadGuava refuses a size other than the stream's.
func TestGuavaRoundTrip(t *testing.T) {
	ctx := context.Background()
	b, err := NewBloom(BloomOptions{Capacity: 2000, FPP: 0.01, Policy: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	keys := testKeys("rt", 2000)
	if _, err := b.TestAndAdd(ctx, keys); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := b.WriteGuava(&buf); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()

	tests := []struct {
		name    string
		opts    BloomOptions
		field   string // "" = accepted
		capWant int64
	}{
		{"same size", BloomOptions{Capacity: 2000, FPP: 0.01}, "", 2000},
		{"inferred size", BloomOptions{}, "", 1901}, // round(19200·ln 2 / 7): m rounded up to 300 words, k = 7
		{"other capacity", BloomOptions{Capacity: 4000, FPP: 0.01}, "words", 0},
		{"other rate", BloomOptions{Capacity: 2000, FPP: 0.001}, "words", 0},
		{"invalid size", BloomOptions{Capacity: 2000, FPP: 2}, "invalid", 0},
	}
	for _, tt := range tests {
		r, err := ReadGuava(bytes.NewReader(raw), tt.opts)
		switch {
		case tt.field == "invalid":
			if !errors.Is(err, ErrInvalidParams) {
				t.Errorf("%s: ReadGuava = %v, want ErrInvalidParams", tt.name, err)
			}
			continue
		case tt.field != "":
			var me *MismatchError
			if !errors.As(err, &me) || me.Field != tt.field || !errors.Is(err, ErrMismatch) {
				t.Errorf("%s: ReadGuava = %v, want *MismatchError on %s", tt.name, err, tt.field)
			}
			continue
		case err != nil:
			t.Errorf("%s: ReadGuava: %v", tt.name, err)
			continue
		}
		if r.l.capacity != tt.capWant {
			t.Errorf("%s: capacity = %d, want %d", tt.name, r.l.capacity, tt.capWant)
		}
		got, err := r.Contains(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		for i, ok := range got {
			if !ok {
				t.Fatalf("%s: Contains(%q) = false after round trip", tt.name, keys[i])
			}
		}
		var again bytes.Buffer
		if err := r.WriteGuava(&again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Bytes(), raw) {
			t.Errorf("%s: WriteGuava after ReadGuava differs", tt.name)
		}
	}
}

// TestReadGuavaBad checks every malformed stream is ErrGuavaFormat, never a
// panic or a huge allocation.
func TestReadGuavaBad(t *testing.T) {
	stream := func(ordinal, k byte, n int32, words int) []byte {
		b := []byte{ordinal, k}
		b = binary.BigEndian.AppendUint32(b, uint32(n))
		return append(b, make([]byte, 8*words)...)
	}
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"short header", []byte{1, 8, 0}},
		{"MURMUR128_MITZ_32", stream(0, 8, 1, 1)},
		{"unknown strategy", stream(2, 8, 1, 1)},
		{"negative strategy", stream(0xff, 8, 1, 1)},
		{"zero hashes", stream(1, 0, 1, 1)},
		{"zero words", stream(1, 8, 0, 0)},
		{"negative words", stream(1, 8, -1, 0)},
		{"truncated words", stream(1, 8, 3, 2)},
		{"truncated word", stream(1, 8, 1, 1)[:10]},
		{"claims 2^31-1 words", stream(1, 8, math.MaxInt32, 4)},
	}
	for _, tt := range tests {
		if b, err := ReadGuava(bytes.NewReader(tt.in), BloomOptions{}); !errors.Is(err, ErrGuavaFormat) {
			t.Errorf("%s: ReadGuava = %v, %v; want ErrGuavaFormat", tt.name, b, err)
		}
	}
	// A truncated stream reports the unexpected end.
	if _, err := ReadGuava(bytes.NewReader(stream(1, 8, 3, 2)), BloomOptions{}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated: ReadGuava = %v, want io.ErrUnexpectedEOF", err)
	}
}

// FuzzReadGuava checks ReadGuava never panics, and that whatever it accepts
// it writes back byte for byte.
func FuzzReadGuava(f *testing.F) {
	f.Add([]byte{1, 8, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{1, 255, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 8, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		b, err := ReadGuava(bytes.NewReader(in), BloomOptions{})
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := b.WriteGuava(&out); err != nil {
			t.Fatalf("WriteGuava after ReadGuava: %v", err)
		}
		if !bytes.HasPrefix(in, out.Bytes()) {
			t.Fatalf("WriteGuava(ReadGuava(%x)) = %x", in, out.Bytes())
		}
	})
}
