package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/redistest"
)

// admittedIn counts the crawl's messages on the frontier.
func admittedIn(tb testing.TB, js jetstream.JetStream, topo frontier.Topology, crawl string) uint64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, topo.FrontierStream())
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(topo.WithDefaults().Prefix+".frontier."+crawl+".>"))
	if err != nil {
		tb.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

func publishIn(tb testing.TB, js jetstream.JetStream, topo frontier.Topology, crawl string, links ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A new page each time: the discovered stream drops a message it holds
	// already.
	page := fmt.Sprintf("https://site.example/%d", time.Now().UnixNano())
	d := frontier.Discovered{Crawl: crawl, URL: page, Depth: 1, Links: links}
	if err := topo.PublishDiscovered(ctx, js, d); err != nil {
		tb.Fatal(err)
	}
}

// TestCrawlFilters runs a Worker serving three crawls at once, each with
// its own filter from its stored settings, in memory (snapshot files),
// Redis and Redis Cluster: a URL is admitted once in each crawl; a crawl
// with a revisit window admits it again after the window, once; idle
// filters are closed (saved first) and reopened with what they held; the
// open filters and their memory are reported.
func TestCrawlFilters(t *testing.T) {
	nsrv := natstest.Start(t, natstest.Options{})
	js := nsrv.JetStream()
	for _, where := range []string{"memory", "redis", "cluster"} {
		t.Run(where, func(t *testing.T) {
			redisURL := ""
			switch where {
			case "redis":
				redisURL = redistest.Start(t, redistest.Options{}).URL()
			case "cluster":
				redisURL = strings.Join(redistest.StartCluster(t, 3).Addrs, ",")
			}
			cfg := testConfig(nsrv.URL(), redisURL)
			cfg.Frontier.Prefix = where
			cfg.Filter.Name = "seen-" + where
			// A URL admitted again must be published under the ID it had
			// before: after the frontier's duplicate window W, which a
			// revisit window must exceed.
			cfg.Frontier.DuplicateWindow = 6 * time.Second
			if where == "memory" {
				cfg.Filter.Snapshot = filepath.Join(t.TempDir(), "seen.bloom")
				cfg.Filter.SnapshotInterval = 20 * time.Millisecond
			}
			topo := cfg.Frontier.Topology()
			store := ensure(t, js, topo)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			def := frontier.CrawlSettings{ExpectURLs: 1000, FPP: 1e-6, Kind: "bloom"}
			for id, st := range map[string]frontier.CrawlSettings{
				"a":   {},
				"cuc": {Kind: "cuckoo", ExpectURLs: 500},
				"win": {RevisitAfter: 6 * time.Second, Granularity: 2},
			} {
				if _, err := store.Create(ctx, id, st, def); err != nil {
					t.Fatal(err)
				}
			}
			reg := prometheus.NewRegistry()
			w := &pipeline.Worker{Config: cfg, Registerer: reg, IdleFilter: 300 * time.Millisecond}
			stop := start(t, w)
			ids := []string{"a", "cuc", "win", "norecord"}
			for range 2 {
				for _, id := range ids {
					publishIn(t, js, topo, id, "/x", "/y")
				}
				waitFor(t, 20*time.Second, "drain", func() bool { return drained(js, topo) })
			}
			for _, id := range ids {
				if n := admittedIn(t, js, topo, id); n != 2 {
					t.Errorf("crawl %s: %d admitted, want 2", id, n)
				}
			}
			open := w.CrawlFilters(ctx)
			if len(open) != len(ids) || metric(t, reg, "sieve_filters_open") != float64(len(ids)) {
				t.Fatalf("open filters %+v, want %d", open, len(ids))
			}
			var memory uint64
			for _, f := range open {
				memory += f.Stats.MemoryBytes
				if f.Stats.Items != 2 || f.Stats.MemoryBytes == 0 {
					t.Errorf("crawl %s filter: %+v", f.Crawl, f.Stats)
				}
			}
			if open[1].Crawl != "cuc" || open[1].Stats.Kind != "cuckoo" || open[3].Settings.RevisitAfter != 6*time.Second {
				t.Errorf("crawl filters do not follow the crawls' settings: %+v", open)
			}
			if fs, err := w.FilterStats(ctx); err != nil || fs.Items != 8 || fs.MemoryBytes != memory {
				t.Errorf("FilterStats = %+v, %v; want 8 items in %d bytes", fs, err, memory)
			}

			// Idle filters close (saved first) and reopen as they were.
			waitFor(t, 20*time.Second, "idle filters closed", func() bool { return len(w.CrawlFilters(ctx)) == 0 })
			if metric(t, reg, "sieve_filters_open") != 0 {
				t.Error("sieve_filters_open after the idle filters closed")
			}
			for _, id := range []string{"a", "cuc", "norecord"} {
				publishIn(t, js, topo, id, "/x", "/y")
			}
			waitFor(t, 20*time.Second, "drain", func() bool { return drained(js, topo) })
			for _, id := range []string{"a", "cuc", "norecord"} {
				if n := admittedIn(t, js, topo, id); n != 2 {
					t.Errorf("crawl %s after reopening: %d admitted, want 2", id, n)
				}
			}

			// The window's URLs are new again after at most
			// D·(1+1/g) = 9 s; then they are duplicates again.
			waitFor(t, 30*time.Second, "the window's URLs admitted again", func() bool {
				publishIn(t, js, topo, "win", "/x", "/y")
				waitFor(t, 20*time.Second, "drain", func() bool { return drained(js, topo) })
				return admittedIn(t, js, topo, "win") >= 4
			})
			publishIn(t, js, topo, "win", "/x", "/y")
			waitFor(t, 20*time.Second, "drain", func() bool { return drained(js, topo) })
			if n := admittedIn(t, js, topo, "win"); n != 4 {
				t.Errorf("crawl win: %d admitted, want 4 (each URL once per window)", n)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if where == "memory" {
				for _, id := range ids {
					st := frontier.CrawlSettings{}
					if id == "cuc" {
						st.Kind = "cuckoo" // its file is named after its kind
					}
					if _, err := os.Stat(pipeline.CrawlFilter(cfg.Filter, id, st).Snapshot); err != nil {
						t.Errorf("crawl %s: no snapshot file: %v", id, err)
					}
				}
			}
		})
	}
}

// TestCrawlFiltersSharedFilter checks an upgrade from the filter every
// crawl shared: in memory the default crawl takes the shared snapshot over
// (what it held stays seen, the file is renamed to the crawl's), another
// crawl leaves it alone and starts empty; a shared filter in Redis is
// reported in the log, never read.
func TestCrawlFiltersSharedFilter(t *testing.T) {
	nsrv := natstest.Start(t, natstest.Options{})
	js := nsrv.JetStream()
	for _, tc := range []struct {
		where, crawl string
		admitted     uint64 // of /x (held by the shared filter) and /y
		taken        bool   // the shared snapshot renamed to the crawl's
	}{
		{"memory", pipeline.SharedCrawl, 1, true},
		{"memory", "other", 2, false},
		{"redis", pipeline.SharedCrawl, 2, false},
	} {
		t.Run(tc.where+"/"+tc.crawl, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cfg := testConfig(nsrv.URL(), "")
			cfg.Frontier.Prefix = "shared-" + tc.where + "-" + tc.crawl
			var rdb *redis.Client
			if tc.where == "redis" {
				srv := redistest.Start(t, redistest.Options{})
				cfg.Redis.URL = srv.URL()
				rdb = srv.Client()
			} else {
				cfg.Filter.Snapshot = filepath.Join(t.TempDir(), "seen.bloom")
			}
			canon, err := cfg.Normalize.Normalizer()
			if err != nil {
				t.Fatal(err)
			}
			var open redis.UniversalClient
			if rdb != nil {
				open = rdb
			}
			shared, err := pipeline.OpenFilter(ctx, cfg.Filter, open, canon.Version())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := shared.TestAndAdd(ctx, [][]byte{[]byte("https://site.example/x")}); err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(pipeline.SaveFilter(ctx, cfg.Filter, shared), shared.Close()); err != nil {
				t.Fatal(err)
			}

			topo := cfg.Frontier.Topology()
			ensure(t, js, topo)
			var log syncBuffer
			w := &pipeline.Worker{Config: cfg, Logger: slog.New(slog.NewTextHandler(&log, nil))}
			stop := start(t, w)
			publishIn(t, js, topo, tc.crawl, "/x", "/y")
			waitFor(t, 20*time.Second, "drain", func() bool { return drained(js, topo) })
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if n := admittedIn(t, js, topo, tc.crawl); n != tc.admitted {
				t.Errorf("%d admitted, want %d", n, tc.admitted)
			}
			if tc.where == "redis" {
				if !strings.Contains(log.String(), "shared by every crawl is not used") {
					t.Errorf("no word of the shared Redis filter in the log:\n%s", log.String())
				}
				return
			}
			own := pipeline.CrawlSnapshot(cfg.Filter.Snapshot, tc.crawl)
			_, sharedErr := os.Stat(cfg.Filter.Snapshot)
			_, ownErr := os.Stat(own)
			if taken := errors.Is(sharedErr, fs.ErrNotExist) && ownErr == nil; taken != tc.taken {
				t.Errorf("shared snapshot taken over = %v (shared: %v, own: %v), want %v", taken, sharedErr, ownErr, tc.taken)
			}
			if !tc.taken && !strings.Contains(log.String(), "shared by every crawl is not used") {
				t.Errorf("no word of the shared snapshot left alone in the log:\n%s", log.String())
			}
		})
	}
}

// TestWorkerParksUnusableCrawl runs a worker over two crawls whose messages
// share batches, one of them with a corrupt snapshot: the other crawl's URLs
// are all admitted meanwhile (one broken crawl does not stall the rest), the
// broken crawl's messages stay in the stream, unacknowledged and uncounted,
// and the worker reports it parked with the cause; once the file is removed
// its URLs are admitted at the next try, each page counted once.
func TestWorkerParksUnusableCrawl(t *testing.T) {
	nsrv := natstest.Start(t, natstest.Options{})
	js := nsrv.JetStream()
	dir := t.TempDir()
	cfg := testConfig(nsrv.URL(), "")
	cfg.Filter.Snapshot = filepath.Join(dir, "seen.bloom")
	cfg.Worker.ParkDelay = 300 * time.Millisecond
	corrupt := pipeline.CrawlSnapshot(cfg.Filter.Snapshot, "bad")
	if err := os.WriteFile(corrupt, []byte("SIEVEBF\nnot a snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	topo := cfg.Frontier.Topology()
	ensure(t, js, topo)
	reg := prometheus.NewRegistry()
	w := &pipeline.Worker{Config: cfg, Registerer: reg}
	// Publish before the worker runs, so that both crawls share batches.
	for i := range 10 {
		publishIn(t, js, topo, "good", fmt.Sprintf("/g%d", i))
		publishIn(t, js, topo, "bad", fmt.Sprintf("/b%d", i))
	}
	stop := start(t, w)

	waitFor(t, 20*time.Second, "the good crawl's URLs", func() bool { return admittedIn(t, js, topo, "good") == 10 })
	waitFor(t, 20*time.Second, "the bad crawl parked and the good crawl's pages counted", func() bool {
		st, _ := w.Status()
		return st.Parked["bad"].Messages >= 10 && st.Totals.Pages >= 10
	})
	st, _ := w.Status()
	if p := st.Parked["bad"]; !strings.Contains(p.Error, corrupt) || !strings.Contains(p.Error, "corrupt") {
		t.Errorf("parked crawl's error %q, want it to name the corrupt snapshot %s", p.Error, corrupt)
	}
	if n := admittedIn(t, js, topo, "bad"); n != 0 {
		t.Errorf("the broken crawl admitted %d URLs", n)
	}
	if drained(js, topo) {
		t.Error("the broken crawl's messages were acknowledged")
	}
	if st.Totals.Pages != 10 || st.Totals.Links != 10 {
		t.Errorf("counted %d pages and %d links while parked, want the good crawl's 10 and 10", st.Totals.Pages, st.Totals.Links)
	}
	if m := metric(t, reg, "sieve_dedup_parked_total"); m < 10 {
		t.Errorf("sieve_dedup_parked_total = %v, want ≥ 10", m)
	}
	if !st.Ready {
		t.Errorf("worker not ready while one crawl is parked: %+v", st.Dependencies)
	}

	if err := os.Remove(corrupt); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the repaired crawl's URLs", func() bool { return admittedIn(t, js, topo, "bad") == 10 })
	waitFor(t, 20*time.Second, "drain and count", func() bool {
		st, _ := w.Status()
		return drained(js, topo) && st.Totals.Pages >= 20
	})
	st, _ = w.Status()
	if len(st.Parked) != 0 || st.Totals.Pages != 20 || st.Totals.Admitted != 20 {
		t.Errorf("after repair: parked %v, pages %d, admitted %d; want none, 20, 20", st.Parked, st.Totals.Pages, st.Totals.Admitted)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// TestWorkerDropsDeletedCrawlFilter deletes a crawl while a worker has its
// filter open, as `crawler delete-crawl` does (filter keys or snapshot file,
// then the record), and creates it again under the same id: the worker
// drops the old filter at once — the URL it held is new to the new crawl —
// and a deleted in-memory filter's snapshot file does not come back. Before,
// the old filter stayed open until idle for IdleFilter (10 minutes).
func TestWorkerDropsDeletedCrawlFilter(t *testing.T) {
	nsrv := natstest.Start(t, natstest.Options{})
	js := nsrv.JetStream()
	for _, where := range []string{"memory", "redis"} {
		t.Run(where, func(t *testing.T) {
			var rdb redis.UniversalClient
			redisURL := ""
			if where == "redis" {
				srv := redistest.Start(t, redistest.Options{})
				redisURL, rdb = srv.URL(), srv.Client()
			}
			cfg := testConfig(nsrv.URL(), redisURL)
			cfg.Frontier.Prefix = "del" + where
			if where == "memory" {
				cfg.Filter.Snapshot = filepath.Join(t.TempDir(), "seen.bloom")
				cfg.Filter.SnapshotInterval = 20 * time.Millisecond
			}
			topo := cfg.Frontier.Topology()
			reg := ensure(t, js, topo)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			def := frontier.CrawlSettings{ExpectURLs: 1000, FPP: 1e-6, Kind: "bloom"}
			if _, err := reg.Create(ctx, "d", frontier.CrawlSettings{}, def); err != nil {
				t.Fatal(err)
			}
			w := &pipeline.Worker{Config: cfg}
			stop := start(t, w)
			status := func() frontier.Status { st, _ := w.Status(); return st }
			counted := func(pages int64) func() bool {
				return func() bool { return drained(js, topo) && status().Totals.Pages >= pages }
			}
			publishIn(t, js, topo, "d", "/x")
			waitFor(t, 20*time.Second, "drain", counted(1))
			if st := status(); st.Totals.Admitted != 1 {
				t.Fatalf("admitted %d, want 1", st.Totals.Admitted)
			}
			snap := pipeline.CrawlSnapshot(cfg.Filter.Snapshot, "d")
			if where == "memory" {
				waitFor(t, 10*time.Second, "the crawl's snapshot", func() bool { _, err := os.Stat(snap); return err == nil })
			}

			// The worker watches the registry (an ordered consumer on its
			// stream) before the crawl is deleted.
			waitFor(t, 10*time.Second, "the worker watching the crawl registry", func() bool {
				st, err := js.Stream(ctx, "KV_"+topo.CrawlsBucket())
				if err != nil {
					return false
				}
				info, err := st.Info(ctx)
				return err == nil && info.State.Consumers > 0
			})

			// Delete the crawl as delete-crawl does: its filter, then its record.
			store, err := crawls.Open(ctx, js, topo, crawls.Options{Filters: crawls.DedupFilters{Section: cfg.Filter, Redis: rdb}})
			if err != nil {
				t.Fatal(err)
			}
			if d, err := store.Delete(ctx, "d"); err != nil || d.Record == nil || (d.Filter.RedisKeys == 0 && !d.Filter.Removed) {
				t.Fatalf("delete crawl d: %+v, %v; want its record and filter removed", d, err)
			}
			waitFor(t, 10*time.Second, "the deleted crawl's filter dropped", func() bool {
				for _, f := range w.CrawlFilters(ctx) {
					if f.Crawl == "d" {
						return false
					}
				}
				return true
			})
			if where == "memory" {
				time.Sleep(10 * cfg.Filter.SnapshotInterval)
				if _, err := os.Stat(snap); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("the deleted crawl's snapshot came back: %v", err)
				}
			}

			// The same id again: a new crawl, whose filter has never seen /x.
			if _, err := reg.Create(ctx, "d", frontier.CrawlSettings{}, def); err != nil {
				t.Fatal(err)
			}
			publishIn(t, js, topo, "d", "/x")
			waitFor(t, 20*time.Second, "drain", counted(2))
			// Admitted, not Republished: the frontier's duplicate window
			// still holds the deleted crawl's ID for /x, and taking it
			// for the new crawl's would mark /x without queueing it.
			if st := status(); st.Totals.Admitted != 2 || st.Totals.Republished != 0 {
				t.Errorf("after the crawl was created again, /x was admitted %d times and republished %d, want 2 and 0 (it is new to the new crawl); duplicates %d",
					st.Totals.Admitted, st.Totals.Republished, st.Totals.Duplicates)
			}
			if err := stop(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestCrawlFilterSnapshotName pins the file of a crawl's in-memory filter:
// beside the worker's, named for the crawl and, when the worker's is named
// after its kind (the embedded mode's seen.bloom), for the crawl's own kind —
// a cuckoo crawl kept seen.<crawl>.cuckoo, and a later run with the default
// filter.kind looked for seen.<crawl>.bloom, found nothing and refetched the
// crawl.
func TestCrawlFilterSnapshotName(t *testing.T) {
	for _, tt := range []struct {
		snapshot, kind, crawlKind, want string
	}{
		{"data/seen.bloom", "bloom", "", "data/seen.c.bloom"},
		{"data/seen.bloom", "bloom", "bloom", "data/seen.c.bloom"},
		{"data/seen.bloom", "bloom", "cuckoo", "data/seen.c.cuckoo"},
		{"data/seen.cuckoo", "cuckoo", "bloom", "data/seen.c.bloom"},
		{"data/seen.bloom", "cuckoo", "cuckoo", "data/seen.c.cuckoo"}, // --filter-kind cuckoo, filter.snapshot seen.bloom
		{"/var/lib/sieve/filter.snap", "bloom", "cuckoo", "/var/lib/sieve/filter.c.snap"},
		{"", "bloom", "cuckoo", ""},
	} {
		f := pipeline.CrawlFilter(config.Filter{Kind: tt.kind, Name: "sieve:seen", Snapshot: tt.snapshot}, "c", frontier.CrawlSettings{Kind: tt.crawlKind})
		if f.Snapshot != tt.want {
			t.Errorf("snapshot %q (kind %s), crawl kind %q: %q, want %q", tt.snapshot, tt.kind, tt.crawlKind, f.Snapshot, tt.want)
		}
		if f.Name != "sieve:seen:c" {
			t.Errorf("name %q", f.Name)
		}
	}
}

// TestCrawlSnapshotFormerName starts a worker whose data holds a cuckoo
// crawl's snapshot under the name it had before files were named after the
// crawl's kind (seen.<crawl>.bloom, from a worker whose filter.kind is
// bloom): the worker takes the file over under its kind's name and the URL
// it holds is not admitted again.
func TestCrawlSnapshotFormerName(t *testing.T) {
	nsrv := natstest.Start(t, natstest.Options{})
	js := nsrv.JetStream()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := testConfig(nsrv.URL(), "")
	cfg.Filter.Snapshot = filepath.Join(t.TempDir(), "seen.bloom")
	topo := cfg.Frontier.Topology()
	reg := ensure(t, js, topo)
	if _, err := reg.Create(ctx, "cuc", frontier.CrawlSettings{Kind: "cuckoo", ExpectURLs: 1000}, frontier.CrawlSettings{FPP: 1e-6}); err != nil {
		t.Fatal(err)
	}
	c, err := dedup.NewCuckoo(dedup.CuckooOptions{Growth: dedup.Growth{InitialCapacity: 1000, TargetFPP: 1e-6}, Policy: normalize.PolicyVersion})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TestAndAdd(ctx, [][]byte{[]byte("https://site.example/x")}); err != nil {
		t.Fatal(err)
	}
	former := pipeline.CrawlSnapshot(cfg.Filter.Snapshot, "cuc")
	if err := c.Save(ctx, former); err != nil {
		t.Fatal(err)
	}
	w := &pipeline.Worker{Config: cfg}
	stop := start(t, w)
	publishIn(t, js, topo, "cuc", "/x", "/y")
	waitFor(t, 20*time.Second, "drain", func() bool {
		st, _ := w.Status()
		return drained(js, topo) && st.Totals.Pages >= 1
	})
	if n := admittedIn(t, js, topo, "cuc"); n != 1 {
		t.Errorf("admitted %d URLs, want 1 (/x is in the crawl's snapshot)", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	now := pipeline.CrawlFilter(cfg.Filter, "cuc", frontier.CrawlSettings{Kind: "cuckoo"}).Snapshot
	if _, err := os.Stat(now); err != nil || filepath.Base(now) != "seen.cuc.cuckoo" {
		t.Errorf("the crawl's snapshot %s: %v", now, err)
	}
	if _, err := os.Stat(former); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the former name %s is still there: %v", former, err)
	}
}
