package urlfrontier_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/urlfrontier"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
	"github.com/sievecrawl/sieve/urlstore"
)

// TestLeasesOnTheURL: a hand-out leases each URL in its own record, so a
// queue's state stays a few counts however many URLs it hands out: one
// GetURLs with no per-queue limit hands out a queue of more URLs than a
// state could name (format 2 failed past ~52 k: its state outgrew a
// value), a known update ends one lease, and the URLs whose leases end
// without one are ready again with no timer. Under the race detector,
// 5,000 URLs: still a turn of several entries (chunks); 70,000 took 30 s
// to hand out there.
func TestLeasesOnTheURL(t *testing.T) {
	n := 70_000
	if raceEnabled {
		n = 5_000
	}
	e := newEnv(t)
	node := e.start("a")
	const crawl, queue = "c", "big.test"
	for i := 0; i < n; i += 5_000 {
		var items []*pb.URLItem
		for j := i; j < i+5_000; j++ {
			items = append(items, disc(crawl, fmt.Sprintf("http://big.test/%06d", j), queue))
		}
		for u, st := range node.put(t, items...) {
			if st != pb.AckMessage_OK {
				t.Fatalf("put %s: %v", u, st)
			}
		}
	}
	one := &pb.GetParams{DelayRequestable: 60, Key: queue, Item: &pb.GetParams_CrawlID{CrawlID: crawl}}
	start := time.Now()
	got := node.get(t, one)
	if len(got) != n {
		t.Fatalf("GetURLs with no limit handed out %d of %d URLs", len(got), n)
	}
	seen := map[string]bool{}
	for _, u := range got {
		if seen[u] {
			t.Fatalf("%s handed out twice", u)
		}
		seen[u] = true
	}
	t.Logf("%d URLs handed out in %v", n, time.Since(start).Round(time.Millisecond))
	if b := urlfrontier.QueueStateBytes(node.srv, crawl, queue); b == 0 || b > 64 {
		t.Fatalf("the queue's state is %d bytes with %d leases; want a few counts (≤ 64 bytes)", b, n)
	}
	stats := func() *pb.Stats {
		st, err := node.client.GetStats(ctxT(t), &pb.QueueWithinCrawlParams{CrawlID: crawl})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := stats(); int(st.GetInProcess()) != n || st.GetSize() != 0 {
		t.Fatalf("after the hand-out: %d in process, %d waiting; want %d and 0", st.GetInProcess(), st.GetSize(), n)
	}

	acked := n / 70
	var updates []*pb.URLItem
	for _, u := range got[:acked] {
		updates = append(updates, known(crawl, u, 0))
	}
	node.put(t, updates...)
	if keys := urlfrontier.KeysOf(node.srv, crawl, queue, got[0]); len(keys) != 1 || keys[0] != "U" {
		t.Fatalf("a completed URL's keys: %v, want its record alone", keys)
	}
	if keys := urlfrontier.KeysOf(node.srv, crawl, queue, got[acked]); len(keys) != 2 || keys[0] != "U" || keys[1] != fmt.Sprint("R@", e.clk.Now().Add(60*time.Second).UnixMilli()) {
		t.Fatalf("a leased URL's keys: %v, want its record and its ready key at the lease's end", keys)
	}
	if st := stats(); int(st.GetInProcess()) != n-acked || int(st.GetCounts()["completed"]) != acked {
		t.Fatalf("after %d known updates: %d in process, %d completed", acked, st.GetInProcess(), st.GetCounts()["completed"])
	}

	e.clk.Add(30 * time.Second)
	if again := node.get(t, one); len(again) != 0 {
		t.Fatalf("%d URLs handed out again while leased", len(again))
	}
	e.clk.Add(31 * time.Second)
	if st := stats(); st.GetInProcess() != 0 || int(st.GetSize()) != n-acked {
		t.Fatalf("the leases ended: %d in process, %d waiting; want 0 and %d", st.GetInProcess(), st.GetSize(), n-acked)
	}
	again := node.get(t, one)
	if len(again) != n-acked {
		t.Fatalf("after the leases ended %d URLs handed out again, want %d", len(again), n-acked)
	}
	for _, u := range again {
		if !seen[u] {
			t.Fatalf("%s handed out, never put", u)
		}
	}
	if b := urlfrontier.QueueStateBytes(node.srv, crawl, queue); b > 64 {
		t.Fatalf("the queue's state is %d bytes", b)
	}
}

// TestGetURLsReadsWhatItHandsOut: the queues GetURLs serves come from the
// ready queues' index, earliest turn first, so a call reads the states of
// about the queues it serves, not of every queue: among 20,000 queues of
// one URL, each call of 100 queues × 1 URL examines 100 to 110 states
// and hands out URLs not handed out before while their leases run.
func TestGetURLsReadsWhatItHandsOut(t *testing.T) {
	const queues, perCall = 20_000, 100
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	node := e.start("a", func(o *urlfrontier.Options) { o.Registerer = reg })
	for i := 0; i < queues; i += 5_000 {
		var items []*pb.URLItem
		for j := i; j < i+5_000; j++ {
			items = append(items, disc("c", fmt.Sprintf("http://q%05d.test/", j), fmt.Sprintf("q%05d.test", j)))
		}
		node.put(t, items...)
	}
	examined := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "sieve_urlfrontier_queues_examined_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	seen := map[string]bool{}
	for call := range 20 {
		before := examined()
		got := node.get(t, anyCrawl(1, perCall, 600))
		if len(got) != perCall {
			t.Fatalf("call %d handed out %d URLs, want %d", call, len(got), perCall)
		}
		for _, u := range got {
			if seen[u] {
				t.Fatalf("call %d: %s handed out again while leased", call, u)
			}
			seen[u] = true
		}
		if n := examined() - before; n < perCall || n > perCall+perCall/10 {
			t.Fatalf("call %d examined %v queue states among %d queues to serve %d", call, n, queues, perCall)
		}
	}
	if st, err := node.client.GetStats(ctxT(t), &pb.QueueWithinCrawlParams{CrawlID: "c"}); err != nil || st.GetNumberOfQueues() != queues || st.GetInProcess() != 20*perCall {
		t.Fatalf("stats %v, %v; want %d queues, %d in process", st, err, queues, 20*perCall)
	}
}

// TestFormat2QueuesAreIndexed: a store written by format 2 has no ready
// queues' index; the first format-3 server indexes it at its start, and
// a queue a format-2 server writes later (a rolling upgrade) is indexed
// as it is applied: both are handed out.
func TestFormat2QueuesAreIndexed(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	log, err := frontier.OpenStoreLog(ctx, e.nats.JetStream(), frontier.Topology{}, urlfrontier.StoreName)
	if err != nil {
		t.Fatal(err)
	}
	part, b := urlfrontier.Format2Queue("c", "old.test", "http://old.test/")
	if err := urlstore.Append(ctx, log, part, b); err != nil {
		t.Fatal(err)
	}
	node := e.start("a")
	if got := node.get(t, anyCrawl(1, 10, 60)); len(got) != 1 || got[0] != "http://old.test/" {
		t.Fatalf("handed out %v; want the format-2 store's URL", got)
	}
	part, b = urlfrontier.Format2Queue("c", "later.test", "http://later.test/")
	if err := urlstore.Append(ctx, log, part, b); err != nil {
		t.Fatal(err)
	}
	var got []string
	eventually(t, "the queue a format-2 server wrote is handed out", func() bool {
		got = append(got, node.get(t, anyCrawl(1, 10, 60))...)
		return len(got) > 0
	})
	if len(got) != 1 || got[0] != "http://later.test/" {
		t.Fatalf("handed out %v", got)
	}
}
