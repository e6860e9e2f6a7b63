package warc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sievecrawl/sieve/warc/warctest"
)

// dirList is Directories over a fixed list: the crawl record's twin.
type dirList []string

func (d dirList) Dirs(context.Context, string) ([]string, error) { return d, nil }

// TestRevisitReadsEarlierDirectory captures a page into one directory and
// fetches it again, writing into another, after doing to the first
// directory's file what happens to archives: kept, left .open by a killed
// writer, deleted, corrupted, or the directory unknown to the crawl. A
// record that can be read whole is revisited (the revisit points at it);
// any other is fetched again in full, unconditionally, as a response
// record, and the reason is reported.
func TestRevisitReadsEarlierDirectory(t *testing.T) {
	srv, _ := site(t)
	u := srv.URL + "/fixed"
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, path string, offset int64)
		listed  bool   // the first directory is among the crawl's
		want    string // record type of the second fetch
		reason  string // why it was fetched in full
		recover bool   // the .open file is closed by the revisit
	}{
		{"closed file", func(*testing.T, string, int64) {}, true, "revisit", "", false},
		{"left open by a killed writer", func(t *testing.T, path string, _ int64) {
			// As after a SIGKILL: the file still has its .open name and
			// its index lines are unsorted.
			if err := os.Rename(path, path+openSuffix); err != nil {
				t.Fatal(err)
			}
			idx := filepath.Join(filepath.Dir(path), indexName(filepath.Base(path)))
			if err := os.Rename(idx, idx+openSuffix); err != nil {
				t.Fatal(err)
			}
		}, true, "revisit", "", true},
		{"deleted", func(t *testing.T, path string, _ int64) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, true, "response", UnreadableMissing, false},
		{"corrupt", func(t *testing.T, path string, offset int64) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// A byte inside the record's compressed block.
			if _, err := f.WriteAt([]byte{0xff, 0x00, 0xff}, offset+40); err != nil {
				t.Fatal(err)
			}
		}, true, "response", UnreadableCorrupt, false},
		{"directory not the crawl's", func(*testing.T, string, int64) {}, false, "response", UnreadableMissing, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caps := NewMemCaptures()
			dir1, dir2 := t.TempDir(), t.TempDir()
			w1, err := Open(Options{Dir: dir1, CrawlerID: "run1"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, tr := Track(context.Background(), "a", u)
			get(t, client(NewRecorder(w1, RecorderOptions{Captures: caps})), ctx, u, 1<<30)
			first, _ := tr.Of(u)
			if err := w1.Close(); err != nil || first.Type != "response" {
				t.Fatalf("first fetch: %+v, close: %v", first, err)
			}
			// Captured while its file was open, the capture names the
			// file it becomes once closed.
			if c, _, _ := caps.Last(context.Background(), "a", u); c.File != first.File || strings.HasSuffix(c.File, openSuffix) || !strings.HasSuffix(c.File, ".warc.gz") {
				t.Errorf("capture names %q, want the closed file %q", c.File, first.File)
			}
			path := filepath.Join(dir1, first.File)
			tc.damage(t, path, first.Offset)

			w2, err := Open(Options{Dir: dir2, CrawlerID: "run2"})
			if err != nil {
				t.Fatal(err)
			}
			var dirs dirList
			if tc.listed {
				dirs = dirList{dir1}
			}
			ctx, tr = Track(context.Background(), "a", u)
			get(t, client(NewRecorder(w2, RecorderOptions{Captures: caps, Directories: dirs})), ctx, u, 1<<30)
			second, _ := tr.Of(u)
			if err := w2.Close(); err != nil {
				t.Fatal(err)
			}
			if second.Err != nil || second.Type != tc.want {
				t.Fatalf("second fetch: %s record (%v), want %s", second.Type, second.Err, tc.want)
			}
			switch {
			case tc.reason == "" && second.Refetch != nil:
				t.Errorf("fetched in full: %v", second.Refetch)
			case tc.reason != "" && (second.Refetch == nil || second.Refetch.Reason != tc.reason):
				t.Errorf("refetch reason: %v, want %s", second.Refetch, tc.reason)
			}
			if tc.want == "revisit" {
				if second.RefPath != path || second.RefOffset != first.Offset {
					t.Errorf("revisit refers to %s@%d, want %s@%d", second.RefPath, second.RefOffset, path, first.Offset)
				}
				rec := NewRecorder(w2, RecorderOptions{})
				resp, err := rec.ReadPayload(second)
				if err != nil {
					t.Fatalf("ReadPayload: %v", err)
				}
				resp.Body.Close()
			}
			if tc.recover {
				if open, _ := filepath.Glob(filepath.Join(dir1, "*"+openSuffix)); len(open) > 0 {
					t.Errorf("left open after the revisit read it: %v", open)
				}
				warctest.Verify(t, path)
			}
			// What the crawl keeps now is readable: the new response, or
			// the record the revisit points at.
			last, ok, _ := caps.Last(context.Background(), "a", u)
			if !ok {
				t.Fatal("no capture after the second fetch")
			}
			p, err := Locate([]string{dir2, dir1}, last.File)
			if err == nil {
				err = checkRecord(p, last.Offset, last.Digest)
			}
			if err != nil {
				t.Errorf("the last capture is unreadable: %v", err)
			}
			warctest.Verify(t, filepath.Join(dir2, second.File))
		})
	}
}

// TestLocate finds a file under its closed name or its .open name, in the
// first directory that holds it, and says which directories it searched
// when none does.
func TestLocate(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, p := range []string{filepath.Join(a, "x.warc.gz"), filepath.Join(b, "x.warc.gz"), filepath.Join(b, "y.warc.gz.open")} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		dirs       []string
		name, want string
	}{
		{[]string{a, b}, "x.warc.gz", filepath.Join(a, "x.warc.gz")},
		{[]string{b, a}, "x.warc.gz", filepath.Join(b, "x.warc.gz")},
		{[]string{a, b}, "y.warc.gz", filepath.Join(b, "y.warc.gz.open")},
		{[]string{a, b}, "y.warc.gz.open", filepath.Join(b, "y.warc.gz.open")}, // a name from before captures named closed files
		{[]string{a}, "y.warc.gz", ""},
	} {
		got, err := Locate(tc.dirs, tc.name)
		var ue *UnreadableError
		switch {
		case tc.want != "" && (got != tc.want || err != nil):
			t.Errorf("Locate(%v, %q) = %q, %v, want %q", tc.dirs, tc.name, got, err, tc.want)
		case tc.want == "" && (!errors.As(err, &ue) || ue.Reason != UnreadableMissing || !strings.Contains(err.Error(), a)):
			t.Errorf("Locate(%v, %q) = %q, %v, want missing, naming %s", tc.dirs, tc.name, got, err, a)
		}
	}
}
