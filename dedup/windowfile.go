package dedup

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"strconv"
	"time"
)

// Window snapshot format, version 1. Integers are big-endian, floats IEEE
// 754 bits.
//
//	magic        8 bytes  "SIEVEWIN"
//	version      uint16   1
//	kind         uint8    1 = Bloom generations, 2 = cuckoo generations
//	reserved     uint8    0
//	window       int64    D in nanoseconds
//	granularity  uint16   g
//	target fpp   float64  the window's bound
//	generations  uint32, then per generation, oldest first:
//	    epoch    int64    the generation's period number
//	    length   uint64, then that many bytes: the generation's own
//	             snapshot (ScalableBloom.Save's or Cuckoo.WriteTo's format)
//	checksum     uint32   CRC-32C (Castagnoli) of every byte above
//
// Only live generations are written; a generation that has expired by the
// time the file is loaded is dropped then.
const (
	windowMagic       = "SIEVEWIN"
	windowFileVersion = 1

	windowKindBloom  = 1
	windowKindCuckoo = 2
)

// Save writes every live generation of an in-memory window to path
// atomically (a temporary file beside it, synced, renamed over it). Each
// generation is copied as its own Save would copy it; updates to the window
// proceed meanwhile, and no generation expires while Save runs. A window
// kept in Redis has nothing to save: Save returns an error.
func (w *Window) Save(ctx context.Context, path string) error {
	if _, ok := w.store.(memoryWindowStore); !ok {
		return fmt.Errorf("dedup: window: save %s: a window in Redis is saved by Redis", path)
	}
	v, err := w.acquire(ctx, false)
	if err != nil {
		return fmt.Errorf("dedup: window: save %s: %w", path, err)
	}
	defer w.mu.RUnlock()
	kind := byte(windowKindBloom)
	if w.kind == "cuckoo" {
		kind = windowKindCuckoo
	}
	b := []byte(windowMagic)
	b = binary.BigEndian.AppendUint16(b, windowFileVersion)
	b = append(b, kind, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(w.opts.After))
	b = binary.BigEndian.AppendUint16(b, uint16(w.opts.Granularity))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(w.target))
	b = binary.BigEndian.AppendUint32(b, uint32(len(v.gens)))
	var gens []byte
	for i, g := range v.gens {
		var buf bytes.Buffer
		if err := encodeGeneration(ctx, &buf, g); err != nil {
			return fmt.Errorf("dedup: window: save %s: generation %d: %w", path, v.epochs[i], err)
		}
		gens = binary.BigEndian.AppendUint64(gens[:0], uint64(v.epochs[i]))
		gens = binary.BigEndian.AppendUint64(gens, uint64(buf.Len()))
		b = append(append(b, gens...), buf.Bytes()...)
	}
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return writeFileAtomic(path, func(out io.Writer) error {
		_, err := out.Write(b)
		return err
	})
}

// encodeGeneration writes an in-memory generation's own snapshot.
func encodeGeneration(ctx context.Context, w io.Writer, g generation) error {
	switch g := g.(type) {
	case *ScalableBloom:
		s, err := g.snapshot()
		if err != nil {
			return err
		}
		return s.encode(ctx, w)
	case *Cuckoo:
		_, err := g.WriteTo(w)
		return err
	}
	return fmt.Errorf("generation of type %T has no snapshot", g)
}

// LoadBloomWindow restores a window written by Save from a window made by
// NewBloomWindow. The stored window, granularity and target rate are adopted
// where w and gen leave them zero, and each generation's schedule where gen
// leaves it zero (new generations are sized as the newest stored one); a
// parameter given otherwise than stored fails with a *MismatchError naming
// the field and both values (gen.Force accepts another policy, as
// LoadScalableBloom does). A damaged file gives ErrCorrupt, a missing one an
// error matching fs.ErrNotExist.
func LoadBloomWindow(ctx context.Context, path string, w WindowOptions, gen ScalableOptions) (*Window, error) {
	if err := adoptWindowHead(path, &w, &gen.Growth.TargetFPP); err != nil {
		return nil, err
	}
	given := gen.Growth
	w, gen, target, err := bloomWindowOptions(w, gen)
	if err != nil {
		return nil, err
	}
	dec := gen // each generation adopts its stored schedule where not given
	dec.Growth = Growth{InitialCapacity: given.InitialCapacity, TargetFPP: gen.Growth.TargetFPP, Factor: given.Factor, Tightening: given.Tightening}
	var newest *ScalableBloom
	gens, err := readWindowFile(ctx, path, w, target, windowKindBloom, func(r io.Reader, size int64) (generation, error) {
		s, err := decodeSnapshot(ctx, r, size, snapshotKindScalable)
		if err != nil {
			return nil, err
		}
		newest, err = scalableFromSnapshot(path, s, dec)
		return newest, err
	})
	if err != nil {
		return nil, err
	}
	if newest != nil {
		gen.Growth = dec.Growth.adopt(newest.growth)
	}
	store := memoryWindowStore{create: func() (generation, error) { return NewScalableBloom(gen) }}
	return newWindow(w, target, "bloom", store, gens), nil
}

// LoadCuckooWindow restores a window written by Save from a window made by
// NewCuckooWindow, as LoadBloomWindow does.
func LoadCuckooWindow(ctx context.Context, path string, w WindowOptions, gen CuckooOptions) (*Window, error) {
	if err := adoptWindowHead(path, &w, &gen.Growth.TargetFPP); err != nil {
		return nil, err
	}
	given := gen
	w, gen, target, err := cuckooWindowOptions(w, gen)
	if err != nil {
		return nil, err
	}
	dec := given // each generation adopts its stored parameters where not given
	dec.Growth.TargetFPP = gen.Growth.TargetFPP
	var newest *Cuckoo
	gens, err := readWindowFile(ctx, path, w, target, windowKindCuckoo, func(r io.Reader, _ int64) (generation, error) {
		c, err := ReadCuckoo(r, dec)
		var me *MismatchError
		if errors.As(err, &me) {
			me.Name = path
		}
		if err != nil {
			return nil, err
		}
		newest = c
		return c, nil
	})
	if err != nil {
		return nil, err
	}
	if newest != nil {
		gen = newest.opts
		gen.Policy, gen.Force, gen.MaxKicks = given.Policy, given.Force, given.MaxKicks
		gen = gen.withDefaults()
	}
	store := memoryWindowStore{create: func() (generation, error) { return NewCuckoo(gen) }}
	return newWindow(w, target, "cuckoo", store, gens), nil
}

// adoptWindowHead sets w.After, w.Granularity and *target, where zero, to
// those of the window snapshot at path. A header it cannot read is left to
// readWindowFile to report; a missing file is an error matching
// fs.ErrNotExist.
func adoptWindowHead(path string, w *WindowOptions, target *float64) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("dedup: load window: %w", err)
	}
	defer f.Close()
	var head [8 + 2 + 2 + 8 + 2 + 8]byte
	if _, err := io.ReadFull(f, head[:]); err != nil || string(head[:8]) != windowMagic {
		return nil
	}
	if w.After == 0 {
		w.After = time.Duration(binary.BigEndian.Uint64(head[12:]))
	}
	if w.Granularity == 0 {
		w.Granularity = int(binary.BigEndian.Uint16(head[20:]))
	}
	if *target == 0 {
		*target = math.Float64frombits(binary.BigEndian.Uint64(head[22:]))
	}
	return nil
}

// readWindowFile reads and checks a window snapshot, decoding each
// generation with decode (given a reader limited to its bytes and their
// count).
func readWindowFile(ctx context.Context, path string, w WindowOptions, target float64, kind byte,
	decode func(r io.Reader, size int64) (generation, error)) (gens map[int64]generation, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dedup: load window: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("dedup: load window: %w", err)
	}
	gens = map[int64]generation{}
	defer func() {
		if err != nil {
			for _, g := range gens {
				_ = g.Close()
			}
			err = fmt.Errorf("dedup: load window %s: %w", path, err)
		}
	}()
	br, crc := bufio.NewReader(f), crc32.New(castagnoli)
	r := io.TeeReader(br, crc) // everything before the checksum is summed
	var head [8 + 2 + 2 + 8 + 2 + 8 + 4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, corrupt("truncated header: %w", eofUnexpected(err))
	}
	if string(head[:8]) != windowMagic {
		return nil, corrupt("not a Sieve window snapshot (magic %q)", head[:8])
	}
	if v := binary.BigEndian.Uint16(head[8:]); v != windowFileVersion {
		return nil, corrupt("format version %d, this build reads %d", v, windowFileVersion)
	}
	names := map[byte]string{windowKindBloom: "bloom", windowKindCuckoo: "cuckoo"}
	after := int64(binary.BigEndian.Uint64(head[12:]))
	g := int(binary.BigEndian.Uint16(head[20:]))
	fpp := math.Float64frombits(binary.BigEndian.Uint64(head[22:]))
	count := binary.BigEndian.Uint32(head[30:])
	mismatch := func(field string, stored, given any) error {
		return &MismatchError{Name: path, Field: field, Stored: fmt.Sprint(stored), Given: fmt.Sprint(given)}
	}
	switch {
	case head[10] != kind:
		return nil, mismatch("kind", names[head[10]], names[kind])
	case after != int64(w.After):
		return nil, mismatch("window", strconv.FormatInt(after, 10)+"ns", strconv.FormatInt(int64(w.After), 10)+"ns")
	case g != w.Granularity:
		return nil, mismatch("granularity", g, w.Granularity)
	case fpp != target:
		return nil, mismatch("target_fpp", fpp, target)
	case count > uint32(w.Granularity)+1:
		return nil, corrupt("%d generations, a window has at most %d", count, w.Granularity+1)
	}
	var hdr [16]byte
	for range count {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, corrupt("truncated generation header: %w", eofUnexpected(err))
		}
		e, size := int64(binary.BigEndian.Uint64(hdr[:])), binary.BigEndian.Uint64(hdr[8:])
		if _, dup := gens[e]; dup {
			return nil, corrupt("generation %d stored twice", e)
		}
		if size > uint64(fi.Size()) {
			return nil, corrupt("generation %d claims %d bytes in a file of %d", e, size, fi.Size())
		}
		lr := &io.LimitedReader{R: r, N: int64(size)}
		gen, err := decode(lr, int64(size))
		if err != nil {
			return nil, fmt.Errorf("generation %d: %w", e, err)
		}
		gens[e] = gen
		if n, _ := io.Copy(io.Discard, lr); n > 0 || lr.N > 0 {
			return nil, corrupt("generation %d: %d bytes after its snapshot or missing", e, n+lr.N)
		}
	}
	want := crc.Sum32()
	var sum [4]byte
	if _, err := io.ReadFull(br, sum[:]); err != nil {
		return nil, corrupt("truncated checksum: %w", eofUnexpected(err))
	}
	if got := binary.BigEndian.Uint32(sum[:]); got != want {
		return nil, corrupt("checksum %#08x, content sums to %#08x", got, want)
	}
	if _, err := br.Read(sum[:1]); err != io.EOF {
		return nil, corrupt("data after the checksum")
	}
	return gens, nil
}
