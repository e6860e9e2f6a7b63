package frontier_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/stats"
)

// waitStreamEmpty waits until stream holds no message (work-queue
// retention: every message acknowledged).
func (p *pipeline) waitStreamEmpty(tb testing.TB, stream string, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var info *jetstream.StreamInfo
		s, err := p.js.Stream(ctx, stream)
		if err == nil {
			info, err = s.Info(ctx)
		}
		cancel()
		if err == nil && info.State.Msgs == 0 {
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d messages", info.State.Msgs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("stream %s not drained within %v: %s", stream, timeout, last)
}

func TestRouteIsAFunctionOfCrawlAndURL(t *testing.T) {
	topo := frontier.Topology{Routes: 12}
	seen := map[int]int{}
	for i := 0; i < 12000; i++ {
		u := fmt.Sprintf("https://a.example/p/%d", i)
		r := topo.Route("c", u)
		if r < 0 || r >= 12 {
			t.Fatalf("Route(c, %q) = %d, want [0, 12)", u, r)
		}
		if again := topo.Route("c", u); again != r {
			t.Fatalf("Route(c, %q) = %d then %d", u, r, again)
		}
		seen[r]++
	}
	// 1,000 expected per route; a route with under 800 or over 1,200 is
	// 6 standard deviations off: the hash does not spread.
	for r := 0; r < 12; r++ {
		if seen[r] < 800 || seen[r] > 1200 {
			t.Errorf("route %d got %d of 12,000 URLs, want about 1,000", r, seen[r])
		}
	}
	if got := (frontier.Topology{}).Route("c", "https://a.example/"); got != 0 {
		t.Errorf("Route without routes = %d, want 0", got)
	}
}

// TestRoutedWorkersOwnEachURL runs three workers with route partitions
// over one shared filter, one joining and one leaving mid-run: every URL
// reaches the frontier exactly once, no two workers race on a URL (at most
// 0.1 % of the admitted URLs caught by the duplicate window), and the
// workers' route partitions never overlap.
func TestRoutedWorkersOwnEachURL(t *testing.T) {
	p := newPipeline(t, frontier.Topology{Partitions: 4, Routes: 12, AckWait: 5 * time.Second})
	s := site{host: "routes.example", pages: 4000}
	want := map[string]bool{}
	page := func(i int) frontier.Discovered {
		var to []int
		for j := 0; j < 40; j++ {
			l := (i*53 + j*j*7) % s.pages
			to = append(to, l)
			want[s.canonical(l)] = true
		}
		return s.page("c", i, to, i)
	}
	filter := newMemoryFilter(t)
	rec := stats.NewMemory()
	worker := func(id string) (*frontier.Worker, func() error) {
		w := newWorker(t, p, filter, rec, frontier.WorkerOptions{
			ID: id, Batch: 8, Concurrency: 2, RouteLeaseTTL: 1500 * time.Millisecond,
		})
		return w, runWorker(t, w)
	}
	const pages = 1500
	for i := 0; i < pages/3; i++ {
		p.publish(t, page(i))
	}
	w1, _ := worker("w1")
	w2, stop2 := worker("w2")
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: timed out", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("both workers owning routes", func() bool {
		return len(w1.Status().Routes) > 0 && len(w2.Status().Routes) > 0
	})
	for i := pages / 3; i < 2*pages/3; i++ {
		p.publish(t, page(i))
	}
	w3, _ := worker("w3") // joins mid-run
	waitFor("the third worker owning routes", func() bool { return len(w3.Status().Routes) > 0 })
	for i := 2 * pages / 3; i < pages; i++ {
		p.publish(t, page(i))
	}
	if err := stop2(); err != nil { // leaves mid-run
		t.Fatalf("worker 2 stopped with %v", err)
	}
	p.waitDrained(t, 60*time.Second)
	p.waitStreamEmpty(t, p.topo.RoutedStream(), 60*time.Second)

	checkOnce(t, p, p.take(t, 0), want)
	owner := map[int]string{}
	for name, w := range map[string]*frontier.Worker{"w1": w1, "w3": w3} {
		for _, r := range w.Status().Routes {
			if o, ok := owner[r]; ok {
				t.Errorf("route %d owned by %s and %s", r, o, name)
			}
			owner[r] = name
		}
	}
	var admitted, racing, links, pagesSeen int64
	for _, w := range []*frontier.Worker{w1, w2, w3} {
		tot := w.Status().Totals
		admitted += tot.Admitted
		racing += tot.Republished
		links += tot.Links
		pagesSeen += tot.Pages
	}
	t.Logf("admitted %d, racing publishes %d, links %d, pages %d; routes at the end: %v", admitted, racing, links, pagesSeen, owner)
	if admitted != int64(len(want)) {
		t.Errorf("admitted %d URLs, want %d", admitted, len(want))
	}
	if racing*1000 > admitted {
		t.Errorf("%d racing publishes of %d admitted URLs, want at most 0.1 %%", racing, admitted)
	}
	if pagesSeen != pages || links != pages*40 {
		t.Errorf("counted %d pages and %d links, want %d and %d (each counted once, by the forwarding worker)", pagesSeen, links, pages, pages*40)
	}
}
