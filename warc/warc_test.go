package warc

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/sievecrawl/sieve/warc/warctest"
)

// site serves the kinds of responses a crawl meets: a fixed-length page, a
// chunked one, a gzip-encoded one, an error, a redirect and a long body.
func site(t *testing.T) (*httptest.Server, map[string][]byte) {
	t.Helper()
	bodies := map[string][]byte{
		"/fixed":    []byte("<html><a href=/chunked>x</a></html>"),
		"/chunked":  bytes.Repeat([]byte("chunk of a streamed page\n"), 2000),
		"/gzip":     gzipped([]byte(strings.Repeat("compressible ", 500))),
		"/missing":  []byte("not here"),
		"/redirect": nil,
		"/long":     bytes.Repeat([]byte("0123456789"), 300_000), // 3 MB
	}
	mux := http.NewServeMux()
	fixed := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", fmt.Sprint(len(bodies["/fixed"])))
		w.Write(bodies["/fixed"])
	}
	mux.HandleFunc("/fixed", fixed)
	mux.HandleFunc("/copy", fixed) // the same page under another URL
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		b := bodies["/chunked"]
		for len(b) > 0 {
			n := min(len(b), 7000)
			w.Write(b[:n])
			w.(http.Flusher).Flush()
			b = b[n:]
		}
	})
	mux.HandleFunc("/gzip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(bodies["/gzip"])
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, string(bodies["/missing"]), http.StatusNotFound)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/fixed", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/long", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(bodies["/long"])
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, bodies
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// client is an HTTP/1.1 client recording through rec, as the crawler's.
func client(rec *Recorder) *http.Client {
	d := &net.Dialer{}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return rec.WrapConn(c), nil
		},
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
	}
	return &http.Client{
		Transport:     rec.RoundTripper(tr),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// recording starts the test site and a Writer in a new directory, with an
// HTTP client recording into it (bodies up to 1 MiB).
func recording(t *testing.T) (srv *httptest.Server, dir string, w *Writer, c *http.Client) {
	t.Helper()
	srv, _ = site(t)
	dir = t.TempDir()
	w, err := Open(Options{Dir: dir, CrawlerID: "test-1"})
	if err != nil {
		t.Fatal(err)
	}
	return srv, dir, w, client(NewRecorder(w, RecorderOptions{MaxBodySize: 1 << 20}))
}

func get(t testing.TB, c *http.Client, ctx context.Context, u string, limit int64) []byte {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatalf("close %s: %v", u, err)
	}
	return b
}

func TestRecordExchanges(t *testing.T) {
	srv, bodies := site(t)
	dir := t.TempDir()
	w, err := Open(Options{Dir: dir, CrawlerID: "test-1"})
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(w, RecorderOptions{MaxBodySize: 1 << 20, SpoolMemory: 64 << 10})
	c := client(rec)
	paths := []string{"/fixed", "/chunked", "/gzip", "/missing", "/redirect", "/fixed", "/long"}
	for _, p := range paths {
		ctx, tr := Track(context.Background(), "c1", srv.URL+p)
		// Read only part of some bodies: the recorder reads the rest.
		limit := int64(100)
		if p == "/fixed" {
			limit = 1 << 30
		}
		get(t, c, ctx, srv.URL+p, limit)
		res, ok := tr.Of(srv.URL + p)
		if !ok || res.Err != nil {
			t.Fatalf("%s: result %+v %v", p, res, ok)
		}
		if (p == "/long") != res.Truncated {
			t.Errorf("%s: truncated = %v", p, res.Truncated)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if open, _ := filepath.Glob(filepath.Join(dir, "*.open")); len(open) > 0 {
		t.Fatalf("files left open: %v", open)
	}
	recs := warctest.Records(t, dir)
	types := map[string]int{}
	byID := map[string]warctest.Record{}
	for _, r := range recs {
		types[r.Get("WARC-Type")]++
		byID[r.Get("WARC-Record-ID")] = r
	}
	if types["warcinfo"] != 1 || types["response"] != len(paths) || types["request"] != len(paths) {
		t.Fatalf("record types %v", types)
	}
	for _, r := range recs {
		if r.Get("WARC-Type") != "response" {
			continue
		}
		u := r.Get("WARC-Target-URI")
		path := strings.TrimPrefix(u, srv.URL)
		if r.Get("WARC-IP-Address") != "127.0.0.1" {
			t.Errorf("%s: IP %q", u, r.Get("WARC-IP-Address"))
		}
		req, ok := byID[r.Get("WARC-Concurrent-To")]
		if !ok || req.Get("WARC-Type") != "request" || req.Get("WARC-Concurrent-To") != r.Get("WARC-Record-ID") {
			t.Errorf("%s: no request record linked both ways", u)
		}
		_, payload := warctest.Payload(t, r)
		want := bodies[path]
		if path == "/long" {
			if r.Get("WARC-Truncated") != "length" || !bytes.HasPrefix(want, payload) || len(payload) < 1<<20 {
				t.Errorf("%s: truncated record: header %q, %d bytes", u, r.Get("WARC-Truncated"), len(payload))
			}
			continue
		}
		if path == "/missing" {
			want = append(want, '\n') // http.Error adds one
		}
		if path != "/redirect" && !bytes.Equal(payload, want) {
			t.Errorf("%s: payload of %d bytes differs from the %d served", u, len(payload), len(want))
		}
		sum := sha1.Sum(payload)
		if d := "sha1:" + base32.StdEncoding.EncodeToString(sum[:]); r.Get("WARC-Payload-Digest") != d {
			t.Errorf("%s: payload digest %s, want %s", u, r.Get("WARC-Payload-Digest"), d)
		}
	}
	st := w.Stats()
	if st.Files != 1 || st.Records["response"] != int64(len(paths)) || st.Bytes == 0 {
		t.Errorf("stats %+v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, indexName(filepath.Base(firstFile(t, dir))))); err != nil {
		t.Errorf("no index beside the file: %v", err)
	}
}

func firstFile(t *testing.T, dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(files) == 0 {
		t.Fatal("no WARC file")
	}
	return files[0]
}

// TestReadByOthers has the files read by tools nobody here wrote: the
// Internet Archive's `warc verify` checks every record, its digests and
// its gzip framing; webrecorder's `warcio cdx-index` indexes them, and its
// index must equal the one written beside the file.
func TestReadByOthers(t *testing.T) {
	srv, dir, w, c := recording(t)
	for _, p := range []string{"/fixed", "/chunked", "/gzip", "/missing", "/redirect", "/long", "/fixed"} {
		get(t, c, context.Background(), srv.URL+p, 1<<30)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	file := firstFile(t, dir)
	warctest.Verify(t, file)
	// warcio reads every record where we wrote it.
	recs := warctest.ReadFile(t, file)
	idx := warctest.Index(t, file)
	if len(idx) != len(recs) {
		t.Fatalf("warcio index lists %d records, the file holds %d", len(idx), len(recs))
	}
	for i, r := range recs {
		if idx[i].Offset != r.Offset || idx[i].Type != r.Get("WARC-Type") || idx[i].URI != r.Get("WARC-Target-URI") {
			t.Errorf("record %d: warcio reads %+v, we wrote %s %s at %d", i, idx[i], r.Get("WARC-Type"), r.Get("WARC-Target-URI"), r.Offset)
		}
	}
	theirs := warctest.CDXIndex(t, file)
	ours, err := os.ReadFile(filepath.Join(dir, indexName(filepath.Base(file))))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(theirs)
	if got := strings.Join(theirs, "\n") + "\n"; got != string(ours) {
		t.Errorf("warcio's index differs from ours:\n%s\nours:\n%s", got, ours)
	}
}

// TestRotate: a file is closed once it holds MaxFileSize bytes; each file
// begins with its own warcinfo record, and names follow
// <prefix>-<17-digit UTC time>-<serial>-<crawler id>.warc.gz.
func TestRotate(t *testing.T) {
	srv, _ := site(t)
	dir := t.TempDir()
	w, err := Open(Options{Dir: dir, Prefix: "demo", CrawlerID: "host/1 x", MaxFileSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	c := client(NewRecorder(w, RecorderOptions{}))
	for range 4 {
		get(t, c, context.Background(), srv.URL+"/chunked", 1<<30)
	}
	w.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(files) != 4 {
		t.Fatalf("%d files, want 4: %v", len(files), files)
	}
	name := regexp.MustCompile(`^demo-\d{17}-\d{5}-host_1_x\.warc\.gz$`)
	for _, f := range files {
		if !name.MatchString(filepath.Base(f)) {
			t.Errorf("file name %s", filepath.Base(f))
		}
		recs := warctest.ReadFile(t, f)
		if recs[0].Get("WARC-Type") != "warcinfo" || recs[0].Get("WARC-Filename") != filepath.Base(f) {
			t.Errorf("%s does not begin with its warcinfo", f)
		}
		for _, r := range recs[1:] {
			if r.Get("WARC-Warcinfo-ID") != recs[0].Get("WARC-Record-ID") {
				t.Errorf("%s: a record does not name the file's warcinfo", f)
			}
		}
	}
	warctest.Verify(t, files...)
}

func TestSURT(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://www.Example.com/A/b?z=1&a=2", "com,example)/a/b?a=2&z=1"},
		{"https://example.com", "com,example)/"},
		{"http://example.com:8080/x", "com,example:8080)/x"},
		{"https://example.com:443/x", "com,example)/x"},
		{"http://127.0.0.1:80/", "1,0,0,127)/"},
	} {
		if got := SURT(c.in); got != c.want {
			t.Errorf("SURT(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestPayloadStoredOnce: within a crawl, a payload already stored under
// another URL is written as a revisit record of the first (profile
// identical-payload-digest), in another crawl in full.
func TestPayloadStoredOnce(t *testing.T) {
	srv, _ := site(t)
	dir := t.TempDir()
	w, err := Open(Options{Dir: dir, CrawlerID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	c := client(NewRecorder(w, RecorderOptions{Captures: NewMemCaptures()}))
	for _, f := range []struct{ crawl, path, want string }{
		{"a", "/fixed", "response"}, {"a", "/copy", "revisit"}, {"b", "/copy", "response"}, {"a", "/fixed", "revisit"},
	} {
		ctx, tr := Track(context.Background(), f.crawl, srv.URL+f.path)
		get(t, c, ctx, srv.URL+f.path, 1<<30)
		res, _ := tr.Of(srv.URL + f.path)
		if res.Type != f.want {
			t.Errorf("crawl %s %s: %s record, want %s", f.crawl, f.path, res.Type, f.want)
		}
		if f.want == "revisit" && (res.Profile != ProfileIdenticalPayload || res.RefersTo != srv.URL+"/fixed") {
			t.Errorf("crawl %s %s: revisit %s of %s", f.crawl, f.path, res.Profile, res.RefersTo)
		}
	}
	w.Close()
	warctest.Verify(t, firstFile(t, dir))
}

// TestConcurrentExchanges records from many goroutines at once, as a
// crawler's fetches do: every exchange is in the file once, whole (the
// Internet Archive's tool verifies it), and with -race no two record
// builders race (gowarc's own builder did: newRecordBuilder).
func TestConcurrentExchanges(t *testing.T) {
	srv, dir, w, c := recording(t)
	const workers, each = 8, 10
	paths := []string{"/fixed", "/chunked", "/gzip", "/missing", "/redirect"}
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := range each {
				get(t, c, context.Background(), fmt.Sprintf("%s%s?g=%d&i=%d", srv.URL, paths[(g+i)%len(paths)], g, i), 1<<30)
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	file := firstFile(t, dir)
	warctest.Verify(t, file)
	uris := map[string]int{}
	for _, r := range warctest.ReadFile(t, file) {
		if r.Get("WARC-Type") == "response" {
			uris[r.Get("WARC-Target-URI")]++
		}
	}
	if len(uris) != workers*each {
		t.Errorf("%d distinct responses recorded, want %d", len(uris), workers*each)
	}
	for u, n := range uris {
		if n != 1 {
			t.Errorf("%s recorded %d times", u, n)
		}
	}
}
