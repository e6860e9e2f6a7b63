package testsite

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

func startDust(tb testing.TB, opts DustOptions) *DustWeb {
	tb.Helper()
	w, err := StartDust(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(w.Close)
	return w
}

func dustClient(tb testing.TB) *http.Client {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	tb.Cleanup(c.CloseIdleConnections)
	return c
}

func dustGet(tb testing.TB, c *http.Client, u string) (int, []byte) {
	tb.Helper()
	resp, err := c.Get(u)
	if err != nil {
		tb.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("GET %s: %v", u, err)
	}
	if resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		tb.Errorf("GET %s: Content-Type %q", u, resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, body
}

// dustNoise are the classes of the blocks that change on every render.
var dustNoise = map[string]bool{"rendered": true, "readers": true, "most-read": true}

// visibleText returns the text a reader sees on a page, one line per text
// node, without the blocks that change on every render.
func visibleText(body []byte) string {
	var lines []string
	z := html.NewTokenizer(bytes.NewReader(body))
	skip := 0 // depth inside a noise block
	for {
		switch z.Next() {
		case html.ErrorToken:
			return strings.Join(lines, "\n")
		case html.StartTagToken:
			if skip > 0 {
				skip++
				continue
			}
			for {
				k, v, more := z.TagAttr()
				if string(k) == "class" && dustNoise[string(v)] {
					skip = 1
				}
				if !more {
					break
				}
			}
		case html.EndTagToken:
			if skip > 0 {
				skip--
			}
		case html.TextToken:
			if t := strings.TrimSpace(string(z.Text())); t != "" && skip == 0 {
				lines = append(lines, t)
			}
		}
	}
}

// dustHrefs returns the href of every <a> of a page.
func dustHrefs(body []byte) []string {
	var out []string
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return out
		case html.StartTagToken, html.SelfClosingTagToken:
			if name, attrs := z.TagName(); string(name) != "a" || !attrs {
				continue
			}
			for {
				k, v, more := z.TagAttr()
				if string(k) == "href" {
					out = append(out, string(v))
				}
				if !more {
					break
				}
			}
		}
	}
}

// family counts ids by family: the text before the colon.
func familyCounts(ids []string) map[string]int {
	m := map[string]int{}
	for _, id := range ids {
		f, _, _ := strings.Cut(id, ":")
		m[f]++
	}
	return m
}

func TestDustPageCounts(t *testing.T) {
	tests := []struct {
		scale int
		want  map[string]int
	}{
		// shop: home, about, help, 10 categories × 3 listing pages, 127
		// products; news: home, 8 sections, 120 articles; docs: 11
		// directory pages, 134 files; blog: home, 5 archive pages, 8 tags,
		// 100 posts; control: home, 9 lists, 70 items, 20 × red and blue,
		// 9 look-alike patterns × 14.
		{1, map[string]int{"shop": 160, "news": 129, "docs": 145, "blog": 114, "control": 246}},
		{2, map[string]int{"shop": 317, "news": 249, "docs": 279, "blog": 219, "control": 491}},
	}
	for _, tc := range tests {
		w := startDust(t, DustOptions{Scale: tc.scale})
		pages := w.Pages()
		if got := familyCounts(pages); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Scale %d: pages per family = %v, want %v", tc.scale, got, tc.want)
		}
		if !slices.IsSorted(pages) || len(slices.Compact(slices.Clone(pages))) != len(pages) {
			t.Errorf("Scale %d: Pages() is not sorted and distinct", tc.scale)
		}
		for _, id := range pages {
			f, path, _ := strings.Cut(id, ":")
			if got, ok := w.PageOf("http://" + w.Hosts()[f] + path); !ok || got != id {
				t.Errorf("PageOf(its own canonical URL) = %q, %v; want %q", got, ok, id)
			}
		}
		hosts := w.Hosts()
		seeds := w.Seeds()
		if len(hosts) != 6 || len(seeds) != 6 {
			t.Fatalf("Scale %d: %d hosts, %d seeds; want 6", tc.scale, len(hosts), len(seeds))
		}
		for i, f := range []string{"shop", "news", "docs", "mirror", "blog", "control"} {
			if want := "http://" + hosts[f] + "/"; seeds[i] != want || !strings.HasPrefix(hosts[f], "127.0.0.1:") {
				t.Errorf("Seeds()[%d] = %q, host %q; want %q on 127.0.0.1", i, seeds[i], hosts[f], want)
			}
		}
	}
}

// docsFile returns the name of the first file of docs directory dir.
func docsFile(tb testing.TB, w *DustWeb, dir string) string {
	tb.Helper()
	for _, id := range w.Pages() {
		if name, ok := strings.CutPrefix(id, "docs:/"+dir); ok && !strings.Contains(name, "/") && name != "" {
			return strings.TrimSuffix(name, ".html")
		}
	}
	tb.Fatalf("no file in docs:/%s", dir)
	return ""
}

func TestDustSpellingsNameOnePage(t *testing.T) {
	w := startDust(t, DustOptions{})
	c := dustClient(t)
	hosts := w.Hosts()
	on := func(family string, paths ...string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, "http://"+hosts[family]+p)
		}
		return out
	}
	f := docsFile(t, w, "guide/")
	F := strings.ToUpper(f[:1]) + f[1:]
	guideFile := []string{"/guide/" + f + ".html", "/guide/" + f + ".htm", "/guide/" + f, "/Guide/" + F + ".html",
		"/GUIDE/" + strings.ToUpper(f) + ".HTM", "/guide/guide/" + f + ".html", "/guide/" + f + ".html?print=1"}
	// same says what the spellings share: "bytes", or "text" outside the
	// noise blocks (the bytes then differ from render to render).
	tests := []struct {
		name string
		urls []string
		id   string
		same string
	}{
		{"shop product: zsid and ref name nothing",
			on("shop", "/product/7", "/product/7?zsid=0123456789abcdef", "/product/7?ref=related&zsid=ff", "/product/7?zsid=1&ref=nav&utm_source=x"),
			"shop:/product/7", "text"},
		{"shop listing: no p is p=1",
			on("shop", "/c/books", "/c/books?p=1", "/c/books?p=1&ref=nav&zsid=abc"), "shop:/c/books", "text"},
		{"shop listing page 2", on("shop", "/c/books?p=2&zsid=a", "/c/books?zsid=b&p=2&ref=footer"), "shop:/c/books?p=2", "text"},
		{"shop home", append(on("shop", "/?ref=footer&zsid=9"), "http://"+hosts["shop"]), "shop:/", "text"},
		{"news article: cmp names nothing", on("news", "/article/5", "/article/5?cmp=1a2b3c4d", "/article/5?cmp=zz&x=1"), "news:/article/5", "text"},
		{"news section", on("news", "/section/tech", "/section/tech?cmp=0"), "news:/section/tech", "text"},
		{"docs file: case, extension, doubled segment", on("docs", guideFile...), "docs:/guide/" + f + ".html", "bytes"},
		{"docs directory", on("docs", "/guide/", "/guide/index.html", "/guide", "/Guide/", "/guide/INDEX.htm", "/guide/guide/", "/guide/index"),
			"docs:/guide/", "bytes"},
		{"docs nested directory", on("docs", "/ref/api/", "/ref/ref/api/", "/REF/API", "/Ref/Api/index.html"), "docs:/ref/api/", "bytes"},
		{"docs root", append(on("docs", "/", "/index.html", "/INDEX.HTM", "/index"), "http://"+hosts["docs"]), "docs:/", "bytes"},
		{"mirror: the docs page, byte for byte", append(on("docs", guideFile[0]), on("mirror", guideFile...)...),
			"docs:/guide/" + f + ".html", "bytes"},
		{"mirror directory", append(on("docs", "/ref/"), on("mirror", "/ref", "/REF/index.html")...), "docs:/ref/", "bytes"},
		{"blog post: view, from, lang in any order, a trailing slash",
			on("blog", "/post/3", "/post/3/", "/post/3?view=full", "/post/3?from=tag&view=full",
				"/post/3/?lang=en&from=home&view=full", "/post/3?view=full&lang=en&from=archive"),
			"blog:/post/3", "bytes"},
		{"blog tag", on("blog", "/tag/go", "/tag/go/?lang=en", "/tag/go?from=home"), "blog:/tag/go", "bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var first []byte
			for i, u := range tc.urls {
				if id, ok := w.PageOf(u); !ok || id != tc.id {
					t.Errorf("PageOf(%q) = %q, %v; want %q", u, id, ok, tc.id)
				}
				status, body := dustGet(t, c, u)
				if status != http.StatusOK {
					t.Fatalf("GET %s = %d, want 200", u, status)
				}
				if i == 0 {
					first = body
					continue
				}
				switch tc.same {
				case "bytes":
					if !bytes.Equal(body, first) {
						t.Errorf("GET %s: the bytes differ from those of %s", u, tc.urls[0])
					}
				case "text":
					if bytes.Equal(body, first) {
						t.Errorf("GET %s: the same bytes as %s; want the noise of a new render", u, tc.urls[0])
					}
					if got, want := visibleText(body), visibleText(first); got != want {
						t.Errorf("GET %s: the text differs from that of %s:\n%.300s\nwant\n%.300s", u, tc.urls[0], got, want)
					}
				}
			}
			if got := w.Fetches()[tc.id]; got < len(tc.urls) {
				t.Errorf("Fetches()[%q] = %d, want at least %d", tc.id, got, len(tc.urls))
			}
		})
	}
}

func TestDustNotPages(t *testing.T) {
	w := startDust(t, DustOptions{})
	c := dustClient(t)
	hosts := w.Hosts()
	tests := []struct{ family, path string }{
		{"shop", "/c/books?p=4"},    // three pages only
		{"shop", "/c/books?p=01"},   // one spelling per number
		{"shop", "/c/Books"},        // the shop is case-sensitive
		{"shop", "/product/128"},    // 127 products
		{"shop", "/product/7/"},     // no trailing slash
		{"news", "/article/0"},      // from 1
		{"news", "/section/world/"}, // no trailing slash
		{"docs", "/guide/nosuch.html"},
		{"docs", "/ref/api.html"}, // a directory is no file
		{"docs", "/guide//index.html"},
		{"docs", "/robots.txt"}, // robots.txt is a 404: all is allowed
		{"mirror", "/guide/nosuch"},
		{"blog", "/post/3?lang=fr"},      // only the default language is the page
		{"blog", "/post/3?view=summary"}, // and only view=full
		{"blog", "/post/3?utm_source=x"}, // no other parameter
		{"blog", "/post/3//"},            // one slash at most
		{"blog", "/post/101"},
		{"control", "/item?id=3&color=green"},
		{"control", "/item?id=30&color=red"}, // items 1-20 come in colours
		{"control", "/item?id=3&id=4"},
		{"control", "/item?id=03"},
		{"control", "/PAGE/3"},
		{"control", "/doc/3"},
		{"control", "/dir/3"},
		{"control", "/a/3"},
		{"control", "/list"},
		{"control", "/list?page=10"},
		{"control", "/?utm_source=x"}, // every parameter matters here
	}
	for _, tc := range tests {
		u := "http://" + hosts[tc.family] + tc.path
		if id, ok := w.PageOf(u); ok || id != "" {
			t.Errorf("PageOf(%q) = %q, %v; want \"\", false", u, id, ok)
		}
		if status, _ := dustGet(t, c, u); status != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", u, status)
		}
	}
	for _, u := range []string{"http://127.0.0.1:1/", "https://" + hosts["shop"] + "/", "mailto:a@b.c", "/product/7", "://"} {
		if id, ok := w.PageOf(u); ok {
			t.Errorf("PageOf(%q) = %q, true; want false: not a URL of the web", u, id)
		}
	}
	if got := w.Fetches(); len(got) != 0 {
		t.Errorf("Fetches() = %v after only 404s, want none", got)
	}
	if got := w.Requests(); got != len(tests) {
		t.Errorf("Requests() = %d, want %d", got, len(tests))
	}
}

func TestDustControlLookAlikesAreDistinct(t *testing.T) {
	w := startDust(t, DustOptions{})
	c := dustClient(t)
	base := "http://" + w.Hosts()["control"]
	tests := []struct {
		a, b  string
		lines int // lines of text that differ, 0: the texts differ more
	}{
		{"/item?id=3", "/item?id=4", 0},                      // a parameter that matters
		{"/item?id=3&color=red", "/item?id=3&color=blue", 1}, // one line apart: colour and price
		{"/item?id=3", "/item?id=3&color=red", 1},
		{"/Page/3", "/page/3", 0}, // case matters
		{"/doc/3.htm", "/doc/3.html", 0},
		{"/dir/3/", "/dir/3/index.html", 0},
		{"/a/3/a/", "/a/3/", 0}, // a repeated segment is not noise here
		{"/a/a/3/", "/a/3/", 0}, // nor a doubled one
		{"/list?page=1", "/list?page=2", 0},
	}
	for _, tc := range tests {
		idA, okA := w.PageOf(base + tc.a)
		idB, okB := w.PageOf(base + tc.b)
		if !okA || !okB || idA == idB {
			t.Errorf("PageOf(%s), PageOf(%s) = %q, %q; want two distinct pages", tc.a, tc.b, idA, idB)
		}
		_, bodyA := dustGet(t, c, base+tc.a)
		_, bodyB := dustGet(t, c, base+tc.b)
		textA, textB := visibleText(bodyA), visibleText(bodyB)
		if textA == textB {
			t.Errorf("GET %s and %s: the same text; want distinct pages", tc.a, tc.b)
		}
		linesA, linesB := strings.Split(textA, "\n"), strings.Split(textB, "\n")
		differ := 0
		for i := range min(len(linesA), len(linesB)) {
			if linesA[i] != linesB[i] {
				differ++
			}
		}
		if tc.lines > 0 && (len(linesA) != len(linesB) || differ != tc.lines) {
			t.Errorf("GET %s and %s: %d of %d/%d lines differ, want %d", tc.a, tc.b, differ, len(linesA), len(linesB), tc.lines)
		}
		if tc.lines == 0 && differ < 2 {
			t.Errorf("GET %s and %s: %d lines differ; want distinct text", tc.a, tc.b, differ)
		}
		// The same URL again: the noise changes, the text does not.
		_, again := dustGet(t, c, base+tc.a)
		if bytes.Equal(again, bodyA) || visibleText(again) != textA {
			t.Errorf("GET %s twice: same bytes %v, same text %v; want new bytes, same text",
				tc.a, bytes.Equal(again, bodyA), visibleText(again) == textA)
		}
	}
}

func TestDustCounters(t *testing.T) {
	w := startDust(t, DustOptions{})
	c := dustClient(t)
	h := w.Hosts()
	for _, u := range []string{
		"http://" + h["docs"] + "/ref/", "http://" + h["docs"] + "/REF", "http://" + h["mirror"] + "/ref/index.htm",
		"http://" + h["docs"] + "/robots.txt", "http://" + h["docs"] + "/nosuch/",
		"http://" + h["blog"] + "/post/1/",
	} {
		dustGet(t, c, u)
	}
	want := map[string]int{"docs:/ref/": 3, "blog:/post/1": 1}
	if got := w.Fetches(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Fetches() = %v, want %v", got, want)
	}
	if got := w.Requests(); got != 6 {
		t.Errorf("Requests() = %d, want 6", got)
	}
	w.Reset()
	if got, n := w.Fetches(), w.Requests(); len(got) != 0 || n != 0 {
		t.Errorf("after Reset: Fetches() = %v, Requests() = %d; want none", got, n)
	}
}

func TestDustCloseLeaksNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	w, err := StartDust(DustOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{}}
	for _, s := range w.Seeds() {
		dustGet(t, c, s)
	}
	c.CloseIdleConnections()
	w.Close()
	w.Close() // idempotent
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after Close, %d before", runtime.NumGoroutine(), before)
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := http.Get(w.Seeds()[0]); err == nil {
		t.Error("GET after Close succeeded")
	}
}

// TestDustNaiveCrawl crawls the web as a crawler with no canonicalization
// does: breadth first per host, hosts in turn, deduplicating exact URLs
// (fragments dropped) and nothing else. It must reach every page and no URL
// PageOf does not know; it logs how many fetches each page cost it. The
// shop and news hosts never run out of new URLs (a new zsid or cmp on every
// render), so the crawl stops at its cap of fetches: their figure is the
// share of the cap they got, not a property of the web.
func TestDustNaiveCrawl(t *testing.T) {
	const limit = 20000
	w := startDust(t, DustOptions{})
	c := dustClient(t)
	families := []string{"shop", "news", "docs", "mirror", "blog", "control"}
	familyOf := map[string]string{}
	for f, h := range w.Hosts() {
		familyOf[h] = f
	}
	type visit struct {
		url   string
		depth int
	}
	queues := map[string][]visit{}
	seen := map[string]bool{}
	push := func(u *url.URL, depth int) {
		f := familyOf[u.Host]
		// A URL past the cap would never be fetched: holding the hosts
		// whose URLs never end to the cap bounds the test's memory.
		if f == "" || len(queues[f]) >= limit || seen[u.String()] {
			return
		}
		seen[u.String()] = true
		queues[f] = append(queues[f], visit{u.String(), depth})
	}
	for _, s := range w.Seeds() {
		u, _ := url.Parse(s)
		push(u, 0)
	}
	depth := map[string]int{}               // "family page-id" → least depth it was reached at
	fetches := map[string]int{}             // family → fetches
	reached := map[string]map[string]bool{} // family → page ids
	lastNew := map[string]int{}             // family → the fetch that reached its last new page
	start := time.Now()
	n := 0
	for more := true; more && n < limit; {
		more = false
		for _, f := range families {
			if len(queues[f]) == 0 || n >= limit {
				continue
			}
			more = true
			v := queues[f][0]
			queues[f] = queues[f][1:]
			n++
			id, ok := w.PageOf(v.url)
			if !ok {
				t.Errorf("the crawl reached %s, which PageOf does not know", v.url)
			}
			status, body := dustGet(t, c, v.url)
			if status != http.StatusOK {
				t.Errorf("GET %s = %d, want 200", v.url, status)
				continue
			}
			fetches[f]++
			if reached[f] == nil {
				reached[f] = map[string]bool{}
			}
			if !reached[f][id] {
				reached[f][id] = true
				lastNew[f] = fetches[f]
			}
			if d, ok := depth[f+" "+id]; !ok || v.depth < d {
				depth[f+" "+id] = v.depth
			}
			from, _ := url.Parse(v.url)
			for _, href := range dustHrefs(body) {
				ref, err := url.Parse(href)
				if err != nil {
					t.Errorf("%s links to %q: %v", v.url, href, err)
					continue
				}
				u := from.ResolveReference(ref)
				u.Fragment = ""
				if familyOf[u.Host] == "" {
					t.Errorf("%s links to %s, off the web", v.url, u)
				}
				push(u, v.depth+1)
			}
		}
	}
	elapsed := time.Since(start)

	pages := w.Pages()
	perFamily := familyCounts(pages)
	perFamily["mirror"] = perFamily["docs"]
	for _, id := range pages {
		f, _, _ := strings.Cut(id, ":")
		if !reached[f][id] {
			t.Errorf("the crawl never reached %s", id)
		}
	}
	deepest := map[string]int{} // family → the depth of its deepest page
	for f, ids := range reached {
		for id := range ids {
			if d := depth[f+" "+id]; d > 8 {
				t.Errorf("%s is %d links from the %s seed, want at most 8", id, d, f)
			}
			deepest[f] = max(deepest[f], depth[f+" "+id])
		}
	}
	for id := range reached["mirror"] {
		if !reached["docs"][id] {
			t.Errorf("the mirror served %s, which the docs host did not", id)
		}
	}
	total := 0
	for _, k := range w.Fetches() {
		total += k
	}
	if total != n || w.Requests() != n {
		t.Errorf("Fetches() sum to %d and Requests() = %d, want the crawl's %d", total, w.Requests(), n)
	}

	t.Logf("naive crawl: %d fetches in %v (cap %d), %d distinct pages: %.1f fetches per page",
		n, elapsed.Round(time.Millisecond), limit, len(pages), float64(n)/float64(len(pages)))
	for _, f := range families {
		note := ""
		if len(queues[f]) > 0 {
			note = fmt.Sprintf(" (capped: %d URLs still queued)", len(queues[f]))
		}
		t.Logf("%-8s %4d pages (depth ≤ %d), %5d fetches: %5.1f per page, every page reached by fetch %d%s",
			f, perFamily[f], deepest[f], fetches[f], float64(fetches[f])/float64(perFamily[f]), lastNew[f], note)
	}
	// What a crawler with fixed rules only can expect: the traps work, and
	// the control host costs one fetch per page.
	for _, tc := range []struct {
		family string
		min    float64
	}{{"shop", 20}, {"news", 20}, {"docs", 2}, {"mirror", 2}, {"blog", 2}} {
		if got := float64(fetches[tc.family]) / float64(perFamily[tc.family]); got < tc.min {
			t.Errorf("%s: %.1f fetches per page, want at least %.0f: the spellings no longer multiply", tc.family, got, tc.min)
		}
	}
	if fetches["control"] != perFamily["control"] {
		t.Errorf("control: %d fetches for %d pages, want one each", fetches["control"], perFamily["control"])
	}
}
