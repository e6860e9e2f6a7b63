package sitemap

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// The protocol's limits (sitemaps.org, "Sitemap file location" and "Using
// Sitemap index files"), the defaults of Limits.
const (
	DefaultMaxURLs      = 50_000
	DefaultMaxBytes     = 50 << 20 // 50 MiB
	DefaultMaxURLLength = 2048
)

const (
	// maxLastMod is the longest lastmod kept: the longest W3C datetime with
	// nanoseconds is 35 bytes; a longer one is garbage, dropped.
	maxLastMod = 64
	// maxGzipLayers is how many gzip layers are taken off: a .xml.gz served
	// with Content-Encoding: gzip to a client that does not decode it has two.
	maxGzipLayers = 2
	// sniffLen bounds the whitespace skipped before the first character,
	// which says XML ('<') or text.
	sniffLen = 4096
)

// Kind is what a document lists.
type Kind string

// The kinds of sitemap.
const (
	KindURLSet Kind = "urlset" // <urlset>: pages
	KindIndex  Kind = "index"  // <sitemapindex>: child sitemaps, to be fetched and parsed in turn
	KindText   Kind = "text"   // one page URL per line
)

// Limits bounds one parse. Its zero value (and any field <= 0) means the
// protocol's limits: DefaultMaxURLs, DefaultMaxBytes, DefaultMaxURLLength.
type Limits struct {
	MaxURLs      int   // entries (valid or skipped) in one file; one more stops the parse with ReasonTooManyURLs
	MaxBytes     int64 // bytes in one file, compressed and uncompressed; one more stops it with ReasonTooLarge
	MaxURLLength int   // bytes in one loc, after trimming; a longer loc is skipped (ReasonBadURL)
}

// withDefaults returns l with every unset field at its default.
func (l Limits) withDefaults() Limits {
	if l.MaxURLs <= 0 {
		l.MaxURLs = DefaultMaxURLs
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxURLLength <= 0 {
		l.MaxURLLength = DefaultMaxURLLength
	}
	return l
}

// Entry is one URL of a sitemap: a page (KindURLSet, KindText) or a child
// sitemap (KindIndex).
type Entry struct {
	Kind    Kind     // the document's kind: KindIndex means Loc is a sitemap, not a page
	Loc     string   // the URL as listed, entities decoded and surrounding white space trimmed; not canonicalized
	URL     *url.URL // Loc parsed: an absolute http or https URL with a host
	LastMod string   // <lastmod> as given, white space trimmed; "" if absent, in a text sitemap or longer than 64 bytes
	// LastModTime is LastMod parsed as a W3C datetime (YYYY, YYYY-MM,
	// YYYY-MM-DD, or a date with hh:mm[:ss[.s…]] and a Z or ±hh:mm zone);
	// zero when LastMod is empty or not of that form.
	LastModTime time.Time
}

// Result describes one parse, also when it stopped with an error.
type Result struct {
	Kind    Kind  // the document's kind; "" when it was not recognized
	Gzip    bool  // whether the input was gzip-compressed
	URLs    int   // entries yielded
	Skipped int   // entries skipped for ReasonBadURL
	Bytes   int64 // uncompressed bytes read (at most Limits.MaxBytes)
}

// Parse reads one sitemap from r, gzip-compressed or not, and calls yield
// with each valid entry in document order. It reads as it goes and holds
// one entry (and one XML token or text line) at a time, never the document.
//
// Parse stops at the end of the document (the root element's end tag, or
// EOF for a text sitemap; what follows a root, a gzip trailer included, is
// not read), at a limit of lim, at an input error, or at an
// error from yield. An input error is an *Error with its Reason; an error
// from yield is returned unchanged. In every case the entries already
// yielded are valid and Result counts what was read. Parse never panics on
// any input. It does not close r.
func Parse(r io.Reader, lim Limits, yield func(Entry) error) (Result, error) {
	p := &parser{lim: lim.withDefaults(), yield: yield}
	err := p.parse(r)
	if p.body != nil {
		p.res.Bytes = p.body.n
	}
	if e, ok := errors.AsType[*Error](err); ok {
		e.Offset = p.res.Bytes
	}
	return p.res, err
}

// parser is the state of one Parse.
type parser struct {
	lim   Limits
	yield func(Entry) error
	res   Result
	body  *meter // the uncompressed bytes
	count int    // entries seen, valid or not
}

// parse takes off the gzip layers, tells XML from text and parses.
func (p *parser) parse(r io.Reader) error {
	in := &meter{r: r, max: p.lim.MaxBytes, raw: true}
	br := bufio.NewReader(in)
	for range maxGzipLayers {
		magic, _ := br.Peek(2)
		if !bytes.Equal(magic, []byte{0x1f, 0x8b}) {
			break
		}
		p.res.Gzip = true
		zr, err := gzip.NewReader(br)
		if err != nil {
			return gzipError(err)
		}
		br = bufio.NewReader(&meter{r: gunzip{zr}, max: p.lim.MaxBytes})
	}
	p.body = &meter{r: br, max: p.lim.MaxBytes}
	body := bufio.NewReaderSize(p.body, max(sniffLen, 2*p.lim.MaxURLLength))
	first, err := skipSpace(body)
	switch {
	case errors.Is(err, io.EOF):
		return fail(ReasonNotSitemap, "no content")
	case err != nil:
		return classify(err, ReasonNotSitemap)
	case first == '<':
		return p.xml(body)
	}
	return p.text(body)
}

// skipSpace discards a UTF-8 byte order mark and white space (at most
// sniffLen bytes of it) and returns the first byte after them, unread.
func skipSpace(br *bufio.Reader) (byte, error) {
	if bom, _ := br.Peek(3); bytes.Equal(bom, []byte{0xef, 0xbb, 0xbf}) {
		br.Discard(3)
	}
	for range sniffLen {
		b, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		if !isSpace(b) {
			return b, br.UnreadByte()
		}
	}
	return 0, fail(ReasonNotSitemap, "only white space in the first %d bytes", sniffLen)
}

// isSpace reports whether b is XML white space.
func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// entry counts one entry, checks its loc and yields it, or counts it
// skipped. Only the count limit and yield's error stop the parse.
func (p *parser) entry(loc, lastmod string) error {
	p.count++
	if p.count > p.lim.MaxURLs {
		return fail(ReasonTooManyURLs, "more than %d entries", p.lim.MaxURLs)
	}
	loc = strings.TrimSpace(loc)
	u := checkLoc(loc, p.lim.MaxURLLength)
	if u == nil {
		p.res.Skipped++
		return nil
	}
	e := Entry{Kind: p.res.Kind, Loc: loc, URL: u}
	if lastmod = strings.TrimSpace(lastmod); len(lastmod) <= maxLastMod {
		e.LastMod = lastmod
		e.LastModTime = parseLastMod(lastmod)
	}
	if err := p.yield(e); err != nil {
		return err
	}
	p.res.URLs++
	return nil
}

// checkLoc returns loc parsed if it is a URL a sitemap may list: at most
// maxLen bytes of UTF-8, absolute, http or https, with a host. The protocol
// wants absolute URLs ("begin with the protocol"), so a relative loc is
// skipped rather than resolved.
func checkLoc(loc string, maxLen int) *url.URL {
	if loc == "" || len(loc) > maxLen || !utf8.ValidString(loc) {
		return nil
	}
	u, err := url.Parse(loc)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return nil
	}
	return u
}

// w3cLayouts are the W3C datetime forms (https://www.w3.org/TR/NOTE-datetime)
// time.Parse knows; it also accepts a fraction of a second after the seconds.
var w3cLayouts = []string{
	"2006",
	"2006-01",
	"2006-01-02",
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04:05Z07:00",
}

// parseLastMod parses a sitemap's lastmod as a W3C datetime (the form the
// protocol requires) and returns the zero time when it is not one. A date
// without a time is midnight UTC.
func parseLastMod(s string) time.Time {
	if strings.Contains(s, ",") {
		return time.Time{} // time.Parse takes "," before a fraction too; W3C only "."
	}
	for _, layout := range w3cLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	return time.Time{}
}

// meter passes at most max+1 bytes of r through, counting them; past max it
// fails with ReasonTooLarge. A raw meter reads the caller's reader: its
// errors are ReasonRead. A meter's errors are sticky.
type meter struct {
	r   io.Reader
	n   int64
	max int64
	raw bool
	err error
}

func (m *meter) Read(b []byte) (int, error) {
	if m.err != nil {
		return 0, m.err
	}
	if room := m.max + 1 - m.n; int64(len(b)) > room {
		b = b[:room]
	}
	n, err := m.r.Read(b)
	m.n += int64(n)
	if m.n > m.max {
		n -= int(m.n - m.max)
		m.n = m.max
		err = fail(ReasonTooLarge, "more than %d bytes", m.max)
	} else if err != nil && err != io.EOF && m.raw {
		if _, ok := errors.AsType[*Error](err); !ok {
			err = fail(ReasonRead, "%w", err)
		}
	}
	if err != nil && err != io.EOF {
		m.err = err
	}
	return n, err
}

// gunzip reads a gzip stream and turns its errors (but EOF and an *Error
// from below) into ReasonBadGzip.
type gunzip struct{ zr *gzip.Reader }

func (g gunzip) Read(b []byte) (int, error) {
	n, err := g.zr.Read(b)
	if err != nil && err != io.EOF {
		err = gzipError(err)
	}
	return n, err
}

// gzipError is err from the gzip layer: an *Error from below it, or
// ReasonBadGzip.
func gzipError(err error) error {
	if _, ok := errors.AsType[*Error](err); ok {
		return err
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fail(ReasonBadGzip, "%w", err)
}

// classify returns err if it is an *Error (from a meter or the gzip
// layer), or else an *Error of reason.
func classify(err error, reason Reason) error {
	if _, ok := errors.AsType[*Error](err); ok {
		return err
	}
	return fail(reason, "%w", err)
}
