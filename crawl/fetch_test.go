package crawl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/testsite"
)

func startSite(tb testing.TB, opts testsite.Options) *testsite.Site {
	tb.Helper()
	s, err := testsite.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// newFetcher returns a fast Fetcher allowed to reach the site's host.
func newFetcher(tb testing.TB, opts FetcherOptions, allowHosts ...string) *Fetcher {
	tb.Helper()
	if opts.HostDelay == 0 {
		opts.HostDelay = -1
	}
	if opts.HostParallel == 0 {
		opts.HostParallel = 4
	}
	f, err := NewFetcher(opts)
	if err != nil {
		tb.Fatal(err)
	}
	for _, h := range allowHosts {
		f.AllowHost(h)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}

func TestFetchOutcomes(t *testing.T) {
	site := startSite(t, testsite.Options{Pages: 50})
	f := newFetcher(t, FetcherOptions{}, site.Host())
	base := strings.TrimSuffix(site.URL, "/")
	tests := []struct {
		path      string
		status    int
		redirect  string
		reason    Reason
		temporary bool
		links     bool
		ctype     string
	}{
		{path: "/", status: 200, links: true, ctype: "text/html"},
		{path: "/p/1", status: 200, links: true, ctype: "text/html"}, // has <base href>
		{path: "/old/0", status: 301, redirect: base + "/moved/0", ctype: "text/html"},
		{path: "/moved/0", status: 302, redirect: base + "/p/0", ctype: "text/html"},
		{path: "/go/1", status: 308, redirect: base + "/p/1?utm_source=redirect", ctype: "text/html"},
		{path: "/missing/0", reason: ReasonStatus4xx, status: 404},
		{path: "/broken/0", reason: ReasonStatus5xx, status: 500, temporary: true},
		{path: "/flaky/0", reason: ReasonStatus5xx, status: 503, temporary: true},
		{path: "/flaky/0", status: 200, links: true, ctype: "text/html"}, // second try succeeds
		{path: "/private/0", reason: ReasonRobots},                       // RFC 9309 disallow
		{path: "/files/0.pdf", status: 200, ctype: "application/pdf"},    // not parsed
		{path: "/files/0.txt", status: 200, ctype: "text/plain"},         // not parsed although it holds links
	}
	for _, tc := range tests {
		page, err := f.Fetch(t.Context(), base+tc.path)
		if tc.reason != "" {
			var fe *FetchError
			if !errors.As(err, &fe) {
				t.Errorf("Fetch(%s) = %v, %v; want a FetchError %s", tc.path, page, err, tc.reason)
				continue
			}
			if fe.Reason != tc.reason || fe.Temporary != tc.temporary || fe.Status != tc.status {
				t.Errorf("Fetch(%s) error %+v, want reason %s temporary %v status %d", tc.path, fe, tc.reason, tc.temporary, tc.status)
			}
			continue
		}
		if err != nil {
			t.Errorf("Fetch(%s): %v", tc.path, err)
			continue
		}
		if page.Status != tc.status || page.Redirect != tc.redirect || (len(page.Links) > 0) != tc.links || page.ContentType != tc.ctype {
			t.Errorf("Fetch(%s) = status %d redirect %q ctype %q %d links; want %d %q %q links %v",
				tc.path, page.Status, page.Redirect, page.ContentType, len(page.Links), tc.status, tc.redirect, tc.ctype, tc.links)
		}
	}
	fetches := site.Fetches()
	if fetches["/private/0"] != 0 {
		t.Errorf("/private/0 fetched %d times despite robots.txt", fetches["/private/0"])
	}
	if fetches["/robots.txt"] != 1 {
		t.Errorf("robots.txt fetched %d times, want 1 (cached)", fetches["/robots.txt"])
	}
	if fetches["/hidden/0"] != 0 {
		t.Errorf("followed a link in a non-HTML file")
	}
}

func TestFetchLinks(t *testing.T) {
	site := startSite(t, testsite.Options{Pages: 50})
	f := newFetcher(t, FetcherOptions{}, site.Host())
	base := strings.TrimSuffix(site.URL, "/")

	home, err := f.Fetch(t.Context(), site.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range home.Links {
		if !strings.HasPrefix(l, "http://") || strings.Contains(l, "#") {
			t.Errorf("home link %q: want absolute http(s) without fragment", l)
		}
	}
	for _, want := range []string{base + "/calendar/2024/06", base + "/files/0.txt", site.OffScopeURL + "p/0"} {
		if !slices.Contains(home.Links, want) {
			t.Errorf("home links lack %q: %q", want, home.Links)
		}
	}
	if slices.Contains(home.Links, base+"/") {
		t.Errorf("home links contain the page itself through its #top fragment: fragments must be dropped, and %q kept once", base+"/")
	}

	// /p/1 has <base href=/base/x/>: "../../p/N" must resolve to /p/N.
	p1, err := f.Fetch(t.Context(), base+"/p/1")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range p1.Links {
		if strings.Contains(l, "/base/") {
			t.Errorf("link %q on /p/1 ignores <base href>", l)
		}
	}
	if !slices.Contains(p1.Links, base+"/p/9") { // child 8·1+1
		t.Errorf("/p/1 links lack its child /p/9: %q", p1.Links)
	}
}

func TestFetchNoFollowAndLimits(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/meta", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><head><meta name="ROBOTS" content="noindex, nofollow"></head><a href="/x">x</a></html>`)
	})
	mux.HandleFunc("/header", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Robots-Tag", "sievebot: nofollow")
		fmt.Fprint(w, `<html><a href="/x">x</a></html>`)
	})
	mux.HandleFunc("/other-bot", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Robots-Tag", "otherbot: nofollow")
		fmt.Fprint(w, `<html><a href="/x">x</a></html>`)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><a href="/early">early</a>`)
		fmt.Fprint(w, strings.Repeat(" ", 4096))
		fmt.Fprint(w, `<a href="/late">late</a></html>`)
	})
	mux.HandleFunc("/many", func(w http.ResponseWriter, r *http.Request) {
		for i := range 20 {
			fmt.Fprintf(w, `<a href="/l/%d">l</a><a href="/l/%d#again">l</a>`, i, i)
		}
		fmt.Fprintf(w, `<a href="/%s">long</a>`, strings.Repeat("y", 300))
	})
	mux.HandleFunc("/canonical", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><head><link rel="alternate canonical" href="/c"></head><iframe src="/frame"></iframe></html>`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	f := newFetcher(t, FetcherOptions{IgnoreRobots: true, MaxBodySize: 2048, MaxLinks: 10, MaxURLLength: 200}, host)
	for _, path := range []string{"/meta", "/header"} {
		p, err := f.Fetch(t.Context(), srv.URL+path)
		if err != nil || !p.NoFollow || len(p.Links) != 0 {
			t.Errorf("Fetch(%s) = %+v, %v; want nofollow and no links", path, p, err)
		}
	}
	if p, err := f.Fetch(t.Context(), srv.URL+"/other-bot"); err != nil || p.NoFollow || len(p.Links) != 1 {
		t.Errorf("Fetch(/other-bot) = %+v, %v; a nofollow for another agent must not apply", p, err)
	}
	if p, err := f.Fetch(t.Context(), srv.URL+"/big"); err != nil || !p.Truncated || !slices.Equal(p.Links, []string{srv.URL + "/early"}) {
		t.Errorf("Fetch(/big) = %+v, %v; want truncated with only the early link", p, err)
	}
	if p, err := f.Fetch(t.Context(), srv.URL+"/many"); err != nil || len(p.Links) != 10 || p.Dropped != 11 {
		t.Errorf("Fetch(/many) = %d links, %d dropped, %v; want 10 kept (repeats removed), 11 dropped", len(p.Links), p.Dropped, err)
	}
	if p, err := f.Fetch(t.Context(), srv.URL+"/canonical"); err != nil || len(p.Links) != 0 {
		t.Errorf("Fetch(/canonical) without Canonical/Frames = %q, %v; want no links", p.Links, err)
	}
	f2 := newFetcher(t, FetcherOptions{IgnoreRobots: true, Canonical: true, Frames: true}, host)
	if p, err := f2.Fetch(t.Context(), srv.URL+"/canonical"); err != nil || !slices.Equal(p.Links, []string{srv.URL + "/c", srv.URL + "/frame"}) {
		t.Errorf("Fetch(/canonical) with Canonical and Frames = %q, %v; want /c and /frame", p.Links, err)
	}
}

// TestFetchLazyReadsLinksLater checks the crawler's fetch, which ends the
// host's turn at the exchange: the page comes back with its fingerprint
// and canonical link but no links, and ReadLinks then finds what Fetch
// finds (the page's links, none under a robots meta nofollow), once.
func TestFetchLazyReadsLinksLater(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><head><link rel=canonical href="/c"></head><a href="/a">a</a><a href="/b#x">b</a></html>`)
	})
	mux.HandleFunc("/meta", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><head><meta name="robots" content="nofollow"></head><a href="/a">a</a></html>`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	f := newFetcher(t, FetcherOptions{IgnoreRobots: true}, strings.TrimPrefix(srv.URL, "http://"))

	for _, tc := range []struct {
		path     string
		links    []string
		noFollow bool
	}{
		{"/page", []string{srv.URL + "/a", srv.URL + "/b"}, false},
		{"/meta", nil, true},
	} {
		p, _, err := f.fetchLazy(t.Context(), t.Context(), srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if p.Print == nil || len(p.Links) != 0 || p.NoFollow {
			t.Errorf("%s before ReadLinks: print %v, links %q, nofollow %v; want a print, no links yet", tc.path, p.Print != nil, p.Links, p.NoFollow)
		}
		if tc.path == "/page" && p.Canonical != srv.URL+"/c" {
			t.Errorf("%s: canonical %q before ReadLinks, want %q", tc.path, p.Canonical, srv.URL+"/c")
		}
		p.ReadLinks()
		p.ReadLinks() // a second call reads nothing again
		if !slices.Equal(p.Links, tc.links) || p.NoFollow != tc.noFollow {
			t.Errorf("%s after ReadLinks: links %q, nofollow %v; want %q, %v", tc.path, p.Links, p.NoFollow, tc.links, tc.noFollow)
		}
		full, err := f.Fetch(t.Context(), srv.URL+tc.path)
		if err != nil || !slices.Equal(full.Links, p.Links) {
			t.Errorf("%s: Fetch found %q, %v; the lazy fetch %q", tc.path, full.Links, err, p.Links)
		}
	}
}

func TestFetchRefusesForbiddenAddresses(t *testing.T) {
	site := startSite(t, testsite.Options{Pages: 10})
	// Not allowed: neither "localhost" nor 127.0.0.1 is a seed here.
	f := newFetcher(t, FetcherOptions{IgnoreRobots: true})
	for _, u := range []string{
		site.URL,         // a name resolving to loopback (checked after DNS)
		site.OffScopeURL, // a loopback IP
		"http://169.254.169.254/latest/meta-data/", // cloud metadata, link-local
		"http://[::1]:9/",
		"http://0.0.0.0:9/",
		"http://10.0.0.1/",
		"http://100.100.100.200/", // Alibaba metadata, shared address space
		"http://[::ffff:127.0.0.1]:9/",
	} {
		_, err := f.Fetch(t.Context(), u)
		var fe *FetchError
		if !errors.As(err, &fe) || fe.Reason != ReasonForbiddenAddress || fe.Temporary || !errors.Is(err, ErrForbiddenAddress) {
			t.Errorf("Fetch(%s) = %v, want a permanent %s error", u, err, ReasonForbiddenAddress)
		}
	}
	if n := len(site.Fetches()) + site.OffScopeFetches(); n != 0 {
		t.Errorf("site got %d requests, want none", n)
	}

	// A seed host is allowed, and only that host.
	f.AllowHost(site.Host())
	if _, err := f.Fetch(t.Context(), site.URL); err != nil {
		t.Errorf("Fetch(seed %s) after AllowHost: %v", site.URL, err)
	}
	if _, err := f.Fetch(t.Context(), site.OffScopeURL); !errors.Is(err, ErrForbiddenAddress) {
		t.Errorf("Fetch(%s) = %v; allowing localhost must not allow 127.0.0.1", site.OffScopeURL, err)
	}
	// Explicitly allowed prefixes.
	f3 := newFetcher(t, FetcherOptions{IgnoreRobots: true, AllowAddresses: []string{"127.0.0.0/8"}})
	if _, err := f3.Fetch(t.Context(), site.OffScopeURL); err != nil {
		t.Errorf("Fetch(%s) with 127.0.0.0/8 allowed: %v", site.OffScopeURL, err)
	}
	if _, err := NewFetcher(FetcherOptions{AllowAddresses: []string{"http://x/"}}); err == nil {
		t.Errorf("NewFetcher accepted a URL as an allowed address")
	}
}

func TestForbidden(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1", true},        // loopback (RFC 1122)
		{"10.1.2.3", true},         // private (RFC 1918)
		{"172.16.0.1", true},       // private
		{"192.168.1.1", true},      // private
		{"169.254.169.254", true},  // link-local: AWS/GCP/Azure metadata
		{"100.100.100.200", true},  // shared (RFC 6598): Alibaba metadata
		{"0.0.0.0", true},          // unspecified
		{"255.255.255.255", true},  // broadcast
		{"224.0.0.1", true},        // multicast
		{"::1", true},              // loopback
		{"fe80::1", true},          // link-local
		{"fd00:ec2::254", true},    // unique local (RFC 4193): AWS IPv6 metadata
		{"::ffff:10.0.0.1", true},  // IPv4-mapped private
		{"64:ff9b::a00:1", true},   // NAT64 of 10.0.0.1
		{"2002:a00:1::", true},     // 6to4 of 10.0.0.1
		{"8.8.8.8", false},         // public
		{"93.184.215.14", false},   // public
		{"2606:4700::1111", false}, // public IPv6
		{"64:ff9b::808:808", false},
	}
	for _, tc := range tests {
		if got := Forbidden(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Forbidden(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestFetchIgnoresEnvironment(t *testing.T) {
	// colly.NewCollector applies COLLY_*; net/http's default transport
	// HTTP_PROXY. Neither may change what the Fetcher does.
	t.Setenv("COLLY_USER_AGENT", "from-the-environment")
	t.Setenv("COLLY_IGNORE_ROBOTSTXT", "yes")
	t.Setenv("COLLY_MAX_BODY_SIZE", "10")
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("http_proxy", "http://127.0.0.1:1")
	site := startSite(t, testsite.Options{Pages: 10})
	f := newFetcher(t, FetcherOptions{UserAgent: "TestBot/1.0"}, site.Host())
	p, err := f.Fetch(t.Context(), site.URL)
	if err != nil || len(p.Links) == 0 {
		t.Fatalf("Fetch(%s) = %+v, %v", site.URL, p, err)
	}
	if _, err := f.Fetch(t.Context(), site.URL+"private/1"); !errors.Is(err, ErrRobotsDisallowed) {
		t.Errorf("Fetch(private) = %v, want robots.txt honoured", err)
	}
	if ua := site.UserAgents(); len(ua) != 1 || ua["TestBot/1.0"] == 0 {
		t.Errorf("user agents seen = %v, want only TestBot/1.0", ua)
	}
}

func TestFetchTimeoutAndCancel(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	host := strings.TrimPrefix(srv.URL, "http://")
	f := newFetcher(t, FetcherOptions{IgnoreRobots: true, RequestTimeout: 200 * time.Millisecond}, host)
	_, err := f.Fetch(t.Context(), srv.URL+"/slow")
	var fe *FetchError
	if !errors.As(err, &fe) || fe.Reason != ReasonTimeout || !fe.Temporary {
		t.Errorf("Fetch(hanging) = %v, want a temporary timeout", err)
	}

	f2 := newFetcher(t, FetcherOptions{IgnoreRobots: true, RequestTimeout: time.Hour}, host)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := f2.Fetch(ctx, srv.URL+"/slow"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Fetch with an ending context = %v, want %v", err, context.DeadlineExceeded)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"5", 5 * time.Second},
		{"0", 0},
		{"-3", 0},
		{"99999999", time.Hour}, // capped
		{"Thu, 02 Jan 2025 03:04:35 GMT", 30 * time.Second}, // RFC 9110 §10.2.3 HTTP-date
		{"Thu, 02 Jan 2025 03:00:00 GMT", 0},                // in the past
		{"soon", 0},
	}
	for _, tc := range tests {
		if got := retryAfter(tc.in, now); got != tc.want {
			t.Errorf("retryAfter(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestFetchKeepsConnections checks that fetched pages leave their
// connection open for the next request to the host.
func TestFetchKeepsConnections(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><a href="/x">x</a></html>`)
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	f := newFetcher(t, FetcherOptions{IgnoreRobots: true, HostParallel: 1}, strings.TrimPrefix(srv.URL, "http://"))
	for i := range 5 {
		if _, err := f.Fetch(t.Context(), fmt.Sprintf("%s/p/%d", srv.URL, i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("5 fetches opened %d connections, want 1 (kept alive)", n)
	}
	if before := len(ownGoroutines()); before == 0 {
		t.Errorf("no connection goroutine before Close: the check below would prove nothing")
	}
	f.Close()
	deadline := time.Now().Add(5 * time.Second)
	for len(ownGoroutines()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left after Close: %q", ownGoroutines())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
