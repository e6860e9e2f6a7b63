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
	"strconv"
)

// The cuckoo snapshot format, version 1. All integers are little-endian.
//
//	magic            8 bytes  "SIEVECKO"
//	version          uint16   1
//	bucket size      uint8    b
//	fingerprint min  uint8    CuckooOptions.FingerprintBits (0 = none)
//	max layers       uint8    CuckooOptions.MaxLayers
//	initial capacity int64    Growth.InitialCapacity
//	target fpp       float64  Growth.TargetFPP (IEEE 754 bits)
//	factor           float64  Growth.Factor
//	tightening       float64  Growth.Tightening
//	deletes          uint64
//	policy length    uint16, then the policy bytes
//	layers           uint16, then per layer:
//	    buckets      uint64   a power of two
//	    fingerprint  uint8    f
//	    items        uint64   occupied slots
//	    slots        ceil(buckets·b·f/64) uint64 words (slot s at bits [s·f, (s+1)·f))
//	checksum         uint32   CRC-32C of every byte before it
//
// Each layer's geometry must be the one the stored options give for it, and
// its item count must equal its occupied slots, so a snapshot that passes the
// checksum but was written by other code is still refused.
const (
	cuckooMagic       = "SIEVECKO"
	cuckooFileVersion = 1
	maxPolicyLen      = math.MaxUint16
)

// ErrCorrupt is returned (wrapped with what is wrong) when a snapshot cannot
// be read: truncated, failing its checksum, or describing an impossible
// filter.
var ErrCorrupt = errors.New("dedup: corrupt snapshot")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// WriteTo writes a snapshot of the filter to w (see ReadCuckoo). It holds the
// read lock while writing, so updates wait and lookups proceed.
func (c *Cuckoo) WriteTo(w io.Writer) (int64, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return 0, ErrClosed
	}
	if len(c.opts.Policy) > maxPolicyLen {
		return 0, fmt.Errorf("%w: policy longer than %d bytes", ErrInvalidParams, maxPolicyLen)
	}
	cw := &countingWriter{w: bufio.NewWriterSize(w, 1<<16), crc: crc32.New(castagnoli)}
	o := c.opts
	cw.bytes([]byte(cuckooMagic))
	cw.u16(cuckooFileVersion)
	cw.u8(uint8(o.BucketSize))
	cw.u8(uint8(o.FingerprintBits))
	cw.u8(uint8(o.MaxLayers))
	cw.u64(uint64(o.Growth.InitialCapacity))
	cw.u64(math.Float64bits(o.Growth.TargetFPP))
	cw.u64(math.Float64bits(o.Growth.Factor))
	cw.u64(math.Float64bits(o.Growth.Tightening))
	cw.u64(c.deletes)
	cw.u16(uint16(len(o.Policy)))
	cw.bytes([]byte(o.Policy))
	cw.u16(uint16(len(c.layers)))
	for _, t := range c.layers {
		cw.u64(t.buckets)
		cw.u8(uint8(t.f))
		cw.u64(t.count)
		cw.words(t.words)
	}
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], cw.crc.Sum32())
	cw.bytes(sum[:])
	if cw.err == nil {
		cw.err = cw.w.(*bufio.Writer).Flush()
	}
	if cw.err != nil {
		return cw.n, fmt.Errorf("write cuckoo snapshot: %w", cw.err)
	}
	return cw.n, nil
}

// Save writes a snapshot of the filter to path atomically: to a temporary
// file in the same directory, synced, then renamed over path, and the
// directory synced. A crash leaves the old file or the new one, never a mix.
// Updates wait while it writes; ctx is checked before it starts.
func (c *Cuckoo) Save(ctx context.Context, path string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return writeFileAtomic(path, func(w io.Writer) error {
		_, err := c.WriteTo(w)
		return err
	})
}

// LoadCuckoo reads the snapshot at path (see ReadCuckoo). A missing file is
// an error wrapping fs.ErrNotExist, so a caller can tell "start empty" from
// "refuse to start".
func LoadCuckoo(ctx context.Context, path string, opts CuckooOptions) (*Cuckoo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load cuckoo filter: %w", err)
	}
	defer f.Close()
	c, err := ReadCuckoo(f, opts)
	if err != nil {
		var me *MismatchError
		if errors.As(err, &me) {
			me.Name = path
		}
		return nil, fmt.Errorf("load cuckoo filter %s: %w", path, err)
	}
	return c, nil
}

// ReadCuckoo reads a snapshot written by WriteTo. A zero field of opts
// (Growth's fields, MaxLayers, BucketSize, FingerprintBits) takes the stored
// value (it is adopted, never a mismatch); a field given must equal the
// stored one, except MaxKicks, which is taken from opts; otherwise it fails
// with a *MismatchError naming the first that differs and both values. A different Policy is accepted only with opts.Force. A
// snapshot that is truncated, fails its checksum or describes an impossible
// filter fails with ErrCorrupt; ReadCuckoo never trusts a stored size before
// the bytes behind it have arrived.
func ReadCuckoo(r io.Reader, opts CuckooOptions) (*Cuckoo, error) {
	if err := opts.withDefaults().validate(); err != nil {
		return nil, err
	}
	cr := &checkedReader{r: bufio.NewReaderSize(r, 1<<16), crc: crc32.New(castagnoli)}
	if string(cr.bytes(len(cuckooMagic))) != cuckooMagic {
		if cr.err != nil {
			return nil, cr.fail()
		}
		return nil, fmt.Errorf("%w: not a cuckoo filter snapshot", ErrCorrupt)
	}
	if v := cr.u16(); cr.err == nil && v != cuckooFileVersion {
		return nil, fmt.Errorf("%w: unsupported version %d", ErrCorrupt, v)
	}
	stored := CuckooOptions{MaxKicks: opts.withDefaults().MaxKicks}
	stored.BucketSize = int(cr.u8())
	stored.FingerprintBits = int(cr.u8())
	stored.MaxLayers = int(cr.u8())
	stored.Growth.InitialCapacity = int64(cr.u64())
	stored.Growth.TargetFPP = math.Float64frombits(cr.u64())
	stored.Growth.Factor = math.Float64frombits(cr.u64())
	stored.Growth.Tightening = math.Float64frombits(cr.u64())
	deletes := cr.u64()
	stored.Policy = string(cr.bytes(int(cr.u16())))
	nlayers := int(cr.u16())
	if cr.err != nil {
		return nil, cr.fail()
	}
	if err := stored.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	opts.Growth = opts.Growth.adopt(stored.Growth)
	if opts.MaxLayers == 0 {
		opts.MaxLayers = stored.MaxLayers
	}
	if opts.BucketSize == 0 {
		opts.BucketSize = stored.BucketSize
	}
	if opts.FingerprintBits == 0 {
		opts.FingerprintBits = stored.FingerprintBits
	}
	opts = opts.withDefaults()
	if err := cuckooCompare("", stored, opts); err != nil {
		return nil, err
	}
	if nlayers < 1 || nlayers > opts.MaxLayers {
		return nil, fmt.Errorf("%w: %d layers, want 1 to %d", ErrCorrupt, nlayers, opts.MaxLayers)
	}
	c := newCuckoo(opts)
	c.deletes = deletes
	for i := range nlayers {
		p, err := opts.layer(i)
		if err != nil {
			return nil, fmt.Errorf("%w: layer %d: %w", ErrCorrupt, i, err)
		}
		nb, f, items := cr.u64(), int(cr.u8()), cr.u64()
		if cr.err != nil {
			return nil, cr.fail()
		}
		if nb != p.Buckets || f != p.Bits {
			return nil, fmt.Errorf("%w: layer %d has %d buckets of %d-bit fingerprints, want %d of %d", ErrCorrupt, i, nb, f, p.Buckets, p.Bits)
		}
		t := &cuckooTable{buckets: nb, b: opts.BucketSize, f: f}
		n := cuckooWords(nb, t.b, f)
		if t.words = cr.words(n); cr.err != nil {
			return nil, cr.fail()
		}
		for s := range t.slots() {
			if t.get(s) != 0 {
				t.count++
			}
		}
		if t.count != items {
			return nil, fmt.Errorf("%w: layer %d counts %d items but holds %d", ErrCorrupt, i, items, t.count)
		}
		c.layers = append(c.layers, t)
	}
	want := cr.crc.Sum32()
	got := binary.LittleEndian.Uint32(cr.bytes(4))
	if cr.err != nil {
		return nil, cr.fail()
	}
	if got != want {
		return nil, fmt.Errorf("%w: checksum %08x, computed %08x", ErrCorrupt, got, want)
	}
	if stored.Policy != opts.Policy {
		// Accepted by Force (cuckooCompare refused it otherwise): the
		// filter records the new policy from now on.
		c.opts.Policy = opts.Policy
	}
	return c, nil
}

// cuckooCompare returns a *MismatchError for the first parameter of given that
// differs from stored (both with defaults). Policy may differ when given.Force
// is set.
func cuckooCompare(name string, stored, given CuckooOptions) error {
	ftoa := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	fields := []struct {
		name, stored, given string
	}{
		{"initial_capacity", strconv.FormatInt(stored.Growth.InitialCapacity, 10), strconv.FormatInt(given.Growth.InitialCapacity, 10)},
		{"target_fpp", ftoa(stored.Growth.TargetFPP), ftoa(given.Growth.TargetFPP)},
		{"growth_factor", ftoa(stored.Growth.Factor), ftoa(given.Growth.Factor)},
		{"tightening", ftoa(stored.Growth.Tightening), ftoa(given.Growth.Tightening)},
		{"bucket_size", strconv.Itoa(stored.BucketSize), strconv.Itoa(given.BucketSize)},
		{"fingerprint_bits", strconv.Itoa(stored.FingerprintBits), strconv.Itoa(given.FingerprintBits)},
		{"max_layers", strconv.Itoa(stored.MaxLayers), strconv.Itoa(given.MaxLayers)},
		{"policy", strconv.Quote(stored.Policy), strconv.Quote(given.Policy)},
	}
	for _, f := range fields {
		if f.stored == f.given || (f.name == "policy" && given.Force) {
			continue
		}
		return &MismatchError{Name: name, Field: f.name, Stored: f.stored, Given: f.given}
	}
	return nil
}

// countingWriter writes little-endian values, keeping a running CRC, the
// byte count and the first error.
type countingWriter struct {
	w   io.Writer
	crc hash.Hash32
	n   int64
	err error
	buf [8]byte
}

func (w *countingWriter) bytes(p []byte) {
	if w.err != nil {
		return
	}
	var n int
	n, w.err = w.w.Write(p)
	w.n += int64(n)
	w.crc.Write(p[:n])
}

func (w *countingWriter) u8(v uint8) { w.buf[0] = v; w.bytes(w.buf[:1]) }
func (w *countingWriter) u16(v uint16) {
	binary.LittleEndian.PutUint16(w.buf[:2], v)
	w.bytes(w.buf[:2])
}
func (w *countingWriter) u64(v uint64) {
	binary.LittleEndian.PutUint64(w.buf[:], v)
	w.bytes(w.buf[:])
}

// words writes ws in chunks.
func (w *countingWriter) words(ws []uint64) {
	var chunk [8 << 10]byte
	for len(ws) > 0 && w.err == nil {
		n := min(len(ws), len(chunk)/8)
		for i, v := range ws[:n] {
			binary.LittleEndian.PutUint64(chunk[8*i:], v)
		}
		w.bytes(chunk[:8*n])
		ws = ws[n:]
	}
}

// checkedReader reads little-endian values, keeping a running CRC and the
// first error; after an error every read returns zeros.
type checkedReader struct {
	r   io.Reader
	crc hash.Hash32
	err error
	buf [8]byte
}

func (r *checkedReader) bytes(n int) []byte {
	if r.err != nil {
		return make([]byte, n)
	}
	p := make([]byte, n)
	if _, r.err = io.ReadFull(r.r, p); r.err != nil {
		return make([]byte, n)
	}
	r.crc.Write(p)
	return p
}

func (r *checkedReader) fixed(n int) []byte {
	if r.err != nil {
		clear(r.buf[:n])
		return r.buf[:n]
	}
	if _, r.err = io.ReadFull(r.r, r.buf[:n]); r.err != nil {
		clear(r.buf[:n])
		return r.buf[:n]
	}
	r.crc.Write(r.buf[:n])
	return r.buf[:n]
}

func (r *checkedReader) u8() uint8   { return r.fixed(1)[0] }
func (r *checkedReader) u16() uint16 { return binary.LittleEndian.Uint16(r.fixed(2)) }
func (r *checkedReader) u64() uint64 { return binary.LittleEndian.Uint64(r.fixed(8)) }

// words reads n words in chunks, growing the slice only as the bytes arrive
// (a corrupt count cannot make it allocate more than the input holds, plus
// one chunk).
func (r *checkedReader) words(n uint64) []uint64 {
	var chunk [8 << 10]byte
	ws := make([]uint64, 0, min(n, 1<<16))
	for uint64(len(ws)) < n && r.err == nil {
		k := min(n-uint64(len(ws)), uint64(len(chunk)/8))
		p := chunk[:8*k]
		if _, r.err = io.ReadFull(r.r, p); r.err != nil {
			break
		}
		r.crc.Write(p)
		for i := range k {
			ws = append(ws, binary.LittleEndian.Uint64(p[8*i:]))
		}
	}
	return ws
}

// fail wraps the reader's error: a short read is corruption (truncation).
func (r *checkedReader) fail() error {
	if errors.Is(r.err, io.EOF) || errors.Is(r.err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: truncated", ErrCorrupt)
	}
	return fmt.Errorf("read cuckoo snapshot: %w", r.err)
}
