package watch

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/warc"
	"github.com/sievecrawl/sieve/watch/watchtest"
)

// changed tells the page its crawl selector changed.
var changed = chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
	_, err := chromedp.Evaluate[bool](`document.getElementById("crawl").dispatchEvent(new Event("change"))`)(ctx, t)
	return err
})

// TestPage opens the live page in headless Chromium while a real crawl of
// the test site runs, waits for the crawl to end, and checks that the page
// shows the crawl's final numbers and that every chart drew points.
func TestPage(t *testing.T) {
	ctx := watchtest.Browser(t, 60*time.Second)
	p := startPipeline(t, 120)
	if err := chromedp.Do(ctx, chromedp.Navigate(p.url), chromedp.WaitVisible(chromedp.CSS("#chart-seen canvas"))); err != nil {
		t.Fatalf("open %s: %v", p.url, err)
	}
	r := p.wait(t)
	st, sh, f := r.Crawler.Stats, r.Shared.Totals, r.Filter
	want := map[string]string{
		"total-fetched":    watchtest.Num(st.Fetched),
		"total-links":      watchtest.Num(sh.Links),
		"total-admitted":   watchtest.Num(sh.Admitted),
		"total-duplicates": watchtest.Num(sh.Duplicates),
		"total-rejected":   watchtest.Num(sh.RejectedTotal()),
		"total-retried":    watchtest.Num(crawl.Sum(st.Retried)),
		"total-frontier":   "0",
		"total-filter":     watchtest.Num(int64(f.Items)),
		"outcome-2xx":      watchtest.Num(st.Outcomes[crawl.Outcome2xx]),
		"outcome-3xx":      watchtest.Num(st.Outcomes[crawl.Outcome3xx]),
		"outcome-4xx":      watchtest.Num(st.Outcomes[crawl.Outcome4xx]),
		"outcome-5xx":      watchtest.Num(st.Outcomes[crawl.Outcome5xx]),
		"outcome-robots":   watchtest.Num(st.Outcomes[crawl.OutcomeRobots]),
		"outcome-failed":   watchtest.Num(st.Outcomes[crawl.OutcomeFailed]),
		"outcome-retries":  watchtest.Num(crawl.Sum(st.Retried)),
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
		got, err = watchtest.Text(ctx, ids...)
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
	points, err := watchtest.ChartPoints(ctx)
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
	if got, err := watchtest.Text(ctx, "total-fetched", "outcome-4xx", "total-admitted", "total-duplicates"); err != nil ||
		got["total-fetched"] != want["total-fetched"] || got["outcome-4xx"] != want["outcome-4xx"] ||
		got["total-admitted"] != want["total-admitted"] || got["total-duplicates"] != want["total-duplicates"] {
		t.Errorf("crawl %s selected: %v (%v), want fetched %s, 4xx %s, admitted %s, duplicates %s", testCrawl, got, err,
			want["total-fetched"], want["outcome-4xx"], want["total-admitted"], want["total-duplicates"])
	}
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#crawl"), ""), changed); err != nil {
		t.Fatal(err)
	}

	// A reload keeps the history: it lives in the process.
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#chart-seen canvas")), watchtest.Polled); err != nil {
		t.Fatal(err)
	}
	samples, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.sieveWatch.at.length`))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.watch.Samples(0).At); samples < n-5 {
		t.Errorf("after a reload the page holds %d samples, the process %d", samples, n)
	}

	watchtest.SaveScreenshot(t, ctx, "watch.png")
}

// TestPageBounded shows a deployment of 1,000 hosts and a filter of 64
// layers (the most a dedup filter grows to): the page's tables stay short (top hosts, newest layers and a
// summary of the others) and its DOM small.
func TestPageBounded(t *testing.T) {
	ctx := watchtest.Browser(t, 40*time.Second)
	filter, err := dedup.NewScalableBloom(dedup.ScalableOptions{Growth: dedup.Growth{InitialCapacity: 10, TargetFPP: 0.01, Factor: 1, Tightening: 0.95}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filter.Close() }) // after the page server's (cleanups run last first)
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
	openPage(t, ctx, Sources{Role: "dedup-worker", Counters: counts, Filter: filter}, Options{TopHosts: 1000})
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

// parkedWorker is a worker source that reports one parked crawl, as a
// worker does while a crawl's filter cannot be opened
// (pipeline.TestWorkerParksUnusableCrawl runs the real one).
type parkedWorker struct{ since time.Time }

func (parkedWorker) Readiness() pipeline.Readiness {
	return pipeline.Readiness{Ready: true, State: "running"}
}

func (p parkedWorker) Status() (frontier.Status, bool) {
	return frontier.Status{Ready: true, Started: p.since, Parked: map[string]frontier.ParkedCrawl{
		"bad": {Error: "crawl bad: open filter: dedup: corrupt snapshot", Since: p.since, Messages: 1234},
	}}, true
}

// TestPageShowsParkedCrawl checks that the live page names a parked crawl,
// how many messages it holds back, and why.
func TestPageShowsParkedCrawl(t *testing.T) {
	ctx := watchtest.Browser(t, 30*time.Second)
	openPage(t, ctx, Sources{Role: "dedup-worker", Worker: parkedWorker{since: time.Now()}}, Options{})
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("processes").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"crawl bad parked", "1,234 messages held back", "corrupt snapshot"} {
		if !strings.Contains(text, want) {
			t.Errorf("This process shows %q, want it to contain %q", text, want)
		}
	}
}

// openPage serves the page of src on a loopback port until the test ends,
// opens it in the browser ctx and waits for its first poll.
// It returns the page's address.
func openPage(t *testing.T, ctx context.Context, src Sources, o Options) string {
	t.Helper()
	w, err := New(src, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	addr, err := w.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := PageURL(addr.String())
	if err := chromedp.Do(ctx, chromedp.Navigate(base), watchtest.Polled); err != nil {
		t.Fatal(err)
	}
	return base
}

// TestPageShowsArchive: a crawler that archives shows its WARC output
// (directory, files, bytes, records by type) from a real writer that
// recorded a real exchange.
func TestPageShowsArchive(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>hello</html>") }))
	defer srv.Close()
	dir := t.TempDir()
	aw, err := warc.Open(warc.Options{Dir: dir, CrawlerID: "page"})
	if err != nil {
		t.Fatal(err)
	}
	defer aw.Close()
	rec := warc.NewRecorder(aw, warc.RecorderOptions{})
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return rec.WrapConn(c), nil
	}}
	resp, err := (&http.Client{Transport: rec.RoundTripper(tr)}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	ctx := watchtest.Browser(t, 30*time.Second)
	openPage(t, ctx, Sources{Role: "crawler", Archive: aw.Stats}, Options{})
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("archive").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	st := aw.Stats()
	for _, want := range []string{dir, "response records\t1", "request records\t1", "warcinfo records\t1", st.Current} {
		if !strings.Contains(text, want) {
			t.Errorf("Archive shows %q, want it to contain %q", text, want)
		}
	}
}

// TestPageRefetches crawls with an archive whose earlier captures' file is
// gone (deleted, as issue 28 saw): each such page is fetched again in
// full, and the live page shows how many, by reason, as the crawler's
// Stats count them.
func TestPageRefetches(t *testing.T) {
	// The browser's deadline covers the crawl too: 83 s of a loaded
	// clean-clone run went by before the page was read.
	ctx := watchtest.Browser(t, 3*time.Minute)
	const pages = 30
	p := startArchivingPipeline(t, pages, func(siteURL string) warc.Captures {
		caps := warc.NewMemCaptures()
		canon, err := config.Default().Normalize.Normalizer()
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-24 * time.Hour).UTC()
		for i := range pages {
			u, err := canon.URL(fmt.Sprintf("%s/p/%d", strings.TrimSuffix(siteURL, "/"), i))
			if err != nil {
				t.Fatal(err)
			}
			c := warc.Capture{Date: at, Digest: "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ", PayloadURL: u, PayloadDate: at,
				File: "sieve-20261127000000000-00001-deleted.warc.gz", Offset: 1234, Status: 200}
			if err := caps.Put(context.Background(), testCrawl, u, c); err != nil {
				t.Fatal(err)
			}
		}
		return caps
	})
	if err := chromedp.Do(ctx, chromedp.Navigate(p.url), chromedp.WaitVisible(chromedp.CSS("#outcomes"))); err != nil {
		t.Fatalf("open %s: %v", p.url, err)
	}
	r := p.wait(t)
	missing := r.Crawler.Stats.Refetched[warc.UnreadableMissing]
	if missing < pages {
		t.Fatalf("refetched %v, want %d pages whose capture's file is missing", r.Crawler.Stats.Refetched, pages)
	}
	var got map[string]string
	var err error
	for deadline := time.Now().Add(15 * time.Second); ; {
		got, err = watchtest.Text(ctx, "refetched-missing")
		if err == nil && got["refetched-missing"] == watchtest.Num(missing) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("crawler refetched %v; the page shows %q", r.Crawler.Stats.Refetched, got["refetched-missing"])
	if got["refetched-missing"] != watchtest.Num(missing) {
		t.Errorf("page #refetched-missing = %q (%v), want %s (the crawler's count)", got["refetched-missing"], err, watchtest.Num(missing))
	}
}
