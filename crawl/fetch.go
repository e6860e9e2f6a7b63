package crawl

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocolly/colly/v2"
	whatwgurl "github.com/nlnwa/whatwg-url/url"

	"github.com/sievecrawl/sieve/fingerprint"
)

// DefaultUserAgent is the User-Agent sent when FetcherOptions.UserAgent is
// empty. Its product token, "SieveBot", is what robots.txt groups match.
const DefaultUserAgent = "SieveBot/0.1 (+https://github.com/sievecrawl/sieve)"

// FetcherOptions configures a Fetcher. The zero value of every field means
// the default written beside it; the defaults are ones a site owner accepts:
// one request at a time per host, a second apart, robots.txt honoured.
type FetcherOptions struct {
	UserAgent       string        // DefaultUserAgent
	RequestTimeout  time.Duration // 30s: the whole exchange, body included
	MaxBodySize     int64         // 10 MiB: longer bodies are cut (Page.Truncated)
	HostParallel    int           // 1 request in flight per host
	HostDelay       time.Duration // 1s between request starts to one host; negative for none
	MaxParallel     int           // 64 requests in flight over all hosts
	MaxCrawlDelay   time.Duration // 60s: the most of a robots.txt Crawl-delay honoured
	IgnoreRobots    bool          // false: robots.txt is honoured
	RobotsTTL       time.Duration // 24h (RFC 9309 §2.4)
	RobotsCacheSize int           // 10,000 origins
	MaxLinks        int           // 5,000 links kept per page
	MaxURLLength    int           // 2,048 bytes: longer links are dropped
	// Canonical also reports <link rel=canonical href> as a link.
	Canonical bool
	// Frames also reports <frame src> and <iframe src> as links.
	Frames bool
	// RetryAfterURL makes a Retry-After (on a 429 or 503) hold back only
	// the retry of its URL; false: every URL of the host waits, as RFC
	// 9110 reads a 503's Retry-After (the service is unavailable). For
	// sites of one's own whose errors are per page.
	RetryAfterURL bool
	// AllowAddresses lists host names, IP addresses and CIDR prefixes that
	// may be fetched although they are loopback, private, link-local or
	// otherwise forbidden (see Forbidden). Fetcher.AllowHost adds more.
	AllowAddresses []string
	// RoundTrippers wrap the transport of every page request, the first
	// outermost (metrics, tracing, recording the exchange as net/http sees
	// it), as promhttp's InstrumentRoundTripper* do. robots.txt requests
	// go through them too.
	RoundTrippers []func(http.RoundTripper) http.RoundTripper
	// WrapConn wraps every connection the transport opens, after the
	// address guard allowed it and after the TLS handshake, so the wrapper
	// sees the bytes of the exchange as they cross the wire (recording
	// them in a WARC file). With WrapConn set, requests go over HTTP/1.1,
	// whose bytes are the exchange itself.
	WrapConn func(net.Conn) net.Conn
	// TLSConfig is the TLS client configuration (its RootCAs, say); nil:
	// the system's roots.
	TLSConfig *tls.Config
	// Hosts overrides the politeness toward some hosts, keyed by host as in
	// URLs, with the port if not the scheme's ("localhost:8080"); every
	// other host gets HostParallel and HostDelay. Meant for sites one owns,
	// such as the demo's.
	Hosts map[string]HostPolicy
}

// HostPolicy is the politeness toward one host. Zero fields mean the
// general setting.
type HostPolicy struct {
	Parallel int           // requests in flight at once
	Delay    time.Duration // between the starts of two requests; negative for none
	// RetryBackoff is the wait before the first retry of a URL of the host
	// (used by Crawler; see Options.RetryBackoff).
	RetryBackoff time.Duration
	// RetryAfterURL: see FetcherOptions.RetryAfterURL (either holds).
	RetryAfterURL bool
}

func (o FetcherOptions) withDefaults() FetcherOptions {
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.MaxBodySize <= 0 {
		o.MaxBodySize = 10 << 20
	}
	if o.HostParallel <= 0 {
		o.HostParallel = 1
	}
	// Delays stay as given (0: the default, negative: none): the
	// politeness scheduler reads them so.
	hosts := make(map[string]HostPolicy, len(o.Hosts))
	for h, p := range o.Hosts {
		if p.Parallel <= 0 {
			p.Parallel = o.HostParallel
		}
		hosts[strings.ToLower(h)] = p
	}
	o.Hosts = hosts
	if o.MaxParallel <= 0 {
		o.MaxParallel = 64
	}
	if o.MaxCrawlDelay <= 0 {
		o.MaxCrawlDelay = time.Minute
	}
	if o.RobotsTTL <= 0 {
		o.RobotsTTL = 24 * time.Hour
	}
	if o.RobotsCacheSize <= 0 {
		o.RobotsCacheSize = 10_000
	}
	if o.MaxLinks <= 0 {
		o.MaxLinks = 5000
	}
	if o.MaxURLLength <= 0 {
		o.MaxURLLength = 2048
	}
	return o
}

// Page is the outcome of fetching one URL that got an HTTP response.
type Page struct {
	URL         string // the URL requested
	Status      int
	ContentType string // media type without parameters
	// Redirect is the absolute target of a 3xx response's Location. The
	// fetcher never follows it: the target goes through dedup like any link,
	// so a page reached by several redirecting URLs is fetched once.
	Redirect string
	// Links are the absolute http(s) URLs an HTML page links to, resolved
	// against its <base href>, in document order, without repeats. Empty
	// when the page or an X-Robots-Tag says nofollow.
	Links     []string
	NoFollow  bool // the page asked not to follow its links
	Truncated bool // the body was longer than MaxBodySize and was cut
	Dropped   int  // links dropped: too long or beyond MaxLinks
	// Print is the fingerprint of a 2xx HTML page's body (nil for other
	// answers): its payload digest, SimHash and text blocks.
	Print *fingerprint.Print
	// Canonical is the absolute URL the page names as its canonical one,
	// by a Link: <…>; rel="canonical" header or a <link rel=canonical>
	// (the header first); a hint, never followed as such unless
	// FetcherOptions says so.
	Canonical string
	// DuplicateOf is an earlier URL of the crawl whose page this one is,
	// DuplicateKind how they matched (dust.Exact, dust.Near); set by the
	// Crawler's learning.
	DuplicateOf, DuplicateKind string

	sitemap *sitemapResult // what a sitemap document held
	links   func()         // reads Links from the body, once (ReadLinks); nil when done
}

// ReadLinks reads the page's links from its body if that was left for
// later (a fetch with its parse deferred: the host's turn ends at the
// exchange, the parse runs after it). It is a no-op for a page whose links
// were read.
func (p *Page) ReadLinks() {
	if p.links == nil {
		return
	}
	read := p.links
	p.links = nil
	read()
	if p.NoFollow { // a robots meta tag said so
		p.Links = nil
	}
}

// Reason names why a fetch failed, for counting.
type Reason string

// The reasons a fetch fails.
const (
	ReasonBadURL            Reason = "bad_url"
	ReasonRobots            Reason = "robots"
	ReasonRobotsUnavailable Reason = "robots_unavailable"
	ReasonForbiddenAddress  Reason = "forbidden_address"
	ReasonDNS               Reason = "dns"
	ReasonTimeout           Reason = "timeout"
	ReasonNetwork           Reason = "network"
	ReasonTLS               Reason = "tls"
	ReasonStatus4xx         Reason = "http_4xx"
	ReasonStatus5xx         Reason = "http_5xx"
	ReasonTooMany           Reason = "http_429"
	ReasonRedirectLoop      Reason = "redirect_loop"
	ReasonTooManyRedirects  Reason = "too_many_redirects"
	// ReasonCaptureUnreadable: a 304 said the page is unchanged, but the
	// record of its last capture could no longer be read for its links
	// (retried: the page is fetched again in full).
	ReasonCaptureUnreadable Reason = "capture_unreadable"
)

// FetchError is a failed fetch, temporary (worth retrying later: timeouts,
// network errors, 5xx, 429, robots.txt unavailable) or permanent.
type FetchError struct {
	URL        string
	Reason     Reason
	Status     int           // the HTTP status, 0 without a response
	Temporary  bool          // worth retrying later
	RetryAfter time.Duration // what a Retry-After header asked, 0 if none
	Err        error
}

func (e *FetchError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("crawl: fetch %s: %s: %v", e.URL, e.Reason, e.Err)
	}
	return fmt.Sprintf("crawl: fetch %s: %s", e.URL, e.Reason)
}

func (e *FetchError) Unwrap() error { return e.Err }

// Fetcher fetches single pages safely: robots.txt honoured (cached), no
// connection to a forbidden address (checked after DNS resolution, on every
// dial), redirects reported instead of followed, links extracted from HTML
// only.
//
// net/http makes the exchange: an http.Transport whose dialer is the address
// guard, wrapped by FetcherOptions.RoundTrippers, its connections by
// FetcherOptions.WrapConn. colly only parses: an HTML body read by the
// Fetcher is handed to the collector through a transport that serves it
// from memory, and colly's callbacks collect the links. It reads no
// environment variable (colly's COLLY_* settings and HTTP_PROXY are
// ignored). A Fetcher is safe for concurrent use; Close cancels fetches in
// flight.
type Fetcher struct {
	opts      FetcherOptions
	collector *colly.Collector
	transport *http.Transport
	guard     *guard
	robots    *robotsCache
	parallel  chan struct{} // one token per request in flight

	client  *http.Client // page requests: the transport with its RoundTrippers
	cancel  context.CancelFunc
	nextID  atomic.Uint64
	bodies  sync.Map // fetch id → *http.Response read, for colly to parse
	closed  atomic.Bool
	observe func(time.Duration) // receives each HTTP exchange's duration; may be nil
}

// fetchIDHeader carries a fetch's id from colly's request to the transport
// that serves the body the Fetcher read.
const fetchIDHeader = "X-Sieve-Fetch-Id"

const resultKey = "sieve.result"

// maxParallel is the most requests in flight to any one host.
func maxParallel(o FetcherOptions) int {
	n := o.HostParallel
	for _, p := range o.Hosts {
		n = max(n, p.Parallel)
	}
	return n
}

// NewFetcher returns a Fetcher configured by opts.
func NewFetcher(opts FetcherOptions) (*Fetcher, error) {
	opts = opts.withDefaults()
	g, err := newGuard(opts.AllowAddresses)
	if err != nil {
		return nil, err
	}
	f := &Fetcher{opts: opts, guard: g, parallel: make(chan struct{}, opts.MaxParallel)}
	dialer := &net.Dialer{Timeout: min(opts.RequestTimeout, 10*time.Second), KeepAlive: 30 * time.Second}
	f.transport = &http.Transport{
		Proxy:                 nil, // never from the environment
		DialContext:           g.dialContext(dialer),
		TLSClientConfig:       opts.TLSConfig,
		ForceAttemptHTTP2:     opts.WrapConn == nil,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   maxParallel(opts),
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: opts.RequestTimeout,
		ExpectContinueTimeout: time.Second,
	}
	if opts.WrapConn != nil {
		wrapConns(f.transport, opts.WrapConn)
	}
	var rt http.RoundTripper = f.transport
	for i := len(opts.RoundTrippers) - 1; i >= 0; i-- {
		rt = opts.RoundTrippers[i](rt)
	}
	f.client = &http.Client{
		Transport: rt,
		Timeout:   opts.RequestTimeout,
		Jar:       nil, // no cookies: pages are fetched once, by any crawler
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}

	// RFC 9309 §2.3.1.2: follow at least five redirects for robots.txt.
	robotsClient := &http.Client{
		Transport: rt,
		Timeout:   opts.RequestTimeout,
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	f.robots = newRobotsCache(robotsClient, opts.UserAgent, opts.RobotsTTL, opts.RobotsCacheSize)

	// colly.NewCollector would apply COLLY_* environment variables after our
	// options; Init alone sets the defaults without reading the environment.
	c := &colly.Collector{}
	c.Init()
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	c.Context = ctx
	c.UserAgent = opts.UserAgent
	c.AllowURLRevisit = true // dedup is the pipeline's job
	c.IgnoreRobotsTxt = true // robots.txt is checked by robotsCache, before the host slot is taken
	c.MaxBodySize = 0        // the body was read, and cut, by the Fetcher
	c.MaxDepth = 0
	c.ParseHTTPErrorResponse = true // only 2xx HTML bodies reach colly
	c.SetClient(&http.Client{Transport: bodies{f}})
	selector := "a[href], area[href]"
	if opts.Canonical {
		selector += `, link[rel~="canonical"][href]`
	}
	c.OnHTML(selector, func(e *colly.HTMLElement) { result(e.Request.Ctx).linkRef(e.Request, e.Attr("href")) })
	if opts.Frames {
		c.OnHTML("frame[src], iframe[src]", func(e *colly.HTMLElement) { result(e.Request.Ctx).linkRef(e.Request, e.Attr("src")) })
	}
	c.OnHTML("meta[name][content]", func(e *colly.HTMLElement) {
		if name := e.Attr("name"); strings.EqualFold(name, "robots") || strings.EqualFold(name, robotsToken(opts.UserAgent)) {
			if hasNoFollow(e.Attr("content")) {
				result(e.Request.Ctx).page.NoFollow = true
			}
		}
	})
	f.collector = c
	return f, nil
}

// policy returns the politeness given to the host of rawURL in
// FetcherOptions.Hosts, if any.
func (f *Fetcher) policy(rawURL string) (HostPolicy, bool) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return HostPolicy{}, false
	}
	p, ok := f.opts.Hosts[strings.ToLower(u.Host)]
	return p, ok
}

// holdsHost reports whether a Retry-After answered for rawURL holds back
// every URL of its host (FetcherOptions.RetryAfterURL).
func (f *Fetcher) holdsHost(rawURL string) bool {
	if p, ok := f.policy(rawURL); ok && p.RetryAfterURL {
		return false
	}
	return !f.opts.RetryAfterURL
}

// AllowHost lets the host of hostport (host or host:port) be fetched although
// it resolves to a forbidden address: for seeds that are such hosts.
func (f *Fetcher) AllowHost(hostport string) { f.guard.allowHostOf(hostport) }

// Close cancels fetches in flight and releases idle connections. It is
// idempotent.
func (f *Fetcher) Close() error {
	if f.closed.Swap(true) {
		return nil
	}
	f.cancel()
	f.transport.CloseIdleConnections()
	return nil
}

// fetchResult collects what colly's callbacks learn about one fetch.
type fetchResult struct {
	page     Page
	sitemap  *sitemapResult // of a sitemap fetch
	max      int
	maxLen   int
	seen     map[string]bool
	headers  http.Header
	gotReply bool
	base     *whatwgurl.Url // the page's base, parsed once: see absolute
	noBase   bool           // the base did not parse again: colly resolves each link
}

func result(ctx *colly.Context) *fetchResult { return ctx.GetAny(resultKey).(*fetchResult) }

// linkParser parses as colly's Request.AbsoluteURL does.
var linkParser = whatwgurl.NewParser(whatwgurl.WithPercentEncodeSinglePercentSign())

// linkRef adds the link ref of the page req fetched.
func (r *fetchResult) linkRef(req *colly.Request, ref string) { r.link(r.absolute(req, ref)) }

// absolute resolves ref as req.AbsoluteURL does, without parsing the
// page's base again for every link: AbsoluteURL parses the base's string
// and then the ref (a page of PostgreSQL's documentation has about 100
// links: 8 % of a crawl's CPU went to parsing its base). The base is what
// AbsoluteURL resolves the empty reference to (the page's URL, or its
// <base href>, without fragment), parsed once per page; resolving against
// it gives what resolving against the base with its fragment gives, for
// every reference but a fragment alone, which AbsoluteURL refuses first.
func (r *fetchResult) absolute(req *colly.Request, ref string) string {
	if strings.HasPrefix(ref, "#") {
		return ""
	}
	if r.base == nil && !r.noBase {
		b, err := linkParser.Parse(req.AbsoluteURL(""))
		r.base, r.noBase = b, err != nil
	}
	if r.noBase {
		return req.AbsoluteURL(ref)
	}
	u, err := r.base.Parse(ref)
	if err != nil {
		return ""
	}
	return u.Href(false)
}

func (r *fetchResult) link(abs string) {
	if abs == "" {
		return
	}
	if !strings.HasPrefix(abs, "http://") && !strings.HasPrefix(abs, "https://") {
		return
	}
	if i := strings.IndexByte(abs, '#'); i >= 0 {
		abs = abs[:i] // fragments name parts of one page
	}
	if r.seen[abs] {
		return
	}
	r.seen[abs] = true
	if len(abs) > r.maxLen || len(r.page.Links) >= r.max {
		r.page.Dropped++
		return
	}
	r.page.Links = append(r.page.Links, abs)
}

// Fetch fetches rawURL once, after checking robots.txt. It returns a Page for
// every HTTP response that is not an error: 2xx (with links for HTML) and 3xx
// (with Redirect). Other outcomes are a *FetchError, or ctx's error when ctx
// ended first. Fetch does not space requests to a host: that is the
// scheduler's job (package politeness), which the Crawler runs.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) (*Page, error) {
	p, _, err := f.fetch(ctx, ctx, rawURL)
	return p, err
}

// fetch is Fetch with two contexts: wait bounds the waiting for robots.txt and
// a global request slot (ending it hands the URL back unfetched), ctx the
// request. It also returns the pause the host asked for after this request
// (its robots.txt Crawl-delay, bounded by MaxCrawlDelay); a Retry-After is in
// the FetchError.
func (f *Fetcher) fetch(wait, ctx context.Context, rawURL string) (*Page, time.Duration, error) {
	return f.fetchAs(wait, ctx, rawURL, nil)
}

// bodyReader reads a 2xx body into the fetch's result in place of the HTML
// link extraction (sitemaps).
type bodyReader func(resp *http.Response, r *fetchResult) error

// fetchAs is fetch with read, if not nil, reading 2xx bodies.
func (f *Fetcher) fetchAs(wait, ctx context.Context, rawURL string, read bodyReader) (*Page, time.Duration, error) {
	p, pause, err := f.fetchLazy(wait, ctx, rawURL, read)
	if p != nil {
		p.ReadLinks()
	}
	return p, pause, err
}

// fetchLazy is fetchAs with an HTML page's links left in its body for
// Page.ReadLinks: the exchange, the body and its fingerprint are done when
// it returns, colly's parse is not. The crawler ends the host's turn
// there, so that at one request at a time the next exchange does not wait
// for this page's parse.
func (f *Fetcher) fetchLazy(wait, ctx context.Context, rawURL string, read bodyReader) (*Page, time.Duration, error) {
	if f.closed.Load() {
		return nil, 0, errors.New("crawl: fetcher closed")
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		if err == nil {
			err = errors.New("not an absolute http(s) URL")
		}
		return nil, 0, &FetchError{URL: rawURL, Reason: ReasonBadURL, Err: err}
	}
	var crawlDelay time.Duration
	if !f.opts.IgnoreRobots {
		crawlDelay, err = f.robots.allowed(wait, u)
		switch {
		case wait.Err() != nil:
			return nil, 0, wait.Err()
		case errors.Is(err, ErrRobotsDisallowed):
			return nil, 0, &FetchError{URL: rawURL, Reason: ReasonRobots, Err: err}
		case err != nil:
			return nil, 0, &FetchError{URL: rawURL, Reason: ReasonRobotsUnavailable, Temporary: true, Err: err}
		}
	}
	pause := min(crawlDelay, f.opts.MaxCrawlDelay)
	select {
	case f.parallel <- struct{}{}:
	case <-wait.Done():
		return nil, 0, wait.Err()
	}
	if err := wait.Err(); err != nil { // both were ready: select chose at random
		<-f.parallel
		return nil, 0, err
	}
	start := time.Now()
	r, err := f.do(ctx, rawURL, read)
	<-f.parallel
	if f.observe != nil {
		f.observe(time.Since(start))
	}
	if ctx.Err() != nil {
		return nil, pause, ctx.Err()
	}
	if !r.gotReply {
		return nil, pause, classify(rawURL, err)
	}
	p := &r.page
	p.sitemap = r.sitemap
	switch {
	case p.Status >= 200 && p.Status < 400:
		if p.NoFollow { // an X-Robots-Tag said so: nothing to read
			p.Links, p.links = nil, nil
		}
		if p.Status >= 300 && p.Redirect == rawURL {
			return nil, pause, &FetchError{URL: rawURL, Reason: ReasonRedirectLoop, Status: p.Status}
		}
		return p, pause, nil
	case p.Status == http.StatusTooManyRequests || p.Status == http.StatusServiceUnavailable:
		ra := retryAfter(r.headers.Get("Retry-After"), time.Now())
		reason := ReasonTooMany
		if p.Status != http.StatusTooManyRequests {
			reason = ReasonStatus5xx
		}
		return nil, pause, &FetchError{URL: rawURL, Reason: reason, Status: p.Status, Temporary: true, RetryAfter: ra}
	case p.Status == http.StatusRequestTimeout:
		return nil, pause, &FetchError{URL: rawURL, Reason: ReasonTimeout, Status: p.Status, Temporary: true}
	case p.Status >= 500 && p.Status != http.StatusNotImplemented && p.Status != http.StatusHTTPVersionNotSupported:
		return nil, pause, &FetchError{URL: rawURL, Reason: ReasonStatus5xx, Status: p.Status, Temporary: true}
	case p.Status >= 500:
		return nil, pause, &FetchError{URL: rawURL, Reason: ReasonStatus5xx, Status: p.Status}
	default:
		return nil, pause, &FetchError{URL: rawURL, Reason: ReasonStatus4xx, Status: p.Status}
	}
}

// do makes the HTTP exchange for rawURL with net/http and, for a 2xx HTML
// page, has colly parse the body for links. Other bodies are not read.
func (f *Fetcher) do(ctx context.Context, rawURL string, read bodyReader) (*fetchResult, error) {
	r := f.newResult()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return r, err
	}
	req.Header.Set("User-Agent", f.opts.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5")
	resp, err := f.client.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	r.gotReply = true
	f.describe(r, resp)
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		if loc := resp.Header.Get("Location"); loc != "" {
			if target, err := resp.Request.URL.Parse(loc); err == nil && (target.Scheme == "http" || target.Scheme == "https") {
				target.Fragment, target.RawFragment = "", ""
				r.page.Redirect = target.String()
			}
		}
		return r, nil
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		return r, nil
	case read != nil:
		if err := read(resp, r); err != nil {
			r.gotReply = false
			return r, &url.Error{Op: "Get", URL: rawURL, Err: err}
		}
		return r, nil
	case !isHTML(r.page.ContentType):
		return r, nil // only HTML is read for links
	}
	if err := f.readHTML(rawURL, resp, r); err != nil {
		// Cut off mid-body: a failed exchange, as net/http reports one.
		r.gotReply = false
		return r, &url.Error{Op: "Get", URL: rawURL, Err: err}
	}
	return r, nil
}

func (f *Fetcher) newResult() *fetchResult {
	return &fetchResult{max: f.opts.MaxLinks, maxLen: f.opts.MaxURLLength, seen: map[string]bool{}}
}

// describe records what resp's status line and headers say into r.
func (f *Fetcher) describe(r *fetchResult, resp *http.Response) {
	r.headers = resp.Header
	r.page.Status = resp.StatusCode
	r.page.ContentType, _, _ = mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if href := canonicalLink(resp.Header.Values("Link")); href != "" {
		if c, err := resp.Request.URL.Parse(href); err == nil && (c.Scheme == "http" || c.Scheme == "https") {
			c.Fragment, c.RawFragment = "", ""
			r.page.Canonical = c.String()
		}
	}
	if hasNoFollow(xRobotsTag(resp.Header.Values("X-Robots-Tag"), robotsToken(f.opts.UserAgent))) {
		r.page.NoFollow = true
	}
}

// canonicalLink returns the target of the first link with relation
// canonical in Link header values (RFC 8288: `<target>; rel="canonical"`,
// several links per value, rel a space-separated list).
func canonicalLink(values []string) string {
	for _, v := range values {
		for v != "" {
			v = strings.TrimLeft(v, " \t,")
			if !strings.HasPrefix(v, "<") {
				return ""
			}
			end := strings.IndexByte(v, '>')
			if end < 0 {
				return ""
			}
			target, rest := v[1:end], v[end+1:]
			params := rest
			if i := strings.IndexByte(rest, ','); i >= 0 {
				params, rest = rest[:i], rest[i+1:]
			} else {
				rest = ""
			}
			for _, p := range strings.Split(params, ";") {
				name, val, ok := strings.Cut(strings.TrimSpace(p), "=")
				if !ok || !strings.EqualFold(strings.TrimSpace(name), "rel") {
					continue
				}
				for _, rel := range strings.Fields(strings.Trim(strings.TrimSpace(val), `"`)) {
					if strings.EqualFold(rel, "canonical") {
						return target
					}
				}
			}
			v = rest
		}
	}
	return ""
}

// isHTML reports whether a media type is read for links (none: sniffed
// as HTML).
func isHTML(mediaType string) bool {
	return mediaType == "" || mediaType == "text/html" || mediaType == "application/xhtml+xml"
}

// readHTML reads resp's body, cut at MaxBodySize, and has colly parse it
// into r.
func (f *Fetcher) readHTML(rawURL string, resp *http.Response, r *fetchResult) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.opts.MaxBodySize+1))
	if err != nil {
		return err
	}
	if int64(len(body)) > f.opts.MaxBodySize {
		body = body[:f.opts.MaxBodySize]
		r.page.Truncated = true
	}
	r.page.Print = fingerprintOf(body)
	if href := r.page.Print.Canonical; href != "" && r.page.Canonical == "" {
		if base, err := url.Parse(rawURL); err == nil {
			if c, err := base.Parse(href); err == nil && (c.Scheme == "http" || c.Scheme == "https") {
				c.Fragment, c.RawFragment = "", ""
				r.page.Canonical = c.String()
			}
		}
	}
	head := &http.Response{
		Status: resp.Status, StatusCode: resp.StatusCode, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
		Header: resp.Header,
	}
	r.page.links = func() { f.parse(rawURL, head, body, r) }
	return nil
}

// stored returns the links of resp, a response to rawURL kept earlier (the
// archive's capture of a page a 304 said is unchanged), as Fetch would have
// found them.
func (f *Fetcher) stored(rawURL string, resp *http.Response) Page {
	r := f.newResult()
	f.describe(r, resp)
	if r.page.NoFollow || !isHTML(r.page.ContentType) || f.readHTML(rawURL, resp, r) != nil {
		r.page.Links = nil
		return r.page
	}
	r.page.ReadLinks()
	return r.page
}

// parse has colly read body, the HTML answer head (status and headers)
// gave for rawURL, into r.
func (f *Fetcher) parse(rawURL string, head *http.Response, body []byte, r *fetchResult) {
	id := strconv.FormatUint(f.nextID.Add(1), 36)
	resp := *head
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	f.bodies.Store(id, &resp)
	defer f.bodies.Delete(id)
	cctx := colly.NewContext()
	cctx.Put(resultKey, r)
	hdr := http.Header{}
	hdr.Set(fetchIDHeader, id)
	// Errors are the collector's own (closed, say): the page then has no
	// links, which is all parsing adds.
	_ = f.collector.Request(http.MethodGet, rawURL, nil, cctx, hdr)
}

// bodies is the colly collector's transport: it serves the body the Fetcher
// read for the request's fetch id, so colly parses without fetching.
type bodies struct{ f *Fetcher }

func (b bodies) RoundTrip(req *http.Request) (*http.Response, error) {
	v, ok := b.f.bodies.Load(req.Header.Get(fetchIDHeader))
	if !ok {
		return nil, errors.New("crawl: no body read for this request")
	}
	resp := *v.(*http.Response)
	resp.Request = req
	return &resp, nil
}

// wrapConns makes t hand every connection to wrap once it carries the
// exchange's bytes: plain connections as dialled (through the address
// guard), TLS ones after the handshake, which then offers HTTP/1.1 only.
func wrapConns(t *http.Transport, wrap func(net.Conn) net.Conn) {
	dial := t.DialContext
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	}
	t.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cfg := &tls.Config{}
		if t.TLSClientConfig != nil {
			cfg = t.TLSClientConfig.Clone()
		}
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				host = addr
			}
			cfg.ServerName = host
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(raw, cfg)
		hctx, cancel := context.WithTimeout(ctx, t.TLSHandshakeTimeout)
		defer cancel()
		if err := tc.HandshakeContext(hctx); err != nil {
			raw.Close()
			return nil, err
		}
		return wrap(tc), nil
	}
}

// classify turns a transport error into a FetchError.
func classify(rawURL string, err error) error {
	if err == nil {
		err = errors.New("no response")
	}
	fe := &FetchError{URL: rawURL, Err: err}
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var netErr net.Error
	var urlErr *url.Error
	switch {
	case errors.Is(err, ErrForbiddenAddress):
		fe.Reason = ReasonForbiddenAddress
	case errors.As(err, &dnsErr):
		fe.Reason = ReasonDNS
		fe.Temporary = !dnsErr.IsNotFound
	case errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr):
		fe.Reason = ReasonTLS
	case errors.As(err, &netErr) && netErr.Timeout(), errors.Is(err, context.DeadlineExceeded):
		fe.Reason = ReasonTimeout
		fe.Temporary = true
	case !errors.As(err, &urlErr):
		// Every error of http.Client is a *url.Error: this one is colly
		// refusing the URL before any request.
		fe.Reason = ReasonBadURL
	default:
		fe.Reason = ReasonNetwork
		fe.Temporary = true
	}
	return fe
}

// retryAfter parses a Retry-After header (RFC 9110 §10.2.3): seconds or an
// HTTP date. It returns 0 for none or nonsense, and at most an hour.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		d = time.Duration(min(secs, 3600)) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return max(0, min(d, time.Hour))
}

// robotsToken is the product token of a User-Agent: "SieveBot" of
// "SieveBot/0.1 (+https://…)".
func robotsToken(ua string) string {
	tok, _, _ := strings.Cut(ua, "/")
	tok, _, _ = strings.Cut(tok, " ")
	return tok
}

// xRobotsTag returns the X-Robots-Tag directives that apply to agent: those
// without a user-agent prefix and those for agent.
func xRobotsTag(values []string, agent string) string {
	var out []string
	for _, v := range values {
		if name, rest, ok := strings.Cut(v, ":"); ok && !strings.ContainsAny(name, ", ") {
			if strings.EqualFold(strings.TrimSpace(name), agent) {
				out = append(out, rest)
			}
			continue
		}
		out = append(out, v)
	}
	return strings.Join(out, ",")
}

func hasNoFollow(directives string) bool {
	for _, d := range strings.Split(directives, ",") {
		switch strings.ToLower(strings.TrimSpace(d)) {
		case "nofollow", "none":
			return true
		}
	}
	return false
}
