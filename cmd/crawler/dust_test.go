package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/testsite"
)

// dustCrawlIn crawls the DUST web (testsite.StartDust) with the embedded
// crawler in the data dir dir, learning as the crawl's settings say, and
// returns what each family cost (distinct pages, fetches, pages never
// fetched), the run's summary, and what `crawler rules` says of the crawl
// afterwards.
func dustCrawlIn(tb testing.TB, dir, learn string, maxPages int) (web *testsite.DustWeb, byFamily map[string][3]int, sum runSummary, rules string) {
	tb.Helper()
	web, err := testsite.StartDust(testsite.DustOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(web.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	args := append([]string{"run", "--embedded", "--data-dir", dir, "--seed", strings.Join(web.Seeds(), ","),
		"--idle-exit", "2s", "--crawl-max-pages", fmt.Sprint(maxPages), "--learn", learn}, testRunFlags(8)...)
	code, stdout, stderr := runCLI(tb, ctx, append(args, "--json")...)
	if code != 0 {
		tb.Fatalf("crawler run: exit %d\n%s", code, stderr)
	}
	if code, out, _ := runCLI(tb, ctx, "rules", "--data-dir", dir); code == 0 {
		rules = out
	}
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		tb.Fatalf("summary: %v\n%s", err, stdout)
	}
	fetches := web.Fetches()
	byFamily = map[string][3]int{}
	for _, id := range web.Pages() {
		fam, _, _ := strings.Cut(id, ":")
		c := byFamily[fam]
		c[0]++
		c[1] += fetches[id]
		if fetches[id] == 0 {
			c[2]++
		}
		byFamily[fam] = c
	}
	return web, byFamily, sum, rules
}

// dustTable prints byFamily and returns the totals.
func dustTable(tb testing.TB, label string, byFamily map[string][3]int) (pages, fetches, lost int) {
	tb.Helper()
	fams := make([]string, 0, len(byFamily))
	for f := range byFamily {
		fams = append(fams, f)
	}
	sort.Strings(fams)
	for _, f := range fams {
		c := byFamily[f]
		tb.Logf("%-8s %-8s pages %4d  fetches %5d  per page %5.2f  lost %d", label, f, c[0], c[1], float64(c[1])/float64(c[0]), c[2])
		pages, fetches, lost = pages+c[0], fetches+c[1], lost+c[2]
	}
	tb.Logf("%-8s %-8s pages %4d  fetches %5d  per page %5.2f  lost %d", label, "all", pages, fetches, float64(fetches)/float64(pages), lost)
	return pages, fetches, lost
}

// TestDustOnePageOneFetch is issue 37's goal on the DUST web: six hosts
// that spell each page many ways (a session parameter new on every render,
// noisy pages with a random campaign parameter, case, extension, index
// and trailing-slash aliases, repeated segments, a mirror, irrelevant
// parameters) and a control host of distinct look-alikes. Learning on
// (the default), the crawl ends by itself, fetches every distinct page,
// and at most 1.2 times per page overall; the control host is fetched
// whole.
func TestDustOnePageOneFetch(t *testing.T) {
	if testing.Short() {
		t.Skip("a crawl of ~800 pages")
	}
	web, byFamily, sum, rules := dustCrawlIn(t, t.TempDir(), "on", 20_000)
	pages, fetches, lost := dustTable(t, "learn on", byFamily)
	defer func() {
		if t.Failed() {
			t.Logf("crawler rules:\n%s", rules)
		}
	}()
	st := sum.Crawler
	t.Logf("took %.1fs, ended: %s; duplicates %v (%v bytes), spellings dropped %d, second renders %d",
		sum.Seconds, sum.End, st.Duplicates, st.DuplicateBytes, st.Spellings, st.NoiseFetches)
	if lost != 0 {
		t.Errorf("%d distinct pages never fetched, want 0", lost)
	}
	if ratio := float64(fetches) / float64(pages); ratio > 1.2 {
		t.Errorf("%.2f fetches per distinct page, want ≤ 1.2", ratio)
	}
	if c := byFamily["control"]; c[2] != 0 {
		t.Errorf("control host: %d of %d look-alike pages never fetched", c[2], c[0])
	}
	if sum.Left == nil || sum.Left.Frontier != 0 || sum.End != "frontier empty" {
		t.Errorf("the crawl did not end by itself with an empty frontier: end %q, left %+v", sum.End, sum.Left)
	}
	// What was saved is counted: duplicates by kind with their bytes,
	// per host, and spellings dropped at fetch time; none on the control
	// host.
	if st.Duplicates["exact"] == 0 || st.Duplicates["near"] == 0 || st.Spellings == 0 || crawl.Sum(st.DuplicateBytes) == 0 {
		t.Errorf("duplicates %v (%v bytes), spellings %d: want exact and near duplicates and dropped spellings", st.Duplicates, st.DuplicateBytes, st.Spellings)
	}
	control := web.Hosts()["control"]
	for id, cs := range st.Crawls {
		if d, ok := cs.DuplicateHosts[control]; ok && d != (crawl.HostDuplicates{}) {
			t.Errorf("crawl %s: the control host counts duplicates: %+v", id, d)
		}
	}
}

var dustBench = flag.Bool("sieve.dustbench", false, "run the DUST web benchmark (./bench.sh dust)")

// TestDustBench is ./bench.sh dust: the DUST web crawled with learning off
// (the same-run baseline, capped at 15,000 fetches: a session parameter
// new on every render makes it endless) and on, alternating, three times
// each, printing per family distinct pages, fetches per page, pages lost,
// and the medians.
func TestDustBench(t *testing.T) {
	if !*dustBench {
		t.Skip("a benchmark: ./bench.sh dust")
	}
	var ratios [2][]float64
	var secs [2][]float64
	for run := range 3 {
		for i, learn := range []string{"off", "on"} {
			_, byFamily, sum, rules := dustCrawlIn(t, t.TempDir(), learn, 15_000)
			pages, fetches, lost := dustTable(t, fmt.Sprintf("run %d, learn %s", run+1, learn), byFamily)
			st := sum.Crawler
			t.Logf("run %d, learn %s: %.1fs, end %s, duplicates %v, spellings dropped %d, second renders %d, lost %d",
				run+1, learn, sum.Seconds, sum.End, st.Duplicates, st.Spellings, st.NoiseFetches, lost)
			if learn == "on" && run == 0 {
				// The rules learned: each with its support, the fetches
				// wasted before it was active and those it saved.
				t.Logf("crawler rules after run 1:\n%s", rules)
			}
			ratios[i] = append(ratios[i], float64(fetches)/float64(pages))
			secs[i] = append(secs[i], sum.Seconds)
		}
	}
	med := func(v []float64) float64 { s := append([]float64(nil), v...); sort.Float64s(s); return s[len(s)/2] }
	t.Logf("fetches per distinct page, median of 3: learning off %.2f %v, on %.2f %v; ratio on/off %.3f",
		med(ratios[0]), ratios[0], med(ratios[1]), ratios[1], med(ratios[1])/med(ratios[0]))
	t.Logf("seconds, median of 3: learning off %.1f %v, on %.1f %v", med(secs[0]), secs[0], med(secs[1]), secs[1])
}

// docsSite serves a directory of HTML documentation on loopback, counting
// the 200 HTML responses per path.
type docsSite struct {
	srv *httptest.Server
	mu  sync.Mutex
	n   map[string]int
}

func serveDocs(tb testing.TB, dir string) *docsSite {
	tb.Helper()
	d := &docsSite{n: map[string]int{}}
	files := http.FileServer(http.Dir(dir))
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		files.ServeHTTP(rec, r)
		if rec.status == http.StatusOK && strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
			d.mu.Lock()
			d.n[r.URL.Path]++
			d.mu.Unlock()
		}
	}))
	tb.Cleanup(d.srv.Close)
	return d
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }
func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// crawlDocs crawls a documentation directory embedded, learning as learn
// says, and returns the fetches per path.
func crawlDocs(tb testing.TB, dir, learn string) map[string]int {
	tb.Helper()
	site := serveDocs(tb, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	args := append([]string{"run", "--embedded", "--data-dir", tb.TempDir(), "--seed", site.srv.URL + "/index.html",
		"--idle-exit", "2s", "--learn", learn}, testRunFlags(16)...)
	if code, _, stderr := runCLI(tb, ctx, args...); code != 0 {
		tb.Fatalf("crawler run: exit %d\n%s", code, stderr)
	}
	site.mu.Lock()
	defer site.mu.Unlock()
	return maps.Clone(site.n)
}

// TestDustRealDocs crawls real documentation sites, Debian's
// postgresql-doc-15 and python3.11-doc (skipped where they are not
// installed: they are test data, not dependencies), with learning on and
// off: learning loses no page (the same pages are fetched) and fetches
// each once.
func TestDustRealDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("crawls of ~1,200 and ~500 pages")
	}
	for _, dir := range []string{"/usr/share/doc/postgresql-doc-15/html", "/usr/share/doc/python3.11-doc/html"} {
		t.Run(filepath.Base(filepath.Dir(dir)), func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, "index.html")); err != nil {
				t.Skipf("%s not installed (apt-get install %s)", dir, filepath.Base(filepath.Dir(dir)))
			}
			off := crawlDocs(t, dir, "off")
			on := crawlDocs(t, dir, "on")
			sum := func(m map[string]int) (n int) {
				for _, v := range m {
					n += v
				}
				return n
			}
			t.Logf("learning off: %d pages, %d fetches; on: %d pages, %d fetches", len(off), sum(off), len(on), sum(on))
			for p := range off {
				if on[p] == 0 {
					t.Errorf("%s: fetched with learning off, lost with it on", p)
				}
			}
			for p, n := range on {
				if n != 1 {
					t.Errorf("%s fetched %d times with learning on, want 1", p, n)
				}
			}
			if len(on) < 100 {
				t.Errorf("only %d pages fetched", len(on))
			}
		})
	}
}

// TestDustRulesFrom crawls the DUST web twice in one data dir: the second
// crawl, created with --rules-from the first, starts with its rules and
// wastes no fetch learning them again.
func TestDustRulesFrom(t *testing.T) {
	if testing.Short() {
		t.Skip("two crawls of ~800 pages")
	}
	web, err := testsite.StartDust(testsite.DustOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	crawlAs := func(id string, extra ...string) (perPage float64) {
		web.Reset()
		args := append([]string{"run", "--embedded", "--data-dir", dir, "--crawl-id", id, "--seed", strings.Join(web.Seeds(), ","),
			"--idle-exit", "2s"}, append(extra, testRunFlags(8)...)...)
		if code, _, stderr := runCLI(t, ctx, args...); code != 0 {
			t.Fatalf("crawler run %s: exit %d\n%s", id, code, stderr)
		}
		fetches, lost := 0, 0
		for _, id := range web.Pages() {
			fetches += web.Fetches()[id]
			if web.Fetches()[id] == 0 {
				lost++
			}
		}
		if lost != 0 {
			t.Errorf("crawl %s: %d pages never fetched", id, lost)
		}
		return float64(fetches) / float64(len(web.Pages()))
	}
	first := crawlAs("first")
	second := crawlAs("second", "--rules-from", "first")
	t.Logf("fetches per distinct page: first crawl %.3f, second from its rules %.3f", first, second)
	if second >= first || second > 1.06 {
		t.Errorf("second crawl, from the first's rules: %.3f fetches per page, want fewer than the first (%.3f) and ≤ 1.06", second, first)
	}
}
