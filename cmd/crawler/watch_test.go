package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sievecrawl/sieve/auth"
	"github.com/sievecrawl/sieve/auth/authtest"
	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/testsite"
	"github.com/sievecrawl/sieve/watch"
	"github.com/sievecrawl/sieve/watch/watchtest"
)

// command runs a program to its end and returns its exit code and output.
func command(tb testing.TB, bin string, args ...string) (code int, stdout, stderr string) {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errb.String()
	} else if err != nil {
		tb.Fatalf("%s %q: %v", bin, args, err)
	}
	return 0, out.String(), errb.String()
}

// TestEmbeddedWatch runs a real embedded crawl of the test site with the
// crawler binary and watches it in headless Chromium: the page's address is
// printed and announced in the data dir; while the crawl runs, `crawler
// stats` and `dedup-worker stats --data-dir` answer from the process; once
// the crawl is done the page shows the numbers of the run's summary and
// every chart has drawn; after the process stopped, both commands answer
// from the data dir (saved report, filter snapshot), and a snapshot path
// that does not exist is an error.
func TestEmbeddedWatch(t *testing.T) {
	ctx := watchtest.Browser(t, 90*time.Second)
	bin, worker := crawlerBinary(t), workerBinary(t)
	site := startSite(t, testsite.Options{Pages: 150})
	dir := t.TempDir()
	p := startProc(t, "crawler", bin, append([]string{"run", "--embedded", "--data-dir", dir, "--seed", site.URL,
		"--idle-exit", "10m", "--json"}, testRunFlags(8)...), nil)

	var url string
	for deadline := time.Now().Add(30 * time.Second); url == ""; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(dir, watch.URLFile)); err == nil {
			url = strings.TrimSpace(string(b))
		} else if time.Now().After(deadline) {
			t.Fatalf("no %s in the data dir after 30s; log:\n%s", watch.URLFile, p.logTail())
		}
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("page at %s, want a loopback address", url)
	}
	if log := p.logTail(); !strings.Contains(log, "watch it at "+url+"\n") {
		t.Errorf("the crawler did not print %q; log:\n%s", "watch it at "+url, log)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#chart-seen canvas"))); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}

	// The crawl is done when the queues are empty, nothing is in hand and
	// the counts have not moved for two seconds.
	const state = `(r => r && r.crawler && r.shared && r.streams && r.filter ? JSON.stringify({
		idle: r.crawler.in_flight === 0 && r.streams.frontier_queued === 0 && r.streams.discovered_queued === 0 && r.streams.discovered_in_flight === 0,
		n: [r.crawler.fetched, r.shared.totals.links, r.shared.totals.admitted, r.filter.items]}) : "")(window.sieveWatch.report)`
	var last string
	for deadline, since := time.Now().Add(60*time.Second), time.Now(); ; time.Sleep(200 * time.Millisecond) {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](state))
		if err != nil {
			t.Fatal(err)
		}
		if s != last {
			last, since = s, time.Now()
		}
		if strings.Contains(s, `"idle":true`) && !strings.Contains(s, `"n":[0,`) && time.Since(since) > 2*time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the crawl did not settle in 60s: %s; log:\n%s", s, p.logTail())
		}
	}

	// While it runs, both programs' stats commands read the process.
	code, out, errs := command(t, bin, "stats", "--data-dir", dir, "--json")
	var live watch.Report
	if err := json.Unmarshal([]byte(out), &live); code != 0 || err != nil || live.Role != "embedded" || live.Crawler == nil {
		t.Fatalf("crawler stats while running: exit %d, %v, role %q; stderr %s", code, err, live.Role, errs)
	}
	code, out, errs = command(t, worker, "stats", "--data-dir", dir, "--json")
	var wrep watch.Report
	if err := json.Unmarshal([]byte(out), &wrep); code != 0 || err != nil || wrep.Shared == nil || wrep.Worker == nil || wrep.Streams == nil {
		t.Fatalf("dedup-worker stats --data-dir while running: exit %d, %v; stdout %s stderr %s", code, err, out, errs)
	}

	// check asks the running process, not the snapshot file: with the file
	// moved away the seed is still seen.
	snap := crawlSnapshot(dir, "bloom")
	if err := os.Rename(snap, snap+".away"); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := command(t, worker, "check", "--data-dir", dir, site.URL, site.URL+"never-linked"); code != 0 ||
		!strings.Contains(out, "seen\t") || !strings.Contains(out, "new\t") {
		t.Errorf("dedup-worker check --data-dir while running: exit %d, %q %q", code, out, errs)
	}
	// Back, unless the running crawl saved its filter meanwhile: its file
	// is newer (a link never replaces a file, a rename would).
	if err := os.Link(snap+".away", snap); err != nil && !errors.Is(err, fs.ErrExist) {
		t.Fatal(err)
	}
	if err := os.Remove(snap + ".away"); err != nil {
		t.Fatal(err)
	}

	ids := []string{"total-fetched", "total-links", "total-admitted", "total-duplicates", "total-rejected", "total-retried",
		"total-filter", "outcome-2xx", "outcome-3xx", "outcome-4xx", "outcome-5xx", "outcome-robots", "outcome-failed"}
	page, err := watchtest.Text(ctx, ids...)
	if err != nil {
		t.Fatal(err)
	}
	points, err := watchtest.ChartPoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watchtest.SaveScreenshot(t, ctx, "watch-embedded.png")

	// Stop the run: its summary is the crawl's.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 60*time.Second)
	sum := p.summary(t)
	if sum.Dedup == nil {
		t.Fatalf("summary without dedup counts: %+v", sum)
	}
	st, tot := sum.Crawler, sum.Dedup.Totals
	want := map[string]int64{
		"total-fetched": st.Fetched, "total-links": tot.Links, "total-admitted": tot.Admitted, "total-duplicates": tot.Duplicates,
		"total-rejected": tot.RejectedTotal(), "total-retried": crawl.Sum(st.Retried),
		// A fresh filter holds exactly the URLs admitted.
		"total-filter": tot.Admitted,
	}
	for _, o := range crawl.Outcomes() {
		want["outcome-"+o] = st.Outcomes[o]
	}
	if sum.Filter != nil {
		want["total-filter"] = int64(sum.Filter.Items)
	}
	for _, id := range ids {
		if page[id] != watchtest.Num(want[id]) {
			t.Errorf("page #%s = %q, the run's summary says %d", id, page[id], want[id])
		}
	}
	if st.Fetched == 0 || st.Outcomes[crawl.Outcome4xx] == 0 || tot.Duplicates == 0 {
		t.Errorf("the test site's crawl fetches pages, 404s and duplicates: %+v", st)
	}
	if len(points) != 4 {
		t.Errorf("charts %v, want 4", points)
	}
	for id, n := range points {
		if n <= 0 {
			t.Errorf("chart %s drew %v points, want some", id, n)
		}
	}
	if live.Crawler.Fetched != st.Fetched || wrep.Shared.Totals.Admitted != tot.Admitted {
		t.Errorf("while running: crawler stats fetched %d, dedup-worker stats admitted %d; the run: %d, %d",
			live.Crawler.Fetched, wrep.Shared.Totals.Admitted, st.Fetched, tot.Admitted)
	}

	// After the run, the data dir answers.
	if _, err := os.Stat(filepath.Join(dir, watch.URLFile)); !os.IsNotExist(err) {
		t.Errorf("%s left behind after the run: %v", watch.URLFile, err)
	}
	code, out, errs = command(t, bin, "stats", "--data-dir", dir, "--json")
	var saved watch.Report
	if err := json.Unmarshal([]byte(out), &saved); code != 0 || err != nil || saved.Crawler == nil || saved.Shared == nil {
		t.Fatalf("crawler stats after the run: exit %d, %v; stderr %s", code, err, errs)
	}
	if saved.Crawler.Fetched != st.Fetched || saved.Shared.Totals.Admitted != tot.Admitted || saved.Shared.Totals.Duplicates != tot.Duplicates {
		t.Errorf("crawler stats after the run: fetched %d admitted %d duplicates %d; the run: %d %d %d",
			saved.Crawler.Fetched, saved.Shared.Totals.Admitted, saved.Shared.Totals.Duplicates, st.Fetched, tot.Admitted, tot.Duplicates)
	}
	if code, out, errs := command(t, bin, "stats", "--data-dir", dir); code != 0 || !strings.Contains(out, watchtest.Num(st.Fetched)) {
		t.Errorf("crawler stats (table) after the run: exit %d\n%s%s", code, out, errs)
	}
	// The filter's size (testRunFlags) comes from the crawl's report.
	code, out, errs = command(t, worker, "stats", "--data-dir", dir, "--json")
	wrep = watch.Report{}
	if err := json.Unmarshal([]byte(out), &wrep); code != 0 || err != nil || wrep.Shared == nil || wrep.Filter == nil ||
		wrep.Shared.Totals.Admitted != tot.Admitted || wrep.Filter.Items != uint64(tot.Admitted) {
		t.Errorf("dedup-worker stats --data-dir after the run: exit %d, %v; stdout %s stderr %s", code, err, out, errs)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"seen", []string{"check", "--data-dir", dir, site.URL}, 0, "seen\t"},
		{"new", []string{"check", "--data-dir", dir, site.URL + "never-linked"}, 0, "new\t"},
		// A snapshot that does not exist is an error, never "new".
		{"no snapshot", []string{"check", "--data-dir", filepath.Join(dir, "nothing"), site.URL}, 1, "does not exist"},
		{"no snapshot file", []string{"check", "--filter-snapshot", filepath.Join(dir, "seen.nothing"), site.URL}, 1, "does not exist"},
		{"no crawl", []string{"stats", "--data-dir", filepath.Join(dir, "nothing")}, 1, "does not exist"},
	} {
		code, out, errs := command(t, worker, tc.args...)
		if code != tc.code || !strings.Contains(out+errs, tc.contains) {
			t.Errorf("%s: dedup-worker %q = exit %d, %q %q; want exit %d containing %q", tc.name, tc.args, code, out, errs, tc.code, tc.contains)
		}
	}
	if code, _, errs := command(t, bin, "stats", "--data-dir", filepath.Join(dir, "nothing")); code != 1 || !strings.Contains(errs, "no embedded crawl") {
		t.Errorf("crawler stats of an unused dir: exit %d, %s", code, errs)
	}
}

// TestStatsOfSecuredRun: `crawler stats` of a live embedded run whose page
// is behind TLS (a private CA) and tokens reads it with the client
// settings, and without them says which setting is missing instead of
// showing the report of an earlier run.
func TestStatsOfSecuredRun(t *testing.T) {
	ca := authtest.NewCA(t, "run CA")
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	authtest.WriteFile(t, tokens, []byte("ops-token-0123456789abcdef,ops,read\n"))
	tokenFile := filepath.Join(dir, "ops.token")
	authtest.WriteFile(t, tokenFile, []byte("ops-token-0123456789abcdef\n"))
	tf, err := auth.OpenTokenFile(tokens, auth.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tf.Close() })
	dataDir := t.TempDir()
	// An earlier run's report, which a refused read must not show.
	authtest.WriteFile(t, filepath.Join(dataDir, watch.ReportFile), []byte(`{"role":"embedded","id":"earlier-run"}`))
	s, err := watch.New(watch.Sources{Role: "embedded", ID: "live-run", Counters: stats.NewMemory()},
		watch.Options{Interval: 50 * time.Millisecond, Dir: dataDir, WebConfigFile: ca.WebConfig(t, "reader", "s3cret-pass"),
			Auth: auth.New(auth.Options{Server: "http", Tokens: tf})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"with CA and token", []string{"--client-ca-file", ca.CertFile, "--client-token-file", tokenFile}, 0, "live-run"},
		{"without a token", []string{"--client-ca-file", ca.CertFile}, 1, "client.token_file"},
		{"without the CA", []string{"--client-token-file", tokenFile}, 1, "client.ca_file"},
	} {
		code, out, errOut := runCLI(t, t.Context(), append([]string{"stats", "--json", "--data-dir", dataDir}, tc.args...)...)
		if code != tc.code || !strings.Contains(out+errOut, tc.contains) || strings.Contains(out, "earlier-run") {
			t.Errorf("%s: exit %d, %q %q; want exit %d containing %q", tc.name, code, out, errOut, tc.code, tc.contains)
		}
	}
}
