package dedup

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
)

// Snapshot file format, version 1. All integers are big-endian; floats are
// IEEE 754 bits. Words are in Guava's layout (bit j in word j/64, bit j%64).
//
//	magic            8 bytes  "SIEVEBF\n"
//	version          uint16   1
//	kind             uint8    1 = Bloom, 2 = ScalableBloom
//	reserved         uint8    0
//	policy length    uint16, then the policy bytes
//	initial capacity int64    (Bloom: its capacity)
//	target fpp       float64  (Bloom: its fpp)
//	growth factor    float64  (Bloom: 0)
//	tightening       float64  (Bloom: 0)
//	layer count      uint32
//	per layer:       capacity int64, fpp float64, k uint32, items uint64,
//	                 word count uint64, then the words (uint64 each)
//	checksum         uint32   CRC-32C (Castagnoli) of every byte above
const (
	snapshotMagic   = "SIEVEBF\n"
	snapshotVersion = 1

	snapshotKindBloom    = 1
	snapshotKindScalable = 2
)

// snapshot is the decoded content of a snapshot file.
type snapshot struct {
	kind   byte
	policy string
	growth Growth // a Bloom stores its capacity and fpp, Factor and Tightening 0
	layers []*layer
}

// writeSnapshot writes s to path atomically: into a temporary file in the
// same directory, synced, then renamed over path, and the directory synced.
// A crash leaves either the old file or the new one, never a mix.
func writeSnapshot(ctx context.Context, path string, s *snapshot) (err error) {
	if len(s.policy) > maxPolicyLen {
		return fmt.Errorf("dedup: snapshot %s: policy is %d bytes, more than %d", path, len(s.policy), maxPolicyLen)
	}
	return writeFileAtomic(path, func(w io.Writer) error { return s.encode(ctx, w) })
}

// writeFileAtomic writes path with write, atomically: into a temporary file
// in the same directory, synced, then renamed over path, and the directory
// synced.
func writeFileAtomic(path string, write func(w io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("dedup: snapshot: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		return fmt.Errorf("dedup: snapshot %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("dedup: snapshot %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("dedup: snapshot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("dedup: snapshot %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("dedup: snapshot: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		// Make the rename itself durable; not every platform can sync a
		// directory, and the data is already safe in the file.
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// encode writes the snapshot and its checksum to w.
func (s *snapshot) encode(ctx context.Context, w io.Writer) error {
	sum := crc32.New(castagnoli)
	if err := s.encodeBody(ctx, io.MultiWriter(sum, w)); err != nil {
		return err
	}
	// The checksum itself is not summed.
	_, err := w.Write(binary.BigEndian.AppendUint32(nil, sum.Sum32()))
	return err
}

func (s *snapshot) encodeBody(ctx context.Context, w io.Writer) error {
	b := []byte(snapshotMagic)
	b = binary.BigEndian.AppendUint16(b, snapshotVersion)
	b = append(b, s.kind, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(s.policy)))
	b = append(b, s.policy...)
	b = binary.BigEndian.AppendUint64(b, uint64(s.growth.InitialCapacity))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(s.growth.TargetFPP))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(s.growth.Factor))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(s.growth.Tightening))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.layers)))
	if _, err := w.Write(b); err != nil {
		return err
	}
	for _, l := range s.layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		b = binary.BigEndian.AppendUint64(b[:0], uint64(l.capacity))
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(l.fpp))
		b = binary.BigEndian.AppendUint32(b, uint32(l.k))
		b = binary.BigEndian.AppendUint64(b, l.items.Load())
		b = binary.BigEndian.AppendUint64(b, uint64(len(l.words)))
		if _, err := w.Write(b); err != nil {
			return err
		}
		if err := writeWords(w, l.words); err != nil {
			return err
		}
	}
	return nil
}

// readSnapshot reads and verifies the snapshot at path: its structure, its
// checksum, and that each layer's size is what its parameters give
// (following the growth schedule for a scalable filter). It allocates no
// more than the file's size.
func readSnapshot(ctx context.Context, path string, kind byte) (*snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dedup: load snapshot: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("dedup: load snapshot: %w", err)
	}
	s, err := decodeSnapshot(ctx, f, fi.Size(), kind)
	if err != nil {
		return nil, fmt.Errorf("dedup: load snapshot %s: %w", path, err)
	}
	return s, nil
}

// decodeSnapshot reads a snapshot of the given kind from r, which holds size
// bytes.
func decodeSnapshot(ctx context.Context, r io.Reader, size int64, kind byte) (*snapshot, error) {
	sr := &snapshotReader{r: bufio.NewReaderSize(r, int(min(max(size, 16), 1<<20))), sum: crc32.New(castagnoli), left: size}
	return sr.decode(ctx, kind)
}

// snapshotReader reads a snapshot, checksumming it and tracking how many
// bytes the file has left so no count can make it over-allocate.
type snapshotReader struct {
	r    *bufio.Reader
	sum  hash.Hash32
	left int64
	buf  [8]byte
}

func (r *snapshotReader) read(p []byte, what string) error {
	if _, err := io.ReadFull(r.r, p); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: truncated in %s: %w", ErrCorrupt, what, io.ErrUnexpectedEOF)
		}
		return err
	}
	r.sum.Write(p)
	r.left -= int64(len(p))
	return nil
}

func (r *snapshotReader) u16(what string) (uint16, error) {
	err := r.read(r.buf[:2], what)
	return binary.BigEndian.Uint16(r.buf[:2]), err
}

func (r *snapshotReader) u32(what string) (uint32, error) {
	err := r.read(r.buf[:4], what)
	return binary.BigEndian.Uint32(r.buf[:4]), err
}

func (r *snapshotReader) u64(what string) (uint64, error) {
	err := r.read(r.buf[:8], what)
	return binary.BigEndian.Uint64(r.buf[:8]), err
}

func (r *snapshotReader) f64(what string) (float64, error) {
	u, err := r.u64(what)
	return math.Float64frombits(u), err
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

func (r *snapshotReader) decode(ctx context.Context, kind byte) (*snapshot, error) {
	var head [12]byte
	if err := r.read(head[:], "header"); err != nil {
		return nil, err
	}
	if string(head[:8]) != snapshotMagic {
		return nil, corrupt("not a Sieve filter snapshot (magic %q)", head[:8])
	}
	if v := binary.BigEndian.Uint16(head[8:]); v != snapshotVersion {
		return nil, corrupt("format version %d, this build reads %d", v, snapshotVersion)
	}
	s := &snapshot{kind: head[10]}
	if s.kind != kind {
		return nil, corrupt("holds filter kind %d, want %d", s.kind, kind)
	}
	n, err := r.u16("policy")
	if err != nil {
		return nil, err
	}
	policy := make([]byte, min(int64(n), max(r.left, 0)))
	if err := r.read(policy, "policy"); err != nil {
		return nil, err
	}
	s.policy = string(policy)
	c, err := r.u64("initial capacity")
	if err != nil {
		return nil, err
	}
	s.growth.InitialCapacity = int64(c)
	if s.growth.TargetFPP, err = r.f64("target fpp"); err != nil {
		return nil, err
	}
	if s.growth.Factor, err = r.f64("growth factor"); err != nil {
		return nil, err
	}
	if s.growth.Tightening, err = r.f64("tightening"); err != nil {
		return nil, err
	}
	switch kind {
	case snapshotKindBloom:
		if s.growth.Factor != 0 || s.growth.Tightening != 0 {
			return nil, corrupt("a fixed-size filter with growth parameters")
		}
		if _, err := newLayerParams(s.growth.InitialCapacity, s.growth.TargetFPP); err != nil {
			return nil, corrupt("parameters: %w", err)
		}
	case snapshotKindScalable:
		if err := s.growth.Validate(); err != nil {
			return nil, corrupt("parameters: %w", err)
		}
	}
	count, err := r.u32("layer count")
	if err != nil {
		return nil, err
	}
	if count == 0 || count > maxLayers || (kind == snapshotKindBloom && count != 1) {
		return nil, corrupt("%d layers", count)
	}
	for i := range int(count) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		l, err := r.layer(s, i)
		if err != nil {
			return nil, err
		}
		s.layers = append(s.layers, l)
	}
	want := r.sum.Sum32()
	got, err := r.u32("checksum")
	if err != nil {
		return nil, err
	}
	if got != want {
		return nil, corrupt("checksum %#08x, content sums to %#08x", got, want)
	}
	if _, err := r.r.ReadByte(); err != io.EOF {
		return nil, corrupt("data after the checksum")
	}
	return s, nil
}

// layer reads layer i and checks its size against its parameters.
func (r *snapshotReader) layer(s *snapshot, i int) (*layer, error) {
	what := fmt.Sprintf("layer %d", i)
	c, err := r.u64(what)
	if err != nil {
		return nil, err
	}
	l := &layer{capacity: int64(c)}
	if l.fpp, err = r.f64(what); err != nil {
		return nil, err
	}
	k, err := r.u32(what)
	if err != nil {
		return nil, err
	}
	items, err := r.u64(what)
	if err != nil {
		return nil, err
	}
	nw, err := r.u64(what)
	if err != nil {
		return nil, err
	}
	// The layer's parameters come from the header (Bloom) or the schedule
	// (scalable); its size from Guava's formulas. A Bloom imported from a
	// Guava stream keeps the stream's k and size, so only sanity applies.
	want := LayerParams{Capacity: s.growth.InitialCapacity, FPP: s.growth.TargetFPP}
	if s.kind == snapshotKindScalable {
		if want, err = s.growth.Layer(i); err != nil {
			return nil, corrupt("%s: %w", what, err)
		}
	}
	if l.capacity != want.Capacity || l.fpp != want.FPP {
		return nil, corrupt("%s sized for %d items at %v, parameters give %d at %v", what, l.capacity, l.fpp, want.Capacity, want.FPP)
	}
	if k == 0 || k > math.MaxUint8 || nw == 0 || nw > maxLayerWords {
		return nil, corrupt("%s has k=%d and %d words", what, k, nw)
	}
	if s.kind == snapshotKindScalable {
		sz, err := newLayerParams(l.capacity, l.fpp)
		if err != nil {
			return nil, corrupt("%s: %w", what, err)
		}
		if int(k) != sz.k || int(nw) != sz.words {
			return nil, corrupt("%s has k=%d and %d words, its parameters give %d and %d", what, k, nw, sz.k, sz.words)
		}
	}
	if int64(nw) > r.left/8 {
		return nil, corrupt("truncated in %s: %d words, file has %d bytes left: %w", what, nw, r.left, io.ErrUnexpectedEOF)
	}
	l.k = int(k)
	l.bitSize = nw * 64
	l.words = make([]uint64, nw)
	var buf [8 * 4096]byte
	for off := 0; off < len(l.words); {
		c := min(len(l.words)-off, 4096)
		if err := r.read(buf[:8*c], what); err != nil {
			return nil, err
		}
		for j := range c {
			l.words[off+j] = binary.BigEndian.Uint64(buf[8*j:])
		}
		off += c
	}
	l.countOnes()
	if items > l.ones.Load() {
		// A key counts as new only when it sets a clear bit, so a layer
		// never holds more items than set bits.
		return nil, corrupt("%s claims %d items in %d set bits", what, items, l.ones.Load())
	}
	l.items.Store(items)
	return l, nil
}

// Save writes the filter to path atomically (see the format above): a
// temporary file beside path is written, synced and renamed over it, so a
// crash leaves the previous snapshot or the new one. The bits are copied
// under the filter's lock, so the snapshot holds whole batches only, and
// written while other calls proceed; the copy costs the filter's size in
// memory for the duration.
func (b *Bloom) Save(ctx context.Context, path string) error {
	l, policy, err := b.freeze()
	if err != nil {
		return err
	}
	return writeSnapshot(ctx, path, &snapshot{
		kind:   snapshotKindBloom,
		policy: policy,
		growth: Growth{InitialCapacity: l.capacity, TargetFPP: l.fpp},
		layers: []*layer{l},
	})
}

// LoadBloom restores a filter written by Bloom.Save. opts must give the
// stored capacity and rate (zero fields meaning the defaults) and policy, or
// LoadBloom returns a *MismatchError; with opts.Force a different policy is
// accepted and opts.Policy replaces the stored one. A truncated or damaged
// file gives ErrCorrupt, a missing one an error matching fs.ErrNotExist.
// A filter imported with ReadGuava and inferred sizing is stored with the
// inferred capacity and rate, which Stats().Layers[0] reports.
func LoadBloom(ctx context.Context, path string, opts BloomOptions) (*Bloom, error) {
	s, err := readSnapshot(ctx, path, snapshotKindBloom)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	switch {
	case s.growth.InitialCapacity != opts.Capacity:
		return nil, &MismatchError{Name: path, Field: "capacity", Stored: fmt.Sprint(s.growth.InitialCapacity), Given: fmt.Sprint(opts.Capacity)}
	case s.growth.TargetFPP != opts.FPP:
		return nil, &MismatchError{Name: path, Field: "fpp", Stored: fmt.Sprint(s.growth.TargetFPP), Given: fmt.Sprint(opts.FPP)}
	case s.policy != opts.Policy && !opts.Force:
		return nil, &MismatchError{Name: path, Field: "policy", Stored: fmt.Sprintf("%q", s.policy), Given: fmt.Sprintf("%q", opts.Policy)}
	}
	return newBloomFromLayer(s.layers[0], opts), nil
}
