package frontier_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/internal/leaktest"
	"github.com/sievecrawl/sieve/stats"
)

// checkOnce asserts that the frontier messages are exactly the URLs of want,
// each once, on the subject of its crawl and host partition.
func checkOnce(t *testing.T, p *pipeline, got []frontierMsg, want map[string]bool) {
	t.Helper()
	seen := map[string]int{}
	for _, m := range got {
		seen[m.entry.URL]++
		if seen[m.entry.URL] == 2 {
			t.Errorf("URL %s on the frontier twice", m.entry.URL)
		}
		if !want[m.entry.URL] {
			t.Errorf("URL %s on the frontier, not expected", m.entry.URL)
		}
		host := strings.SplitN(strings.SplitN(m.entry.URL, "://", 2)[1], "/", 2)[0]
		if wantSubj := p.topo.FrontierSubject(m.entry.Crawl, p.topo.Partition(host)); m.subject != wantSubj {
			t.Errorf("URL %s on subject %s, want %s", m.entry.URL, m.subject, wantSubj)
		}
	}
	missing := 0
	for u := range want {
		if seen[u] == 0 {
			missing++
			if missing <= 5 {
				t.Errorf("URL %s missing from the frontier", u)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d URLs missing", missing, len(want))
	}
}

// checkNoRepublish asserts that no publish of the workers was caught by
// JetStream's duplicate window. In a run without faults the filter alone
// must keep each URL to one publish: the window is the safety net for
// crashes, and a test that leans on it would pass with a filter that holds
// nothing.
func checkNoRepublish(t *testing.T, workers ...*frontier.Worker) {
	t.Helper()
	for i, w := range workers {
		if n := w.Status().Totals.Republished; n != 0 {
			t.Errorf("worker %d: %d publishes caught as duplicates by JetStream's window, want 0 (the filter let them through)", i+1, n)
		}
	}
}

func TestWorkerAdmitsEachURLOnce(t *testing.T) {
	p := newPipeline(t, frontier.Topology{Partitions: 4})
	s := site{host: "site.example", pages: 300}
	filter := newMemoryFilter(t)
	rec := stats.NewMemory()
	// Two workers share the filter and the consumer, as two processes
	// share Redis and NATS.
	w1 := newWorker(t, p, filter, rec, frontier.WorkerOptions{Batch: 8, Concurrency: 2})
	w2 := newWorker(t, p, filter, rec, frontier.WorkerOptions{Batch: 8, Concurrency: 2})
	stop1, stop2 := runWorker(t, w1), runWorker(t, w2)

	want := map[string]bool{}
	// Seeds first: depth 0.
	seeds := frontier.Discovered{Crawl: "c1", Kind: frontier.KindSeed, Links: []string{s.canonical(0), "https://Other.example:443/", "mailto:me@site.example"}}
	p.publish(t, seeds)
	want[s.canonical(0)], want["https://other.example/"] = true, true
	p.waitDrained(t, 20*time.Second)

	// Pages come in waves, each drained before the next. A URL's first
	// mentions all lie on one page of its wave: pages of one wave are in
	// concurrent batches of both workers, and two workers whose batches both
	// hold a new URL both publish it (neither has marked it yet) — a race
	// between processes the duplicate window absorbs by design, counted as
	// Republished (within one worker there is no such race:
	// TestWorkerBatchesDoNotRace). With no such race, every repeat must be
	// stopped by the filter or the seen cache, and a single publish caught
	// by the window means the filter failed.
	rng := rand.New(rand.NewPCG(1, 2))
	bad := []string{"mailto:info@site.example", "javascript:void(0)", "http://exa mple.com/", "tel:+100"}
	var links, rejects int
	admitted := map[int]bool{0: true} // by an earlier wave
	for wave := 0; wave < 20; wave++ {
		owner := map[int]int{} // new URL of this wave → the one page linking to it
		for i := wave * 10; i < wave*10+10; i++ {
			var to []int
			for len(to) < 30 {
				l := rng.IntN(s.pages)
				if o, ok := owner[l]; !admitted[l] && ok && o != i {
					continue
				}
				if !admitted[l] {
					owner[l] = i
				}
				to = append(to, l)
				want[s.canonical(l)] = true
			}
			d := s.page("c1", i, to, i)
			if i%10 == 0 {
				d.Links = append(d.Links, bad[i/10%len(bad)])
				rejects++
			}
			links += len(d.Links)
			p.publish(t, d)
		}
		p.waitDrained(t, 20*time.Second)
		for l := range owner {
			admitted[l] = true
		}
	}
	// Poison does not block the queue.
	p.publishRaw(t, []byte("not json"))
	p.publishRaw(t, []byte(`{"v":99,"crawl":"c1","url":"https://site.example/","links":[]}`))

	p.waitDrained(t, 30*time.Second)
	if err := stop1(); err != nil {
		t.Errorf("worker 1 stop: %v", err)
	}
	if err := stop2(); err != nil {
		t.Errorf("worker 2 stop: %v", err)
	}
	got := p.take(t, 0)
	checkOnce(t, p, got, want)
	for _, m := range got {
		wantDepth := 2
		if m.entry.URL == s.canonical(0) || m.entry.URL == "https://other.example/" {
			wantDepth = 0
		}
		if m.entry.Depth != wantDepth {
			t.Errorf("%s depth %d, want %d", m.entry.URL, m.entry.Depth, wantDepth)
		}
		if wantDepth == 2 && !strings.HasPrefix(m.entry.From, "https://site.example/p/") {
			t.Errorf("%s from %q, want a page", m.entry.URL, m.entry.From)
		}
	}

	snap, err := rec.Snapshot(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	tot := snap.Totals
	wantTot := stats.Delta{Pages: 201, Links: int64(links + len(seeds.Links)), Admitted: int64(len(want)),
		Rejected: map[string]int64{"scheme": 1 + int64(rejects) - 5, "host": 5}}
	if tot.Pages != wantTot.Pages || tot.Links != wantTot.Links || tot.Admitted != wantTot.Admitted {
		t.Errorf("totals %+v, want pages %d links %d admitted %d", tot, wantTot.Pages, wantTot.Links, wantTot.Admitted)
	}
	if tot.Republished != 0 {
		t.Errorf("recorded %d publishes caught by JetStream's duplicate window, want 0", tot.Republished)
	}
	if tot.Links != tot.Admitted+tot.Duplicates+tot.RejectedTotal() {
		t.Errorf("links %d ≠ admitted %d + duplicates %d + rejected %d", tot.Links, tot.Admitted, tot.Duplicates, tot.RejectedTotal())
	}
	if tot.Rejected["scheme"] != wantTot.Rejected["scheme"] || tot.Rejected["host"] != wantTot.Rejected["host"] {
		t.Errorf("rejected %v, want %v", tot.Rejected, wantTot.Rejected)
	}
	if tot.Poison[frontier.PoisonMalformed] != 1 || tot.Poison[frontier.PoisonVersion] != 1 {
		t.Errorf("poison %v, want one malformed and one version", tot.Poison)
	}
	if len(snap.TopHosts) == 0 || snap.TopHosts[0].Host != "site.example" || snap.TopHosts[0].Admitted != int64(len(want)-1) {
		t.Errorf("top hosts %+v", snap.TopHosts)
	}
	st1, st2 := w1.Status(), w2.Status()
	if st1.Totals.Pages+st2.Totals.Pages != 201 {
		t.Errorf("workers processed %d and %d pages, want 201 in all", st1.Totals.Pages, st2.Totals.Pages)
	}
	checkNoRepublish(t, w1, w2)
	t.Logf("the workers processed %d and %d pages", st1.Totals.Pages, st2.Totals.Pages)
}

// TestWorkerTakesWhatIsWaiting checks natural batching: a page that comes
// alone is admitted at once, not when a timer gives up waiting for its batch
// of 64 to fill (with FetchWait 8 s here, a batch held for more would take 8
// s). Full batches under load are the pipeline benchmark's.
func TestWorkerTakesWhatIsWaiting(t *testing.T) {
	p := newPipeline(t, frontier.Topology{})
	s := site{host: "alone.example", pages: 200}
	w := newWorker(t, p, newMemoryFilter(t), nil, frontier.WorkerOptions{Batch: 64, Concurrency: 1, FetchWait: 8 * time.Second})
	runWorker(t, w)
	// Let the worker's first pull find nothing and wait.
	time.Sleep(200 * time.Millisecond)

	for i, links := range [][]int{{1, 2}, {3}} {
		start := time.Now()
		p.publish(t, s.page("c", i, links, 0))
		var got []frontierMsg
		for len(got) < len(links) && time.Since(start) < 4*time.Second {
			got = append(got, p.take(t, len(links)-len(got))...)
		}
		if len(got) != len(links) {
			t.Fatalf("page %d: %d of its %d links admitted after %v: the worker held a batch of one for more", i, len(got), len(links), time.Since(start).Round(time.Millisecond))
		}
		t.Logf("page %d alone: its links admitted after %v (FetchWait %v)", i, time.Since(start).Round(time.Millisecond), 8*time.Second)
	}
}

func TestWorkerGracefulStopFinishesBatches(t *testing.T) {
	p := newPipeline(t, frontier.Topology{})
	s := site{host: "stop.example", pages: 5000}
	want := map[string]bool{}
	for i := 0; i < 400; i++ {
		var to []int
		for j := 0; j < 50; j++ {
			to = append(to, (i*50+j)%s.pages)
			want[s.canonical((i*50+j)%s.pages)] = true
		}
		p.publish(t, s.page("c", i, to, i))
	}
	filter := newMemoryFilter(t)
	w := newWorker(t, p, filter, nil, frontier.WorkerOptions{Batch: 4, Concurrency: 4})
	stop := runWorker(t, w)
	// Stop as soon as work is under way.
	deadline := time.Now().Add(20 * time.Second)
	for w.Status().Totals.Pages == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	// Nothing fetched was left unacknowledged: the acks the worker sent
	// before Run returned reach the consumer within moments, while an
	// abandoned message would stay pending for AckWait (30 s).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := p.js.Consumer(ctx, p.topo.DiscoveredStream(), p.topo.Consumer())
	if err != nil {
		t.Fatal(err)
	}
	var info *jetstream.ConsumerInfo
	for settle := time.Now().Add(3 * time.Second); ; {
		if info, err = c.Info(ctx); err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending == 0 || time.Now().After(settle) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if info.NumAckPending != 0 {
		t.Errorf("%d messages left unacknowledged after a graceful stop", info.NumAckPending)
	}
	if info.NumPending == 0 {
		t.Logf("the worker finished everything before it was stopped; the test proves less")
	}
	// A second worker finishes the rest: still each URL once. It takes one
	// batch at a time: pages 100 apart link to the same URLs, and two
	// concurrent batches holding one new URL would both publish it (a race
	// the duplicate window absorbs, which checkNoRepublish would flag).
	w2 := newWorker(t, p, filter, nil, frontier.WorkerOptions{Concurrency: 1})
	runWorker(t, w2)
	p.waitDrained(t, 30*time.Second)
	checkOnce(t, p, p.take(t, 0), want)
	checkNoRepublish(t, w, w2)
}

func TestWorkerBackpressure(t *testing.T) {
	const capMsgs = 100
	p := newPipeline(t, frontier.Topology{FrontierMaxMsgs: capMsgs})
	s := site{host: "full.example", pages: 600}
	want := map[string]bool{}
	for i := 0; i < 60; i++ {
		var to []int
		for j := 0; j < 10; j++ {
			to = append(to, i*10+j)
			want[s.canonical(i*10+j)] = true
		}
		p.publish(t, s.page("c", i, to, 0))
	}
	w := newWorker(t, p, newMemoryFilter(t), nil, frontier.WorkerOptions{Batch: 4, Concurrency: 2})
	runWorker(t, w)

	// The worker fills the stream, then waits: the frontier dependency is
	// down, the worker stays ready, and nothing is dropped.
	deadline := time.Now().Add(20 * time.Second)
	for w.Status().Dependencies[frontier.DepFrontier].Up {
		if time.Now().After(deadline) {
			t.Fatal("worker never reported the full frontier")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := w.Ready(); err != nil {
		t.Errorf("Ready() = %v during backpressure, want nil", err)
	}
	var got []frontierMsg
	for len(got) < len(want) {
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatalf("took %d of %d URLs", len(got), len(want))
		}
		batch := p.take(t, capMsgs/2)
		if len(batch) > capMsgs {
			t.Fatalf("frontier held %d messages, cap %d", len(batch), capMsgs)
		}
		got = append(got, batch...)
	}
	p.waitDrained(t, 20*time.Second)
	got = append(got, p.take(t, 0)...)
	checkOnce(t, p, got, want)
	if !w.Status().Dependencies[frontier.DepFrontier].Up {
		t.Errorf("frontier still reported full after it was drained")
	}
	checkNoRepublish(t, w)
}

func TestWorkerRidesOutNATSRestart(t *testing.T) {
	p := newPipeline(t, frontier.Topology{AckWait: 2 * time.Second})
	s := site{host: "restart.example", pages: 2000}
	want := map[string]bool{}
	page := func(i int) frontier.Discovered {
		var to []int
		for j := 0; j < 40; j++ {
			to = append(to, (i*37+j*11)%s.pages)
			want[s.canonical((i*37+j*11)%s.pages)] = true
		}
		return s.page("c", i, to, i)
	}
	for i := 0; i < 100; i++ {
		p.publish(t, page(i))
	}
	w := newWorker(t, p, newMemoryFilter(t), nil, frontier.WorkerOptions{Batch: 2, Concurrency: 2})
	runWorker(t, w)
	deadline := time.Now().Add(20 * time.Second)
	for w.Status().Totals.Pages < 10 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}

	p.srv.Shutdown()
	for w.Ready() == nil {
		if time.Now().After(deadline) {
			t.Fatal("worker stayed ready without NATS")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !errors.Is(w.Ready(), frontier.ErrNotReady) || !strings.Contains(w.Ready().Error(), "nats") {
		t.Errorf("Ready() = %v, want it to name nats", w.Ready())
	}
	p.srv.StartAgain()
	for i := 100; i < 150; i++ {
		p.publish(t, page(i))
	}
	p.waitDrained(t, 40*time.Second)
	checkOnce(t, p, p.take(t, 0), want)
	if err := w.Ready(); err != nil {
		t.Errorf("Ready() = %v after NATS came back", err)
	}
}

func TestWorkerCloseLeaksNoGoroutine(t *testing.T) {
	p := newPipeline(t, frontier.Topology{})
	noLeak := leaktest.Check(t)
	w := newWorker(t, p, newMemoryFilter(t), nil, frontier.WorkerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	p.publish(t, site{host: "x.example"}.page("c", 1, []int{1, 2, 3}, 0))
	p.waitDrained(t, 10*time.Second)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Run after Close = %v", err)
	}
	if err := w.Run(ctx); err == nil {
		t.Error("second Run succeeded")
	}
	noLeak()
}

func TestHostPartitionOfIPv6AndPorts(t *testing.T) {
	p := newPipeline(t, frontier.Topology{Partitions: 8})
	w := newWorker(t, p, newMemoryFilter(t), nil, frontier.WorkerOptions{})
	runWorker(t, w)
	urls := []string{"http://[2001:db8::1]:8080/a", "http://example.com:8080/b", "https://example.com/c"}
	p.publish(t, frontier.Discovered{Crawl: "c", Kind: frontier.KindSeed, Links: urls})
	p.waitDrained(t, 10*time.Second)
	hosts := map[string]string{
		"http://[2001:db8::1]:8080/a": "2001:db8::1",
		"http://example.com:8080/b":   "example.com",
		"https://example.com/c":       "example.com",
	}
	got := p.take(t, 0)
	if len(got) != 3 {
		t.Fatalf("frontier has %d URLs, want 3", len(got))
	}
	for _, m := range got {
		want := p.topo.FrontierSubject("c", p.topo.Partition(hosts[m.entry.URL]))
		if m.subject != want {
			t.Errorf("%s on %s, want %s", m.entry.URL, m.subject, want)
		}
	}
	checkNoRepublish(t, w)
}

// TestWorkerRechecksStaleVerdicts: a worker held back by a full frontier for
// more than half the duplicate window asks the filter again before
// publishing, so a URL another worker published and marked meanwhile (and
// whose message ID the window may have forgotten) is not enqueued twice.
func TestWorkerRechecksStaleVerdicts(t *testing.T) {
	const window = 2 * time.Second
	p := newPipeline(t, frontier.Topology{FrontierMaxMsgs: 1, DuplicateWindow: window})
	ctx := context.Background()
	// Fill the frontier.
	if _, err := p.js.Publish(ctx, p.topo.FrontierSubject("c", 0), []byte(`{"v":1,"crawl":"c","url":"https://filler.example/","depth":0}`)); err != nil {
		t.Fatal(err)
	}
	filter := newMemoryFilter(t)
	rec := stats.NewMemory()
	w := newWorker(t, p, filter, rec, frontier.WorkerOptions{})
	runWorker(t, w)
	p.publish(t, frontier.Discovered{Crawl: "c", Kind: frontier.KindSeed, Links: []string{"https://x.example/", "https://y.example/"}})
	deadline := time.Now().Add(10 * time.Second)
	for w.Status().Dependencies[frontier.DepFrontier].Up {
		if time.Now().After(deadline) {
			t.Fatal("worker never reported the full frontier")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Meanwhile another worker enqueued and marked x.example.
	if _, err := filter.TestAndAdd(ctx, [][]byte{[]byte("https://x.example/")}); err != nil {
		t.Fatal(err)
	}
	// The worker's verdict ages past half the window while it waits.
	time.Sleep(window/2 + 200*time.Millisecond)
	// Make room until the worker is done.
	var got []frontierMsg
	for deadline := time.Now().Add(10 * time.Second); ; {
		got = append(got, p.take(t, 0)...)
		if w.Status().Totals.Pages == 1 || time.Now().After(deadline) {
			break
		}
	}
	p.waitDrained(t, 10*time.Second)
	got = append(got, p.take(t, 0)...)
	var urls []string
	for _, m := range got {
		urls = append(urls, m.entry.URL)
	}
	if strings.Join(urls, " ") != "https://filler.example/ https://y.example/" {
		t.Errorf("frontier held %v, want the filler and y.example only", urls)
	}
	checkNoRepublish(t, w)
}

// TestWorkerBatchesDoNotRace publishes every page at once, each linking to
// many of the same new URLs, to one worker whose concurrent batches hold
// the same new URLs at the same moment: each URL must be published once,
// with no publish caught by JetStream's duplicate window (without flights,
// concurrent batches both found such a URL absent and both published it).
func TestWorkerBatchesDoNotRace(t *testing.T) {
	p := newPipeline(t, frontier.Topology{Partitions: 2})
	s := site{host: "race.example", pages: 2000}
	rng := rand.New(rand.NewPCG(3, 4))
	want := map[string]bool{}
	var pages []frontier.Discovered
	for i := 0; i < 400; i++ {
		var to []int
		for j := 0; j < 40; j++ {
			l := rng.IntN(s.pages)
			to = append(to, l)
			want[s.canonical(l)] = true
		}
		pages = append(pages, s.page("r", i, to, i))
	}
	p.publish(t, pages...)
	w := newWorker(t, p, newMemoryFilter(t), nil, frontier.WorkerOptions{Batch: 4, Concurrency: 8, SeenCache: -1})
	stop := runWorker(t, w)
	p.waitDrained(t, 60*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, p, p.take(t, 0), want)
	tot := w.Status().Totals
	if tot.Admitted != int64(len(want)) || tot.Links != tot.Admitted+tot.Duplicates {
		t.Errorf("admitted %d of %d URLs; links %d, duplicates %d", tot.Admitted, len(want), tot.Links, tot.Duplicates)
	}
	checkNoRepublish(t, w)
}
