package warc

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkRecord records exchanges of a 30 KB page through the Recorder
// and a Writer, against the same exchanges made without recording in the
// same run (b.Run "plain"): what archiving adds per fetch.
func BenchmarkRecord(b *testing.B) {
	page := strings.Repeat("<p>some words of a page that compress like text do </p>\n", 550)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	}))
	defer srv.Close()
	for _, archive := range []bool{false, true} {
		b.Run(fmt.Sprintf("archive=%v", archive), func(b *testing.B) {
			var c *http.Client
			if archive {
				w, err := Open(Options{Dir: b.TempDir(), CrawlerID: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
				c = client(NewRecorder(w, RecorderOptions{}))
			} else {
				c = &http.Client{Transport: &http.Transport{DisableCompression: true}}
			}
			b.SetBytes(int64(len(page)))
			b.ResetTimer()
			for range b.N {
				ctx, _ := Track(context.Background(), "c", srv.URL)
				get(b, c, ctx, srv.URL, 1<<30)
			}
		})
	}
}

// BenchmarkCheckRecord reads a page's response record whole, as a revisit
// does before it asks conditionally (checkRecord: the gzip member to its
// checksum, the payload digest), for pages of growing size, beside a
// fetch of the same page recorded in the same run (the "fetch" rows): what
// the check adds to a revisit.
func BenchmarkCheckRecord(b *testing.B) {
	for _, size := range []int{1 << 10, 30 << 10, 1 << 20} {
		page := strings.Repeat("<p>some words of a page that compress like text do </p>\n", size/56+1)[:size]
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, page)
		}))
		w, err := Open(Options{Dir: b.TempDir(), CrawlerID: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		c := client(NewRecorder(w, RecorderOptions{}))
		ctx, tr := Track(context.Background(), "c", srv.URL)
		get(b, c, ctx, srv.URL, 1<<30)
		res, _ := tr.Of(srv.URL)
		path := filepath.Join(w.Dir(), res.File+openSuffix)
		b.Run(fmt.Sprintf("fetch/size=%d", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for range b.N {
				ctx, _ := Track(context.Background(), "c", srv.URL)
				get(b, c, ctx, srv.URL, 1<<30)
			}
		})
		b.Run(fmt.Sprintf("check/size=%d", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for range b.N {
				if err := checkRecord(path, res.Offset, res.Digest); err != nil {
					b.Fatal(err)
				}
			}
		})
		w.Close()
		srv.Close()
	}
}
