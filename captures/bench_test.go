package captures

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/internal/heaptest"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/redistest"
	"github.com/sievecrawl/sieve/urlstore"
	"github.com/sievecrawl/sieve/warc"
)

var (
	costFlag  = flag.Bool("sieve.capturesbench", false, "run the capture cost table (TestCaptureCost)")
	costSizes = flag.String("sieve.capturesbench.sizes", "1000000", "comma-separated numbers of captures")
	costIdle  = flag.Duration("sieve.capturesbench.idle", 15*time.Second, "idle time before the steady RSS is read")
	costRedis = flag.Int("sieve.capturesbench.redis", 200_000, "captures of the Redis baseline (0: none)")
)

// benchCapture is capture i: a URL of one of 20,000 hosts, its own payload.
func benchCapture(i int) (string, warc.Capture) {
	u := fmt.Sprintf("https://www.site%d.example/section-%d/articles/%d/some-title-of-an-article.html", i%20_000, i%50, i)
	c := warc.Capture{Date: at, Digest: fmt.Sprintf("sha1:%032d", i), ETag: fmt.Sprintf(`"%x-5f3a"`, i),
		LastModified: "Tue, 24 Nov 2026 10:00:00 GMT", PayloadURL: u, PayloadDate: at, Status: 200,
		File: fmt.Sprintf("sieve-20261125120000000-%05d-crawler-1-12345.warc.gz", i/20_000), Offset: int64(i%20_000) * 9000}
	return u, c
}

// rssAnon is the process's anonymous resident memory (its heap, stacks,
// Pebble's cache and the embedded NATS server's), in bytes.
func rssAnon(tb testing.TB) int64 {
	anon, _, err := heaptest.RSS()
	if err != nil {
		tb.Fatal(err)
	}
	return anon
}

// TestCaptureCost measures what the archive's captures cost per URL on
// disk (Disk, over an embedded NATS server in this process, as a crawler
// in the embedded mode runs) against Redis (the JSON hashes deployments
// kept them in), in the same run: anonymous RSS growth of the process
// (the store, its NATS server, the Go heap) per URL, Pebble's files and
// the log stream's bytes per URL, and at that size Puts per second from
// 32 goroutines, random lookups per second and the time to close and open
// the store again.
func TestCaptureCost(t *testing.T) {
	if !*costFlag {
		t.Skip("benchmark table; run with -sieve.capturesbench")
	}
	var redisPer float64
	if n := *costRedis; n > 0 {
		rdb := redistest.Start(t, redistest.Options{}).Client()
		before, err := usedMemory(t.Context(), rdb)
		if err != nil {
			t.Fatal(err)
		}
		s := Redis{Client: rdb}
		start := time.Now()
		for i := range n {
			u, c := benchCapture(i)
			if err := s.Put(t.Context(), "c1", u, c); err != nil {
				t.Fatal(err)
			}
		}
		el := time.Since(start)
		after, _ := usedMemory(t.Context(), rdb)
		redisPer = float64(after-before) / float64(n)
		t.Logf("baseline, Redis JSON hashes, %d captures: %.0f puts/s (one client), %.0f B of RAM per URL", n, float64(n)/el.Seconds(), redisPer)
	}
	for _, f := range strings.Split(*costSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("bad size %q", f)
		}
		costOf(t, n, redisPer)
	}
}

// costPuts is how many Puts measure the put rate at each size.
const costPuts = 50_000

// costOf fills a store with n captures, as a crawl's history (through the
// log, 256 per entry, as migrate-captures writes them, which the store's
// follower applies), measures what they cost at rest, then the rate of
// costPuts further Puts from 32 goroutines at that size, lookups, and a
// close and reopen.
func costOf(t *testing.T, n int, redisPer float64) {
	srv := natstest.Start(t, natstest.Options{})
	js := srv.JetStream()
	log, err := frontier.OpenStoreLog(t.Context(), js, frontier.Topology{}, StoreName)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "captures")
	before := rssAnon(t)
	d, err := OpenDisk(t.Context(), dir, log, urlstore.Options{}, false)
	if err != nil {
		t.Fatal(err)
	}
	fstart := time.Now()
	m := &migrator{log: log, batches: map[int]*urlstore.Batch{}}
	for i := range n {
		u, c := benchCapture(i)
		if err := m.add(t.Context(), urlKey("c1", u), encodeCapture(c, u), false); err != nil {
			t.Fatal(err)
		}
		if err := m.add(t.Context(), digestKey("c1", c.Digest), encodeCapture(c, ""), true); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.flushAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	info := storeStreamInfo(t, js)
	for d.Stats().Followed < info.State.LastSeq {
		time.Sleep(10 * time.Millisecond)
	}
	fill := time.Since(fstart)
	if err := d.s.Flush(); err != nil {
		t.Fatal(err)
	}
	ram := rssAnon(t) - before
	// NATS keeps the blocks it wrote last in memory until they have been
	// idle a while (its cache expiry): the steady figure is after that.
	time.Sleep(*costIdle)
	idle := rssAnon(t) - before
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	pm := d.s.Metrics()
	t.Logf("idle: heap in use %d MB, pebble memtables %d MB, block cache %d MB", ms.HeapInuse>>20, pm.MemTable.Size>>20, pm.BlockCache.Size>>20)
	disk := d.Stats().DiskBytes
	natsDisk := dirBytes(t, srv.StoreDir)
	info = storeStreamInfo(t, js)

	var next atomic.Int64
	var wg sync.WaitGroup
	pstart := time.Now()
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= costPuts || t.Failed() {
					return
				}
				u, c := benchCapture(n + i)
				if err := d.Put(t.Context(), "c1", u, c); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	puts := time.Since(pstart)

	reads := 100_000
	rstart := time.Now()
	for range reads {
		i := rand.IntN(n)
		u, want := benchCapture(i)
		got, ok, err := d.Last(t.Context(), "c1", u)
		if err != nil || !ok || got.Offset != want.Offset {
			t.Fatalf("Last(%s) = %+v %v %v", u, got, ok, err)
		}
	}
	rel := time.Since(rstart)
	cstart := time.Now()
	d.Close() // waits for the follower to pass this store's own entries
	closing := time.Since(cstart)
	ostart := time.Now()
	d, err = OpenDisk(t.Context(), dir, log, urlstore.Options{}, false)
	if err != nil {
		t.Fatal(err)
	}
	reopen := time.Since(ostart)
	d.Close()
	per, idlePer := float64(ram)/float64(n), float64(idle)/float64(n)
	ratio := "-"
	if redisPer > 0 {
		ratio = fmt.Sprintf("%.3f", idlePer/redisPer)
	}
	t.Logf("disk, %d captures (filled in %v): RSS %.1f B/URL after filling, %.1f B/URL idle (%s of Redis's); Pebble %.1f B/URL; log %.1f B/URL in messages, %.1f B/URL on disk (%d entries); at that size %.0f puts/s (32 goroutines), %.0f lookups/s, closed in %v, reopened in %v",
		n, fill.Round(time.Second), per, idlePer, ratio, float64(disk)/float64(n), float64(info.State.Bytes)/float64(n), float64(natsDisk)/float64(n), info.State.Msgs,
		float64(costPuts)/puts.Seconds(), float64(reads)/rel.Seconds(), closing.Round(time.Millisecond), reopen.Round(time.Millisecond))
}

// dirBytes is the size of the files under dir.
func dirBytes(tb testing.TB, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		fi, err := e.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
