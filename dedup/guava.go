package dedup

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// guavaMurmur128Mitz64 is the ordinal of BloomFilterStrategies.MURMUR128_MITZ_64,
// the strategy Guava has used since release 12 and the only one Sieve reads.
const guavaMurmur128Mitz64 = 1

// ErrGuavaFormat is returned (wrapped with details) by ReadGuava for a stream
// that is not a Guava BloomFilter.writeTo stream Sieve can read.
var ErrGuavaFormat = errors.New("dedup: bad guava bloom filter stream")

// readChunkWords bounds how many words ReadGuava allocates ahead of the data
// actually read, so a stream claiming 2³¹ words but holding few cannot make
// it allocate 16 GiB.
const readChunkWords = 1 << 16

// WriteGuava writes the filter in the format of Guava's
// BloomFilter.writeTo(OutputStream): one byte strategy ordinal (1 =
// MURMUR128_MITZ_64), one unsigned byte k, a big-endian int32 count of
// longs, then that many big-endian int64 words. Java reads it back with
// BloomFilter.readFrom(in, Funnels.stringFunnel(UTF_8)). The stream holds
// neither the item count nor the policy.
//
// WriteGuava copies the bits under the filter's lock, so it sees no
// half-applied batch, and writes the copy while other calls proceed.
func (b *Bloom) WriteGuava(w io.Writer) error {
	l, _, err := b.freeze()
	if err != nil {
		return err
	}
	if l.k > math.MaxUint8 {
		return fmt.Errorf("dedup: write guava: %d hash functions do not fit a byte", l.k)
	}
	bw := bufio.NewWriter(w)
	hdr := []byte{guavaMurmur128Mitz64, byte(l.k)}
	hdr = binary.BigEndian.AppendUint32(hdr, uint32(len(l.words)))
	if _, err := bw.Write(hdr); err != nil {
		return fmt.Errorf("dedup: write guava: %w", err)
	}
	if err := writeWords(bw, l.words); err != nil {
		return fmt.Errorf("dedup: write guava: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("dedup: write guava: %w", err)
	}
	return nil
}

// ReadGuava reads a filter written by Guava's BloomFilter.writeTo (or by
// WriteGuava). Keys must be the UTF-8 bytes of the strings Java put, with
// Funnels.stringFunnel(UTF_8).
//
// The stream holds only k and the bits. If opts.Capacity or opts.FPP is set,
// Guava's sizing for them must give the stream's k and word count, or
// ReadGuava returns a *MismatchError; left zero, they are inferred from the
// bits (n = round(m·ln 2 / k), p = exp(−m·ln²2 / n)), which is only an
// estimate. The item count starts at ApproximateItems (at most the bits set). opts.Policy is
// adopted as the filter's policy.
func ReadGuava(r io.Reader, opts BloomOptions) (*Bloom, error) {
	var hdr [6]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrGuavaFormat, err)
	}
	if hdr[0] != guavaMurmur128Mitz64 {
		return nil, fmt.Errorf("%w: strategy ordinal %d, want %d (MURMUR128_MITZ_64)", ErrGuavaFormat, int8(hdr[0]), guavaMurmur128Mitz64)
	}
	k := int(hdr[1])
	if k == 0 {
		return nil, fmt.Errorf("%w: zero hash functions", ErrGuavaFormat)
	}
	n := int32(binary.BigEndian.Uint32(hdr[2:]))
	if n <= 0 {
		return nil, fmt.Errorf("%w: %d words", ErrGuavaFormat, n)
	}
	words := make([]uint64, 0, min(int(n), readChunkWords))
	buf := make([]byte, 8*min(int(n), readChunkWords))
	for len(words) < int(n) {
		c := min(int(n)-len(words), readChunkWords)
		if _, err := io.ReadFull(r, buf[:8*c]); err != nil {
			return nil, fmt.Errorf("%w: word %d of %d: %w", ErrGuavaFormat, len(words), n, eofUnexpected(err))
		}
		for i := range c {
			words = append(words, binary.BigEndian.Uint64(buf[8*i:]))
		}
	}
	l := &layer{k: k, bitSize: uint64(n) * 64, words: words}
	if err := l.inferSizing(opts); err != nil {
		return nil, err
	}
	l.countOnes()
	// A key is new only if it sets a clear bit: never more items than bits.
	l.items.Store(min(l.approximateItems(), l.ones.Load()))
	return newBloomFromLayer(l, opts), nil
}

// inferSizing sets the capacity and fpp of a layer read from a Guava stream:
// checked against opts when given, inferred from m and k otherwise.
func (l *layer) inferSizing(opts BloomOptions) error {
	const name = "guava stream"
	if opts.Capacity != 0 || opts.FPP != 0 {
		opts = opts.withDefaults()
		want, err := newLayerParams(opts.Capacity, opts.FPP)
		if err != nil {
			return err
		}
		if want.words != len(l.words) {
			return &MismatchError{Name: name, Field: "words", Stored: fmt.Sprint(len(l.words)), Given: fmt.Sprint(want.words)}
		}
		if want.k != l.k {
			return &MismatchError{Name: name, Field: "hashes", Stored: fmt.Sprint(l.k), Given: fmt.Sprint(want.k)}
		}
		l.capacity, l.fpp = opts.Capacity, opts.FPP
		return nil
	}
	m := float64(l.bitSize)
	l.capacity = max(1, int64(math.Round(m*math.Ln2/float64(l.k))))
	l.fpp = math.Exp(-m * math.Ln2 * math.Ln2 / float64(l.capacity))
	return nil
}

// writeWords writes words big-endian.
func writeWords(w io.Writer, words []uint64) error {
	buf := make([]byte, 0, 8*min(len(words), 4096))
	for len(words) > 0 {
		c := min(len(words), 4096)
		buf = buf[:0]
		for _, x := range words[:c] {
			buf = binary.BigEndian.AppendUint64(buf, x)
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		words = words[c:]
	}
	return nil
}

// eofUnexpected reports a clean EOF in the middle of a structure as
// io.ErrUnexpectedEOF.
func eofUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
