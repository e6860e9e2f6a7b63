package crawl

import (
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
	// AllowAddresses lists host names, IP addresses and CIDR prefixes that
	// may be fetched although they are loopback, private, link-local or
	// otherwise forbidden (see Forbidden). Fetcher.AllowHost adds more.
	AllowAddresses []string
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
	o.HostDelay = delayOrDefault(o.HostDelay, time.Second)
	hosts := make(map[string]HostPolicy, len(o.Hosts))
	for h, p := range o.Hosts {
		if p.Parallel <= 0 {
			p.Parallel = o.HostParallel
		}
		p.Delay = delayOrDefault(p.Delay, o.HostDelay)
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

// Fetcher fetches single pages with colly, politely and safely: robots.txt
// honoured (cached), per-host parallelism and delay, no connection to a
// forbidden address (checked after DNS resolution, on every dial), redirects
// reported instead of followed, links extracted from HTML only. It reads no
// environment variable (colly's COLLY_* settings and HTTP_PROXY are ignored).
// A Fetcher is safe for concurrent use; Close cancels fetches in flight.
type Fetcher struct {
	opts      FetcherOptions
	collector *colly.Collector
	transport *http.Transport
	guard     *guard
	robots    *robotsCache
	parallel  chan struct{} // one token per request in flight

	cancel   context.CancelFunc
	nextID   atomic.Uint64
	inflight sync.Map // fetch id → context.Context of the caller
	closed   atomic.Bool
	observe  func(time.Duration) // receives each HTTP exchange's duration; may be nil
}

// fetchIDHeader carries a fetch's id from colly's request to the transport,
// which removes it, so each HTTP exchange obeys its caller's context (colly
// gives all requests one collector-wide context).
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

// delayOrDefault maps a delay setting to the delay: 0 is def, negative none.
func delayOrDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
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
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   maxParallel(opts),
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: opts.RequestTimeout,
		ExpectContinueTimeout: time.Second,
	}
	rt := &callerContext{base: f.transport, f: f}

	// RFC 9309 §2.3.1.2: follow at least five redirects for robots.txt.
	robotsClient := &http.Client{
		Transport: f.transport,
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
	c.MaxBodySize = int(opts.MaxBodySize) + 1
	c.MaxDepth = 0
	c.ParseHTTPErrorResponse = true // non-2xx responses are aborted in onHeaders; 203–299 are pages
	c.SetClient(&http.Client{
		Transport: rt,
		Timeout:   opts.RequestTimeout,
		Jar:       nil, // no cookies: pages are fetched once, by any crawler
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	})
	c.OnResponseHeaders(f.onHeaders)
	c.OnResponse(f.onResponse)
	selector := "a[href], area[href]"
	if opts.Canonical {
		selector += `, link[rel~="canonical"][href]`
	}
	c.OnHTML(selector, func(e *colly.HTMLElement) { result(e.Request.Ctx).link(e.Request.AbsoluteURL(e.Attr("href"))) })
	if opts.Frames {
		c.OnHTML("frame[src], iframe[src]", func(e *colly.HTMLElement) { result(e.Request.Ctx).link(e.Request.AbsoluteURL(e.Attr("src"))) })
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
	max      int
	maxLen   int
	seen     map[string]bool
	headers  http.Header
	gotReply bool
}

func result(ctx *colly.Context) *fetchResult { return ctx.GetAny(resultKey).(*fetchResult) }

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

func (f *Fetcher) onHeaders(resp *colly.Response) {
	r := result(resp.Ctx)
	r.gotReply = true
	r.page.Status = resp.StatusCode
	r.headers = *resp.Headers
	mediaType, _, _ := mime.ParseMediaType(resp.Headers.Get("Content-Type"))
	r.page.ContentType = mediaType
	if hasNoFollow(xRobotsTag(resp.Headers.Values("X-Robots-Tag"), robotsToken(f.opts.UserAgent))) {
		r.page.NoFollow = true
	}
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		if loc := resp.Headers.Get("Location"); loc != "" {
			if target, err := resp.Request.URL.Parse(loc); err == nil && (target.Scheme == "http" || target.Scheme == "https") {
				target.Fragment, target.RawFragment = "", ""
				r.page.Redirect = target.String()
			}
		}
		resp.Request.Abort()
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		resp.Request.Abort()
	case mediaType != "" && mediaType != "text/html" && mediaType != "application/xhtml+xml":
		// Only HTML is parsed for links: skip the body.
		resp.Request.Abort()
	}
}

func (f *Fetcher) onResponse(resp *colly.Response) {
	r := result(resp.Ctx)
	if int64(len(resp.Body)) > f.opts.MaxBodySize {
		resp.Body = resp.Body[:f.opts.MaxBodySize]
		r.page.Truncated = true
	}
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
	r, err := f.do(ctx, rawURL)
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
	switch {
	case p.Status >= 200 && p.Status < 400:
		if p.NoFollow {
			p.Links = nil
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

// do runs one colly request; the caller's ctx reaches the HTTP exchange
// through callerContext.
func (f *Fetcher) do(ctx context.Context, rawURL string) (*fetchResult, error) {
	id := strconv.FormatUint(f.nextID.Add(1), 36)
	f.inflight.Store(id, ctx)
	defer f.inflight.Delete(id)
	r := &fetchResult{max: f.opts.MaxLinks, maxLen: f.opts.MaxURLLength, seen: map[string]bool{}}
	cctx := colly.NewContext()
	cctx.Put(resultKey, r)
	hdr := http.Header{}
	hdr.Set("User-Agent", f.opts.UserAgent)
	hdr.Set("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5")
	hdr.Set(fetchIDHeader, id)
	err := f.collector.Request(http.MethodGet, rawURL, nil, cctx, hdr)
	return r, err
}

// callerContext is the colly client's transport: it binds each request to the
// context of the Fetch call that made it.
type callerContext struct {
	base http.RoundTripper
	f    *Fetcher
}

func (t *callerContext) RoundTrip(req *http.Request) (*http.Response, error) {
	id := req.Header.Get(fetchIDHeader)
	caller, _ := t.f.inflight.Load(id)
	callerCtx, _ := caller.(context.Context)
	req = req.Clone(req.Context())
	req.Header.Del(fetchIDHeader)
	if callerCtx == nil {
		return t.base.RoundTrip(req)
	}
	// The request's context ends when the caller's or colly's does. It is
	// not cancelled when the exchange ends well: the transport would then
	// race the body's end against the cancellation and drop the
	// connection instead of keeping it alive. Detached from its parents,
	// it needs no cancel to be released. It ends with its parent's cause:
	// a deadline (http.Client.Timeout's, the caller's) stays one, so the
	// transport's error is a timeout, not "context canceled".
	parent := req.Context()
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	stopCaller := context.AfterFunc(callerCtx, func() { cancel(context.Cause(callerCtx)) })
	stopColly := context.AfterFunc(parent, func() { cancel(context.Cause(parent)) })
	unhook := func() { stopCaller(); stopColly() }
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		unhook()
		cancel(nil)
		return nil, err
	}
	resp.Body = &unhookOnClose{ReadCloser: resp.Body, unhook: unhook}
	return resp, nil
}

// unhookOnClose stops watching the contexts once the body is closed.
type unhookOnClose struct {
	io.ReadCloser
	once   sync.Once
	unhook func()
}

func (b *unhookOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.unhook)
	return err
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
