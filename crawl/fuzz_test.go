package crawl

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// FuzzRetryAfter: any header value gives a wait in [0, 1h], never a panic.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"", "5", "-1", "Thu, 02 Jan 2025 03:04:35 GMT", "9999999999999999999999", "1e3", " 7 "} {
		f.Add(s)
	}
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		if d := retryAfter(v, now); d < 0 || d > time.Hour {
			t.Errorf("retryAfter(%q) = %v, want within [0, 1h]", v, d)
		}
	})
}

// FuzzFetchLinks serves arbitrary bytes as an HTML page: the fetcher never
// panics, and every link it reports is an absolute http(s) URL without a
// fragment, within the limits, listed once.
func FuzzFetchLinks(f *testing.F) {
	for _, s := range []string{
		`<a href="/a">a</a><a href="b#x">b</a><base href="http://other.test/dir/"><a href="../c">c</a>`,
		`<area href="javascript:alert(1)"><a href="mailto:x@y"><a href="//h.test/p"><a href="http://[::1">`,
		`<a href="` + strings.Repeat("x", 3000) + `">long</a>`,
		`<meta name=robots content=nofollow><a href=/x>`,
		"\xff\xfe<a href=\"\x00\">",
	} {
		f.Add(s)
	}
	var body atomicString
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, body.load())
	}))
	defer srv.Close()
	fetcher, err := NewFetcher(FetcherOptions{IgnoreRobots: true, HostDelay: -1, MaxLinks: 50, MaxURLLength: 500,
		AllowAddresses: []string{"127.0.0.1"}})
	if err != nil {
		f.Fatal(err)
	}
	defer fetcher.Close()
	f.Fuzz(func(t *testing.T, html string) {
		body.store(html)
		p, err := fetcher.Fetch(t.Context(), srv.URL+"/page")
		if err != nil {
			t.Fatalf("Fetch: %v", err)
		}
		if len(p.Links) > 50 {
			t.Errorf("%d links, limit 50", len(p.Links))
		}
		seen := map[string]bool{}
		for _, l := range p.Links {
			if !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") || strings.Contains(l, "#") || len(l) > 500 || seen[l] {
				t.Errorf("link %q: want absolute http(s), no fragment, ≤ 500 bytes, once", l)
			}
			seen[l] = true
		}
	})
}

// atomicString is a string shared with the test server's handler.
type atomicString struct {
	mu sync.Mutex
	s  string
}

func (a *atomicString) store(s string) { a.mu.Lock(); a.s = s; a.mu.Unlock() }
func (a *atomicString) load() string   { a.mu.Lock(); defer a.mu.Unlock(); return a.s }

// FuzzCanonicalLink: a Link header is untrusted bytes; its parser never
// panics, and what it returns is the inside of one <…>.
func FuzzCanonicalLink(f *testing.F) {
	for _, s := range []string{`<https://a.example/x>; rel="canonical"`, `<a>; rel=next, <b>; rel="alternate canonical"`, `<`, `<x>;rel`, `, ,<y>`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := canonicalLink([]string{v})
		if got != "" && !strings.Contains(v, "<"+got+">") {
			t.Errorf("canonicalLink(%q) = %q, not a <target> of the value", v, got)
		}
	})
}
