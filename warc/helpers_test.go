package warc

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base32"
	"io"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func b32(sum [20]byte) string { return base32.StdEncoding.EncodeToString(sum[:]) }

// testRecord is a WARC record as the tests read it back, independently of
// the writer's code and library: one gzip member, its header fields and
// block.
type testRecord struct {
	offset, length int64
	fields         map[string]string // lower-cased names
	block          []byte
}

func (r testRecord) get(name string) string { return r.fields[strings.ToLower(name)] }

// readRecords reads every record of the WARC files in dir.
func readRecords(t *testing.T, dir string) []testRecord {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	var recs []testRecord
	for _, f := range files {
		recs = append(recs, readFile(t, f)...)
	}
	return recs
}

func readFile(t *testing.T, path string) []testRecord {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []testRecord
	c := &byteCounter{br: bufio.NewReader(bytes.NewReader(data))}
	for c.n < int64(len(data)) {
		start := c.n
		zr, err := gzip.NewReader(c)
		if err != nil {
			t.Fatalf("%s at %d: %v", path, start, err)
		}
		zr.Multistream(false)
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s at %d: %v", path, start, err)
		}
		head, rest, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
		if !ok || !bytes.HasPrefix(head, []byte("WARC/1.1\r\n")) {
			t.Fatalf("%s at %d: not a WARC/1.1 record", path, start)
		}
		r := testRecord{offset: start, length: c.n - start, fields: map[string]string{}}
		for _, l := range strings.Split(string(head), "\r\n")[1:] {
			k, v, _ := strings.Cut(l, ":")
			r.fields[strings.ToLower(k)] = strings.TrimSpace(v)
		}
		n, _ := strconv.Atoi(r.get("Content-Length"))
		if len(rest) != n+4 || !bytes.HasSuffix(rest, []byte("\r\n\r\n")) {
			t.Fatalf("%s at %d: block of %d bytes, Content-Length %d", path, start, len(rest)-4, n)
		}
		r.block = rest[:n]
		recs = append(recs, r)
	}
	return recs
}

// payloadOf returns a response record's body without transfer coding.
func payloadOf(t *testing.T, r testRecord) []byte {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(r.block))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: %v", r.get("WARC-Target-URI"), err)
	}
	var body io.Reader = br
	if len(resp.TransferEncoding) > 0 {
		body = httputil.NewChunkedReader(br)
	}
	b, _ := io.ReadAll(body)
	return b
}
