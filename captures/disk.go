package captures

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"strings"
	"time"

	"github.com/sievecrawl/sieve/urlstore"
	"github.com/sievecrawl/sieve/warc"
)

// Parts is the number of partitions of the captures' log. A URL's capture
// lives in the partition of its host, a digest's first capture in the
// partition of the digest: every key in one partition, as urlstore
// requires. Fixed: changing it would move every key.
const Parts = 64

// What Disk costs per URL, measured by TestCaptureCost (./bench.sh
// scale), for `dedup-worker plan`: on disk, each archiving crawler's index
// (155 B at 20 M) and each NATS replica's log (150 B written a capture at a
// time, as crawlers do, at 5 M); in RAM, a store and its NATS server
// together, fixed (85 MB at 1 M, 105 at 5 M, 104 at 20 M).
const (
	DiskIndexBytesPerURL = 155
	DiskLogBytesPerURL   = 150
	DiskRAMBytesFixed    = 100 << 20
)

// StoreName is the captures' store in the stores' stream
// (frontier.OpenStoreLog).
const StoreName = "captures"

// Disk keeps captures in a urlstore.Store: on disk, in bounded memory,
// shared by every crawler through its log. Keys (each a few dozen bytes):
//
//	'u' crawl 0x00 partition (2 bytes) SHA-256(URL)[:16]     a URL's last capture
//	'd' crawl 0x00 partition (2 bytes) SHA-256(digest)[:16]  a digest's first
//
// Values are the compact binary encoding of encodeCapture. The crawl and
// partition lead the key so that deleting a crawl is one range per
// partition. It is safe for concurrent use.
type Disk struct {
	s    *urlstore.Store
	stop context.CancelFunc // the compaction loop's
	done chan struct{}
}

// CompactRatio is the captures' store's urlstore.Options.CompactRatio: a
// snapshot once the log written since the last is as large as it. Its
// index (155 B a URL) is about what a page fetched adds to the log (150
// B), so a snapshot each period would cost more than the log it saves
// until the crawl had fetched every URL again.
const CompactRatio = 1

// Unindexed reads and changes captures through their log alone, for the
// commands that run beside crawlers holding their stores: a lookup reads
// its partition's entries (1/Parts of the log), a write appends. It is
// safe for concurrent use.
type Unindexed struct{ Log urlstore.Log }

var (
	_ warc.Captures = (*Disk)(nil)
	_ warc.Captures = Unindexed{}
)

// records is where Disk and Unindexed read and write the captures' keys:
// the store's index, or the log itself.
type records interface {
	get(ctx context.Context, key []byte) ([]byte, bool, error)
	write(ctx context.Context, p int, b *urlstore.Batch) error
}

func (d *Disk) get(_ context.Context, key []byte) ([]byte, bool, error) { return d.s.Get(key) }
func (d *Disk) write(ctx context.Context, p int, b *urlstore.Batch) error {
	return d.s.Write(ctx, p, b)
}

func (x Unindexed) get(ctx context.Context, key []byte) ([]byte, bool, error) {
	return urlstore.Lookup(ctx, x.Log, keyPart(key), key)
}
func (x Unindexed) write(ctx context.Context, p int, b *urlstore.Batch) error {
	return urlstore.Append(ctx, x.Log, p, b)
}

// OpenDisk opens the captures' store in dir over log with o. A directory
// another store holds (two crawlers on one data dir) is not shared: the
// store opens in the first free of dir, dir.1, dir.2, … instead, so a
// process that starts again finds its own. With o.Snapshots, a directory
// that is new or behind the log's trims restores the current snapshot
// first; with compact too, the store compacts the log (Store.CompactLoop
// every o.CompactEvery, with CompactRatio unless o sets one; a negative
// ratio holds no snapshot back), reporting
// through o.Logf. It waits until the store has caught up with the log (ctx
// bounds it; a long catch-up is reported through o.Logf).
func OpenDisk(ctx context.Context, dir string, log urlstore.Log, o urlstore.Options, compact bool) (*Disk, error) {
	if o.CompactRatio == 0 {
		o.CompactRatio = CompactRatio
	}
	o.Formats, o.CheckValue = map[string]int{"captures": captureVersion}, checkCapture
	s, err := urlstore.OpenFree(ctx, dir, log, o)
	if err != nil {
		return nil, fmt.Errorf("captures: %w", err)
	}
	if err := s.WaitReady(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("captures: %w", err)
	}
	d := &Disk{s: s}
	if compact && o.Snapshots != nil {
		lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		d.stop, d.done = stop, make(chan struct{})
		go func() {
			defer close(d.done)
			s.CompactLoop(lctx, func(c urlstore.Compaction, err error) {
				if o.Logf == nil {
					return
				}
				if err != nil {
					o.Logf("captures: compacting the log failed; trying again: %v", err)
				} else if c.Snapshot != "" {
					o.Logf("captures: index snapshotted (%s, %d bytes, %v), log trimmed below the previous snapshot", c.Snapshot, c.Bytes, c.Took.Round(time.Millisecond))
				}
			})
		}()
	}
	return d, nil
}

// Compact runs one compaction of the store now (urlstore.Store.Compact).
func (d *Disk) Compact(ctx context.Context) (urlstore.Compaction, error) { return d.s.Compact(ctx) }

// Close stops the compaction and closes the store.
func (d *Disk) Close() error {
	if d.stop != nil {
		d.stop()
		<-d.done
	}
	return d.s.Close()
}

// Stats are the store's figures.
func (d *Disk) Stats() urlstore.Stats { return d.s.Stats() }

// Last returns the last capture of u in crawl.
func (d *Disk) Last(ctx context.Context, crawl, u string) (warc.Capture, bool, error) {
	return capture(ctx, d, urlKey(crawl, u), u)
}

// ByDigest returns the first capture of a payload in crawl.
func (d *Disk) ByDigest(ctx context.Context, crawl, digest string) (warc.Capture, bool, error) {
	return capture(ctx, d, digestKey(crawl, digest), "")
}

// Put records c as u's last capture and, if the digest has none, as its
// first: one log entry in u's partition, and one in the digest's unless
// the store holds the digest already.
func (d *Disk) Put(ctx context.Context, crawl, u string, c warc.Capture) error {
	return put(ctx, d, crawl, u, c)
}

// Delete removes a crawl's captures, returning how many this store held.
func (d *Disk) Delete(ctx context.Context, crawl string) (int64, error) {
	var n int64
	for _, kind := range []byte{'u', 'd'} {
		err := d.s.Scan(append([]byte{kind}, crawl+"\x00"...), func(_, _ []byte) bool { n++; return true })
		if err != nil {
			return 0, err
		}
	}
	return n, deleteCrawl(ctx, d, crawl)
}

// Last returns the last capture of u in crawl.
func (x Unindexed) Last(ctx context.Context, crawl, u string) (warc.Capture, bool, error) {
	return capture(ctx, x, urlKey(crawl, u), u)
}

// ByDigest returns the first capture of a payload in crawl.
func (x Unindexed) ByDigest(ctx context.Context, crawl, digest string) (warc.Capture, bool, error) {
	return capture(ctx, x, digestKey(crawl, digest), "")
}

// Put records c as u's last capture and, if the digest has none, as its
// first.
func (x Unindexed) Put(ctx context.Context, crawl, u string, c warc.Capture) error {
	return put(ctx, x, crawl, u, c)
}

// Delete removes a crawl's captures. It cannot count them without
// reading the whole log, so it returns the partitions it cleared.
func (x Unindexed) Delete(ctx context.Context, crawl string) (int64, error) {
	if err := deleteCrawl(ctx, x, crawl); err != nil {
		return 0, err
	}
	return Parts, nil
}

// capture reads and decodes the capture under key; u is the URL it was
// stored under ("" for a digest's).
func capture(ctx context.Context, r records, key []byte, u string) (warc.Capture, bool, error) {
	v, ok, err := r.get(ctx, key)
	if err != nil || !ok {
		return warc.Capture{}, false, err
	}
	c, err := decodeCapture(v, u)
	if err != nil {
		return warc.Capture{}, false, err
	}
	return c, true, nil
}

// put writes c as u's last capture, then as its digest's first unless the
// digest has one.
func put(ctx context.Context, r records, crawl, u string, c warc.Capture) error {
	var b urlstore.Batch
	k := urlKey(crawl, u)
	b.Set(k, encodeCapture(c, u))
	if err := r.write(ctx, keyPart(k), &b); err != nil {
		return fmt.Errorf("captures: %w", err)
	}
	if c.Digest == "" {
		return nil
	}
	k = digestKey(crawl, c.Digest)
	if _, ok, err := r.get(ctx, k); err != nil || ok {
		return err
	}
	b.Reset()
	b.SetIfAbsent(k, encodeCapture(c, ""))
	if err := r.write(ctx, keyPart(k), &b); err != nil {
		return fmt.Errorf("captures: %w", err)
	}
	return nil
}

// deleteCrawl writes the removal of a crawl's keys to every partition.
func deleteCrawl(ctx context.Context, r records, crawl string) error {
	for p := range Parts {
		var b urlstore.Batch
		for _, kind := range []byte{'u', 'd'} {
			b.DeletePrefix(binary.BigEndian.AppendUint16(append([]byte{kind}, crawl+"\x00"...), uint16(p)))
		}
		if err := r.write(ctx, p, &b); err != nil {
			return fmt.Errorf("captures: delete crawl %s: %w", crawl, err)
		}
	}
	return nil
}

// key builds kind crawl 0x00 partition hash.
func key(kind byte, crawl string, part int, s string) []byte {
	sum := sha256.Sum256([]byte(s))
	k := make([]byte, 0, 1+len(crawl)+1+2+16)
	k = append(k, kind)
	k = append(k, crawl...)
	k = append(k, 0)
	k = binary.BigEndian.AppendUint16(k, uint16(part))
	return append(k, sum[:16]...)
}

func urlKey(crawl, u string) []byte { return key('u', crawl, hostPart(u), u) }

func digestKey(crawl, digest string) []byte { return key('d', crawl, hashPart(digest), digest) }

// keyPart is the partition a key names.
func keyPart(k []byte) int { return int(binary.BigEndian.Uint16(k[len(k)-18:])) }

// hostPart is the partition of a URL's host (its whole text if it has
// none), so a crawler fetching a host writes one partition.
func hostPart(u string) int {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return hashPart(p.Host)
	}
	return hashPart(u)
}

func hashPart(s string) int {
	h := fnv.New32a()
	h.Write([]byte(s))
	return int(h.Sum32() % Parts)
}

// captureVersion is the first byte of an encoded capture: the
// deployment's captures format (urlstore.Options.Formats), recorded in the
// snapshots' manifest, so an older build refuses to open a store a newer
// one opened, and one running stops at a newer capture (checkCapture)
// rather than skip it.
const captureVersion = 1

// checkCapture is the captures' format gate (urlstore.Options.CheckValue):
// a capture of a version above captureVersion (urlstore.Newer) stops the
// store before its entry is applied.
func checkCapture(_, v []byte) error {
	if len(v) > 0 && urlstore.Newer(v[0], captureVersion) {
		return fmt.Errorf("%w: a capture of format %d, this build reads up to %d", urlstore.ErrNewerFormat, v[0], captureVersion)
	}
	return nil
}

// Flags of an encoded capture: what it leaves out because it can be
// rebuilt.
const (
	flagPayloadIsURL  = 1 << iota // PayloadURL is the key's URL
	flagPayloadAtDate             // PayloadDate is Date
	flagSHA1                      // Digest is "sha1:" + base32 of 20 bytes, stored as the 20 bytes
)

var base32Std = base32.StdEncoding.WithPadding(base32.NoPadding)

// encodeCapture is a capture's value: 80–120 bytes for a typical page
// (the JSON the Redis store keeps is ~300):
//
//	version (1)  flags (1)  date (varint seconds, uvarint nanoseconds)
//	digest (20 bytes with flagSHA1, else a string)  ETag  Last-Modified
//	[payload URL]  [payload date]  file  uvarint offset  uvarint status
//
// strings as uvarint length and bytes. u is the URL the capture is
// stored under ("" for a digest's first capture).
func encodeCapture(c warc.Capture, u string) []byte {
	b := make([]byte, 0, 96+len(c.File)+len(c.ETag))
	var flags byte
	if u != "" && c.PayloadURL == u {
		flags |= flagPayloadIsURL
	}
	if c.PayloadDate.Equal(c.Date) {
		flags |= flagPayloadAtDate
	}
	raw, isSHA1 := sha1Bytes(c.Digest)
	if isSHA1 {
		flags |= flagSHA1
	}
	b = append(b, captureVersion, flags)
	putTime := func(t time.Time) {
		b = binary.AppendVarint(b, t.Unix())
		b = binary.AppendUvarint(b, uint64(t.Nanosecond()))
	}
	putString := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	putTime(c.Date)
	if isSHA1 {
		b = append(b, raw...)
	} else {
		putString(c.Digest)
	}
	putString(c.ETag)
	putString(c.LastModified)
	if flags&flagPayloadIsURL == 0 {
		putString(c.PayloadURL)
	}
	if flags&flagPayloadAtDate == 0 {
		putTime(c.PayloadDate)
	}
	putString(c.File)
	b = binary.AppendUvarint(b, uint64(max(c.Offset, 0)))
	return binary.AppendUvarint(b, uint64(max(c.Status, 0)))
}

// sha1Bytes returns the 20 bytes of a "sha1:<base32>" digest that encodes
// back to the same text.
func sha1Bytes(digest string) ([]byte, bool) {
	s, ok := strings.CutPrefix(digest, "sha1:")
	if !ok || len(s) != 32 {
		return nil, false
	}
	raw, err := base32Std.DecodeString(s)
	if err != nil || len(raw) != 20 || base32Std.EncodeToString(raw) != s {
		return nil, false
	}
	return raw, true
}

var errCapture = errors.New("captures: bad stored capture")

// decodeCapture reads encodeCapture's bytes; u is the URL it was stored
// under. It never panics on bad input.
func decodeCapture(b []byte, u string) (warc.Capture, error) {
	var c warc.Capture
	if len(b) < 2 || b[0] != captureVersion {
		return c, errCapture
	}
	flags, rest := b[1], b[2:]
	bad := false
	uvarint := func() uint64 {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			bad = true
			return 0
		}
		rest = rest[n:]
		return v
	}
	getTime := func() time.Time {
		s, n := binary.Varint(rest)
		if n <= 0 {
			bad = true
			return time.Time{}
		}
		rest = rest[n:]
		ns := uvarint()
		if ns >= 1e9 {
			bad = true
			return time.Time{}
		}
		return time.Unix(s, int64(ns)).UTC()
	}
	getString := func() string {
		n := uvarint()
		if bad || n > uint64(len(rest)) {
			bad = true
			return ""
		}
		s := string(rest[:n])
		rest = rest[n:]
		return s
	}
	c.Date = getTime()
	if flags&flagSHA1 != 0 {
		if len(rest) < 20 {
			return c, errCapture
		}
		c.Digest = "sha1:" + base32Std.EncodeToString(rest[:20])
		rest = rest[20:]
	} else {
		c.Digest = getString()
	}
	c.ETag = getString()
	c.LastModified = getString()
	c.PayloadURL = u
	if flags&flagPayloadIsURL == 0 {
		c.PayloadURL = getString()
	}
	c.PayloadDate = c.Date
	if flags&flagPayloadAtDate == 0 {
		c.PayloadDate = getTime()
	}
	c.File = getString()
	off, status := uvarint(), uvarint()
	if bad || off > 1<<62 || status > 999 {
		return warc.Capture{}, errCapture
	}
	c.Offset, c.Status = int64(off), int(status)
	return c, nil
}
