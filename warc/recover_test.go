package warc

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sievecrawl/sieve/warc/warctest"
)

// TestRecoverKilledFile: a writer killed mid-record leaves <name>.open with
// a partial gzip member at its end; the next start cuts it after the last
// complete record, renames it and indexes it, and leaves alone a file a live
// writer holds.
func TestRecoverKilledFile(t *testing.T) {
	srv, _ := site(t)
	live := t.TempDir()
	w, err := Open(Options{Dir: live, CrawlerID: "killed"})
	if err != nil {
		t.Fatal(err)
	}
	c := client(NewRecorder(w, RecorderOptions{}))
	for _, p := range []string{"/fixed", "/chunked", "/gzip"} {
		get(t, c, context.Background(), srv.URL+p, 1<<30)
	}
	open, _ := filepath.Glob(filepath.Join(live, "*.warc.gz.open"))
	if len(open) != 1 {
		t.Fatalf("open files %v", open)
	}
	// A live writer's file is not touched.
	if closed, err := Recover(live); err != nil || len(closed) != 0 {
		t.Fatalf("Recover of a live writer's dir: %v %v", closed, err)
	}
	// What a SIGKILL mid-record leaves: the file as it is, plus half of a
	// next member.
	data, err := os.ReadFile(open[0])
	if err != nil {
		t.Fatal(err)
	}
	complete := len(data)
	next := gzipped([]byte("WARC/1.1\r\nWARC-Type: response\r\nContent-Length: 9999\r\n\r\nHTTP/1.1 200 OK\r\n"))
	data = append(data, next[:len(next)/2]...)
	dead := t.TempDir()
	name := filepath.Base(open[0])
	if err := os.WriteFile(filepath.Join(dead, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	w.Close()

	w2, err := Open(Options{Dir: dead, CrawlerID: "next"}) // recovers at start
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	final := filepath.Join(dead, strings.TrimSuffix(name, openSuffix))
	st, err := os.Stat(final)
	if err != nil {
		t.Fatalf("not closed: %v", err)
	}
	if st.Size() != int64(complete) {
		t.Errorf("cut at %d, want %d (the last complete record's end)", st.Size(), complete)
	}
	recs := warctest.ReadFile(t, final)
	if len(recs) != 7 { // warcinfo + 3 × (response, request)
		t.Errorf("%d records survive, want 7", len(recs))
	}
	idx, err := os.ReadFile(filepath.Join(dead, indexName(filepath.Base(final))))
	if err != nil || strings.Count(string(idx), "\n") != 3 {
		t.Errorf("index of the recovered file: %v\n%s", err, idx)
	}
	warctest.Verify(t, final)
}

// TestWriteFailureStops: a directory that does not exist is refused at
// start; a write that fails cuts the partial record off, and the Writer
// then refuses every request: nothing is fetched that cannot be kept.
func TestWriteFailureStops(t *testing.T) {
	if _, err := Open(Options{Dir: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("Open of a missing directory succeeded")
	}
	srv, _ := site(t)
	dir := t.TempDir()
	w, err := Open(Options{Dir: dir, CrawlerID: "fails"})
	if err != nil {
		t.Fatal(err)
	}
	c := client(NewRecorder(w, RecorderOptions{}))
	get(t, c, context.Background(), srv.URL+"/fixed", 1<<30)
	w.mu.Lock()
	w.file.Close() // every later write fails, as on a full or lost disk
	w.mu.Unlock()
	ctx, tr := Track(context.Background(), "c", srv.URL+"/gzip")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/gzip", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	if err := resp.Body.Close(); err == nil {
		t.Error("a failed record was not reported by Body.Close")
	}
	if tr.Err() == nil || w.Err() == nil {
		t.Errorf("failure not kept: tracker %v, writer %v", tr.Err(), w.Err())
	}
	if _, err := c.Get(srv.URL + "/fixed"); err == nil {
		t.Error("a request went out after the archive failed")
	}
	if w.Stats().Err == "" {
		t.Error("Stats does not say why writing stopped")
	}
}

// FuzzScan: recovering a file a killed writer left (any bytes at all)
// never crashes, and never keeps more than the file holds.
func FuzzScan(f *testing.F) {
	f.Add(gzipped([]byte("WARC/1.1\r\nWARC-Type: response\r\nContent-Length: 19\r\n\r\nHTTP/1.1 200 OK\r\n\r\n\r\n\r\n")))
	f.Add([]byte{0x1f, 0x8b, 8, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, good, err := scan(bytes.NewReader(data), "f.warc.gz")
		if err != nil {
			return
		}
		if good < 0 || good > int64(len(data)) || len(entries) > len(data) {
			t.Fatalf("scan kept %d bytes, %d entries of %d bytes", good, len(entries), len(data))
		}
	})
}
