package sitemap

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// parseCase is one document and what Parse must make of it. Entries are
// written "loc" or "loc @ lastmod".
type parseCase struct {
	name    string
	in      []byte
	lim     Limits
	kind    Kind
	gzip    bool
	want    []string // the entries yielded, in order
	skipped int
	reason  Reason // "" when the parse succeeds
}

// parseCases are real-world-shaped sitemaps and the ways sites get them
// wrong. The testdata files are sitemaps as shops, blogs and news sites
// publish them (protocol: https://www.sitemaps.org/protocol.html).
var parseCases = []parseCase{
	{name: "gzip urlset with extensions, CDATA, entities, bad locs", in: file("urlset.xml.gz"), kind: KindURLSet, gzip: true,
		want: []string{
			"https://shop.example.com/ @ 2024-03-05T08:15:30+00:00",
			"https://shop.example.com/products/blue-shoe?color=blue&size=42 @ 2024-03-04", // trimmed, &amp; decoded, image:loc not taken
			"https://shop.example.com/search?q=shoes&page=2 @ last tuesday",               // CDATA; lastmod kept as given
			"https://shop.example.com/caf%C3%A9 @ 2024-02-29T23:59:59.123Z",
		},
		skipped: 3}, // relative, javascript:, no loc
	{name: "index", in: file("index.xml"), kind: KindIndex,
		want: []string{
			"https://www.example.org/sitemap-posts-1.xml.gz @ 2024-05-01T10:00+02:00",
			"https://www.example.org/sitemap-pages.xml",
		},
		skipped: 1}, // ftp:
	{name: "text with BOM, CRLF, blank line, no final newline", in: file("urls.txt"), kind: KindText,
		want: []string{
			"https://blog.example.com/",
			"https://blog.example.com/2024/01/hello-world",
			"https://blog.example.com/about",
			"http://blog.example.com/feed.xml",
		},
		skipped: 1}, // "not a url"
	{name: "truncated urlset keeps its first entries", in: file("malformed.xml"), kind: KindURLSet,
		want:   []string{"https://news.example.com/a", "https://news.example.com/b"},
		reason: ReasonMalformedXML},

	// Namespaces: matched by local name whatever the xmlns.
	{name: "no xmlns", in: []byte(`<urlset><url><loc>http://a.example/</loc></url></urlset>`), kind: KindURLSet,
		want: []string{"http://a.example/"}},
	{name: "prefixed", in: []byte(`<sm:urlset xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9"><sm:url><sm:loc>http://a.example/</sm:loc></sm:url></sm:urlset>`),
		kind: KindURLSet, want: []string{"http://a.example/"}},
	{name: "undeclared prefix", in: []byte(`<x:sitemapindex><x:sitemap><x:loc>http://a.example/s.xml</x:loc></x:sitemap></x:sitemapindex>`),
		kind: KindIndex, want: []string{"http://a.example/s.xml"}},
	{name: "old google namespace", in: []byte(`<urlset xmlns="http://www.google.com/schemas/sitemap/0.84"><url><loc>http://a.example/</loc></url></urlset>`),
		kind: KindURLSet, want: []string{"http://a.example/"}},

	// Common mistakes that must not lose the file.
	{name: "raw ampersand", in: []byte(`<urlset><url><loc>http://a.example/?x=1&y=2</loc></url><url><loc>http://a.example/b</loc></url></urlset>`),
		kind: KindURLSet, want: []string{"http://a.example/?x=1&y=2", "http://a.example/b"}},
	{name: "ISO-8859-1 declared", in: []byte("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>\n<urlset><url><loc>http://a.example/caf\xe9</loc></url></urlset>"),
		kind: KindURLSet, want: []string{"http://a.example/café"}},
	{name: "Latin-1 served as UTF-8", in: []byte("<urlset><url><loc>http://a.example/caf\xe9</loc></url><url><loc>http://a.example/\xc3\xa9t\xc3\xa9</loc></url></urlset>"),
		kind: KindURLSet, want: []string{"http://a.example/café", "http://a.example/été"}},
	{name: "leading white space and BOM", in: []byte("\xef\xbb\xbf\n\n  <urlset><url><loc>http://a.example/</loc></url></urlset>"),
		kind: KindURLSet, want: []string{"http://a.example/"}},
	{name: "first loc of an entry counts", in: []byte(`<urlset><url><loc>http://a.example/1</loc><loc>http://a.example/2</loc></url></urlset>`),
		kind: KindURLSet, want: []string{"http://a.example/1"}},
	{name: "sitemap element in a urlset ignored", in: []byte(`<urlset><sitemap><loc>http://a.example/s.xml</loc></sitemap><url><loc>http://a.example/</loc></url></urlset>`),
		kind: KindURLSet, want: []string{"http://a.example/"}},
	{name: "junk after the root ignored", in: []byte(`<urlset><url><loc>http://a.example/</loc></url></urlset><html>oops`),
		kind: KindURLSet, want: []string{"http://a.example/"}},
	{name: "end tag in another case", in: []byte(`<urlset><url><loc>http://a.example/x</loc></URL><url><loc>http://a.example/y</loc></url></urlset>`),
		kind: KindURLSet, want: []string{"http://a.example/x", "http://a.example/y"}},
	{name: "wrong end tag stops, never closes the root early", in: []byte(`<urlset><url><loc>http://a.example/x</lock></url><url><loc>http://a.example/y</loc></url></urlset>`),
		kind: KindURLSet, reason: ReasonMalformedXML},
	{name: "unknown entity kept", in: []byte(`<urlset><url><loc>http://a.example/?a=1&nbsp;&#x41;&#66;</loc></url></urlset>`),
		kind: KindURLSet, want: []string{"http://a.example/?a=1&nbsp;AB"}},
	{name: "empty urlset", in: []byte(`<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"/>`), kind: KindURLSet},
	{name: "double gzip", in: gzipped(gzipped(file("index.xml"))), kind: KindIndex, gzip: true,
		want: []string{
			"https://www.example.org/sitemap-posts-1.xml.gz @ 2024-05-01T10:00+02:00",
			"https://www.example.org/sitemap-pages.xml",
		},
		skipped: 1},
	{name: "gzip text", in: gzipped([]byte("http://a.example/\nhttp://a.example/b\n")), kind: KindText, gzip: true,
		want: []string{"http://a.example/", "http://a.example/b"}},

	// Not sitemaps.
	{name: "html error page", in: []byte("<!DOCTYPE html>\n<html><head><title>404</title></head><body>Not found</body></html>"), reason: ReasonNotSitemap},
	{name: "rss feed", in: []byte(`<?xml version="1.0"?><rss version="2.0"><channel><item><link>http://a.example/</link></item></channel></rss>`), reason: ReasonNotSitemap},
	{name: "json", in: []byte(`{"urls": ["http://a.example/"]}`), reason: ReasonNotSitemap},
	{name: "empty", in: nil, reason: ReasonNotSitemap},
	{name: "white space only", in: []byte(" \r\n\t\n"), reason: ReasonNotSitemap},
	{name: "gzip of nothing", in: gzipped(nil), gzip: true, reason: ReasonNotSitemap},
	{name: "xml garbage before a root", in: []byte(`<<<>>>`), reason: ReasonNotSitemap},

	// Limits.
	{name: "too many urls", in: []byte(`<urlset><url><loc>http://a.example/1</loc></url><url><loc>bad</loc></url><url><loc>http://a.example/3</loc></url></urlset>`),
		lim: Limits{MaxURLs: 2}, kind: KindURLSet, want: []string{"http://a.example/1"}, skipped: 1, reason: ReasonTooManyURLs},
	{name: "too many text lines", in: []byte("http://a.example/1\n\nhttp://a.example/2\nhttp://a.example/3\n"),
		lim: Limits{MaxURLs: 2}, kind: KindText, want: []string{"http://a.example/1", "http://a.example/2"}, reason: ReasonTooManyURLs},
	{name: "exactly the url limit", in: []byte("http://a.example/1\nhttp://a.example/2\n"),
		lim: Limits{MaxURLs: 2}, kind: KindText, want: []string{"http://a.example/1", "http://a.example/2"}},
	{name: "too large", in: []byte(`<urlset><url><loc>http://a.example/1</loc></url><url><loc>http://a.example/2</loc></url></urlset>`),
		lim: Limits{MaxBytes: 60}, kind: KindURLSet, want: []string{"http://a.example/1"}, reason: ReasonTooLarge},
	{name: "too large compressed", in: gzipped(bytes.Repeat([]byte("http://a.example/\n"), 4)),
		lim: Limits{MaxBytes: 20}, gzip: true, reason: ReasonTooLarge},
	{name: "loc over the length limit", in: []byte(`<urlset><url><loc>http://a.example/` + strings.Repeat("x", 40) + `</loc></url><url><loc>http://a.example/short</loc></url></urlset>`),
		lim: Limits{MaxURLLength: 30}, kind: KindURLSet, want: []string{"http://a.example/short"}, skipped: 1},
	{name: "text line over the buffer", in: []byte("http://a.example/1\nhttp://a.example/" + strings.Repeat("x", 5000) + "\nhttp://a.example/3\n"),
		lim: Limits{MaxURLLength: 100}, kind: KindText, want: []string{"http://a.example/1", "http://a.example/3"}, skipped: 1},
	{name: "nesting too deep", in: []byte("<urlset>" + strings.Repeat("<a>", maxDepth)), kind: KindURLSet, reason: ReasonMalformedXML},
	{name: "token too large", in: []byte("<urlset><url><loc>http://a.example/</loc></url><!--" + strings.Repeat("x", maxToken+1) + "-->"),
		kind: KindURLSet, want: []string{"http://a.example/"}, reason: ReasonTooLarge},

	// Bad locs and lastmods are skipped, never fatal.
	{name: "bad locs", in: []byte("<urlset>" +
		"<url><loc></loc></url>" +
		"<url><loc>mailto:a@a.example</loc></url>" +
		"<url><loc>http://</loc></url>" +
		"<url><loc>http://a b.example/</loc></url>" +
		"<url><loc>http://a.example/%zz</loc></url>" +
		"<url><loc>http://a.example/\xff</loc></url>" +
		"<url><loc>HTTPS://A.example/ok</loc><lastmod>" + strings.Repeat("9", maxLastMod+1) + "</lastmod></url>" +
		"</urlset>"),
		kind: KindURLSet, want: []string{"http://a.example/ÿ", "HTTPS://A.example/ok"}, skipped: 5}, // \xff read as Latin-1
	{name: "text: first line not a url", in: []byte("hello\nhttp://a.example/\n"), reason: ReasonNotSitemap},
	{name: "text: invalid UTF-8 line", in: []byte("http://a.example/1\nhttp://a.example/\xff\n"), kind: KindText,
		want: []string{"http://a.example/1"}, skipped: 1},

	// Broken gzip.
	{name: "gzip magic, bad header", in: []byte("\x1f\x8b\x07garbage"), gzip: true, reason: ReasonBadGzip},
	{name: "gzip magic only", in: []byte("\x1f\x8b"), gzip: true, reason: ReasonBadGzip},
	{name: "gzip cut in its data", in: gzipped([]byte("http://a.example/1\n" + strings.Repeat("http://a.example/x\n", 1000)))[:40],
		gzip: true, reason: ReasonBadGzip},
}

// TestParse runs parseCases.
func TestParse(t *testing.T) {
	for _, c := range parseCases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			res, err := Parse(bytes.NewReader(c.in), c.lim, func(e Entry) error {
				got = append(got, show(t, e))
				return nil
			})
			checkErr(t, err, c.reason)
			if res.Kind != c.kind || res.Gzip != c.gzip || res.Skipped != c.skipped || res.URLs != len(got) {
				t.Errorf("Result = %+v, want Kind %q, Gzip %v, Skipped %d, URLs %d", res, c.kind, c.gzip, c.skipped, len(got))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// show writes e as "loc" or "loc @ lastmod" after checking what each Entry
// must hold.
func show(tb testing.TB, e Entry) string {
	tb.Helper()
	if e.URL == nil || e.URL.String() == "" || e.Kind == "" {
		tb.Errorf("entry %+v: no URL or Kind", e)
	}
	if got := parseLastMod(e.LastMod); !got.Equal(e.LastModTime) {
		tb.Errorf("entry %q: LastModTime %v, want %v", e.Loc, e.LastModTime, got)
	}
	if e.LastMod == "" {
		return e.Loc
	}
	return e.Loc + " @ " + e.LastMod
}

// checkErr fails unless err is nil (reason "") or an *Error of reason
// wrapping its sentinel.
func checkErr(tb testing.TB, err error, reason Reason) {
	tb.Helper()
	if reason == "" {
		if err != nil {
			tb.Fatalf("Parse: %v", err)
		}
		return
	}
	e, ok := errors.AsType[*Error](err)
	if !ok || e.Reason != reason || !errors.Is(err, reason.sentinel()) {
		tb.Fatalf("Parse error = %v, want reason %q", err, reason)
	}
}

// TestGzipBomb pins that a bomb is decompressed only up to the limit: 128 KiB
// of gzip that inflates to 64 MiB (a URL, then blank padding lines that are
// no entries) stops at 50 MiB with the URL kept, and an XML bomb stops at a
// small limit.
func TestGzipBomb(t *testing.T) {
	cases := []struct {
		name  string
		head  string
		fill  string
		total int64
		lim   Limits
		want  int // entries before the limit
	}{
		{"text, default limit", "http://a.example/\n", strings.Repeat(" ", 1023) + "\n", 64 << 20, Limits{}, 1},
		{"xml, small limit", "<urlset><url><loc>http://a.example/</loc></url>", "<x/>", 4 << 20, Limits{MaxBytes: 1 << 20}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bomb := bombOf(t, c.head, c.fill, c.total)
			in := &countingReader{r: bytes.NewReader(bomb)}
			n := 0
			res, err := Parse(in, c.lim, func(Entry) error { n++; return nil })
			checkErr(t, err, ReasonTooLarge)
			max := c.lim.withDefaults().MaxBytes
			if res.Bytes != max || n != c.want || !res.Gzip {
				t.Errorf("Result = %+v, %d entries; want Bytes %d, %d entries, Gzip", res, n, max, c.want)
			}
			t.Logf("%d bytes of gzip, %d read", len(bomb), in.n)
			if in.n >= int64(len(bomb)) {
				t.Errorf("read all %d bytes of the bomb, want a stop before its end", len(bomb))
			}
		})
	}
}

// bombOf returns head followed by fill repeated to total bytes, gzipped.
func bombOf(tb testing.TB, head, fill string, total int64) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		tb.Fatal(err)
	}
	chunk := []byte(strings.Repeat(fill, 64<<10/len(fill)))
	zw.Write([]byte(head))
	for n := int64(len(head)); n < total; n += int64(len(chunk)) {
		if _, err := zw.Write(chunk); err != nil {
			tb.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// TestStopped pins what stops a parse that is not the document's fault: an
// error from yield comes back unchanged after the entries before it; a
// reader that fails mid-document is ReasonRead wrapping its error, after
// the entries read before it (the parse streams: it yields before the end).
func TestStopped(t *testing.T) {
	doc := "<urlset><url><loc>http://a.example/1</loc></url><url><loc>http://a.example/2</loc></url></urlset>"
	errStop := errors.New("stop")
	errNet := errors.New("connection reset")
	cases := []struct {
		name   string
		r      io.Reader
		stopAt int // yield fails at this entry (1-based), 0 never
		want   int // entries yielded
		err    error
		reason Reason
	}{
		{"yield fails", strings.NewReader(doc), 2, 1, errStop, ""},
		{"yield fails in text", strings.NewReader("http://a.example/1\nhttp://a.example/2\n"), 1, 0, errStop, ""},
		{"reader fails", io.MultiReader(strings.NewReader(doc[:60]), iotest.ErrReader(errNet)), 0, 1, errNet, ReasonRead},
		{"reader fails under gzip", io.MultiReader(bytes.NewReader(gzipped([]byte(doc))[:30]), iotest.ErrReader(errNet)), 0, 0, errNet, ReasonRead},
		{"reader fails in text", io.MultiReader(strings.NewReader("http://a.example/1\nhttp"), iotest.ErrReader(errNet)), 0, 1, errNet, ReasonRead},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := 0
			res, err := Parse(c.r, Limits{}, func(Entry) error {
				if n+1 == c.stopAt {
					return errStop
				}
				n++
				return nil
			})
			if !errors.Is(err, c.err) {
				t.Fatalf("Parse error = %v, want %v", err, c.err)
			}
			if c.reason != "" {
				checkErr(t, err, c.reason)
			} else if err != errStop {
				t.Errorf("Parse error = %v, want yield's error unchanged", err)
			}
			if n != c.want || res.URLs != c.want {
				t.Errorf("yielded %d, Result.URLs %d, want %d", n, res.URLs, c.want)
			}
		})
	}
}

// TestLastMod pins the W3C datetime forms (https://www.w3.org/TR/NOTE-datetime)
// that parse, and real-world lastmods that do not.
func TestLastMod(t *testing.T) {
	plus2 := time.FixedZone("", 2*3600)
	cases := []struct {
		in   string
		want time.Time // zero: not parsed
	}{
		{"2024", time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"2024-03", time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)},
		{"2024-03-05", time.Date(2024, 3, 5, 0, 0, 0, 0, time.UTC)},
		{"2024-03-05T08:15+02:00", time.Date(2024, 3, 5, 8, 15, 0, 0, plus2)},
		{"2024-03-05T08:15:30Z", time.Date(2024, 3, 5, 8, 15, 30, 0, time.UTC)},
		{"2024-03-05T08:15:30.5+02:00", time.Date(2024, 3, 5, 8, 15, 30, 5e8, plus2)},
		{"2024-03-05T08:15:30,5Z", time.Time{}}, // W3C: "." only
		{"2024-03-05T08:15:30", time.Time{}},    // W3C: a time needs a zone
		{"2024-03-05 08:15:30+02:00", time.Time{}},
		{"2024-02-30", time.Time{}},
		{"2024-3-5", time.Time{}},
		{"05/03/2024", time.Time{}},
		{"Tue, 05 Mar 2024 08:15:30 GMT", time.Time{}},
		{"", time.Time{}},
	}
	for _, c := range cases {
		if got := parseLastMod(c.in); !got.Equal(c.want) || got.IsZero() != c.want.IsZero() {
			t.Errorf("parseLastMod(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// file returns the bytes of testdata/name.
func file(name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		panic(fmt.Sprintf("testdata: %v", err))
	}
	return b
}

// gzipped returns b gzip-compressed.
func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}
