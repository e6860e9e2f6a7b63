package crawls_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/redistest"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/watch"
)

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// startWorker runs a dedup worker from cfg until the test ends.
func startWorker(tb testing.TB, cfg config.Config) *pipeline.Worker {
	tb.Helper()
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	w := &pipeline.Worker{Config: cfg, Logger: slog.New(slog.DiscardHandler)}
	if err := w.Open(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := errors.Join(<-done, w.Close()); err != nil {
			tb.Errorf("dedup worker: %v", err)
		}
	})
	return w
}

// TestStoreLifecycle runs a crawl's lifecycle through a Store on real NATS
// with a real dedup worker, its filters in Redis or in snapshot files (an
// embedded run's data dir, with the report a run leaves there): two crawls
// created and seeded are listed and described with their queued URLs,
// filters and counts; deleting one removes its queued URLs, filter, counts
// and record, and says so, leaving the other as it was; deleting it again
// finds no record; and its id names a new crawl at once, which the worker
// gives a new, empty filter.
func TestStoreLifecycle(t *testing.T) {
	ns := natstest.Start(t, natstest.Options{})
	js := ns.JetStream()
	for _, where := range []string{"redis", "snapshot"} {
		t.Run(where, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			dir := t.TempDir()
			cfg := config.Default()
			cfg.NATS.URL = ns.URL()
			cfg.Frontier.Prefix = where // its own streams on the shared server
			cfg.Worker.FetchWait = 20 * time.Millisecond
			cfg.Worker.StatsInterval = 20 * time.Millisecond
			cfg.HTTP.Addr = ""
			var (
				rdb    redis.UniversalClient
				counts crawls.Counts
			)
			report := crawls.Report{Path: filepath.Join(dir, watch.ReportFile)}
			if where == "redis" {
				srv := redistest.Start(t, redistest.Options{})
				cfg.Redis.URL, rdb = srv.URL(), srv.Client()
				counts = crawls.RedisCounts{Stats: stats.NewRedis(rdb, cfg.Frontier.Prefix)}
			} else {
				cfg.Filter.Snapshot = filepath.Join(dir, "seen.bloom")
				cfg.Filter.SnapshotInterval = 20 * time.Millisecond
				counts = report
			}
			canon, err := cfg.Normalize.Normalizer()
			if err != nil {
				t.Fatal(err)
			}
			topo := cfg.Frontier.Topology()
			store, err := crawls.Open(ctx, js, topo, crawls.Options{
				Filters: crawls.DedupFilters{Section: cfg.Filter, Redis: rdb, Policy: canon.Version()},
				Counts:  counts,
			})
			if err != nil {
				t.Fatal(err)
			}
			def := frontier.CrawlSettings{ExpectURLs: 1000, FPP: 0.001, Kind: "bloom", Scope: "host"}
			seeds := map[string][]string{
				"a": {"https://a.example/", "https://a.example/1", "https://a.example/2"},
				"b": {"https://b.example/", "https://b.example/1"},
			}
			for _, id := range []string{"a", "b"} {
				if _, err := store.SeedWith(ctx, id, seeds[id], frontier.CrawlSettings{ExpectURLs: 500}, def); err != nil {
					t.Fatal(err)
				}
			}
			if d, err := store.Describe(ctx, "a"); err != nil || d.Pending != 1 || d.Queued != 0 || d.Filter != nil {
				t.Fatalf("crawl a before a worker: %+v, %v; want its seed message pending, no filter", d, err)
			}
			w := startWorker(t, cfg)

			// Each crawl's seeds on the frontier, in its filter, counted.
			admitted := func(id string, n int) func() bool {
				return func() bool {
					d, err := store.Describe(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					if where == "snapshot" {
						// What an embedded run leaves when it ends.
						snap, err := w.StatsSnapshot(ctx, 0)
						if err != nil {
							t.Fatal(err)
						}
						b, _ := json.Marshal(watch.Report{Role: "crawler", At: time.Now(), Shared: &snap})
						if err := os.WriteFile(report.Path, b, 0o644); err != nil {
							t.Fatal(err)
						}
					}
					return d.Pending == 0 && d.Queued == uint64(n) && d.Filter != nil && d.Filter.Items == uint64(n) &&
						d.Counts != nil && d.Counts.Admitted == int64(n)
				}
			}
			for id, s := range seeds {
				waitFor(t, 20*time.Second, "crawl "+id+"'s seeds admitted", admitted(id, len(s)))
			}
			list, err := store.List(ctx)
			if err != nil || len(list) != 2 || list[0].ID != "a" || list[1].ID != "b" ||
				list[0].Settings.ExpectURLs != 500 || list[0].Filter.TargetFPP != 0.001 || list[0].FilterError != "" {
				t.Fatalf("List = %+v, %v; want a and b with their settings and filters", list, err)
			}

			d, err := store.Delete(ctx, "a")
			switch {
			case err != nil:
				t.Fatalf("Delete(a): %v", err)
			case d.Record == nil || len(d.Record.Seeds) != 3 || d.URLs() != 3 || d.Queues.Discovered != 0 ||
				d.Queues.FrontierSubject != topo.CrawlFrontierFilter("a"):
				t.Errorf("Delete(a) = %+v; want its record and 3 URLs purged from %s", d, topo.CrawlFrontierFilter("a"))
			case where == "redis" && (d.Filter.Name != cfg.Filter.Name+":a" || d.Filter.RedisKeys == 0 || d.Counts == nil || d.Counts.Entries == 0):
				t.Errorf("Delete(a) = %+v; want its filter's keys and counts deleted", d)
			case where == "snapshot" && (!d.Filter.Removed || d.Filter.File != pipeline.CrawlSnapshot(cfg.Filter.Snapshot, "a") ||
				d.Counts == nil || d.Counts.Entries == 0 || d.Counts.Report != report.Path):
				t.Errorf("Delete(a) = %+v; want its snapshot removed and its counts taken from the report", d)
			}
			if _, err := store.Describe(ctx, "a"); !errors.Is(err, crawls.ErrNotFound) {
				t.Errorf("Describe of a deleted crawl: %v, want ErrNotFound", err)
			}
			if c, err := counts.Counts(ctx); err != nil || c["a"] != (stats.CrawlCounts{}) || c["b"].Admitted != 2 {
				t.Errorf("counts after deleting a: %+v, %v; want b's only", c, err)
			}
			if rdb != nil {
				if keys, _ := rdb.Keys(ctx, "*seen:a*").Result(); len(keys) != 0 {
					t.Errorf("crawl a's filter keys left: %q", keys)
				}
			}
			if list, err := store.List(ctx); err != nil || len(list) != 1 || list[0].ID != "b" || list[0].Queued != 2 || list[0].Filter.Items != 2 {
				t.Errorf("List after deleting a = %+v, %v; want b as it was", list, err)
			}
			if d, err := store.Delete(ctx, "a"); err != nil || d.Record != nil || d.URLs() != 0 {
				t.Errorf("Delete of a deleted crawl = %+v, %v; want no record, nothing purged", d, err)
			}

			// The id at once: a new crawl, new settings, a new filter. The
			// worker drops the old one when it sees the record go.
			waitFor(t, 10*time.Second, "the worker dropping crawl a's filter", func() bool {
				for _, f := range w.CrawlFilters(ctx) {
					if f.Crawl == "a" {
						return false
					}
				}
				return true
			})
			// The same seeds: the new crawl crawls them again, though the
			// streams' duplicate windows still hold the old crawl's IDs.
			rec, err := store.SeedWith(ctx, "a", seeds["a"], frontier.CrawlSettings{ExpectURLs: 900}, def)
			if err != nil || rec.Settings.ExpectURLs != 900 || rec.Incarnation == "" || rec.Incarnation == d.Record.Incarnation {
				t.Fatalf("crawl a created again: %+v, %v; want new settings and a new incarnation (was %q)", rec, err, d.Record.Incarnation)
			}
			waitFor(t, 20*time.Second, "the new crawl a's seeds admitted", func() bool {
				d, err := store.Describe(ctx, "a")
				return err == nil && d.Pending == 0 && d.Queued == 3 && d.Filter != nil && d.Filter.Items == 3
			})
			if st, _ := w.Status(); st.Totals.Republished != 0 {
				t.Errorf("%d URLs republished: the new crawl's seeds were taken for the deleted crawl's", st.Totals.Republished)
			}
		})
	}
}

// TestCreateConcurrent: creators racing on the real registry
// (compare-and-set in the crawls bucket) agree on one record.
func TestCreateConcurrent(t *testing.T) {
	ns := natstest.Start(t, natstest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	store, err := crawls.Open(ctx, ns.JetStream(), frontier.Topology{}, crawls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	def := frontier.CrawlSettings{ExpectURLs: 10_000_000, FPP: 0.001, Kind: "bloom", Scope: "host", Granularity: 4}
	given := frontier.CrawlSettings{ExpectURLs: 5000, RevisitAfter: time.Hour}
	want := frontier.CrawlSettings{ExpectURLs: 5000, FPP: 0.001, RevisitAfter: time.Hour, Granularity: 4, Kind: "bloom", Scope: "host"}
	var wg sync.WaitGroup
	recs := make([]frontier.CrawlRecord, 8)
	errs := make([]error, len(recs))
	for i := range recs {
		wg.Go(func() { recs[i], errs[i] = store.Create(ctx, "a", given, def) })
	}
	wg.Wait()
	for i := range recs {
		if errs[i] != nil || recs[i].Settings != want || !recs[i].Created.Equal(recs[0].Created) || recs[i].Created.IsZero() ||
			recs[i].Incarnation != recs[0].Incarnation || recs[i].Incarnation == "" {
			t.Errorf("creator %d: %+v, %v; want settings %+v created %v", i, recs[i], errs[i], want, recs[0].Created)
		}
	}
}

// TestIDs lists the recorded crawls without creating the bucket: a page
// that polls before the first crawl finds none and leaves no bucket behind.
func TestIDs(t *testing.T) {
	ns := natstest.Start(t, natstest.Options{})
	js := ns.JetStream()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	topo := frontier.Topology{}
	if ids, err := crawls.IDs(ctx, js, topo); err != nil || len(ids) != 0 {
		t.Fatalf("IDs before any crawl = %q, %v; want none", ids, err)
	}
	if _, err := js.KeyValue(ctx, topo.WithDefaults().CrawlsBucket()); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("the crawls bucket after IDs: %v, want none created", err)
	}
	store, err := crawls.Open(ctx, js, topo, crawls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"b", "a"} {
		if _, err := store.Create(ctx, id, frontier.CrawlSettings{}, frontier.CrawlSettings{Kind: "bloom"}); err != nil {
			t.Fatal(err)
		}
	}
	if ids, err := crawls.IDs(ctx, js, topo); err != nil || !slices.Equal(ids, []string{"a", "b"}) {
		t.Errorf("IDs = %q, %v; want a, b", ids, err)
	}
}
