package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/sievecrawl/sieve/testsite"
)

var collyBench = flag.Bool("sieve.collybench", false, "run the one-site crawl against colly (./bench.sh crawl)")

// collyChildEnv, when set in a child of the test binary, makes it crawl
// the URL it holds with colly and exit (see TestMain): colly runs in a
// process of its own, so that its CPU time is measured as Sieve's is.
const collyChildEnv = "SIEVE_BENCH_COLLY"

// collyRequest is what a colly child crawls.
type collyRequest struct {
	URL      string `json:"url"`
	Parallel int    `json:"parallel"`
	MaxDepth int    `json:"max_depth"` // Sieve's: the seed at 0
}

// collyChild crawls as a 40-line colly program a new user would write: its
// own visited set, fragments stripped, the seed's host only, synchronous at
// one request at a time and Async with a Parallelism limit above, the depth
// of the Sieve run. It prints the pages fetched as JSON.
func collyChild(spec string) int {
	var req collyRequest
	if err := json.Unmarshal([]byte(spec), &req); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	u, err := url.Parse(req.URL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	opts := []colly.CollectorOption{colly.AllowedDomains(u.Hostname()), colly.MaxDepth(req.MaxDepth + 1)}
	if req.Parallel > 1 {
		opts = append(opts, colly.Async(true))
	}
	c := colly.NewCollector(opts...)
	if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: req.Parallel}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var fetched atomic.Int64
	c.OnResponse(func(*colly.Response) { fetched.Add(1) })
	c.OnError(func(*colly.Response, error) { fetched.Add(1) })
	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		link, _, _ := strings.Cut(e.Request.AbsoluteURL(e.Attr("href")), "#")
		_ = e.Request.Visit(link)
	})
	if err := c.Visit(req.URL); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c.Wait()
	_ = json.NewEncoder(os.Stdout).Encode(map[string]int64{"fetched": fetched.Load()})
	return 0
}

// benchSite is a site both crawl.
type benchSite struct {
	name, seed string
	maxDepth   int
	flags      []string // Sieve's settings for it beyond the shared ones
}

// crawlRun is one crawl's measure: wall time (Sieve's without its idle
// exit), CPU time (user + system) of the crawling process, responses.
type crawlRun struct {
	wall, cpu time.Duration
	fetched   int64
}

// TestCrawlVsColly is ./bench.sh crawl: one site, no politeness delay,
// crawled by Sieve's embedded mode (`crawler run --embedded`, a process of
// its own: NATS, a dedup worker and the crawler) and by colly (a process
// of its own), pairs alternating, three of each, at one request at a time
// and at four. The sites: the demo site (always; served by this test
// process, so neither side pays for it), and where Debian's packages are
// installed PostgreSQL's and Python's documentation served by python3 -m
// http.server (HTTP/1.0: a connection per request, as the issue measured).
// Sieve's wall time leaves out its idle exit (1 s). It prints each run,
// then per site and parallelism the medians, the ratio Sieve/colly of wall
// time (goal ≤ 1.0), CPU per response of each and their ratio, and the
// ratio of CPU for the whole site (goal ≤ 1.2 per page: where both fetch
// the same pages the two ratios agree; on the demo site Sieve learns to
// skip the traps' spellings and makes half colly's responses, so CPU per
// response charges it for work it did not do, and the site's CPU, the
// same distinct pages for both, is the measure per page). Last, Sieve
// alone on the largest site at 1, 2, 4, 8 and 16 requests at a time:
// pages per second and CPU used, to show where throughput stops growing
// (the server or the CPU).
func TestCrawlVsColly(t *testing.T) {
	if !*collyBench {
		t.Skip("a benchmark: ./bench.sh crawl")
	}
	bin := crawlerBinary(t)
	var sites []benchSite
	demo := startSite(t, testsite.Options{Pages: 300})
	sites = append(sites, benchSite{name: "demo site (300 pages and traps)", seed: demo.URL, maxDepth: 16,
		// As --demo crawls it (its 503s hold back their page, not the
		// site), but without retries: colly makes none.
		flags: []string{"--crawl-retry-after", "url", "--crawl-max-retries", "0"}})
	for _, d := range []struct{ name, dir, index string }{
		{"PostgreSQL documentation", "/usr/share/doc/postgresql-doc-15/html", "index.html"},
		{"Python documentation", "/usr/share/doc/python3.11-doc/html", "index.html"},
	} {
		if _, err := os.Stat(filepath.Join(d.dir, d.index)); err != nil {
			t.Logf("%s: not installed (%s), skipped", d.name, d.dir)
			continue
		}
		addr := pythonHTTPServer(t, d.dir)
		sites = append(sites, benchSite{name: d.name, seed: "http://" + addr + "/" + d.index, maxDepth: 16})
	}
	for _, site := range sites {
		for _, parallel := range []int{1, 4} {
			var sieve, coll []crawlRun
			for round := range 3 {
				c := runColly(t, site, parallel)
				s := runSieve(t, bin, site, parallel)
				t.Logf("%s, %d at a time, round %d: colly %d responses in %.2fs (CPU %.2fs); Sieve %d in %.2fs (CPU %.2fs)",
					site.name, parallel, round+1, c.fetched, c.wall.Seconds(), c.cpu.Seconds(), s.fetched, s.wall.Seconds(), s.cpu.Seconds())
				coll, sieve = append(coll, c), append(sieve, s)
			}
			cw, sw := medianOf(coll, func(r crawlRun) float64 { return r.wall.Seconds() }), medianOf(sieve, func(r crawlRun) float64 { return r.wall.Seconds() })
			cc := medianOf(coll, func(r crawlRun) float64 { return r.cpu.Seconds() * 1000 / float64(max(r.fetched, 1)) })
			sc := medianOf(sieve, func(r crawlRun) float64 { return r.cpu.Seconds() * 1000 / float64(max(r.fetched, 1)) })
			ct, st := medianOf(coll, func(r crawlRun) float64 { return r.cpu.Seconds() }), medianOf(sieve, func(r crawlRun) float64 { return r.cpu.Seconds() })
			t.Logf("%s, %d at a time, medians of 3: colly %.2fs, Sieve %.2fs: wall ratio %.2f (goal ≤ 1.0); CPU per response colly %.2f ms, Sieve %.2f ms: ratio %.2f; CPU for the site colly %.2fs, Sieve %.2fs: ratio %.2f (goal ≤ 1.2)",
				site.name, parallel, cw, sw, sw/cw, cc, sc, sc/cc, ct, st, st/ct)
		}
	}
	big := sites[len(sites)-1]
	for _, s := range sites {
		if strings.Contains(s.name, "PostgreSQL") {
			big = s
		}
	}
	for _, parallel := range []int{1, 2, 4, 8, 16} {
		var runs []crawlRun
		for range 3 {
			runs = append(runs, runSieve(t, bin, big, parallel))
		}
		w := medianOf(runs, func(r crawlRun) float64 { return r.wall.Seconds() })
		rate := medianOf(runs, func(r crawlRun) float64 { return float64(r.fetched) / r.wall.Seconds() })
		busy := medianOf(runs, func(r crawlRun) float64 { return r.cpu.Seconds() / r.wall.Seconds() })
		t.Logf("%s, Sieve alone at %2d at a time, medians of 3: %.2fs, %.0f pages/s, CPU %.2f cores of %d", big.name, parallel, w, rate, busy, runtime.NumCPU())
	}
}

func medianOf(runs []crawlRun, f func(crawlRun) float64) float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// runColly crawls site with colly in a child process.
func runColly(t *testing.T, site benchSite, parallel int) crawlRun {
	t.Helper()
	spec, _ := json.Marshal(collyRequest{URL: site.seed, Parallel: parallel, MaxDepth: site.maxDepth})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), collyChildEnv+"="+string(spec))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("colly: %v\n%s", err, errb.String())
	}
	wall := time.Since(start)
	var res struct{ Fetched int64 }
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("colly's output %q: %v", out.String(), err)
	}
	return crawlRun{wall: wall, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), fetched: res.Fetched}
}

// runSieve crawls site with `crawler run --embedded` in a fresh data dir.
func runSieve(t *testing.T, bin string, site benchSite, parallel int) crawlRun {
	t.Helper()
	const idle = time.Second
	args := append([]string{"run", "--embedded", "--data-dir", t.TempDir(), "--seed", site.seed,
		"--crawl-host-delay", "0", "--crawl-host-parallel", strconv.Itoa(parallel),
		"--crawl-max-depth", strconv.Itoa(site.maxDepth), "--idle-exit", idle.String(),
		"--progress", "never", "--log-level", "warn", "--json"}, site.flags...)
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("crawler run: %v\n%s", err, errb.String())
	}
	wall := time.Since(start) - idle
	var sum runSummary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("crawler run's summary %q: %v", out.String(), err)
	}
	return crawlRun{wall: wall, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), fetched: sum.Crawler.Fetched}
}

// pythonHTTPServer serves dir with python3 -m http.server on a free
// loopback port until the test ends, and returns its address.
func pythonHTTPServer(t *testing.T, dir string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("python3", "-m", "http.server", strconv.Itoa(port), "--bind", "127.0.0.1", "--directory", dir)
	if err := cmd.Start(); err != nil {
		t.Fatalf("python3 -m http.server: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("python3 -m http.server on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
