package captures

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/redistest"
	"github.com/sievecrawl/sieve/urlstore"
	"github.com/sievecrawl/sieve/warc"
)

type store interface {
	warc.Captures
	Delete(ctx context.Context, crawl string) (int64, error)
}

// TestStores runs the same table against Redis and the JetStream bucket
// (real servers): last capture per URL, first capture per digest kept,
// crawls apart, a crawl's captures deleted with it.
func TestStores(t *testing.T) {
	ctx := t.Context()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	srv := natstest.Start(t, natstest.Options{})
	kv, err := OpenKV(ctx, srv.JetStream(), frontier.Topology{})
	if err != nil {
		t.Fatal(err)
	}
	diskLog, err := frontier.OpenStoreLog(ctx, srv.JetStream(), frontier.Topology{Prefix: "disk"}, StoreName)
	if err != nil {
		t.Fatal(err)
	}
	disk, err := OpenDisk(ctx, filepath.Join(t.TempDir(), "captures"), diskLog, urlstore.Options{Logf: t.Logf}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { disk.Close() })
	logOnly, err := frontier.OpenStoreLog(ctx, srv.JetStream(), frontier.Topology{Prefix: "logonly"}, StoreName)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]store{"redis": Redis{Client: rdb}, "kv": kv, "disk": disk, "unindexed": Unindexed{Log: logOnly}} {
		t.Run(name, func(t *testing.T) {
			at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
			a := warc.Capture{Date: at, Digest: "sha1:AAAA", ETag: `"1"`, PayloadURL: "http://x/a?q=1 2", PayloadDate: at, File: "f.warc.gz", Offset: 10}
			b := a
			b.Date, b.ETag, b.Offset = at.Add(time.Hour), `"2"`, 99
			steps := []struct {
				crawl, url string
				c          warc.Capture
			}{{"c1", a.PayloadURL, a}, {"c1", "http://x/copy", b}, {"c2", a.PayloadURL, b}}
			for _, st := range steps {
				if err := s.Put(ctx, st.crawl, st.url, st.c); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range []struct {
				crawl, url string
				want       *warc.Capture
			}{{"c1", a.PayloadURL, &a}, {"c1", "http://x/copy", &b}, {"c2", a.PayloadURL, &b}, {"c2", "http://x/copy", nil}} {
				got, ok, err := s.Last(ctx, c.crawl, c.url)
				if err != nil || ok != (c.want != nil) || (ok && !got.Date.Equal(c.want.Date)) || (ok && got.Offset != c.want.Offset) {
					t.Errorf("Last(%s, %s) = %+v %v %v, want %+v", c.crawl, c.url, got, ok, err, c.want)
				}
			}
			// The digest's first capture stays the first.
			if got, ok, err := s.ByDigest(ctx, "c1", "sha1:AAAA"); err != nil || !ok || got.Offset != a.Offset {
				t.Errorf("ByDigest(c1) = %+v %v %v, want the first capture", got, ok, err)
			}
			if got, ok, _ := s.ByDigest(ctx, "c2", "sha1:AAAA"); !ok || got.Offset != b.Offset {
				t.Errorf("ByDigest(c2) = %+v %v: crawls must not share captures", got, ok)
			}
			n, err := s.Delete(ctx, "c1")
			if err != nil || n == 0 {
				t.Fatalf("Delete = %d, %v", n, err)
			}
			if _, ok, _ := s.Last(ctx, "c1", a.PayloadURL); ok {
				t.Error("a deleted crawl's capture is still there")
			}
			if _, ok, _ := s.ByDigest(ctx, "c1", "sha1:AAAA"); ok {
				t.Error("a deleted crawl's digest is still there")
			}
			if _, ok, _ := s.Last(ctx, "c2", a.PayloadURL); !ok {
				t.Error("deleting c1 removed c2's capture")
			}
		})
	}
}

// TestRedisBytesPerURL measures what a capture costs in Redis per URL
// (what `dedup-worker plan` adds per URL of an archiving crawl): 20,000
// typical captures, used_memory before and after.
func TestRedisBytesPerURL(t *testing.T) {
	ctx := t.Context()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	s := Redis{Client: rdb}
	used := func() int64 {
		n, err := usedMemory(ctx, rdb)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := used()
	const n = 20_000
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for i := range n {
		u := fmt.Sprintf("https://www.example.com/section-%d/articles/%d/some-title-of-an-article.html", i%50, i)
		c := warc.Capture{Date: at, Digest: fmt.Sprintf("sha1:%032d", i), ETag: fmt.Sprintf(`"%x-5f3a"`, i),
			LastModified: "Tue, 24 Nov 2026 10:00:00 GMT", PayloadURL: u, PayloadDate: at, Status: 200,
			File: "sieve-20261125120000000-00001-crawler-1-12345.warc.gz", Offset: int64(i) * 9000}
		if err := s.Put(ctx, "c1", u, c); err != nil {
			t.Fatal(err)
		}
	}
	per := float64(used()-before) / n
	t.Logf("captures in Redis: %.0f bytes per URL (last capture + first of its digest)", per)
	if per < 100 || per > float64(BytesPerURL)*1.25 {
		t.Errorf("%.0f bytes per URL; BytesPerURL (%d, what plan assumes) is off by more than 25%%", per, BytesPerURL)
	}
}

// usedMemory is Redis's used_memory.
func usedMemory(ctx context.Context, c redis.UniversalClient) (int64, error) {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("captures: no used_memory in INFO")
}
