package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/redistest"
	"github.com/sievecrawl/sieve/testsite"
)

// crawlSnapshot is the snapshot file of crawl "default"'s filter in an
// embedded run's data dir.
func crawlSnapshot(dir, kind string) string {
	return pipeline.CrawlSnapshot(filepath.Join(dir, "seen."+kind), "default")
}

// redisKeys lists the keys matching pattern.
func redisKeys(tb testing.TB, rdb *redis.Client, pattern string) []string {
	tb.Helper()
	keys, err := rdb.Keys(context.Background(), pattern).Result()
	if err != nil {
		tb.Fatal(err)
	}
	return keys
}

// TestCrawlLifecycle runs the crawl lifecycle with real processes (NATS,
// Redis, a dedup worker, crawlers): a crawl created with settings, which a
// second seeder cannot change; the same site seeded into another crawl
// after the first fetched it is fetched again, once; crawls lists both;
// delete-crawl removes a crawl's queues, filter and record and says so,
// leaving the other crawl's.
func TestCrawlLifecycle(t *testing.T) {
	bin := crawlerBinary(t)
	site := startSite(t, testsite.Options{Pages: 40, Latency: time.Millisecond})
	d := startDeployment(t, 1, 1)
	rdb := d.redis.Client()
	cli := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(cleanEnv(), d.env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	crawlAll := func() {
		t.Helper()
		p := startProc(t, "crawler", bin, append([]string{"run", "--json", "--idle-exit", "2s"}, testRunFlags(8)...), d.env)
		p.wait(t, 90*time.Second)
	}

	out, err := cli("seed", "--crawl-id", "a", "--expect-urls", "5000", "--fpp", "0.0001", site.URL)
	if err != nil || !strings.Contains(out, "expect_urls 5000, fpp 0.0001, revisit_after never, kind bloom, scope host") {
		t.Fatalf("crawler seed a: %v\n%s", err, out)
	}
	crawlAll()
	pages, _ := siteRequests(site)
	if pages == 0 {
		t.Fatal("crawl a fetched nothing")
	}
	if keys := redisKeys(t, rdb, "sieve:seen:a:*"); len(keys) == 0 {
		t.Fatal("crawl a has no filter of its own in Redis")
	}

	// Crawl a again: nothing new. The same site as crawl b: all of it
	// again, once.
	for _, args := range [][]string{
		{"seed", "--crawl-id", "a", site.URL},
		{"seed", "--crawl-id", "b", "--revisit-after", "1h", site.URL},
	} {
		if out, err := cli(args...); err != nil {
			t.Fatalf("crawler %q: %v\n%s", args, err, out)
		}
	}
	crawlAll()
	fetches := site.Fetches()
	for _, path := range site.Plan(8).Once {
		if n := fetches[path]; n != 2 {
			t.Errorf("%s fetched %d times, want 2 (once by crawl a, once by crawl b)", path, n)
		}
	}

	// A crawl's settings are fixed.
	out, err = cli("seed", "--crawl-id", "a", "--expect-urls", "6000", site.URL)
	if err == nil || !strings.Contains(out, "expect-urls 6000 given, but the crawl was created with expect-urls 5000") {
		t.Errorf("seeding a with other settings: %v\n%s", err, out)
	}
	out, err = cli("seed", "--crawl-id", "c", "--revisit-after", "1s", site.URL)
	if err == nil || !strings.Contains(out, "shorter than frontier.duplicate_window") {
		t.Errorf("a revisit window shorter than the duplicate window: %v\n%s", err, out)
	}

	// Crawl c is seeded but not crawled: its seed waits on the frontier.
	if out, err := cli("seed", "--crawl-id", "c", site.URL+"never-linked"); err != nil {
		t.Fatalf("crawler seed c: %v\n%s", err, out)
	}
	var rows []crawls.Crawl
	waitFor(t, 30*time.Second, "crawl c's seed on the frontier", func() bool {
		out, err := cli("crawls", "--json")
		rows = nil
		if err != nil || json.Unmarshal([]byte(out), &rows) != nil {
			t.Fatalf("crawler crawls --json: %v\n%s", err, out)
		}
		return len(rows) == 3 && rows[2].Queued == 1
	})
	if rows[0].ID != "a" || rows[0].Settings.ExpectURLs != 5000 || rows[0].Settings.FPP != 0.0001 || rows[0].Queued != 0 ||
		rows[1].ID != "b" || rows[1].Settings.RevisitAfter != time.Hour || rows[1].Settings.Granularity != dedup.DefaultWindowGranularity ||
		rows[2].Settings.ExpectURLs != 100000 || len(rows[2].Seeds) != 1 ||
		rows[0].Counts == nil || rows[0].Counts.Admitted == 0 || rows[1].Counts == nil || rows[1].Counts.Admitted != rows[0].Counts.Admitted ||
		rows[0].Filter == nil || rows[0].Filter.Items != uint64(rows[0].Counts.Admitted) || rows[0].Filter.TargetFPP != 0.0001 {
		t.Errorf("crawls: %+v", rows)
	}
	if out, err := cli("crawls"); err != nil || !strings.Contains(out, "1h0m0s (g=4)") || !strings.Contains(out, "CRAWL") {
		t.Errorf("crawler crawls: %v\n%s", err, out)
	}

	out, err = cli("delete-crawl", "c", "a")
	if err != nil {
		t.Fatalf("crawler delete-crawl: %v\n%s", err, out)
	}
	for _, want := range []string{
		"crawl c:\n  frontier: 1 messages purged (sieve.frontier.c.>)",
		"crawl a:\n  frontier: 0 messages purged",
		`Redis keys of "sieve:seen:a" deleted`,
		"record: removed (1 seeds",
		"per-crawl counts deleted (the totals keep them)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("delete-crawl output lacks %q:\n%s", want, out)
		}
	}
	if keys := redisKeys(t, rdb, "sieve:seen:a:*"); len(keys) != 0 {
		t.Errorf("crawl a's filter keys left: %q", keys)
	}
	if keys := redisKeys(t, rdb, "{sieve:seen:a:*"); len(keys) != 0 {
		t.Errorf("crawl a's filter shards left: %q", keys)
	}
	if keys := redisKeys(t, rdb, "sieve:seen:b:*"); len(keys) == 0 {
		t.Error("crawl b's filter went with a's")
	}
	out, err = cli("crawls", "--json")
	rows = nil
	if err != nil || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].ID != "b" {
		t.Errorf("crawls after deleting a and c: %v\n%s", err, out)
	}
	if out, err := cli("delete-crawl"); err == nil || !strings.Contains(out, "give the id") {
		t.Errorf("delete-crawl without an id: %v\n%s", err, out)
	}
	d.stop(t)
}

// TestDeleteRedisFilter deletes a Bloom filter and a revisit window, in
// single Redis and in a Redis Cluster, leaving a filter whose name extends
// theirs.
func TestDeleteRedisFilter(t *testing.T) {
	for _, where := range []string{"single", "cluster"} {
		t.Run(where, func(t *testing.T) {
			var rdb redis.UniversalClient
			if where == "single" {
				rdb = redistest.Start(t, redistest.Options{}).Client()
			} else {
				rdb = redistest.StartCluster(t, 3).Client()
			}
			ctx := context.Background()
			keys := [][]byte{[]byte("https://a.example/"), []byte("https://b.example/")}
			for _, name := range []string{"s:seen:a", "s:seen:ab"} {
				f, err := dedup.OpenRedisBloom(ctx, rdb, name, dedup.RedisBloomOptions{InitialCapacity: 1000, Shards: 4})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.TestAndAdd(ctx, keys); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			w, err := dedup.OpenRedisBloomWindow(ctx, rdb, "s:seen:w", dedup.WindowOptions{After: time.Hour}, dedup.RedisBloomOptions{InitialCapacity: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.TestAndAdd(ctx, keys); err != nil {
				t.Fatal(err)
			}
			w.Close()
			for _, name := range []string{"s:seen:a", "s:seen:w"} {
				n, err := dedup.DeleteRedis(ctx, rdb, name)
				if err != nil || n < 2 {
					t.Errorf("delete %s: %d keys, %v", name, n, err)
				}
				if n, err := dedup.DeleteRedis(ctx, rdb, name); err != nil || n != 0 {
					t.Errorf("delete %s again: %d keys, %v; want none", name, n, err)
				}
			}
			// The other filter is whole.
			f, err := dedup.OpenRedisBloom(ctx, rdb, "s:seen:ab", dedup.RedisBloomOptions{InitialCapacity: 1000, Shards: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if seen, err := f.Contains(ctx, keys); err != nil || !seen[0] || !seen[1] {
				t.Errorf("the other filter after deleting: %v, %v", seen, err)
			}
		})
	}
}

// TestCrawlsFilterColumn lists crawls whose filters a worker made in Redis:
// a plain filter shows its URLs; a revisit window its URLs, generations and
// period (it showed nothing); a crawl without a filter yet "-"; a filter
// that cannot be read says why instead of looking like none. Listing writes
// nothing to Redis, and the generic filter settings (filter.kind, capacity,
// fpp, as compose.yaml gives them) do not make any crawl's filter a
// mismatch.
func TestCrawlsFilterColumn(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := natstest.Start(t, natstest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg, err := crawls.Open(ctx, ns.JetStream(), frontier.Topology{}, crawls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	canon, err := config.Default().Normalize.Normalizer()
	if err != nil {
		t.Fatal(err)
	}
	worker := config.Default().Filter
	worker.Log = slog.New(slog.DiscardHandler)
	cases := []struct {
		id     string
		st     frontier.CrawlSettings
		policy string // the filter's normalization policy; "" for no filter
	}{
		{"plain", frontier.CrawlSettings{ExpectURLs: 2000, FPP: 0.001, Kind: "bloom", Scope: "host"}, canon.Version()},
		{"window", frontier.CrawlSettings{ExpectURLs: 2000, FPP: 0.001, RevisitAfter: time.Hour, Granularity: 4, Kind: "cuckoo", Scope: "host"}, canon.Version()},
		{"empty", frontier.CrawlSettings{ExpectURLs: 2000, FPP: 0.001, Kind: "bloom", Scope: "host"}, ""},
		// Filled under another normalization policy: the workers refuse it.
		{"stale", frontier.CrawlSettings{ExpectURLs: 2000, FPP: 0.001, Kind: "bloom", Scope: "host"}, "v0-test"},
	}
	for _, c := range cases {
		if _, err := reg.Create(ctx, c.id, c.st, frontier.CrawlSettings{}); err != nil {
			t.Fatal(err)
		}
		if c.policy == "" {
			continue
		}
		f, err := pipeline.OpenCrawlFilter(ctx, pipeline.CrawlFilter(worker, c.id, c.st), c.st, srv.Client(), c.policy)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.TestAndAdd(ctx, [][]byte{[]byte("https://a.example/"), []byte("https://b.example/")}); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}

	s := loadSettings(t, "--nats-url", ns.URL(), "--redis-url", srv.URL(), "--filter-kind", "bloom", "--filter-capacity", "10000000", "--filter-fpp", "0.000001")
	before := redistest.Dump(t, srv.Client())
	var out strings.Builder
	if err := crawlsCommand(ctx, s, true, &out); err != nil {
		t.Fatal(err)
	}
	var rows []crawls.Crawl
	if err := json.Unmarshal([]byte(out.String()), &rows); err != nil || len(rows) != len(cases) {
		t.Fatalf("crawls --json: %v\n%s", err, out.String())
	}
	byID := map[string]crawls.Crawl{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	for _, tt := range []struct {
		id      string
		items   uint64 // 0: no filter shown
		window  bool
		errText string
	}{
		{"plain", 2, false, ""},
		{"window", 2, true, ""},
		{"empty", 0, false, ""},
		{"stale", 0, false, "v0-test"},
	} {
		r := byID[tt.id]
		switch {
		case tt.items != 0 && (r.Filter == nil || r.Filter.Items != tt.items):
			t.Errorf("crawl %s: filter %+v (error %q); want %d URLs", tt.id, r.Filter, r.FilterError, tt.items)
		case tt.items == 0 && r.Filter != nil:
			t.Errorf("crawl %s: filter %+v; want none", tt.id, r.Filter)
		case (r.Window != nil) != tt.window:
			t.Errorf("crawl %s: window %+v; want one: %v", tt.id, r.Window, tt.window)
		case tt.window && (r.Window.Period != 15*time.Minute || len(r.Window.Generations) != 1):
			t.Errorf("crawl %s: window %+v; want period 15m, 1 generation", tt.id, r.Window)
		case !strings.Contains(r.FilterError, tt.errText) || (tt.errText == "") != (r.FilterError == ""):
			t.Errorf("crawl %s: filter error %q; want %q", tt.id, r.FilterError, tt.errText)
		}
	}
	out.Reset()
	if err := crawlsCommand(ctx, s, false, &out); err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		t.Log(out.String())
	}
	for _, want := range []string{"2 URLs, 1 generation(s) of 15m0s", "cannot be read:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("crawler crawls lacks %q:\n%s", want, out.String())
		}
	}
	if after := redistest.Dump(t, srv.Client()); !maps.Equal(before, after) {
		t.Error("crawler crawls changed what Redis stores")
	}
}
