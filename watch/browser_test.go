package watch

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/stats"
)

var screenshotPath = flag.String("watch.screenshot", "", "also save the live page's screenshot to this PNG `path` (the README's: docs/watch.png)")

// chromiumPath finds headless Chromium (Debian package chromium), skipping
// the test without it or, with CI=true, failing it: a CI run must not pass
// without the browser test.
func chromiumPath(tb testing.TB) string {
	tb.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium found (Debian: apt-get install chromium; test.sh installs it)"
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// browser starts headless Chromium with a fresh profile and returns a
// context for chromedp actions on one tab, ended at cleanup.
func browser(tb testing.TB, timeout time.Duration) context.Context {
	tb.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(tb)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(tb.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(tb.Logf))
	tb.Cleanup(func() { cancelTab(); cancelAlloc() })
	// The first action starts the browser, which lives as long as ctx:
	// the timeout goes on the actions' context, derived after it.
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("start chromium: %v", err)
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	tb.Cleanup(cancelTimeout)
	return ctx
}

// pageText reads the text of the elements with the given ids.
func pageText(ctx context.Context, ids ...string) (map[string]string, error) {
	js := fmt.Sprintf(`Object.fromEntries(%q.split(",").map(id => [id, (document.getElementById(id) || {}).textContent]))`, strings.Join(ids, ","))
	return chromedp.Run(ctx, chromedp.Evaluate[map[string]string](js))
}

func num(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// changed tells the page its crawl selector changed.
var changed = chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
	_, err := chromedp.Evaluate[bool](`document.getElementById("crawl").dispatchEvent(new Event("change"))`)(ctx, t)
	return err
})

// polled waits until the page has polled the process once.
var polled = chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
	_, err := chromedp.Poll[bool](`window.sieveWatch.polls >= 1`, chromedp.WithPollingTimeout(10*time.Second))(ctx, t)
	return err
})

// saveScreenshot writes png into the test's artifact directory
// (SIEVE_ARTIFACTS, or a temporary directory) and to -watch.screenshot.
func saveScreenshot(tb testing.TB, name string, png []byte) {
	tb.Helper()
	dir := os.Getenv("SIEVE_ARTIFACTS")
	if dir == "" {
		dir = tb.TempDir()
	}
	paths := []string{filepath.Join(dir, name)}
	if *screenshotPath != "" {
		paths = append(paths, *screenshotPath)
	}
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, png, 0o644); err != nil {
			tb.Fatal(err)
		}
		tb.Logf("screenshot: %s (%d bytes)", p, len(png))
	}
}

// TestPage opens the live page in headless Chromium while a real crawl of
// the test site runs, waits for the crawl to end, and checks that the page
// shows the crawl's final numbers and that every chart drew points.
func TestPage(t *testing.T) {
	ctx := browser(t, 60*time.Second)
	p := startPipeline(t, 120)
	if err := chromedp.Do(ctx, chromedp.Navigate(p.url), chromedp.WaitVisible(chromedp.CSS("#chart-seen canvas"))); err != nil {
		t.Fatalf("open %s: %v", p.url, err)
	}
	r := p.wait(t)
	st, sh, f := r.Crawler.Stats, r.Shared.Totals, r.Filter
	want := map[string]string{
		"total-fetched":    num(st.Fetched),
		"total-links":      num(sh.Links),
		"total-admitted":   num(sh.Admitted),
		"total-duplicates": num(sh.Duplicates),
		"total-rejected":   num(sh.RejectedTotal()),
		"total-retried":    num(crawl.Sum(st.Retried)),
		"total-frontier":   "0",
		"total-filter":     num(int64(f.Items)),
		"outcome-2xx":      num(st.Outcomes[crawl.Outcome2xx]),
		"outcome-3xx":      num(st.Outcomes[crawl.Outcome3xx]),
		"outcome-4xx":      num(st.Outcomes[crawl.Outcome4xx]),
		"outcome-5xx":      num(st.Outcomes[crawl.Outcome5xx]),
		"outcome-robots":   num(st.Outcomes[crawl.OutcomeRobots]),
		"outcome-failed":   num(st.Outcomes[crawl.OutcomeFailed]),
		"outcome-retries":  num(crawl.Sum(st.Retried)),
		"ready":            "ready",
	}
	ids := make([]string, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	// The page polls every second: wait until it shows the final sample.
	var got map[string]string
	var err error
	for deadline := time.Now().Add(15 * time.Second); ; {
		got, err = pageText(ctx, ids...)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) == fmt.Sprint(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, id := range ids {
		if got[id] != want[id] {
			t.Errorf("page #%s = %q, want %q (the crawl's summary)", id, got[id], want[id])
		}
	}
	for k, n := range map[string]int64{"2xx": st.Outcomes[crawl.Outcome2xx], "4xx": st.Outcomes[crawl.Outcome4xx], "robots": st.Outcomes[crawl.OutcomeRobots]} {
		if n == 0 {
			t.Errorf("the test site yields %s outcomes; the crawl counted none", k)
		}
	}

	// Every chart drew: a canvas, and points in its series.
	points, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](`Object.fromEntries([...document.querySelectorAll(".chart")].map(e => [e.id, e.querySelector("canvas") ? +e.dataset.points : -1]))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 4 {
		t.Errorf("charts: %v, want 4", points)
	}
	for id, n := range points {
		if n <= 0 {
			t.Errorf("chart %s drew %v points, want some", id, n)
		}
	}

	// The crawl selector shows the crawl's own numbers (here all of them).
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#crawl"), testCrawl), changed); err != nil {
		t.Fatal(err)
	}
	if got, err := pageText(ctx, "total-fetched", "outcome-4xx"); err != nil || got["total-fetched"] != want["total-fetched"] || got["outcome-4xx"] != want["outcome-4xx"] {
		t.Errorf("crawl %s selected: %v (%v), want fetched %s, 4xx %s", testCrawl, got, err, want["total-fetched"], want["outcome-4xx"])
	}
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#crawl"), ""), changed); err != nil {
		t.Fatal(err)
	}

	// A reload keeps the history: it lives in the process.
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#chart-seen canvas")), polled); err != nil {
		t.Fatal(err)
	}
	samples, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.sieveWatch.at.length`))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.watch.Samples(0).At); samples < n-5 {
		t.Errorf("after a reload the page holds %d samples, the process %d", samples, n)
	}

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	saveScreenshot(t, "watch.png", png)
}

// TestPageBounded shows a deployment of 1,000 hosts and a filter of 64
// layers (the most a dedup filter grows to): the page's tables stay short (top hosts, newest layers and a
// summary of the others) and its DOM small.
func TestPageBounded(t *testing.T) {
	ctx := browser(t, 40*time.Second)
	filter, err := dedup.NewScalableBloom(dedup.ScalableOptions{Growth: dedup.Growth{InitialCapacity: 10, TargetFPP: 0.01, Factor: 1, Tightening: 0.95}})
	if err != nil {
		t.Fatal(err)
	}
	defer filter.Close()
	counts := stats.NewMemory()
	var d stats.Delta
	for i := range 1000 {
		host := fmt.Sprintf("host-%04d.example", i)
		d.AdmitHost(host)
		d.Admitted++
		d.Links++
	}
	// About ten keys a layer, until the filter cannot grow any more.
	for i := 0; i < 10_000; i++ {
		if _, err := filter.TestAndAdd(context.Background(), [][]byte{fmt.Appendf(nil, "https://example.com/%d", i)}); err != nil {
			break
		}
	}
	if err := counts.Add(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	fs, _ := filter.Stats(context.Background())
	if len(fs.Layers) != 64 {
		t.Fatalf("filter has %d layers, want 64", len(fs.Layers))
	}
	w, err := New(Sources{Role: "dedup-worker", Counters: counts, Filter: filter}, Options{TopHosts: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	addr, err := w.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(PageURL(addr.String())), polled); err != nil {
		t.Fatal(err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[struct{ Hosts, Layers, Nodes int }](
		`({hosts: document.querySelectorAll("#hosts tr").length, layers: document.querySelectorAll("#layers tr").length, nodes: document.getElementsByTagName("*").length})`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d layers, 1,000 hosts: %d host rows, %d layer rows, %d elements", len(fs.Layers), rows.Hosts, rows.Layers, rows.Nodes)
	if rows.Hosts > 26 || rows.Hosts < 2 || rows.Layers > 12 || rows.Layers < 2 || rows.Nodes > 1000 {
		t.Errorf("page holds %d host rows, %d layer rows, %d elements; want ≤ 26, ≤ 12, ≤ 1000", rows.Hosts, rows.Layers, rows.Nodes)
	}
}
