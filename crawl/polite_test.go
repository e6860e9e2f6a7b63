package crawl

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/testsite"
)

// flatSite serves an index page linking to Pages pages that link nowhere,
// on its own loopback address, and logs when each path was requested: the
// shape of a host with a backlog (all its URLs known after one fetch).
// Each page has text of its own (pageText): hosts serving the same pages
// would be mirrors, and a crawl that learns which spellings name one page
// (issue 37) rightly fetches each page on one of them only.
type flatSite struct {
	URL   string
	Host  string
	pages int
	srv   *http.Server
	// indexLatency delays the index page's answer.
	indexLatency time.Duration
	// unavailable, if set, is a page's path answering its first request
	// with 503 and Retry-After: retryAfter seconds.
	unavailable string
	retryAfter  int

	mu    sync.Mutex
	times map[string][]time.Time // path → request times (robots.txt included)
}

func startFlatSite(tb testing.TB, addr string, pages int) *flatSite {
	tb.Helper()
	ln, err := net.Listen("tcp", addr+":0")
	if err != nil {
		tb.Fatalf("listen on %s: %v", addr, err)
	}
	s := &flatSite{Host: ln.Addr().String(), pages: pages, times: map[string][]time.Time{}}
	s.URL = "http://" + s.Host + "/"
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	tb.Cleanup(func() { _ = s.srv.Close() })
	return s
}

func (s *flatSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.times[r.URL.Path] = append(s.times[r.URL.Path], time.Now())
	first := len(s.times[r.URL.Path]) == 1
	s.mu.Unlock()
	switch {
	case r.URL.Path == s.unavailable && first:
		w.Header().Set("Retry-After", fmt.Sprint(s.retryAfter))
		http.Error(w, "come back later", http.StatusServiceUnavailable)
	case r.URL.Path == "/":
		time.Sleep(s.indexLatency)
		w.Header().Set("Content-Type", "text/html")
		var b strings.Builder
		b.WriteString("<html><body>")
		for i := range s.pages {
			fmt.Fprintf(&b, `<a href="/p/%d">%d</a>`, i, i)
		}
		b.WriteString("</body></html>")
		_, _ = w.Write([]byte(b.String()))
	case strings.HasPrefix(r.URL.Path, "/p/"):
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html><body><p>" + pageText(s.Host+r.URL.Path) + "</p></body></html>"))
	default:
		http.NotFound(w, r)
	}
}

// fetches returns the requests of each path but robots.txt.
func (s *flatSite) fetches() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for p, ts := range s.times {
		if p != "/robots.txt" {
			out[p] = len(ts)
		}
	}
	return out
}

// pageTimes returns when pages (robots.txt aside) were requested, in order.
func (s *flatSite) pageTimes() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Time
	for p, ts := range s.times {
		if p != "/robots.txt" {
			out = append(out, ts...)
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// firstFetch returns when the first page was requested (zero: none yet).
func (s *flatSite) firstFetch() time.Time {
	if ts := s.pageTimes(); len(ts) > 0 {
		return ts[0]
	}
	return time.Time{}
}

// reset forgets the requests seen.
func (s *flatSite) reset() {
	s.mu.Lock()
	clear(s.times)
	s.mu.Unlock()
}

// served returns how many pages (robots.txt aside) the site served.
func (s *flatSite) served() int {
	n := 0
	for _, c := range s.fetches() {
		n += c
	}
	return n
}

// TestBacklogDoesNotHoldOtherHosts crawls a host with a backlog of 200 URLs
// beside a small host in the same (single) partition, with few messages in
// hand allowed: the small host is crawled at its own pace while the big one
// is still far from done, and every page of both is fetched exactly once.
// Before the scheduler, the big host's messages held every in-flight slot
// while they waited for its turn, and the small host waited for most of the
// backlog (issue 17).
func TestBacklogDoesNotHoldOtherHosts(t *testing.T) {
	topo := frontier.Topology{Partitions: 1}
	big := startFlatSite(t, "127.0.0.2", 200)
	small := startFlatSite(t, "127.0.0.3", 10)
	p := startPipeline(t, topo)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	// The small host's index answers late, so its links reach the
	// partition behind the big host's 200.
	small.indexLatency = 300 * time.Millisecond
	if err := seed(ctx, p.js, topo, "backlog", []string{big.URL, small.URL}); err != nil {
		t.Fatal(err)
	}
	opts := fastOptions(topo, 2)
	opts.Fetcher.HostParallel = 1
	opts.Fetcher.HostDelay = 20 * time.Millisecond
	opts.Fetcher.IgnoreRobots = true
	opts.InFlight = 8
	opts.IdleExit = time.Second
	c := newCrawler(t, p.js, opts)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	deadline := time.Now().Add(30 * time.Second)
	for small.served() < 11 {
		if time.Now().After(deadline) {
			t.Fatalf("the small host served %d of 11 pages: %+v", small.served(), c.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := big.served(); n > 100 {
		t.Errorf("the small host's 11 pages came after %d of the big host's 201: held up by its backlog", n)
	} else {
		t.Logf("the small host's 11 pages came after %d of the big host's 201", n)
	}
	if err := <-done; !errors.Is(err, ErrIdle) {
		t.Fatalf("Run = %v, want %v; stats %+v", err, ErrIdle, c.Stats())
	}
	for _, s := range []*flatSite{big, small} {
		f := s.fetches()
		if len(f) != s.pages+1 {
			t.Errorf("%s: %d paths fetched, want %d", s.Host, len(f), s.pages+1)
		}
		for path, n := range f {
			if n != 1 {
				t.Errorf("%s%s fetched %d times, want 1", s.Host, path, n)
			}
		}
	}
	st := c.Stats()
	if st.Deferred == 0 {
		t.Errorf("no message was deferred with 8 in hand and a backlog of 200: %+v", st)
	}
	t.Logf("stats: deferred %d, fetched %d", st.Deferred, st.Fetched)
}

// TestRetryAfterHoldsHostOrURL checks what a 503's Retry-After holds back:
// by default every URL of the host (no page of it is requested until the
// wait is over), with RetryAfterURL only the URL's retry (the host's other
// pages go on at once); in both, the page itself is fetched again after the
// wait, once.
func TestRetryAfterHoldsHostOrURL(t *testing.T) {
	for _, tc := range []struct {
		name     string
		urlOnly  bool
		holdHost bool
	}{
		{name: "host (default)", holdHost: true},
		{name: "url", urlOnly: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := frontier.Topology{Partitions: 1}
			site := startFlatSite(t, "127.0.0.2", 30)
			site.unavailable, site.retryAfter = "/p/0", 2
			p := startPipeline(t, topo)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			if err := seed(ctx, p.js, topo, "retry-after", []string{site.URL}); err != nil {
				t.Fatal(err)
			}
			opts := fastOptions(topo, 1)
			opts.Fetcher.HostParallel = 1
			opts.Fetcher.HostDelay = -1
			opts.Fetcher.IgnoreRobots = true
			opts.Fetcher.RetryAfterURL = tc.urlOnly
			opts.MaxRetries = 2
			opts.IdleExit = 500 * time.Millisecond
			c := newCrawler(t, p.js, opts)
			if err := c.Run(ctx); !errors.Is(err, ErrIdle) {
				t.Fatalf("Run = %v, want %v", err, ErrIdle)
			}
			site.mu.Lock()
			unavailable := slices.Clone(site.times["/p/0"])
			var others []time.Time
			for path, ts := range site.times {
				if strings.HasPrefix(path, "/p/") && path != "/p/0" {
					others = append(others, ts...)
				}
			}
			site.mu.Unlock()
			if len(unavailable) != 2 {
				t.Fatalf("/p/0 requested %d times, want 2 (the 503, then its retry)", len(unavailable))
			}
			if wait := unavailable[1].Sub(unavailable[0]); wait < 1900*time.Millisecond {
				t.Errorf("/p/0 retried %v after its 503, want at least its Retry-After (2s)", wait)
			}
			during := 0
			for _, at := range others {
				if at.After(unavailable[0]) && at.Before(unavailable[0].Add(1900*time.Millisecond)) {
					during++
				}
			}
			t.Logf("%d of the host's other pages requested during the 2 s after the 503", during)
			if tc.holdHost && during > 0 {
				t.Errorf("%d pages of the host requested during its Retry-After, want none", during)
			}
			if !tc.holdHost && during == 0 {
				t.Errorf("no page of the host requested during the URL's Retry-After: the host was held")
			}
		})
	}
}

// TestCrawlerPoliteness checks the politeness a crawl keeps toward a host:
// with HostParallel 1 and a 100ms delay, never two requests at once and
// starts at least the delay apart; a host named in FetcherOptions.Hosts (a
// site one owns) gets its own parallelism and no delay, every other host the
// general policy (issue 10 item 4: the demo turned politeness off for every
// host).
func TestCrawlerPoliteness(t *testing.T) {
	const delay = 100 * time.Millisecond
	own := startSite(t, testsite.Options{Pages: 30, Latency: 50 * time.Millisecond})
	other := startSite(t, testsite.Options{Pages: 20, Latency: 5 * time.Millisecond, Addr: "127.0.0.2"})
	topo := frontier.Topology{Partitions: 2}
	p := startPipeline(t, topo)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if err := seed(ctx, p.js, topo, "polite", []string{own.URL, other.URL}); err != nil {
		t.Fatal(err)
	}
	opts := fastOptions(topo, 3)
	opts.Fetcher.HostParallel = 1
	opts.Fetcher.HostDelay = delay
	opts.Fetcher.Hosts = map[string]HostPolicy{strings.ToUpper(own.Host()): {Parallel: 3, Delay: -1}}
	c := newCrawler(t, p.js, opts)
	if err := c.Run(ctx); !errors.Is(err, ErrIdle) {
		t.Fatalf("Run = %v, want %v", err, ErrIdle)
	}
	if n, _ := own.MaxInFlight(); n < 2 || n > 3 {
		t.Errorf("%s (own, parallel 3) served up to %d requests at once, want 2 or 3", own.Host(), n)
	}
	if n, reqs := other.MaxInFlight(); n != 1 {
		t.Errorf("%s (general policy) served %d requests at once, want 1: %q", other.Host(), n, reqs)
	}
	// Starts are spaced by the delay at the crawler; arrivals may be a
	// little closer (a new connection's handshake delays only the first).
	if gap := other.MinGap(); gap < delay*8/10 {
		t.Errorf("%s: shortest gap between requests = %v, want about %v or more", other.Host(), gap, delay)
	}
}

// pageText is a paragraph of 40 words drawn from a generator seeded by
// name: pages of distinct names share no more than chance.
func pageText(name string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(h.Sum64(), 38))
	words := make([]string, 40)
	for i := range words {
		words[i] = fmt.Sprintf("w%x", rng.Uint32()%4096)
	}
	return strings.Join(words, " ")
}
