package crawl

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gocolly/colly/v2"
)

// TestAbsoluteMatchesColly resolves every link of pages with and without a
// <base href> with fetchResult.absolute, which parses the page's base once,
// and with colly's Request.AbsoluteURL, which parses it for every link:
// both must give the same URL for every reference.
func TestAbsoluteMatchesColly(t *testing.T) {
	refs := []string{
		"", "a", "./a", "../a", "../../../../a", "/a/b/../c", "?q=1", "?", "#f", "#", "a#f",
		"//other.example/p", "//other.example", "http://other.example/p?q#f", "HTTP://Other.Example:80/P",
		"https://x.example:443/", "https:x", "http:a", "mailto:a@b", "javascript:void(0)", "data:text/html,x",
		" a b ", "a\tb\nc", `\a\b`, `..\a`, "a%zz", "%", "a%2fb", "é", "/ü?ä=ö#ß", "a?b=%",
		"http://[::1]:8080/a", "http://xn--nxasmq6b.example/", "http://ÉXAMPLE.com/", "http://a b/",
		"http://exa mple/", "//", "///a", "http:/a", "http:", "./", ".", "..", "/.", "/..", "a/./b/../c",
		"?a=1&b=2;c", "..;/a", "a:b", "1a:b", "http://u:p@host/a", "http://host:99999/", "http://256.0.0.1/",
		"http://0x7f.1/", "http://host/%2e%2E/a", "http://host/a/%2e/b",
	}
	var body strings.Builder
	for _, r := range refs {
		fmt.Fprintf(&body, "<a href=\"%s\">x</a>\n", html.EscapeString(r))
	}
	pages := map[string]string{
		"/dir/page.html":     "",
		"/dir/sub/base.html": `<base href="/other/dir/">`,
		"/elsewhere.html":    `<base href="http://base.example/x/y?z#w">`,
		"/relative.html":     `<base href="../up/">`,
		"/empty.html":        `<base href="">`,
		"/page?q=1":          "",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		head, ok := pages[r.URL.RequestURI()]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><head>%s</head><body>%s</body></html>", head, body.String())
	}))
	defer srv.Close()

	for path := range pages {
		t.Run(path, func(t *testing.T) {
			c := colly.NewCollector()
			compared := 0
			var res *fetchResult
			c.OnResponse(func(*colly.Response) { res = &fetchResult{} })
			c.OnHTML("a[href]", func(e *colly.HTMLElement) {
				ref := e.Attr("href")
				want := e.Request.AbsoluteURL(ref)
				if got := res.absolute(e.Request, ref); got != want {
					t.Errorf("absolute(%q) = %q, colly's AbsoluteURL %q", ref, got, want)
				}
				compared++
			})
			if err := c.Visit(srv.URL + path); err != nil {
				t.Fatal(err)
			}
			if compared != len(refs) {
				t.Fatalf("compared %d links, want %d", compared, len(refs))
			}
			if res.noBase {
				t.Errorf("the page's base did not parse: every link went through colly")
			}
		})
	}
}
