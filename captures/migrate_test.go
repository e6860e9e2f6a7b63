package captures

import (
	"reflect"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/redistest"
	"github.com/sievecrawl/sieve/urlstore"
	"github.com/sievecrawl/sieve/warc"
)

// TestMigrate: captures kept by earlier versions, in Redis and in the
// embedded bucket, read the same from the disk store's log after the
// migration, run twice (the second changes nothing a reader sees), with
// more than one entry's worth per partition.
func TestMigrate(t *testing.T) {
	ctx := t.Context()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	srv := natstest.Start(t, natstest.Options{})
	kv, err := OpenKV(ctx, srv.JetStream(), frontier.Topology{})
	if err != nil {
		t.Fatal(err)
	}
	type put struct {
		crawl, url string
		c          warc.Capture
	}
	var puts []put
	for i := range 600 {
		u := "https://h" + string(rune('a'+i%3)) + ".example/p" + time.Duration(i).String()
		c := typical()
		c.PayloadURL, c.Offset, c.Digest = u, int64(i), "sha1:"+enc.EncodeToString([]byte(time.Duration(i%500).String() + "xxxxxxxxxxxxxxxxxxxx")[:20])
		puts = append(puts, put{[]string{"c1", "c2"}[i%2], u, c})
	}
	elsewhere := typical() // a revisit: its payload is another URL's
	elsewhere.PayloadURL = "https://ha.example/original"
	puts = append(puts, put{"c1", "https://ha.example/copy", elsewhere})
	for name, src := range map[string]interface {
		warc.Captures
	}{"redis": Redis{Client: rdb}, "kv": kv} {
		t.Run(name, func(t *testing.T) {
			for _, p := range puts {
				if err := src.Put(ctx, p.crawl, p.url, p.c); err != nil {
					t.Fatal(err)
				}
			}
			log := &urlstore.MemLog{}
			var moved Moved
			for range 2 {
				switch s := src.(type) {
				case Redis:
					moved, err = MigrateRedis(ctx, s, log)
				case *KV:
					moved, err = MigrateKV(ctx, s, log)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%+v in %d log entries", moved, log.Len())
			want := Moved{Captures: len(puts), Digests: 501}
			if name == "kv" {
				want = Moved{Captures: len(puts) - 1, Digests: 501, Skipped: 1}
			}
			if moved != want {
				t.Errorf("moved %+v, want %+v", moved, want)
			}
			if log.Len() >= 2*len(puts) {
				t.Errorf("%d log entries for %d captures: not grouped", log.Len(), len(puts))
			}
			dst := Unindexed{Log: log}
			for _, p := range puts {
				want, wantOK, _ := src.Last(ctx, p.crawl, p.url)
				got, ok, err := dst.Last(ctx, p.crawl, p.url)
				if name == "kv" && p.c.PayloadURL != p.url {
					wantOK = false // skipped: fetched in full next time
				}
				if err != nil || ok != wantOK || (ok && !reflect.DeepEqual(got, want)) {
					t.Errorf("Last(%s, %s) = %+v %v %v, want %+v %v", p.crawl, p.url, got, ok, err, want, wantOK)
				}
				wantD, _, _ := src.ByDigest(ctx, p.crawl, p.c.Digest)
				gotD, ok, err := dst.ByDigest(ctx, p.crawl, p.c.Digest)
				if err != nil || !ok || !reflect.DeepEqual(gotD, wantD) {
					t.Errorf("ByDigest(%s, %s) = %+v %v %v, want %+v", p.crawl, p.c.Digest, gotD, ok, err, wantD)
				}
			}
		})
	}
}
