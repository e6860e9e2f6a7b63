// Package warctest reads WARC files back for tests, independently of the
// code that wrote them (compress/gzip and the record framing only), and
// runs the tools nobody here wrote that check them: the Internet Archive's
// `warc verify` and webrecorder's `warcio cdx-index`, which test.sh
// installs into $SIEVE_TOOLS.
package warctest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sievecrawl/sieve/internal/toolstest"
)

// Record is a WARC record as read back: where its gzip member is, its
// header fields and its block.
type Record struct {
	File           string
	Offset, Length int64
	Fields         map[string]string // names lower-cased
	Block          []byte
}

// Get returns a header field.
func (r Record) Get(name string) string { return r.Fields[strings.ToLower(name)] }

// Records reads every record of the *.warc.gz files in dir.
func Records(tb testing.TB, dir string) []Record {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	return ReadFiles(tb, files...)
}

// ReadFiles reads every record of the given WARC files, in order.
func ReadFiles(tb testing.TB, files ...string) []Record {
	tb.Helper()
	var recs []Record
	for _, f := range files {
		recs = append(recs, ReadFile(tb, f)...)
	}
	return recs
}

// countingReader counts the bytes a gzip reader consumed, to find where
// each member ends.
type countingReader struct {
	br *bufio.Reader
	n  int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.br.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.br.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// ReadFile reads every record of one WARC file: each must be its own gzip
// member holding one whole WARC/1.1 record.
func ReadFile(tb testing.TB, path string) []Record {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var recs []Record
	c := &countingReader{br: bufio.NewReader(bytes.NewReader(data))}
	for c.n < int64(len(data)) {
		start := c.n
		zr, err := gzip.NewReader(c)
		if err != nil {
			tb.Fatalf("%s at %d: %v", path, start, err)
		}
		zr.Multistream(false)
		raw, err := io.ReadAll(zr)
		if err != nil {
			tb.Fatalf("%s at %d: %v", path, start, err)
		}
		head, rest, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
		if !ok || !bytes.HasPrefix(head, []byte("WARC/1.1\r\n")) {
			tb.Fatalf("%s at %d: not a WARC/1.1 record", path, start)
		}
		r := Record{File: filepath.Base(path), Offset: start, Length: c.n - start, Fields: map[string]string{}}
		for _, l := range strings.Split(string(head), "\r\n")[1:] {
			k, v, _ := strings.Cut(l, ":")
			r.Fields[strings.ToLower(k)] = strings.TrimSpace(v)
		}
		n, _ := strconv.Atoi(r.Get("Content-Length"))
		if len(rest) != n+4 || !bytes.HasSuffix(rest, []byte("\r\n\r\n")) {
			tb.Fatalf("%s at %d: block of %d bytes, Content-Length %d", path, start, len(rest)-4, n)
		}
		r.Block = rest[:n]
		recs = append(recs, r)
	}
	return recs
}

// Payload returns a response record's HTTP status and body without
// transfer coding.
func Payload(tb testing.TB, r Record) (int, []byte) {
	tb.Helper()
	br := bufio.NewReader(bytes.NewReader(r.Block))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		tb.Fatalf("%s: %v", r.Get("WARC-Target-URI"), err)
	}
	var body io.Reader = br
	if len(resp.TransferEncoding) > 0 {
		body = httputil.NewChunkedReader(br)
	}
	b, _ := io.ReadAll(body)
	return resp.StatusCode, b
}

// SHA1 is the hex SHA-1 of b.
func SHA1(b []byte) string {
	s := sha1.Sum(b)
	return hex.EncodeToString(s[:])
}

// Verify runs the Internet Archive's `warc verify` on files and fails
// the test unless it finds every file valid.
func Verify(t testing.TB, files ...string) {
	t.Helper()
	bin := toolstest.Find(t, "ia-warc", "bin/ia-warc")
	out, err := exec.Command(bin, append([]string{"verify", "--json"}, files...)...).CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if err != nil || !validAll(out, len(files)) {
		t.Fatalf("warc verify: %v\n%s", err, out)
	}
}

// validAll reports whether `warc verify --json` output says n files are
// valid, every record read, and logs no error.
func validAll(out []byte, n int) bool {
	valid := 0
	for _, line := range bytes.Split(out, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e struct {
			Level          string `json:"level"`
			Valid          *bool  `json:"valid"`
			Errors         int    `json:"errors"`
			AllRecordsRead *bool  `json:"allRecordsRead"`
		}
		if err := json.Unmarshal(line, &e); err != nil || e.Level == "ERROR" {
			return false
		}
		if e.Valid != nil {
			if !*e.Valid || e.Errors != 0 || e.AllRecordsRead == nil || !*e.AllRecordsRead {
				return false
			}
			valid++
		}
	}
	return valid == n
}

// CDXIndex runs webrecorder's `warcio cdx-index` on file and returns its
// lines.
func CDXIndex(t testing.TB, file string) []string {
	t.Helper()
	bin := toolstest.Find(t, "warcio", "node_modules/.bin/warcio")
	out, err := exec.Command(bin, "cdx-index", file).Output()
	if err != nil {
		t.Fatalf("warcio cdx-index: %v", err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// Index runs webrecorder's `warcio index` on file: the offset, type and
// target URI of every record it reads.
func Index(t testing.TB, file string) []IndexLine {
	t.Helper()
	bin := toolstest.Find(t, "warcio", "node_modules/.bin/warcio")
	out, err := exec.Command(bin, "index", file).Output()
	if err != nil {
		t.Fatalf("warcio index: %v", err)
	}
	var lines []IndexLine
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var il IndexLine
		if err := json.Unmarshal([]byte(l), &il); err != nil {
			t.Fatalf("warcio index line %q: %v", l, err)
		}
		lines = append(lines, il)
	}
	return lines
}

// IndexLine is one record as `warcio index` lists it.
type IndexLine struct {
	Offset int64  `json:"offset"`
	Type   string `json:"warc-type"`
	URI    string `json:"warc-target-uri"`
}
