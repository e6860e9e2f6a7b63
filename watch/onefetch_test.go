package watch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/dust"
	"github.com/sievecrawl/sieve/testsite"
	"github.com/sievecrawl/sieve/watch/watchtest"
)

// pageBytes formats n as the page does (app.js bytes()).
func pageBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f, i := float64(n), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d %s", n, units[0])
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}

// TestPageOneFetch crawls the DUST web (six hosts that spell each page
// many ways, and a control host of look-alikes; issue 37) with learning on,
// and checks that the live page's "one page, one fetch" section shows what
// the crawler counted, duplicates by kind with their bytes, spellings
// dropped, second renders, the hosts with the most duplicates, and the
// rules the crawl learned as the bucket holds them (those that saved the
// most first), in a 1366×768 window that never scrolls sideways (issue 38)
// however long the rules' example URLs are.
func TestPageOneFetch(t *testing.T) {
	if testing.Short() {
		t.Skip("a crawl of ~800 pages")
	}
	web, err := testsite.StartDust(testsite.DustOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(web.Close)
	ctx := watchtest.Browser(t, 3*time.Minute, chromedp.WindowSize(1366, 768))
	p := startCrawl(t, web.Seeds(), nil)
	if err := chromedp.Do(ctx, chromedp.Navigate(p.url), watchtest.Polled); err != nil {
		t.Fatalf("open %s: %v", p.url, err)
	}
	r := p.wait(t)
	st := r.Crawler.Stats
	if st.Duplicates["exact"] == 0 || st.Duplicates["near"] == 0 || st.Spellings == 0 || st.NoiseFetches == 0 {
		t.Fatalf("the DUST web's crawl counted duplicates %v, spellings %d, second renders %d: want some of each", st.Duplicates, st.Spellings, st.NoiseFetches)
	}
	// The crawler shares its rules when it stops: wait for the page's
	// source to have read what the bucket holds now.
	recs, err := p.rules.List(context.Background(), testCrawl)
	if err != nil || len(recs) == 0 {
		t.Fatalf("the crawl learned no rules (%v)", err)
	}
	want := summarizeRules(recs, time.Time{})
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = p.watch.Report()
		if cr := r.Rules[testCrawl]; cr != nil && cr.Count == want.Count && cr.Saved == want.Saved && cr.Wasted == want.Wasted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the report's rules %+v never matched the bucket's %+v", r.Rules[testCrawl], want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if want.States[string(dust.Active)] == 0 {
		t.Errorf("no rule became active: %v", want.States)
	}

	wantText := map[string]string{
		"dup-exact":       watchtest.Num(st.Duplicates["exact"]),
		"dup-near":        watchtest.Num(st.Duplicates["near"]),
		"dup-total":       watchtest.Num(crawl.Sum(st.Duplicates)),
		"dup-exact-bytes": pageBytes(st.DuplicateBytes["exact"]),
		"dup-near-bytes":  pageBytes(st.DuplicateBytes["near"]),
		"dup-bytes":       pageBytes(crawl.Sum(st.DuplicateBytes)),
		"dup-spellings":   watchtest.Num(st.Spellings),
		"dup-noise":       watchtest.Num(st.NoiseFetches),
		"rules-saved":     watchtest.Num(want.Saved),
		"rules-wasted":    watchtest.Num(want.Wasted),
	}
	ids := make([]string, 0, len(wantText))
	for id := range wantText {
		ids = append(ids, id)
	}
	var got map[string]string
	for deadline := time.Now().Add(15 * time.Second); ; {
		if got, err = watchtest.Text(ctx, ids...); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) == fmt.Sprint(wantText) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, id := range ids {
		if got[id] != wantText[id] {
			t.Errorf("page #%s = %q, want %q (the crawler's count)", id, got[id], wantText[id])
		}
	}

	// The rules table: the rule that saved the most first, with its host,
	// state, support, saved and wasted fetches and example; a row per rule
	// up to 25.
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[][]string](
		`[...document.querySelectorAll("#rules tr")].slice(1).map(tr => [...tr.cells].map(td => td.textContent))`))
	if err != nil {
		t.Fatal(err)
	}
	top := want.Top[0]
	if n := min(want.Count, 25); len(rows) != n {
		t.Errorf("rules table has %d rows, want %d", len(rows), n)
	}
	if len(rows) > 0 {
		row := rows[0]
		wantRow := []string{top.Host, top.Rule, top.State, watchtest.Num(int64(top.Support)), watchtest.Num(int64(top.Saved)), watchtest.Num(int64(top.Wasted))}
		if len(row) != 8 || !slices.Equal(row[:6], wantRow) || !strings.Contains(row[7], top.Example[0]+" = "+top.Example[1]) {
			t.Errorf("first rule row %q, want %q and example %q", row, wantRow, top.Example)
		}
	}
	t.Logf("%d rules (%v), saved %d, wasted %d; first row %q", want.Count, want.States, want.Saved, want.Wasted, rows[:min(len(rows), 3)])

	// Hosts by duplicates: the one with the most first.
	type hostDup struct {
		host string
		n    int64
	}
	var hosts []hostDup
	for h, d := range st.Crawls[testCrawl].DuplicateHosts {
		hosts = append(hosts, hostDup{h, d.Exact + d.Near + d.Spellings})
	}
	slices.SortFunc(hosts, func(a, b hostDup) int {
		if a.n != b.n {
			return int(b.n - a.n)
		}
		return strings.Compare(a.host, b.host)
	})
	first, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#dup-hosts tr:nth-child(2) td").textContent`))
	if err != nil || len(hosts) == 0 || first != hosts[0].host {
		t.Errorf("first host by duplicates %q (%v), want %+v", first, err, hosts[:min(len(hosts), 1)])
	}

	// Issue 38: at 1366 px the page never scrolls sideways.
	assertNoSidewaysScroll(t, ctx)
	watchtest.SaveScreenshot(t, ctx, "watch-one-fetch.png")
}

// assertNoSidewaysScroll fails the test if the page in ctx is wider than
// its window.
func assertNoSidewaysScroll(t *testing.T, ctx context.Context) {
	t.Helper()
	w, err := chromedp.Run(ctx, chromedp.Evaluate[struct{ Scroll, Client, Inner int }](
		`({scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth, inner: window.innerWidth})`))
	if err != nil {
		t.Fatal(err)
	}
	if w.Scroll > w.Client {
		wide, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`[...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth).slice(0, 8).map(e => e.tagName + (e.id ? "#" + e.id : "") + "." + e.className + " right " + Math.round(e.getBoundingClientRect().right))`))
		t.Errorf("the page scrolls sideways in a window %d px wide: scrollWidth %d > clientWidth %d; too wide: %q", w.Inner, w.Scroll, w.Client, wide)
	}
}
