package frontier_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/redistest"
	"github.com/sievecrawl/sieve/stats"
)

// The soak runs only when asked (bench.sh soak; not in CI):
//
//	go test ./frontier -run TestSoak -sieve.soak -v -timeout 60m
var (
	soak         = flag.Bool("sieve.soak", false, "run the cluster soak (TestSoak)")
	soakURLs     = flag.Int("sieve.soak.urls", 300_000, "URLs the soak's crawl admits")
	soakWait     = flag.Int("sieve.soak.wait", 1, "redis.wait_replicas of the soak's workers")
	soakRoutes   = flag.Int("sieve.soak.routes", 16, "frontier.routes of the soak's workers")
	soakChildren = 3 // new URLs per page: the crawl is a tree
	soakRepeats  = 5 // links per page to URLs linked before
)

// soakURL is URL i of the soak's crawl, on one of 50 hosts.
func soakURL(i int) string { return fmt.Sprintf("https://h%d.soak.example/p/%d", i%50, i) }

// soakPage is the page at URL i: links to its children in the tree (so
// that every URL below n is found once its parent is fetched) and to
// earlier URLs, which are repeats.
func soakPage(i, n int) frontier.Discovered {
	d := frontier.Discovered{Crawl: "soak", URL: soakURL(i), Depth: 1}
	for c := i*soakChildren + 1; c <= i*soakChildren+soakChildren && c < n; c++ {
		d.Links = append(d.Links, soakURL(c))
	}
	r := rand.New(rand.NewPCG(uint64(i), 7))
	for k := 0; k < soakRepeats && i > 0; k++ {
		d.Links = append(d.Links, soakURL(r.IntN(i+1)))
	}
	return d
}

// soakCrawler stands in for a crawler: it takes entries off the frontier
// (one durable consumer shared by the crawlers), records each stored
// message by URL, and publishes the page at that URL. A crawler's
// fetching is not what the soak is about; its NATS side is.
type soakCrawler struct {
	mu     sync.Mutex
	stored map[int]map[uint64]bool // URL → the frontier stream sequences it was stored at
	taken  atomic.Int64
}

func (s *soakCrawler) run(ctx context.Context, tb testing.TB, js jetstream.JetStream, topo frontier.Topology, n int) {
	var cons jetstream.Consumer
	for ctx.Err() == nil {
		var err error
		if cons == nil {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			cons, err = js.CreateOrUpdateConsumer(cctx, topo.FrontierStream(), jetstream.ConsumerConfig{
				Durable: "soak-crawlers", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: topo.FrontierFilter(),
				AckWait: 10 * time.Second, MaxAckPending: 20_000,
			})
			cancel()
			if err != nil {
				cons = nil
				time.Sleep(100 * time.Millisecond)
				continue
			}
		}
		batch, err := cons.Fetch(200, jetstream.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		var msgs []jetstream.Msg
		var pages []frontier.Discovered
		for m := range batch.Messages() {
			e, err := frontier.DecodeEntry(m.Data())
			if err != nil {
				tb.Errorf("frontier message %q: %v", m.Data(), err)
				continue
			}
			i, err := strconv.Atoi(e.URL[strings.LastIndexByte(e.URL, '/')+1:])
			if err != nil {
				tb.Errorf("frontier URL %q is not the soak's", e.URL)
				continue
			}
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			s.mu.Lock()
			if s.stored[i] == nil {
				s.stored[i] = map[uint64]bool{}
			}
			s.stored[i][md.Sequence.Stream] = true
			s.mu.Unlock()
			msgs, pages = append(msgs, m), append(pages, soakPage(i, n))
		}
		// The batch's pages, published together; acknowledged once stored.
		for len(pages) > 0 && ctx.Err() == nil {
			futures := make([]jetstream.PubAckFuture, len(pages))
			for k, d := range pages {
				data, _ := d.Encode()
				futures[k], _ = js.PublishAsync(topo.DiscoveredSubject(d.Crawl), data)
			}
			var again []frontier.Discovered
			for k, f := range futures {
				if f == nil {
					again = append(again, pages[k])
					continue
				}
				select {
				case <-f.Ok():
				case <-f.Err():
					again = append(again, pages[k])
				case <-ctx.Done():
					return
				}
			}
			pages = again
			if len(again) > 0 {
				time.Sleep(50 * time.Millisecond)
			}
		}
		for _, m := range msgs {
			_ = m.Ack() // lost: the entry comes back, its page is published again
			s.taken.Add(1)
		}
	}
}

// TestSoak runs a crawl of -sieve.soak.urls URLs through 3 dedup workers
// and 2 crawlers on a 3-node NATS cluster (replicas 3) and a Redis Cluster
// of 3 masters with a replica each, and kills, in turn, the node leading
// the discovered stream, a Redis master (while its replica lags) and a
// worker, each brought back (the worker replaced) once the pipeline
// resumed. It prints how many URLs were lost, stored twice on the frontier,
// and left out of the filter (to be admitted again after the duplicate
// window).
func TestSoak(t *testing.T) {
	if !*soak {
		t.Skip("the soak runs with -sieve.soak")
	}
	n := *soakURLs
	nc := natstest.StartCluster(t, 3, natstest.Options{})
	rc := redistest.StartClusterWith(t, redistest.ClusterOptions{Masters: 3, Replicas: 1, NodeTimeout: 2 * time.Second})
	topo := frontier.Topology{Partitions: 16, Replicas: 3, Routes: *soakRoutes, AckWait: 10 * time.Second,
		DuplicateWindow: 20 * time.Minute, MaxAckPending: 50_000}.WithDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin, err := jetstream.New(nc.Conn(0))
	if err != nil {
		t.Fatal(err)
	}
	ectx, ecancel := context.WithTimeout(ctx, 30*time.Second)
	if err := topo.Ensure(ectx, admin); err != nil {
		t.Fatal(err)
	}
	ecancel()

	rclient := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Addrs, ReadTimeout: 5 * time.Second, MaxRetries: -1})
	defer rclient.Close()
	filter, err := dedup.Open(ctx, dedup.Spec{Kind: "bloom", Redis: rclient, Name: "soak",
		Growth: dedup.Growth{InitialCapacity: int64(2 * n), TargetFPP: 1e-7}, Policy: normalize.PolicyVersion, NoMirror: *soakWait > 0})
	if err != nil {
		t.Fatal(err)
	}
	defer filter.Close()
	canon, err := normalize.New(normalize.Options{})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var workers []*frontier.Worker
	var stopped []*frontier.Worker
	startWorker := func(i int) {
		o := frontier.WorkerOptions{Topology: topo, ID: fmt.Sprintf("soak-%d", i), RouteLeaseTTL: 3 * time.Second,
			BackoffMin: 20 * time.Millisecond, BackoffMax: time.Second}
		if *soakWait > 0 {
			o.Replicas = dedup.NewReplicaWait(rclient, *soakWait, time.Second)
		}
		w, err := frontier.NewWorker(nc.Conn(i%3), filter, canon, stats.NewMemory(), o)
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = w.Run(ctx) }()
		mu.Lock()
		workers = append(workers, w)
		mu.Unlock()
	}
	for i := 0; i < 3; i++ {
		startWorker(i)
	}
	crawler := &soakCrawler{stored: map[int]map[uint64]bool{}}
	var cwg sync.WaitGroup
	for i := 0; i < 2; i++ {
		js, err := jetstream.New(nc.Conn(i + 1))
		if err != nil {
			t.Fatal(err)
		}
		cwg.Go(func() { crawler.run(ctx, t, js, topo, n) })
	}
	seedJS, _ := jetstream.New(nc.Conn(0))
	if err := topo.PublishDiscovered(ctx, seedJS, frontier.Discovered{Crawl: "soak", Kind: frontier.KindSeed, Links: []string{soakURL(0)}}); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	progress := func() int64 { return crawler.taken.Load() }
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: timed out (%d of %d URLs taken)", what, progress(), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	resumed := func(what string, at time.Time) {
		t.Helper()
		from := progress()
		waitFor(what+": resume", func() bool { return progress() > from+100 })
		fmt.Printf("  %-46s resumed in %v\n", what, time.Since(at).Round(time.Millisecond))
	}
	fmt.Printf("soak: %d URLs, 3 workers (routes %d, wait_replicas %d), 2 crawlers, NATS 3 nodes R3, Redis Cluster 3+3\n", n, *soakRoutes, *soakWait)

	// 1. The NATS node leading the discovered stream.
	waitFor("a quarter", func() bool { return progress() >= int64(n/4) })
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	leader, err := nc.Leader(lctx, admin, topo.DiscoveredStream())
	lcancel()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	nc.Servers[leader].Shutdown()
	resumed(fmt.Sprintf("NATS node %s (discovered leader) killed:", nc.Servers[leader].Name()), at)
	nc.Servers[leader].StartAgain()

	// 2. A Redis master, its replica lagging.
	waitFor("a half", func() bool { return progress() >= int64(n/2) })
	at, _ = killLaggingMaster(t, rc, func() {})
	resumed("Redis master killed (replica lagging):", at)

	// 3. A worker, without warning; a new one takes its place.
	waitFor("three quarters", func() bool { return progress() >= int64(3*n/4) })
	mu.Lock()
	victim := workers[0]
	workers = workers[1:]
	stopped = append(stopped, victim)
	mu.Unlock()
	at = time.Now()
	victim.Close()
	startWorker(3)
	resumed("worker killed (its leases expire):", at)

	// Done when every URL was taken and the streams are empty.
	p := &pipeline{js: admin, topo: topo}
	waitFor("every URL", func() bool {
		crawler.mu.Lock()
		defer crawler.mu.Unlock()
		return len(crawler.stored) >= n
	})
	p.waitDrained(t, 10*time.Minute)
	p.waitStreamEmpty(t, topo.RoutedStream(), 10*time.Minute)
	p.waitStreamEmpty(t, topo.FrontierStream(), 10*time.Minute)
	elapsed := time.Since(start)
	cancel()
	cwg.Wait()

	var lost, twice int
	crawler.mu.Lock()
	for i := 0; i < n; i++ {
		switch k := len(crawler.stored[i]); {
		case k == 0:
			lost++
		case k > 1:
			twice++
		}
	}
	crawler.mu.Unlock()
	var republished int64
	mu.Lock()
	for _, w := range append(workers, stopped...) {
		w.Close()
		republished += w.Status().Totals.Republished
	}
	mu.Unlock()
	check := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Addrs, ReadTimeout: 10 * time.Second})
	defer check.Close()
	fresh, err := dedup.Open(context.Background(), dedup.Spec{Kind: "bloom", Redis: check, Name: "soak", Policy: normalize.PolicyVersion, Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	readmit := 0
	for lo := 0; lo < n; lo += 5000 {
		var keys [][]byte
		for i := lo; i < min(lo+5000, n); i++ {
			u, _ := canon.URL(soakURL(i))
			keys = append(keys, []byte(u))
		}
		held, err := fresh.Contains(context.Background(), keys)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range held {
			if !h {
				readmit++
			}
		}
	}
	fmt.Printf("soak: %d URLs in %v: lost %d, stored twice %d, out of the filter (re-admitted after the window) %d, republished (caught by the window) %d\n",
		n, elapsed.Round(time.Second), lost, twice, readmit, republished)
	if lost > 0 || twice > 0 {
		t.Errorf("lost %d, stored twice %d: want 0 and 0", lost, twice)
	}
}
