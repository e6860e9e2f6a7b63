package urlfrontier_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// The way StormCrawler's URLFrontier spout and status updater use a
// frontier (as far as its defaults go: the figures below are ours where
// they are not): spouts ask GetURLs for up to maxPerQueue URLs of up to
// maxQueues queues with a lease of leaseSeconds, and fetchers' results come
// back through status updaters streaming known items in batches, with
// metadata and a refetch date, or none for a URL done.
const (
	scHosts        = 1_000
	scPerHost      = 100
	scMaxPerQueue  = 10
	scMaxQueues    = 100
	scLeaseSeconds = 30
	scSpouts       = 4   // GetURLs callers at once
	scUpdaters     = 4   // PutURLs streams at once
	scBatch        = 250 // known items per stream
)

// TestStormCrawlerCrawl drives a crawl of 100,000 URLs over 1,000 hosts as
// StormCrawler would and checks politeness (no queue served twice within
// its delay), leases (a URL is handed out again only once its lease ended
// without an update) and completion (every URL handed out, then completed
// or scheduled as its update said, counted so). Time is the test's clock,
// advanced when no queue has a turn.
func TestStormCrawlerCrawl(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 URLs")
	}
	if raceEnabled {
		t.Skip("100,000 URLs take minutes under the race detector; the plain run drives them")
	}
	e := newEnv(t)
	n := e.start("n1")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	const crawl = "storm"
	delay := time.Second // the server's default

	// Injection: the seeds as discovered items, on the updaters' streams.
	var seeds []*pb.URLItem
	for i := range scHosts * scPerHost {
		seeds = append(seeds, disc(crawl, fmt.Sprintf("https://h%d.example/p%d", i%scHosts, i/scHosts), ""))
	}
	if st := putConcurrently(ctx, t, n, seeds); st[pb.AckMessage_OK] != len(seeds) {
		t.Fatalf("injection: %v, want %d OK", st, len(seeds))
	}

	type handOut struct {
		at    time.Time
		until time.Time
	}
	var (
		served   = map[string]time.Time{} // queue → its last turn
		handed   = map[string][]handOut{} // URL → its hand-outs
		lost     = map[string]bool{}      // URLs whose update is dropped once
		outcome  = map[string]uint64{}    // URL → refetch date sent (0: done)
		problems []string
	)
	refetchAt := uint64(e.clk.Now().Add(24 * time.Hour).Unix())
	idle := 0
	for len(outcome) < len(seeds) {
		now := e.clk.Now()
		got := make([][]*pb.URLInfo, scSpouts)
		g, gctx := errgroup.WithContext(ctx)
		for s := range scSpouts {
			g.Go(func() error {
				st, err := n.client.GetURLs(gctx, &pb.GetParams{MaxUrlsPerQueue: scMaxPerQueue, MaxQueues: scMaxQueues,
					DelayRequestable: scLeaseSeconds, Item: &pb.GetParams_CrawlID{CrawlID: crawl}})
				if err != nil {
					return err
				}
				for {
					u, err := st.Recv()
					if err == io.EOF {
						return nil
					}
					if err != nil {
						return err
					}
					got[s] = append(got[s], u)
				}
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		var updates []*pb.URLItem
		total := 0
		// A queue has one turn per round, by one spout, of at most
		// scMaxPerQueue URLs: two spouts asking at once never both serve it.
		turns := map[string]map[int]int{} // queue → spout → URLs
		for s, urls := range got {
			for _, u := range urls {
				total++
				if turns[u.GetKey()] == nil {
					turns[u.GetKey()] = map[int]int{}
				}
				turns[u.GetKey()][s]++
				for _, h := range handed[u.GetUrl()] {
					if now.Before(h.until) {
						problems = append(problems, fmt.Sprintf("%s handed out at %v within its lease until %v", u.GetUrl(), now, h.until))
					}
				}
				handed[u.GetUrl()] = append(handed[u.GetUrl()], handOut{at: now, until: now.Add(scLeaseSeconds * time.Second)})
				// 1 URL in 200 loses its update the first time (a
				// fetcher that died): it must come back after its lease.
				if len(handed[u.GetUrl()]) == 1 && len(handed)%200 == 0 {
					lost[u.GetUrl()] = true
					continue
				}
				date := uint64(0)
				if len(handed)%3 == 0 {
					date = refetchAt
				}
				outcome[u.GetUrl()] = date
				k := known(crawl, u.GetUrl(), date)
				k.GetKnown().Info.Metadata = map[string]*pb.StringList{"fetch.statusCode": {Values: []string{"200"}}}
				updates = append(updates, k)
			}
		}
		for q, bySpout := range turns {
			for _, k := range bySpout {
				if len(bySpout) > 1 || k > scMaxPerQueue {
					problems = append(problems, fmt.Sprintf("queue %s served by %d spouts at once, %d URLs: want one, at most %d", q, len(bySpout), k, scMaxPerQueue))
				}
			}
			if last, ok := served[q]; ok && now.Sub(last) < delay {
				problems = append(problems, fmt.Sprintf("queue %s served at %v, %v after its last turn", q, now, now.Sub(last)))
			}
			served[q] = now
		}
		if len(problems) > 0 {
			t.Fatalf("%d problems, first: %s", len(problems), problems[0])
		}
		if len(updates) > 0 {
			if st := putConcurrently(ctx, t, n, updates); st[pb.AckMessage_OK] != len(updates) {
				t.Fatalf("status updates: %v, want %d OK", st, len(updates))
			}
		}
		if total == 0 {
			idle++
			if idle > 10_000 {
				t.Fatalf("nothing handed out for %d rounds with %d of %d URLs done", idle, len(outcome), len(seeds))
			}
			e.clk.Add(100 * time.Millisecond)
		} else {
			idle = 0
		}
	}

	for u := range lost {
		if k := len(handed[u]); k != 2 {
			t.Errorf("%s, whose first update was lost, handed out %d times, want 2", u, k)
		}
	}
	if len(lost) == 0 {
		t.Error("no update was lost: the lease case was not exercised")
	}
	var completed, scheduled uint64
	for u, d := range outcome {
		if !lost[u] && len(handed[u]) != 1 {
			t.Errorf("%s handed out %d times, want once", u, len(handed[u]))
		}
		if d == 0 {
			completed++
		} else {
			scheduled++
		}
	}
	st, err := n.client.GetStats(ctx, &pb.QueueWithinCrawlParams{CrawlID: crawl})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetSize() != scheduled || st.GetInProcess() != 0 || st.GetCounts()["completed"] != completed || st.GetNumberOfQueues() != scHosts {
		t.Errorf("GetStats = size %d, in process %d, completed %d, queues %d; want %d, 0, %d, %d",
			st.GetSize(), st.GetInProcess(), st.GetCounts()["completed"], st.GetNumberOfQueues(), scheduled, completed, scHosts)
	}
	if c, err := n.client.CountURLs(ctx, &pb.CountUrlParams{CrawlID: crawl}); err != nil || c.GetValue() != uint64(len(seeds)) {
		t.Errorf("CountURLs = %v, %v, want %d", c, err, len(seeds))
	}
	it, err := n.client.GetURLStatus(ctx, &pb.URLStatusRequest{CrawlID: crawl, Url: "https://h0.example/p0"})
	if err != nil || it.GetKnown().GetRefetchableFromDate() != outcome["https://h0.example/p0"] ||
		!slices.Equal(it.GetKnown().GetInfo().GetMetadata()["fetch.statusCode"].GetValues(), []string{"200"}) {
		t.Errorf("GetURLStatus(h0/p0) = %v, %v, want its update's date and metadata", it, err)
	}
}

// putConcurrently sends items on scUpdaters PutURLs streams at once, each
// in batches of scBatch, and counts the acks by status.
func putConcurrently(ctx context.Context, tb testing.TB, n *node, items []*pb.URLItem) map[pb.AckMessage_Status]int {
	tb.Helper()
	var mu sync.Mutex
	count := map[pb.AckMessage_Status]int{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(scUpdaters)
	for start := 0; start < len(items); start += scBatch {
		batch := items[start:min(start+scBatch, len(items))]
		g.Go(func() error {
			st, err := n.client.PutURLs(gctx)
			if err != nil {
				return err
			}
			for _, it := range batch {
				if err := st.Send(it); err != nil {
					return err
				}
			}
			if err := st.CloseSend(); err != nil {
				return err
			}
			for {
				a, err := st.Recv()
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
				mu.Lock()
				count[a.GetStatus()]++
				mu.Unlock()
			}
		})
	}
	if err := g.Wait(); err != nil {
		tb.Fatal(err)
	}
	return count
}
