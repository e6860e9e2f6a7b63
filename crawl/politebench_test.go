package crawl

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/frontier"
)

var (
	politeBench      = flag.Bool("sieve.politebench", false, "run the polite throughput table (TestPoliteThroughput)")
	politeBenchHosts = flag.String("sieve.politebench.hosts", "100,1000", "the rows of the polite table: numbers of small hosts, comma-separated")
)

// TestPoliteThroughput is the polite-crawl benchmark of issue 17: N hosts on
// loopback addresses, each serving a 21-page site (an index linking to 20
// pages), plus one host whose index links to 10,000 pages (a backlog); one
// crawl seeded with the N+1 index pages, the crawler at its defaults (one
// request per second per host). A crawl of many hosts is bound by
// politeness, so the best it can do is the sum of the hosts' limits.
//
// For each N it prints, beside the same measure of a baseline run in the same
// process (one goroutine per host fetching its pages on a one-second ticker:
// the hosts' limits as this machine reaches them):
//
//   - fetches in the first 15.5 s from the first fetch, while every host
//     has work, against the hosts' limit: 16 each (one at the start, one a
//     second after; the half second keeps the count off the edge where the
//     16th fetch falls), and as fetches/s;
//
//   - each host's own rate: a small host's 20 gaps between its 21 fetches,
//     the big host's fetches in its first minute; the slowest host's ratio
//     to 1/s and the big host's;
//
//   - the crawler's messages in hand and deferrals.
//
//     go test ./crawl -run '^TestPoliteThroughput$' -sieve.politebench -v -timeout 60m
//
// Not part of the test run: it takes about 3 minutes per row.
func TestPoliteThroughput(t *testing.T) {
	if !*politeBench {
		t.Skip("benchmark: run with -sieve.politebench")
	}
	const (
		smallPages = 20
		bigPages   = 10_000
		window     = 15500 * time.Millisecond
		perHost    = 16 // fetches one host allows in the window
		bigMinute  = time.Minute
	)
	type row struct {
		hosts                         int
		sieveRate, baseRate           float64
		sieveN, baseN                 int
		sieveSlowest, baseSlowest     float64
		sieveBig, baseBig             float64
		slowestHost                   string
		held, deferred, hostsInMemory int64
	}
	var rows []row
	for _, f := range strings.Split(*politeBenchHosts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 10_000 {
			t.Fatalf("-sieve.politebench.hosts: %q is not a number of hosts (1 to 10,000)", f)
		}
		t.Run(fmt.Sprint("hosts=", n), func(t *testing.T) {
			small := make([]*flatSite, n)
			for i := range small {
				small[i] = startFlatSite(t, fmt.Sprintf("127.0.%d.%d", 1+i/250, 2+i%250), smallPages)
			}
			big := startFlatSite(t, "127.0.200.1", bigPages)
			sites := append(slices.Clone(small), big)

			// Baseline: each host fetched at exactly its limit.
			politeBaseline(sites, bigMinute)
			b := measurePolite(sites, small, big, window, bigMinute)
			for _, s := range sites {
				s.reset()
			}

			// Sieve: one embedded pipeline, the crawler's defaults.
			topo := frontier.Topology{}
			p := startPipeline(t, topo)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			seeds := make([]string, len(sites))
			for i, s := range sites {
				seeds[i] = s.URL
			}
			if err := seed(ctx, p.js, topo, "polite", seeds); err != nil {
				t.Fatal(err)
			}
			c := newCrawler(t, p.js, Options{Topology: topo})
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			var maxHeld, maxHosts int64
			deadline := time.Now().Add(10*time.Second + bigMinute + 5*time.Second)
			for time.Now().Before(deadline) {
				st := c.Stats()
				maxHeld, maxHosts = max(maxHeld, int64(st.InFlight)), max(maxHosts, int64(st.Hosts))
				time.Sleep(200 * time.Millisecond)
				if first := big.firstFetch(); !first.IsZero() && time.Since(first) > bigMinute+time.Second {
					break
				}
			}
			st := c.Stats()
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
			s := measurePolite(sites, small, big, window, bigMinute)
			for _, site := range sites {
				for path, k := range site.fetches() {
					if k > 1 {
						t.Errorf("%s%s fetched %d times", site.Host, path, k)
					}
				}
			}
			r := row{hosts: n + 1, sieveRate: s.rate, baseRate: b.rate, sieveN: s.n, baseN: b.n, sieveSlowest: s.slowest, baseSlowest: b.slowest,
				sieveBig: s.big, baseBig: b.big, slowestHost: s.slowestHost, held: maxHeld, deferred: st.Deferred, hostsInMemory: maxHosts}
			rows = append(rows, r)
			t.Logf("%d hosts: sieve %d fetches in the window (%.1f/s), baseline %d, limit %d; slowest host %.2f (%s), big host %.2f of 1/s",
				n+1, s.n, s.rate, b.n, perHost*(n+1), s.slowest, s.slowestHost, s.big)
			t.Logf("where the time goes: small hosts' first fetch after %v (median), %v (last), baseline %v, %v; gaps over 1.5s: sieve %d, baseline %d",
				s.firstMedian.Round(time.Millisecond), s.firstLast.Round(time.Millisecond), b.firstMedian.Round(time.Millisecond), b.firstLast.Round(time.Millisecond), s.longGaps, b.longGaps)
		})
	}
	t.Logf("fetches in the first %v: limit = %d per host", window, perHost)
	t.Log("| hosts | limit | baseline | sieve | sieve/s | sieve/limit | sieve/baseline | slowest host (sieve, baseline) | big host's first minute (sieve, baseline) | most in hand | hosts in memory | deferrals |")
	t.Log("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		limit := perHost * r.hosts
		t.Logf("| %d | %d | %d | %d | %.1f | %.2f× | %.2f× | %.2f, %.2f | %.2f, %.2f | %d | %d | %d |",
			r.hosts, limit, r.baseN, r.sieveN, r.sieveRate, float64(r.sieveN)/float64(limit), float64(r.sieveN)/float64(r.baseN),
			r.sieveSlowest, r.baseSlowest, r.sieveBig, r.baseBig, r.held, r.hostsInMemory, r.deferred)
	}
}

// politeMeasure is what a run did to the sites.
type politeMeasure struct {
	n           int     // page fetches in the window from the first fetch
	rate        float64 // n per second
	slowest     float64 // the slowest small host's rate, as a fraction of 1/s
	slowestHost string
	big         float64 // the big host's fetches in its first minute, over 60
	// Where the time goes: when the small hosts' first fetches came after
	// the first fetch of all (median, last), and how many gaps between two
	// fetches of a small host were over 1.5 s.
	firstMedian, firstLast time.Duration
	longGaps               int
}

func measurePolite(sites, small []*flatSite, big *flatSite, window, minute time.Duration) politeMeasure {
	var all []time.Time
	for _, s := range sites {
		all = append(all, s.pageTimes()...)
	}
	if len(all) == 0 {
		return politeMeasure{}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Before(all[j]) })
	t0, n := all[0], 0
	for _, ts := range all {
		if ts.Sub(t0) < window {
			n++
		}
	}
	m := politeMeasure{n: n, rate: float64(n) / window.Seconds(), slowest: 2}
	var firsts []time.Duration
	for _, s := range small {
		ts := s.pageTimes()
		if len(ts) > 0 {
			firsts = append(firsts, ts[0].Sub(t0))
		}
		for i := 1; i < len(ts); i++ {
			if ts[i].Sub(ts[i-1]) > 1500*time.Millisecond {
				m.longGaps++
			}
		}
		if len(ts) < 2 {
			m.slowest, m.slowestHost = 0, s.Host
			continue
		}
		r := float64(len(ts)-1) / ts[len(ts)-1].Sub(ts[0]).Seconds()
		if len(ts) < s.pages+1 {
			r *= float64(len(ts)) / float64(s.pages+1) // unfinished
		}
		if r < m.slowest {
			m.slowest, m.slowestHost = r, s.Host
		}
	}
	if len(firsts) > 0 {
		slices.Sort(firsts)
		m.firstMedian, m.firstLast = firsts[len(firsts)/2], firsts[len(firsts)-1]
	}
	if ts := big.pageTimes(); len(ts) > 0 {
		k := 0
		for _, x := range ts {
			if x.Sub(ts[0]) < minute {
				k++
			}
		}
		m.big = float64(k) / minute.Seconds()
	}
	return m
}

// politeBaseline fetches every site at exactly one request per second per
// host (a goroutine and a ticker per host, plain net/http) until the small
// sites are done and the big one has had its minute.
func politeBaseline(sites []*flatSite, minute time.Duration) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxIdleConns: 4096}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	for _, s := range sites {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			start := time.Now()
			for i := -1; i < s.pages && time.Since(start) < minute; i++ {
				path := "/"
				if i >= 0 {
					path = fmt.Sprintf("/p/%d", i)
				}
				resp, err := client.Get("http://" + s.Host + path)
				if err == nil {
					resp.Body.Close()
				}
				<-tick.C
			}
		}()
	}
	wg.Wait()
}
