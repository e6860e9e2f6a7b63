package frontier_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/stats"
)

// TestAdmitPageInProcess checks the embedded mode's way in: pages handed
// to AdmitPage by concurrent callers, their links overlapping, put each URL
// on the frontier once, counted as the discovered stream's pages are,
// without a message on the discovered stream; a page no worker would take
// is refused as poison, and a worker that forwards to route owners sends
// the caller to the stream.
func TestAdmitPageInProcess(t *testing.T) {
	p := newPipeline(t, frontier.Topology{Partitions: 4})
	s := site{host: "inproc.example", pages: 400}
	rec := stats.NewMemory()
	w := newWorker(t, p, newMemoryFilter(t), rec, frontier.WorkerOptions{})
	stop := runWorker(t, w)

	want := map[string]bool{}
	var mu sync.Mutex
	links := 0
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < 100; i += 4 {
				var to []int
				for k := range 20 {
					to = append(to, (i*7+k*13)%s.pages) // shared among pages and callers
				}
				d := s.page("c1", i, to, i)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				err := w.AdmitPage(ctx, d)
				cancel()
				if err != nil {
					t.Errorf("page %d: %v", i, err)
					return
				}
				mu.Lock()
				links += len(d.Links)
				for _, l := range to {
					want[s.canonical(l)] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	got := p.take(t, 0)
	checkOnce(t, p, got, want)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if depth := streamMsgs(t, p, p.topo.DiscoveredStream()); depth != 0 {
		t.Errorf("discovered stream holds %d messages, want none", depth)
	}
	err := w.AdmitPage(ctx, frontier.Discovered{Crawl: "bad crawl id", URL: "https://inproc.example/", Links: []string{"https://inproc.example/x"}})
	var pe *frontier.PoisonError
	if !errors.As(err, &pe) || pe.Reason != frontier.PoisonCrawl {
		t.Errorf("a page of a malformed crawl id: %v, want poison %q", err, frontier.PoisonCrawl)
	}
	if err := stop(); err != nil {
		t.Errorf("worker stop: %v", err)
	}
	snap, err := rec.Snapshot(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	tot := snap.Totals
	if tot.Pages != 100 || tot.Links != int64(links) || tot.Admitted != int64(len(want)) {
		t.Errorf("totals pages %d links %d admitted %d, want 100, %d, %d", tot.Pages, tot.Links, tot.Admitted, links, len(want))
	}
	if tot.Links != tot.Admitted+tot.Duplicates+tot.RejectedTotal() {
		t.Errorf("links %d ≠ admitted %d + duplicates %d + rejected %d", tot.Links, tot.Admitted, tot.Duplicates, tot.RejectedTotal())
	}
	checkNoRepublish(t, w)

	routed := newWorker(t, newPipeline(t, frontier.Topology{Routes: 2}), newMemoryFilter(t), nil, frontier.WorkerOptions{})
	if err := routed.AdmitPage(ctx, s.page("c1", 1, []int{2}, 0)); !errors.Is(err, frontier.ErrNotInProcess) {
		t.Errorf("a worker forwarding to route owners: %v, want ErrNotInProcess", err)
	}
}

// streamMsgs is the number of messages stream holds.
func streamMsgs(t *testing.T, p *pipeline, stream string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := p.js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
