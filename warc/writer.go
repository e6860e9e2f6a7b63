package warc

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/klauspost/compress/gzip"
	gowarc "github.com/nlnwa/gowarc/v3"
)

// Options configures a Writer.
type Options struct {
	Dir string // where the files go; must exist and be writable
	// Prefix starts every file name; "sieve" if empty.
	Prefix string
	// CrawlerID ends every file name, so replicas writing to one directory
	// never collide. Characters other than letters, digits, '.', '_' and
	// '-' are replaced.
	CrawlerID string
	// MaxFileSize closes a file once it holds this many bytes (a file ends
	// with the record that crossed it); 1 GB if 0.
	MaxFileSize int64
	// Info is written in every file's warcinfo record, after the fields the
	// Writer sets itself (software, format, conformsTo): "operator",
	// "http-header-user-agent", "robots" and the like.
	Info map[string]string
	// Software names the program in warcinfo; "Sieve" if empty.
	Software string
	// now is time.Now, or a test's clock.
	now func() time.Time
}

// DefaultMaxFileSize is the size at which a WARC file is closed and the next
// begun: 1 GB, the size ISO 28500 suggests.
const DefaultMaxFileSize = 1_000_000_000

// Stats is what a Writer wrote since it was opened.
type Stats struct {
	Dir     string           `json:"dir"`
	Files   int              `json:"files"`   // files begun
	Bytes   int64            `json:"bytes"`   // compressed bytes written
	Records map[string]int64 `json:"records"` // by WARC-Type
	Current string           `json:"current,omitempty"`
	Err     string           `json:"error,omitempty"` // why writing stopped
}

// Writer writes WARC/1.1 files: each record its own gzip member, each file
// begun with a warcinfo record, named
// <prefix>-<17-digit UTC time>-<serial>-<crawler id>.warc.gz, written as
// <name>.open (locked while written) and renamed when closed, with a CDXJ
// index beside it. A write that fails is cut back from the file, and the
// Writer refuses every later record (Err): a crawler must stop fetching what
// it cannot keep. A Writer is safe for concurrent use.
type Writer struct {
	opts Options

	mu     sync.Mutex
	file   *os.File
	name   string // final name of the current file, without directory
	size   int64
	serial int
	infoID string
	index  *os.File // the current file's CDXJ lines, unsorted
	err    error
	stats  Stats
	closed bool
}

// Open checks that opts.Dir can be written, closes files that a killed
// writer left open there (see Recover), and returns a Writer. The first
// file is begun with the first record.
func Open(opts Options) (*Writer, error) {
	if opts.Dir == "" {
		return nil, errors.New("warc: no directory")
	}
	if opts.Prefix == "" {
		opts.Prefix = "sieve"
	}
	if opts.MaxFileSize <= 0 {
		opts.MaxFileSize = DefaultMaxFileSize
	}
	if opts.Software == "" {
		opts.Software = "Sieve"
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	opts.CrawlerID = nameSafe.ReplaceAllString(opts.CrawlerID, "_")
	if opts.CrawlerID == "" {
		host, _ := os.Hostname()
		opts.CrawlerID = nameSafe.ReplaceAllString(host, "_") + "-" + strconv.Itoa(os.Getpid())
	}
	// Captures name their files, and the crawl its directories, by
	// absolute paths: a later run from elsewhere finds them.
	abs, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("warc: directory: %w", err)
	}
	opts.Dir = abs
	st, err := os.Stat(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("warc: directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("warc: %s is not a directory", opts.Dir)
	}
	probe, err := os.CreateTemp(opts.Dir, ".sieve-probe-*")
	if err != nil {
		return nil, fmt.Errorf("warc: directory %s cannot be written: %w", opts.Dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	if _, err := Recover(opts.Dir); err != nil {
		return nil, err
	}
	return &Writer{opts: opts, stats: Stats{Dir: opts.Dir, Records: map[string]int64{}}}, nil
}

var nameSafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Dir returns the Writer's directory, as an absolute path.
func (w *Writer) Dir() string { return w.opts.Dir }

// Err returns why the Writer failed, ErrClosed once it is closed, or nil.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil && w.closed {
		return ErrClosed
	}
	return w.err
}

// Stats returns what the Writer wrote.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Records = maps.Clone(w.stats.Records)
	s.Current = w.name
	if w.err != nil {
		s.Err = w.err.Error()
	}
	return s
}

// Close closes the current file: renamed from .open, its index sorted
// beside it. Later writes fail.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	return w.closeFile()
}

// ErrCaptures wraps a failure of the Captures store: the exchange may have
// been written, but its capture not recorded; worth fetching again later,
// unlike a failure to write.
var ErrCaptures = errors.New("warc: captures")

// ErrClosed is returned for records given to a closed Writer.
var ErrClosed = errors.New("warc: writer closed")

// Rotate closes the current file; the next record begins another.
func (w *Writer) Rotate() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closeFile()
}

// fileName is the final name of the file begun at t.
func (w *Writer) fileName(t time.Time) string {
	t = t.UTC()
	ts := t.Format("20060102150405") + fmt.Sprintf("%03d", t.Nanosecond()/1e6)
	return fmt.Sprintf("%s-%s-%05d-%s.warc.gz", w.opts.Prefix, ts, w.serial, w.opts.CrawlerID)
}

// beginFile creates the next file, locked, with its warcinfo record.
func (w *Writer) beginFile() error {
	w.serial++
	name := w.fileName(w.opts.now())
	path := filepath.Join(w.opts.Dir, name+openSuffix)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("warc: begin file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("warc: lock %s: %w", path, err)
	}
	idx, err := os.OpenFile(filepath.Join(w.opts.Dir, indexName(name)+openSuffix), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("warc: begin index: %w", err)
	}
	w.file, w.name, w.size, w.index, w.infoID = f, name, 0, idx, ""
	w.stats.Files++
	info, err := w.warcinfo(name)
	if err != nil {
		return err
	}
	if _, err := w.writeRecord(info); err != nil {
		return err
	}
	w.infoID = info.RecordId()
	return nil
}

// warcinfo builds a file's warcinfo record.
func (w *Writer) warcinfo(name string) (gowarc.WarcRecord, error) {
	rb := newRecordBuilder(gowarc.Warcinfo, recordOpts...)
	rb.AddWarcHeaderTime(gowarc.WarcDate, w.opts.now())
	rb.AddWarcHeader(gowarc.WarcFilename, name)
	rb.AddWarcHeader(gowarc.ContentType, gowarc.ApplicationWarcFields)
	host, _ := os.Hostname()
	fields := [][2]string{
		{"software", w.opts.Software},
		{"format", "WARC File Format 1.1"},
		{"conformsTo", "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"},
		{"hostname", host},
	}
	for _, k := range slices.Sorted(maps.Keys(w.opts.Info)) {
		fields = append(fields, [2]string{k, w.opts.Info[k]})
	}
	for _, f := range fields {
		if _, err := fmt.Fprintf(rb, "%s: %s\r\n", f[0], f[1]); err != nil {
			return nil, err
		}
	}
	return build(rb)
}

// recordOpts make records as given: Sieve computes the digests itself (the
// payload digest over the body without transfer coding, which the library
// does not), so nothing is validated or fixed.
var recordOpts = []gowarc.WarcRecordOption{gowarc.WithNoValidation(), gowarc.WithAddMissingDigest(false), gowarc.WithRecordIdFunc(recordID)}

// builders serializes newRecordBuilder: gowarc v3.1.0 calls
// uuid.EnableRandPool, a write to a global, each time it makes a record
// builder, a data race between recorders writing at once (go test -race).
var builders sync.Mutex

// newRecordBuilder is gowarc.NewRecordBuilder without its data race. Record
// ids come from recordID, not from the uuid package, whose reads of the
// same global would race with that write too.
func newRecordBuilder(t gowarc.RecordType, opts ...gowarc.WarcRecordOption) gowarc.WarcRecordBuilder {
	builders.Lock()
	defer builders.Unlock()
	return gowarc.NewRecordBuilder(t, opts...)
}

// recordID returns a new WARC-Record-ID: a random (version 4) UUID URN.
func recordID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	h := hex.EncodeToString(b[:])
	return "urn:uuid:" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

// blockOpts are recordOpts for a record whose block is n bytes: its
// builder holds the block in memory up to 1 MiB (on disk beyond, as
// gowarc does by default) and starts with a buffer no larger than the
// block, where gowarc's default first buffer is 16 KiB whatever the size.
func blockOpts(n int64) []gowarc.WarcRecordOption {
	return append(slices.Clip(recordOpts), gowarc.WithBufferMaxMemBytes(max(1, min(n, 1<<20))))
}

func build(rb gowarc.WarcRecordBuilder) (gowarc.WarcRecord, error) {
	rec, _, err := rb.Build()
	if err != nil {
		return nil, fmt.Errorf("warc: build record: %w", err)
	}
	return rec, nil
}

// closeFile closes the current file, if any.
func (w *Writer) closeFile() error {
	if w.file == nil {
		return nil
	}
	f, idx, name := w.file, w.index, w.name
	w.file, w.index, w.name, w.size = nil, nil, "", 0
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if cerr := idx.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return w.fail(fmt.Errorf("warc: close %s: %w", name, err))
	}
	return w.fail(finish(w.opts.Dir, name))
}

// finish renames a closed file from .open and writes its sorted index.
func finish(dir, name string) error {
	path := filepath.Join(dir, name)
	if err := sortIndex(filepath.Join(dir, indexName(name)+openSuffix), filepath.Join(dir, indexName(name))); err != nil {
		return err
	}
	if err := os.Rename(path+openSuffix, path); err != nil {
		return fmt.Errorf("warc: close: %w", err) // names both paths
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

func (w *Writer) fail(err error) error {
	if err != nil && w.err == nil {
		w.err = err
	}
	return err
}

// written is one record in a file.
type written struct {
	file           string
	offset, length int64
}

// member is a record compressed as one gzip member, ready to append.
type member struct {
	rec    gowarc.WarcRecord
	infoID string // the warcinfo it names
	data   *spool
}

var gzips = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression)
	return zw
}}

// compress marshals rec, naming the warcinfo record infoID, into one gzip
// member. It runs outside the Writer's lock, so fetches compress in
// parallel and only the appending is serial.
func compress(rec gowarc.WarcRecord, infoID string) (member, error) {
	m := member{rec: rec, infoID: infoID, data: newSpool(1<<20, "")}
	if infoID != "" {
		rec.WarcHeader().SetId(gowarc.WarcWarcinfoID, infoID)
	} else {
		rec.WarcHeader().Delete(gowarc.WarcWarcinfoID)
	}
	zw := gzips.Get().(*gzip.Writer)
	defer gzips.Put(zw)
	zw.Reset(m.data)
	_, _, err := gowarc.NewMarshaler().Marshal(pooledReadFrom{zw}, rec, 0)
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		m.data.Close()
		return m, fmt.Errorf("warc: compress record: %w", err)
	}
	return m, nil
}

// appendMember appends m to the current file (compressing it again if the
// file's warcinfo is not the one it names) and returns where. On failure
// the file is cut back to where the member began, and the Writer fails.
func (w *Writer) appendMember(m member) (written, error) {
	defer m.data.Close()
	if m.infoID != w.infoID {
		m.data.Close()
		again, err := compress(m.rec, w.infoID)
		if err != nil {
			return written{}, w.fail(err)
		}
		m = again
		defer m.data.Close()
	}
	start := w.size
	n, err := io.Copy(w.file, m.data.Reader())
	if err != nil {
		// Cut the partial member off: the file stays valid to its last
		// complete record.
		_ = w.file.Truncate(start)
		_, _ = w.file.Seek(start, io.SeekStart)
		return written{}, w.fail(fmt.Errorf("warc: write record: %w", err)) // the error names the file
	}
	w.size += n
	w.stats.Bytes += n
	w.stats.Records[m.rec.Type().String()]++
	return written{offset: start, length: n}, nil
}

// writeRecord compresses and appends rec, with the lock held (warcinfo
// records).
func (w *Writer) writeRecord(rec gowarc.WarcRecord) (written, error) {
	defer rec.Close()
	m, err := compress(rec, w.infoID)
	if err != nil {
		return written{}, w.fail(err)
	}
	return w.appendMember(m)
}

// Result is the outcome of recording one exchange.
type Result struct {
	URL       string
	Err       error
	Type      string // "response" or "revisit"
	Profile   string // a revisit's profile
	Status    int
	MIME      string
	Digest    string // payload digest, "sha1:…"
	Size      int64  // payload bytes
	Truncated bool
	Date      time.Time
	File      string // the file holding the response or revisit record
	Offset    int64  // where the record's gzip member begins
	Length    int64  // the member's length
	RefersTo  string // a revisit's original URL
	// RefFile and RefOffset locate the record holding a revisit's
	// payload, RefPath where the file was found (ReadPayload reads it).
	RefFile   string
	RefOffset int64
	RefPath   string
	// Refetch says why the last capture's payload could not be read,
	// when it could not: the request was then made unconditional and
	// the page stored in full.
	Refetch *UnreadableError
}

// writeExchange writes the request and response records of ex (or a revisit
// record in place of the response, when captures knows the payload), appends
// the response's line to the file's index, then records the capture.
func (w *Writer) writeExchange(ctx context.Context, crawl string, ex *exchange, truncated bool, last *Capture, captures Captures, loc *locator) (Result, error) {
	resp, perr := parseResponse(ex.resp.Reader())
	res := Result{Type: "response", Status: resp.status, MIME: resp.mime, Digest: resp.payloadDigest, Size: resp.payloadLen, Truncated: truncated, Date: ex.date}
	if res.Date.IsZero() {
		res.Date = time.Now().UTC()
	}
	if truncated || perr != nil {
		res.Digest = ""
	}
	ref, profile, err := revisitOf(ctx, crawl, ex.url, resp, perr == nil && !truncated, last, captures)
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrCaptures, err)
	}
	refPath := ex.lastPath
	if ref != nil && ref != last {
		// Another URL's capture of the payload: a revisit may point at
		// it only if it can be read; else the response is kept whole.
		refPath, err = loc.checkCapture(ctx, crawl, *ref)
		var ue *UnreadableError
		if errors.As(err, &ue) {
			ref, err = nil, nil
		}
		if err != nil {
			return res, fmt.Errorf("%w: %w", ErrCaptures, err)
		}
	}
	reqRec, err := requestRecord(ex, res.Date)
	if err != nil {
		return res, err
	}
	var respRec gowarc.WarcRecord
	if ref != nil {
		res.Type, res.Profile, res.RefersTo, res.Digest = "revisit", profile, ref.PayloadURL, ref.Digest
		res.RefFile, res.RefOffset, res.RefPath = ref.File, ref.Offset, refPath
		respRec, err = revisitRecord(ex, res.Date, resp, ref, profile)
	} else {
		respRec, err = responseRecord(ex, res.Date, resp, perr == nil, truncated)
	}
	if err != nil {
		reqRec.Close()
		return res, err
	}
	respRec.WarcHeader().AddId(gowarc.WarcConcurrentTo, reqRec.RecordId())
	reqRec.WarcHeader().AddId(gowarc.WarcConcurrentTo, respRec.RecordId())
	at, err := w.writePair(respRec, reqRec, func(file string, at written) string {
		return cdxjLine(cdxEntry{URL: ex.url, Date: res.Date, MIME: res.MIME, Status: res.Status, Digest: res.Digest,
			Length: at.length, Offset: at.offset, File: file, Type: res.Type})
	})
	if err != nil {
		return res, err
	}
	res.File, res.Offset, res.Length = at.file, at.offset, at.length
	if captures == nil || res.Status/100 != 2 && res.Type != "revisit" {
		return res, nil
	}
	c := Capture{Date: res.Date, Digest: res.Digest, ETag: resp.etag, LastModified: resp.lastModified, Status: res.Status,
		PayloadURL: ex.url, PayloadDate: res.Date, File: at.file, Offset: at.offset}
	if ref != nil {
		c.PayloadURL, c.PayloadDate, c.File, c.Offset = ref.PayloadURL, ref.PayloadDate, ref.File, ref.Offset
		if c.ETag == "" && c.LastModified == "" && last != nil {
			c.ETag, c.LastModified = last.ETag, last.LastModified
		}
	}
	if err := captures.Put(ctx, crawl, ex.url, c); err != nil {
		return res, fmt.Errorf("%w: %w", ErrCaptures, err)
	}
	return res, nil
}

// writePair writes a response (or revisit) record and its request record
// together in the current file, beginning one if needed, and adds the
// first's index line. Both are compressed before the lock is taken.
func (w *Writer) writePair(first, second gowarc.WarcRecord, line func(file string, at written) string) (written, error) {
	defer first.Close()
	defer second.Close()
	w.mu.Lock()
	info := w.infoID
	w.mu.Unlock()
	m1, err := compress(first, info)
	if err != nil {
		return written{}, err
	}
	defer m1.data.Close()
	m2, err := compress(second, info)
	if err != nil {
		return written{}, err
	}
	defer m2.data.Close()

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil || w.closed {
		if w.err == nil {
			return written{}, ErrClosed
		}
		return written{}, w.err
	}
	if w.file != nil && w.size >= w.opts.MaxFileSize {
		if err := w.closeFile(); err != nil {
			return written{}, err
		}
	}
	if w.file == nil {
		if err := w.beginFile(); err != nil {
			return written{}, w.fail(err)
		}
	}
	at, err := w.appendMember(m1)
	if err != nil {
		return written{}, err
	}
	if _, err := w.appendMember(m2); err != nil {
		return written{}, err
	}
	at.file = w.name
	if _, err := w.index.WriteString(line(w.name, at)); err != nil {
		return written{}, w.fail(fmt.Errorf("warc: write index line: %w", err)) // the error names the file
	}
	return at, nil
}

func requestRecord(ex *exchange, date time.Time) (gowarc.WarcRecord, error) {
	rb := newRecordBuilder(gowarc.Request, blockOpts(ex.req.Len())...)
	header(rb, ex, date, contentTypeRequest)
	d, err := writeDigested(rb, ex.req.Reader())
	if err != nil {
		return nil, fmt.Errorf("warc: request record: %w", err)
	}
	rb.AddWarcHeader(gowarc.WarcBlockDigest, d)
	return build(rb)
}

func responseRecord(ex *exchange, date time.Time, r response, parsed, truncated bool) (gowarc.WarcRecord, error) {
	rb := newRecordBuilder(gowarc.Response, blockOpts(ex.resp.Len())...)
	header(rb, ex, date, contentTypeResponse)
	rb.AddWarcHeader(gowarc.WarcBlockDigest, r.blockDigest)
	switch {
	case truncated:
		// A cut payload has no digest worth comparing: none is written
		// (the field is optional), and none is offered for revisits.
		rb.AddWarcHeader(gowarc.WarcTruncated, "length")
	case parsed:
		rb.AddWarcHeader(gowarc.WarcPayloadDigest, r.payloadDigest)
	}
	if _, err := copyPooled(rb, ex.resp.Reader()); err != nil {
		return nil, fmt.Errorf("warc: response record: %w", err)
	}
	return build(rb)
}

// revisitRecord is a revisit of ref: its block is the response's header
// only; the payload is the referred-to record's.
func revisitRecord(ex *exchange, date time.Time, r response, ref *Capture, profile string) (gowarc.WarcRecord, error) {
	rb := newRecordBuilder(gowarc.Revisit, blockOpts(r.headerLen)...)
	header(rb, ex, date, contentTypeResponse)
	rb.AddWarcHeader(gowarc.WarcProfile, profile)
	rb.AddWarcHeader(gowarc.WarcRefersToTargetURI, ref.PayloadURL)
	rb.AddWarcHeaderTime(gowarc.WarcRefersToDate, ref.PayloadDate)
	d, err := writeDigested(rb, io.LimitReader(ex.resp.Reader(), r.headerLen))
	if err != nil {
		return nil, fmt.Errorf("warc: revisit record: %w", err)
	}
	rb.AddWarcHeader(gowarc.WarcBlockDigest, d)
	rb.AddWarcHeader(gowarc.WarcPayloadDigest, ref.Digest)
	return build(rb)
}

const (
	contentTypeRequest  = "application/http; msgtype=request"
	contentTypeResponse = "application/http; msgtype=response"
)

func header(rb gowarc.WarcRecordBuilder, ex *exchange, date time.Time, contentType string) {
	rb.AddWarcHeader(gowarc.WarcTargetURI, ex.url)
	rb.AddWarcHeaderTime(gowarc.WarcDate, date)
	rb.AddWarcHeader(gowarc.ContentType, contentType)
	if ex.ip != "" {
		rb.AddWarcHeader(gowarc.WarcIPAddress, ex.ip)
	}
}

// writeDigested copies r into a record's block and returns the block's
// digest, in one pass.
func writeDigested(rb gowarc.WarcRecordBuilder, r io.Reader) (string, error) {
	h := sha1.New()
	if _, err := copyPooled(rb, io.TeeReader(r, h)); err != nil {
		return "", err
	}
	return sha1Digest(h), nil
}

const openSuffix = ".open"

// indexName is the name of the CDXJ index of the WARC file name.
func indexName(name string) string { return strings.TrimSuffix(name, ".warc.gz") + ".cdxj" }
