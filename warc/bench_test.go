package warc

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
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
