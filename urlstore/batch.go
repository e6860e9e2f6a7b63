package urlstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// batchVersion is the first byte of an encoded batch: the log's format.
const batchVersion = 1

// batchS2 is the first byte of a batch as the log keeps it when
// compression pays: an S2 block of the whole batchVersion encoding
// follows. The log's entries are compressed here, one by one, and not by
// the stream that holds them: NATS decompresses every block of a stream
// it rebuilds, which it does after any unclean stop (SIGKILL, a crash)
// since its last state file, 2 minutes at most, and that took 4.7 s for a
// 110 MB log of 5 M URLs (2.4 s of it decompressing, twice a block);
// uncompressed blocks of already compressed entries are read and
// checksummed only.
const batchS2 = 2

// batchZstd is the first byte of a batch as the log keeps it since issue
// 39: a zstd frame (its fastest level) of the whole batchVersion encoding
// follows. It packs a log of URLs tighter than S2 (a 20 M fill of
// PutURLs with two metadata keys: 44 B a URL with S2; batches of 64 such
// URLs, 39 B with S2 and 22.5 B with zstd), and the log's size is what a
// restart after an unclean stop reads (NATS rebuilds the stream from
// every block); encoding costs about 1 µs a URL more, decoding the same.
// S2 entries are still read.
const batchZstd = 3

// LogFormat is the newest format of the log's entries this build reads
// and writes: the first byte of an entry, 1 for a batch as it is
// (batchVersion), 2 for one compressed with S2 (batchS2, read only), 3
// with zstd (batchZstd). A first byte above it,
// up to maxFormat, is a newer build's format: a store stops at such an
// entry (ErrNewerFormat) rather than skip it, since skipping would leave
// it without a write every newer store applied. Above maxFormat (or 0)
// the entry is not a store's at all, and every store skips it alike
// (ErrBadBatch).
const LogFormat = batchZstd

// maxFormat is the largest first byte a future format may take.
const maxFormat = 63

// ErrNewerFormat is the error of an entry, a value, or a deployment
// written in a format newer than this build reads: the build must be
// upgraded, and nothing is skipped meanwhile.
var ErrNewerFormat = errors.New("urlstore: written in a newer format than this build reads")

// Newer reports whether version, the version byte of an entry or a
// value, is a format newer than reads, the newest its reader knows: above
// it, up to the largest a version may take (63). Above that the byte is
// not a version at all, and the entry or value is bad, not newer.
func Newer(version byte, reads int) bool { return int(version) > reads && version <= maxFormat }

// newer reports whether an entry's first byte is a format newer than
// LogFormat, and says so.
func newer(first byte) error {
	if Newer(first, LogFormat) {
		return fmt.Errorf("%w: an entry of log format %d; this build reads up to %d: upgrade it", ErrNewerFormat, first, LogFormat)
	}
	return nil
}

// compressMin is the smallest batch worth compressing: below it S2's
// framing eats what it saves (a hand-out's lease, a known update).
const compressMin = 256

// maxDecodedBatch bounds what a compressed entry may claim to expand to,
// so a damaged length cannot ask for gigabytes.
const maxDecodedBatch = 64 << 20

// logged is data as the log keeps it: compressed (batchS2) when it is
// at least compressMin bytes and compression saves some, else as it is.
func logged(data []byte) []byte {
	if len(data) < compressMin || data[0] != batchVersion {
		return data
	}
	out := zstdEncoder().EncodeAll(data, append(make([]byte, 0, len(data)/2), batchZstd))
	if len(out) >= len(data) {
		return data
	}
	return out
}

// The log's zstd coders, made once and shared: both are safe for
// concurrent use. Decoding is bounded by maxDecodedBatch.
var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic(err) // only for bad options
		}
		return e
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxDecodedBatch), zstd.WithDecoderLowmem(true))
		if err != nil {
			panic(err) // only for bad options
		}
		return d
	})
)

// The kinds of operation a batch holds, one byte each in the encoding.
const (
	opSet          = 1 // key, value
	opSetIfAbsent  = 2 // key, value: only if the key holds none
	opDelete       = 3 // key
	opDeletePrefix = 4 // prefix: every key that starts with it
)

// MaxKeyBytes bounds a key, so a corrupt length cannot ask for gigabytes.
const MaxKeyBytes = 4 << 10

// MaxValueBytes bounds a value.
const MaxValueBytes = 1 << 20

// ErrBadBatch is the error of a batch that does not decode: a log entry
// written by something else, or damaged.
var ErrBadBatch = errors.New("urlstore: bad batch")

// Batch is a list of changes applied together, in order, and atomically:
// one entry of the log. Its encoding is the log's format:
//
//	version (1)  then per operation:
//	kind (1)  uvarint key length  key  [uvarint value length  value]
//
// (a value only for Set and SetIfAbsent). SetIfAbsent reads the store as
// the operations before it in the same batch left it, so every replica
// that applies the log in order reaches the same state. The zero value is
// an empty batch. A Batch is not safe for concurrent use.
type Batch struct {
	data []byte
	n    int
}

func (b *Batch) op(kind byte, key, value []byte, hasValue bool) {
	if len(b.data) == 0 {
		b.data = append(b.data, batchVersion)
	}
	b.data = append(b.data, kind)
	b.data = binary.AppendUvarint(b.data, uint64(len(key)))
	b.data = append(b.data, key...)
	if hasValue {
		b.data = binary.AppendUvarint(b.data, uint64(len(value)))
		b.data = append(b.data, value...)
	}
	b.n++
}

// Set stores value under key.
func (b *Batch) Set(key, value []byte) { b.op(opSet, key, value, true) }

// SetIfAbsent stores value under key if the key holds no value then.
func (b *Batch) SetIfAbsent(key, value []byte) { b.op(opSetIfAbsent, key, value, true) }

// Delete removes key.
func (b *Batch) Delete(key []byte) { b.op(opDelete, key, nil, false) }

// DeletePrefix removes every key that starts with prefix (an empty prefix
// is refused when the batch is written: it would remove everything).
func (b *Batch) DeletePrefix(prefix []byte) { b.op(opDeletePrefix, prefix, nil, false) }

// Len is the number of operations in the batch.
func (b *Batch) Len() int { return b.n }

// Size is the batch's encoded size in bytes.
func (b *Batch) Size() int { return len(b.data) }

// Reset empties the batch, keeping its buffer.
func (b *Batch) Reset() { b.data, b.n = b.data[:0], 0 }

// Bytes is the batch's encoding (what the log stores).
func (b *Batch) Bytes() []byte { return b.data }

// operation is one decoded operation; key and value alias the batch.
type operation struct {
	kind       byte
	key, value []byte
}

// check validates the batch as decode would, and the rules only a writer
// is held to (no empty prefix, keys and values within bounds).
func (b *Batch) check() error {
	return decodeBatch(b.data, func(op operation) error {
		if op.kind == opDeletePrefix && len(op.key) == 0 {
			return fmt.Errorf("%w: an empty prefix would delete everything", ErrBadBatch)
		}
		return nil
	})
}

// decodeBatch calls fn for each operation of an encoded batch, in order,
// either as written or as the log keeps it (batchS2). It never panics on
// bad input: a short, oversized or unknown operation is ErrBadBatch.
func decodeBatch(data []byte, fn func(operation) error) error {
	if len(data) == 0 {
		return nil
	}
	if err := newer(data[0]); err != nil {
		return err
	}
	if data[0] == batchS2 || data[0] == batchZstd {
		var raw []byte
		if data[0] == batchS2 {
			n, err := s2.DecodedLen(data[1:])
			if err != nil || n > maxDecodedBatch {
				return fmt.Errorf("%w: compressed entry of %d bytes (%v)", ErrBadBatch, n, err)
			}
			if raw, err = s2.Decode(make([]byte, n), data[1:]); err != nil {
				return fmt.Errorf("%w: %v", ErrBadBatch, err)
			}
		} else {
			var err error
			if raw, err = zstdDecoder().DecodeAll(data[1:], nil); err != nil {
				return fmt.Errorf("%w: compressed entry: %v", ErrBadBatch, err)
			}
		}
		if len(raw) > 0 {
			if err := newer(raw[0]); err != nil {
				return err
			}
		}
		if len(raw) == 0 || raw[0] != batchVersion {
			return fmt.Errorf("%w: compressed entry of another version", ErrBadBatch)
		}
		data = raw
	}
	if data[0] != batchVersion {
		return fmt.Errorf("%w: version %d", ErrBadBatch, data[0])
	}
	rest := data[1:]
	field := func(limit uint64) ([]byte, error) {
		n, w := binary.Uvarint(rest)
		if w <= 0 || n > limit || n > uint64(len(rest)-w) {
			return nil, fmt.Errorf("%w: field length", ErrBadBatch)
		}
		f := rest[w : w+int(n) : w+int(n)]
		rest = rest[w+int(n):]
		return f, nil
	}
	for len(rest) > 0 {
		op := operation{kind: rest[0]}
		rest = rest[1:]
		var err error
		if op.key, err = field(MaxKeyBytes); err != nil {
			return err
		}
		switch op.kind {
		case opSet, opSetIfAbsent:
			if op.value, err = field(MaxValueBytes); err != nil {
				return err
			}
		case opDelete, opDeletePrefix:
		default:
			return fmt.Errorf("%w: operation %d", ErrBadBatch, op.kind)
		}
		if err := fn(op); err != nil {
			return err
		}
	}
	return nil
}
