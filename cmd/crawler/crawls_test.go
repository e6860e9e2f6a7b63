package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/dedup"
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
	var rows []crawlRow
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
