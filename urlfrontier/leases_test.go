package urlfrontier_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/urlfrontier"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// TestLeasesOnTheURL: a hand-out leases each URL in its own record, so a
// queue's state stays a few counts however many URLs it hands out: one
// GetURLs with no per-queue limit hands out a queue of more URLs than a
// state could name (format 2 failed past ~52 k: its state outgrew a
// value), a known update ends one lease, and the URLs whose leases end
// without one are ready again with no timer.
func TestLeasesOnTheURL(t *testing.T) {
	const n = 70_000
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
	if st := stats(); st.GetInProcess() != n || st.GetSize() != 0 {
		t.Fatalf("after the hand-out: %d in process, %d waiting; want %d and 0", st.GetInProcess(), st.GetSize(), n)
	}

	const acked = 1_000
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
	if st := stats(); st.GetInProcess() != n-acked || st.GetCounts()["completed"] != acked {
		t.Fatalf("after %d known updates: %d in process, %d completed", acked, st.GetInProcess(), st.GetCounts()["completed"])
	}

	e.clk.Add(30 * time.Second)
	if again := node.get(t, one); len(again) != 0 {
		t.Fatalf("%d URLs handed out again while leased", len(again))
	}
	e.clk.Add(31 * time.Second)
	if st := stats(); st.GetInProcess() != 0 || st.GetSize() != n-acked {
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
