package frontier_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
)

func TestCrawlsCreate(t *testing.T) {
	p := newPipeline(t, frontier.Topology{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	crawls, err := frontier.OpenCrawls(ctx, p.js, p.topo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := crawls.Get(ctx, "a"); !errors.Is(err, frontier.ErrNoCrawl) {
		t.Fatalf("Get of an unknown crawl: %v, want ErrNoCrawl", err)
	}
	if list, err := crawls.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List of an empty registry = %v, %v", list, err)
	}
	def := frontier.CrawlSettings{ExpectURLs: 10_000_000, FPP: 0.001, Kind: "bloom", Scope: "host", Granularity: 4}

	// Concurrent creators with the same settings agree on one record.
	given := frontier.CrawlSettings{ExpectURLs: 5000, RevisitAfter: time.Hour}
	var wg sync.WaitGroup
	recs := make([]frontier.CrawlRecord, 8)
	errs := make([]error, len(recs))
	for i := range recs {
		wg.Go(func() { recs[i], errs[i] = crawls.Create(ctx, "a", given, def) })
	}
	wg.Wait()
	want := frontier.CrawlSettings{ExpectURLs: 5000, FPP: 0.001, RevisitAfter: time.Hour, Granularity: 4, Kind: "bloom", Scope: "host"}
	for i := range recs {
		if errs[i] != nil || recs[i].Settings != want || recs[i].Created != recs[0].Created || recs[i].Created.IsZero() {
			t.Errorf("creator %d: %+v, %v; want settings %+v created %v", i, recs[i], errs[i], want, recs[0].Created)
		}
	}

	// Seeds merge into the record; settings stay.
	if _, err := crawls.Update(ctx, "a", func(r *frontier.CrawlRecord) (bool, error) {
		r.Seeds = append(r.Seeds, "https://a.example/")
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name  string
		given frontier.CrawlSettings
		err   string // "" none; else both values
	}{
		{"nothing given", frontier.CrawlSettings{}, ""},
		{"same values", frontier.CrawlSettings{ExpectURLs: 5000, RevisitAfter: time.Hour}, ""},
		{"other size", frontier.CrawlSettings{ExpectURLs: 6000}, "expect-urls 6000 given, but the crawl was created with expect-urls 5000"},
		{"other fpp", frontier.CrawlSettings{FPP: 0.01}, "fpp 0.01 given, but the crawl was created with fpp 0.001"},
		{"other window", frontier.CrawlSettings{RevisitAfter: 2 * time.Hour}, "revisit-after 2h0m0s given, but the crawl was created with revisit-after 1h0m0s"},
	} {
		rec, err := crawls.Create(ctx, "a", tt.given, def)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: %v, want an error containing %q", tt.name, err, tt.err)
		case tt.err == "" && (rec.Settings != want || len(rec.Seeds) != 1):
			t.Errorf("%s: record %+v", tt.name, rec)
		}
	}

	// A record written before crawls had settings adopts the first given.
	if _, err := crawls.Update(ctx, "old", func(r *frontier.CrawlRecord) (bool, error) {
		r.Seeds = []string{"https://old.example/"}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	rec, err := crawls.Create(ctx, "old", frontier.CrawlSettings{FPP: 0.0001}, def)
	if err != nil || rec.Settings.FPP != 0.0001 || rec.Settings.ExpectURLs != def.ExpectURLs || len(rec.Seeds) != 1 {
		t.Errorf("settings for an old record: %+v, %v", rec, err)
	}

	list, err := crawls.List(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "a" || list[1].ID != "old" || list[0].Settings != want {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if err := crawls.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := crawls.Get(ctx, "a"); !errors.Is(err, frontier.ErrNoCrawl) {
		t.Errorf("Get after Delete: %v, want ErrNoCrawl", err)
	}
	// A deleted crawl is created afresh, with new settings.
	if rec, err := crawls.Create(ctx, "a", frontier.CrawlSettings{ExpectURLs: 7}, def); err != nil || rec.Settings.ExpectURLs != 7 || len(rec.Seeds) != 0 {
		t.Errorf("recreated crawl: %+v, %v", rec, err)
	}
	if _, err := crawls.Create(ctx, "bad id", frontier.CrawlSettings{}, def); err == nil {
		t.Error("Create with a bad id: no error")
	}
}

// crawlFilters is a FilterSet of in-memory filters, one per crawl, counting
// acquisitions not yet released.
type crawlFilters struct {
	tb   testing.TB
	mu   sync.Mutex
	fs   map[string]frontier.Filter
	held int
}

func (s *crawlFilters) Acquire(_ context.Context, crawl string) (frontier.Filter, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.fs[crawl]
	if !ok {
		f = newMemoryFilter(s.tb)
		s.fs[crawl] = f
	}
	s.held++
	return f, func() { s.mu.Lock(); s.held--; s.mu.Unlock() }, nil
}

// TestWorkerFilterPerCrawl: with a FilterSet, a URL is admitted once in each
// crawl, however often either crawl links to it, and each crawl's filter
// holds only its own URLs.
func TestWorkerFilterPerCrawl(t *testing.T) {
	p := newPipeline(t, frontier.Topology{})
	set := &crawlFilters{tb: t, fs: map[string]frontier.Filter{}}
	// One batch at a time: two batches holding the same new URL at once
	// would both publish it (JetStream's window absorbs the second).
	w := newWorker(t, p, nil, nil, frontier.WorkerOptions{Filters: set, Concurrency: 1})
	stop := runWorker(t, w)
	s := site{host: "shared.example", pages: 50}
	all := make([]int, s.pages)
	for i := range all {
		all[i] = i
	}
	// Both crawls' pages in one batch, then again (seen-cache hits) with
	// other spellings.
	p.publish(t, s.page("a", 0, all, 0), s.page("b", 1, all, 3))
	p.waitDrained(t, 30*time.Second)
	p.publish(t, s.page("b", 1, all, 1), s.page("a", 2, all, 5), s.page("b", 3, all[:10], 7))
	p.waitDrained(t, 30*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, m := range p.take(t, 0) {
		count[m.entry.Crawl+" "+m.entry.URL]++
	}
	for _, crawl := range []string{"a", "b"} {
		for i := range s.pages {
			if n := count[crawl+" "+s.canonical(i)]; n != 1 {
				t.Errorf("crawl %s: %s on the frontier %d times, want 1", crawl, s.canonical(i), n)
			}
		}
	}
	if len(count) != 2*s.pages {
		t.Errorf("%d distinct (crawl, URL) on the frontier, want %d", len(count), 2*s.pages)
	}
	tot := w.Status().Totals
	if tot.Admitted != int64(2*s.pages) || tot.Republished != 0 {
		t.Errorf("totals: admitted %d republished %d; want %d and 0", tot.Admitted, tot.Republished, 2*s.pages)
	}
	for _, crawl := range []string{"a", "b"} {
		st, err := set.fs[crawl].(*dedup.ScalableBloom).Stats(context.Background())
		if err != nil || st.Items != uint64(s.pages) {
			t.Errorf("crawl %s filter holds %d, %v; want %d", crawl, st.Items, err, s.pages)
		}
	}
	if set.held != 0 {
		t.Errorf("%d filters acquired and never released", set.held)
	}
}
