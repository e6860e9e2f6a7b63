package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/testsite"
)

// BenchmarkEmbeddedSnapshots measures an embedded crawl's throughput with
// the filter snapshot saved every 2 s while it changes (the default), against
// the baseline, measured in the same run, of saving only at the end, with
// the filter sized for 100,000 URLs (a 0.4 MB snapshot) and for 10 million
// (40 MB).
func BenchmarkEmbeddedSnapshots(b *testing.B) {
	for _, capacity := range []string{"100000", "10000000"} {
		b.Run("capacity="+capacity, func(b *testing.B) { benchSnapshots(b, capacity) })
	}
}

func benchSnapshots(b *testing.B, capacity string) {
	const idle = time.Second
	var saves int64
	crawl := func(b *testing.B, interval string) (pages int64, d time.Duration) {
		site := startSite(b, testsite.Options{Pages: 3000})
		args := append([]string{"run", "--embedded", "--data-dir", b.TempDir(), "--seed", site.URL,
			"--idle-exit", idle.String(), "--json"}, testRunFlags(30)...)
		args = append(args, "--filter-capacity", capacity, "--crawl-host-parallel", "16", "--filter-snapshot-interval", interval)
		code, stdout, stderr := runCLI(b, b.Context(), args...)
		if code != 0 {
			b.Fatalf("exit %d: %s", code, stderr)
		}
		var sum runSummary
		if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
			b.Fatal(err)
		}
		if sum.Snapshot != nil {
			saves += sum.Snapshot.Saves
		}
		return sum.Crawler.Fetched, time.Duration(sum.Seconds*float64(time.Second)) - idle
	}
	var with, without float64
	runs := 0
	for b.Loop() {
		n, d := crawl(b, "1h")
		without += float64(n) / d.Seconds()
		saves = 0
		n, d = crawl(b, "2s")
		with += float64(n) / d.Seconds()
		runs++
	}
	b.ReportMetric(without/float64(runs), "baseline-pages/s")
	b.ReportMetric(with/float64(runs), "pages/s")
	b.ReportMetric(with/without, "ratio")
	b.ReportMetric(float64(saves), "saves/crawl")
}
