package frontier_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
)

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
