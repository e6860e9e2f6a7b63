package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"os"
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
	"github.com/sievecrawl/sieve/stats"
)

// registerCrawl records a crawl with settings in the registry of the NATS
// server at js, as `crawler seed` creates one.
func registerCrawl(tb testing.TB, ns *natstest.Server, id string, st frontier.CrawlSettings) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg, err := crawls.Open(ctx, ns.JetStream(), frontier.Topology{}, crawls.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := reg.Create(ctx, id, st, frontier.CrawlSettings{}); err != nil {
		tb.Fatal(err)
	}
}

// workerAdds opens a crawl's filter exactly as a running worker does
// (pipeline.CrawlFilter and OpenCrawlFilter, from the crawl's settings and
// the worker's filter section f) and adds the URLs to it, saving an
// in-memory filter to its snapshot file.
func workerAdds(tb testing.TB, f config.Filter, rdbURL, crawl string, st frontier.CrawlSettings, urls ...string) []bool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := config.Default()
	cfg.Redis.URL = rdbURL
	var rdb redis.UniversalClient
	if cfg.Redis.Enabled() {
		c, err := cfg.Redis.Client()
		if err != nil {
			tb.Fatal(err)
		}
		defer c.Close()
		rdb = c
	}
	n, err := cfg.Normalize.Normalizer()
	if err != nil {
		tb.Fatal(err)
	}
	fc := pipeline.CrawlFilter(f, crawl, st)
	fc.Log = slog.New(slog.DiscardHandler)
	sf, err := pipeline.OpenCrawlFilter(ctx, fc, st, rdb, n.Version())
	if err != nil {
		tb.Fatalf("open crawl %s's filter as a worker: %v", crawl, err)
	}
	defer sf.Close()
	keys := make([][]byte, len(urls))
	for i, u := range urls {
		keys[i] = []byte(u)
	}
	added, err := sf.TestAndAdd(ctx, keys)
	if err != nil {
		tb.Fatal(err)
	}
	if err := pipeline.SaveFilter(ctx, fc, sf); err != nil {
		tb.Fatal(err)
	}
	return added
}

// expired stores a small Bloom filter named name in Redis: a window's
// generation when name is "<window>:gen:<epoch>".
func expired(tb testing.TB, rdb redis.UniversalClient, name string) {
	tb.Helper()
	ctx := context.Background()
	f, err := dedup.OpenRedisBloom(ctx, rdb, name, dedup.RedisBloomOptions{InitialCapacity: 100})
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := f.TestAndAdd(ctx, [][]byte{[]byte("https://expired.example/")}); err != nil {
		tb.Fatal(err)
	}
}

// files reads every file in dir, by name.
func files(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range names {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		out[filepath.Base(f)] = string(data)
	}
	return out
}

// TestCrawlWindowReadOnly: check and stats --crawl on a crawl created with a
// revisit window (crawler seed --revisit-after) answer from the window's
// generations, in Redis, in a snapshot file and in an embedded crawl's data
// dir: seen / new as the worker's
// window holds them, its stats with the window (generations, period,
// memory), and write nothing (not even delete a generation long expired).
func TestCrawlWindowReadOnly(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := natstest.Start(t, natstest.Options{})
	dir := t.TempDir()
	for _, kind := range []string{"bloom", "cuckoo"} {
		st := frontier.CrawlSettings{ExpectURLs: 4000, FPP: 0.001, RevisitAfter: time.Hour, Granularity: 4, Kind: kind, Scope: "host"}
		crawl := "news-" + kind
		registerCrawl(t, ns, crawl, st)
		places := map[string]struct {
			redis string
			env   map[string]string
			args  []string // after the command's name
			state func() map[string]string
		}{
			"redis": {srv.URL(), map[string]string{"SIEVE_REDIS_URL": srv.URL(), "SIEVE_NATS_URL": ns.URL()}, nil,
				func() map[string]string { return redistest.Dump(t, srv.Client()) }},
			"snapshot": {"", map[string]string{"SIEVE_FILTER_SNAPSHOT": filepath.Join(dir, "seen.bloom"), "SIEVE_HTTP_ADDR": "",
				"SIEVE_NATS_URL": ns.URL()}, nil, func() map[string]string { return files(t, dir) }},
			// An embedded crawl's data dir: seen.<crawl>.bloom.
			"data dir": {"", map[string]string{"SIEVE_HTTP_ADDR": ""}, []string{"--data-dir", dir},
				func() map[string]string { return files(t, dir) }},
		}
		for name, pl := range places {
			t.Run(kind+" "+name, func(t *testing.T) {
				f := config.Default().Filter
				if pl.redis == "" {
					f.Snapshot = filepath.Join(dir, "seen.bloom")
				}
				workerAdds(t, f, pl.redis, crawl, st, "https://a.example/")
				if pl.redis != "" {
					var d stats.Delta
					d.CountCrawl(crawl, stats.CrawlCounts{Links: 3, Admitted: 1, Duplicates: 2})
					if err := stats.NewRedis(srv.Client(), "sieve").Add(context.Background(), d); err != nil {
						t.Fatal(err)
					}
					// A generation that expired long ago, left by workers
					// that stopped: a reader leaves it for a writer to
					// delete.
					expired(t, srv.Client(), f.Name+":"+crawl+":gen:5")
				}
				before := pl.state()
				code, out, errOut := runCLI(t, "", pl.env, at([]string{"check", "--crawl", crawl, "https://a.example/", "https://b.example/"}, pl.args)...)
				if want := "seen\thttps://a.example/\nnew\thttps://b.example/\n"; code != exitOK || out != want {
					t.Errorf("check --crawl %s: exit %d, stdout %q, stderr %q; want %q", crawl, code, out, errOut, want)
				}
				code, out, errOut = runCLI(t, "", pl.env, at([]string{"stats", "--json", "--crawl", crawl}, pl.args)...)
				var rep report
				if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil {
					t.Fatalf("stats --json --crawl %s: exit %d (%v), stdout %q, stderr %q", crawl, code, err, out, errOut)
				}
				if rep.Filter == nil || rep.Filter.Items != 1 || rep.Filter.Kind != kind || rep.Filter.MemoryBytes == 0 {
					t.Errorf("stats --crawl %s: filter %+v (errors %v); want 1 URL in a %s window", crawl, rep.Filter, rep.Errors, kind)
				}
				if w := rep.Window; w == nil || w.After != time.Hour || w.Granularity != 4 || w.Period != 15*time.Minute || len(w.Generations) != 1 {
					t.Errorf("stats --crawl %s: window %+v; want 1h, g=4, period 15m, 1 generation", crawl, w)
				}
				code, out, errOut = runCLI(t, "", pl.env, at([]string{"stats", "--crawl", crawl}, pl.args)...)
				wants := []string{"REVISIT WINDOW", "1h0m0s, granularity 4", "15m0s per generation", "1 live"}
				if pl.redis != "" { // the crawl's own counts, beside every crawl's
					wants = append(wants, "CRAWL "+crawl, "3 links, 1 admitted, 2 duplicates, 0 rejected")
				}
				for _, want := range wants {
					if code != exitOK || !strings.Contains(out, want) {
						t.Errorf("stats --crawl %s: exit %d, stdout lacks %q:\n%s\nstderr %s", crawl, code, want, out, errOut)
					}
				}
				if after := pl.state(); !maps.Equal(before, after) {
					t.Errorf("check and stats --crawl %s changed what is stored", crawl)
				}
				if testing.Verbose() {
					t.Log(out)
				}
			})
		}
	}
}
