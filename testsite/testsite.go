// Package testsite serves a generated web site on loopback with the traps
// real sites set for crawlers, and counts every request it gets, so a test
// can check that a crawl fetched each page exactly once.
//
// The site (host "localhost") is a tree of Options.Pages content pages
// (/p/N, N from 0; page N links to its children Fanout·N+1 … Fanout·N+Fanout)
// plus Options.Links extra links per page to pseudo-random pages. Every link
// is written in one of many spellings of the same URL: relative, ./ and ../,
// absolute, upper-case host and scheme, a #fragment, tracking parameters
// (utm_*, gclid, fbclid), a percent-encoded unreserved character, a
// <base href> that relative links resolve against. Beside them:
//
//   - /robots.txt disallows /private/; pages link into it;
//   - redirect chains: /old/N → 301 /moved/N → 302 /p/N, and /go/N → 308 /p/N,
//     so /p/N is reached through several redirecting URLs;
//   - /missing/N answers 404, /broken/N always 500, /flaky/N 503 with
//     Retry-After: 1 on its first request and the page afterwards;
//   - non-HTML files /files/N.pdf and /files/N.txt, whose bodies hold links
//     (to /hidden/N) a crawler must not follow;
//   - an infinite calendar /calendar/YYYY/MM, each month linking to the
//     previous and the next: only depth limits end it;
//   - an endless redirect chain /r/0 → /r/1 → …: only a redirect limit ends it;
//   - links to a second host (Site.OffScopeURL: 127.0.0.2, or 127.0.0.1 for a
//     site on another address).
//
// The home page / is the seed. Site is safe for concurrent use.
package testsite

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options sizes a Site; zero values mean the defaults beside them.
type Options struct {
	Pages   int           // 200 content pages
	Fanout  int           // 8 children per page in the tree
	Links   int           // 6 extra links per page
	Seed    uint64        // 1: the pseudo-random link graph
	Latency time.Duration // 0: how long each response waits, to stand for a network
	// Special is how many of each special kind of URL (private, missing,
	// broken, flaky, files, redirect chains) there are: 5.
	Special int
	// Addr is the loopback IP the site listens on: 127.0.0.1, named
	// "localhost" in its URLs. Any other address names the site by itself,
	// so several sites can be distinct hosts.
	Addr string
	// PageBytes pads every HTML page with text to about this size, as
	// real pages are (tens of kilobytes of HTML); 0: no padding.
	PageBytes int
	// Validators makes the site answer as a static web server does: an
	// ETag on every 200, and 304 Not Modified to a request whose
	// If-None-Match names the page as it is.
	Validators bool
	// Sitemaps makes robots.txt name a sitemap index, which lists a
	// gzipped XML sitemap, a text sitemap and a malformed one; they list
	// Orphans pages no page links to (/orphan/N), with a lastmod.
	Sitemaps bool
}

// Orphans is how many pages only the sitemaps list (Options.Sitemaps).
const Orphans = 15

func (o Options) withDefaults() Options {
	if o.Pages <= 0 {
		o.Pages = 200
	}
	if o.Fanout <= 0 {
		o.Fanout = 8
	}
	if o.Links < 0 {
		o.Links = 0
	} else if o.Links == 0 {
		o.Links = 6
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Special <= 0 {
		o.Special = 5
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1"
	}
	return o
}

// Site is a running generated site. Close stops it.
type Site struct {
	// URL is the seed: http://localhost:PORT/ .
	URL string
	// OffScopeURL is the root of the second, off-scope host.
	OffScopeURL string

	opts     Options
	host     string // localhost:PORT
	offHost  string // 127.0.0.1:PORT2
	main     *http.Server
	off      *http.Server
	wg       sync.WaitGroup
	mu       sync.Mutex
	fetches  map[string]int      // request path on the main host → GETs (robots.txt included)
	raw      map[string][]string // request path → the request URIs seen, for diagnosis
	served   map[string][]string // request path → sha1 (hex) of each body served
	offCount int
	flaky    map[string]bool
	agents   map[string]int // User-Agent → requests
	inFlight int
	maxIn    int
	current  map[*http.Request]string // requests being served → "agent uri"
	overlap  []string                 // the requests in flight when maxIn was reached
	starts   []time.Time              // request arrival times on the main host
	closed   bool
}

// New starts a site on loopback ports chosen by the system.
func New(opts Options) (*Site, error) {
	opts = opts.withDefaults()
	l1, err := net.Listen("tcp", net.JoinHostPort(opts.Addr, "0"))
	if err != nil {
		return nil, fmt.Errorf("testsite: listen: %w", err)
	}
	offAddr := "127.0.0.1"
	if opts.Addr == offAddr {
		offAddr = "127.0.0.2"
	}
	l2, err := net.Listen("tcp", net.JoinHostPort(offAddr, "0"))
	if err != nil {
		l1.Close()
		return nil, fmt.Errorf("testsite: listen: %w", err)
	}
	s := &Site{
		opts:    opts,
		host:    net.JoinHostPort(opts.Addr, strconv.Itoa(l1.Addr().(*net.TCPAddr).Port)),
		offHost: l2.Addr().String(),
		fetches: map[string]int{},
		raw:     map[string][]string{},
		served:  map[string][]string{},
		flaky:   map[string]bool{},
		agents:  map[string]int{},
		current: map[*http.Request]string{},
	}
	if opts.Addr == "127.0.0.1" {
		s.host = "localhost:" + strconv.Itoa(l1.Addr().(*net.TCPAddr).Port)
	}
	s.URL = "http://" + s.host + "/"
	s.OffScopeURL = "http://" + s.offHost + "/"
	s.main = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	s.off = &http.Server{Handler: http.HandlerFunc(s.serveOff), ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.main.Serve(l1) }()
	go func() { defer s.wg.Done(); s.off.Serve(l2) }()
	return s, nil
}

// Close stops the site and waits for its goroutines. It is idempotent.
func (s *Site) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := errors.Join(s.main.Shutdown(ctx), s.off.Shutdown(ctx))
	s.wg.Wait()
	return err
}

// Host returns the main host's authority, localhost:PORT.
func (s *Site) Host() string { return s.host }

// Fetches returns how many GET requests each path of the main host got.
func (s *Site) Fetches() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.fetches))
	for k, v := range s.fetches {
		out[k] = v
	}
	return out
}

// Requests returns the request URIs that reached path, in order.
func (s *Site) Requests(path string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.raw[path]...)
}

// Served returns, per request path, the SHA-1 (hex) of every body the site
// served for it, in order: what an archive of the site must hold.
func (s *Site) Served() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string][]string, len(s.served))
	for p, d := range s.served {
		m[p] = append([]string(nil), d...)
	}
	return m
}

// OffScopeFetches returns how many requests the off-scope host got.
func (s *Site) OffScopeFetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.offCount
}

// Reset forgets the counts (and the flaky pages' first failures).
func (s *Site) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fetches = map[string]int{}
	s.raw = map[string][]string{}
	s.flaky = map[string]bool{}
	s.agents = map[string]int{}
	s.offCount = 0
	s.maxIn = 0
	s.overlap = nil
	s.starts = nil
}

// UserAgents returns how many requests came with each User-Agent.
func (s *Site) UserAgents() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.agents))
	for k, v := range s.agents {
		out[k] = v
	}
	return out
}

// MaxInFlight returns the most requests the main host was serving at once,
// and those requests ("User-Agent request-URI").
func (s *Site) MaxInFlight() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxIn, append([]string(nil), s.overlap...)
}

// MinGap returns the shortest time between the arrivals of two consecutive
// requests on the main host (robots.txt excluded), or -1 with fewer than two.
func (s *Site) MinGap() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.starts) < 2 {
		return -1
	}
	gap := time.Duration(1<<63 - 1)
	for i := 1; i < len(s.starts); i++ {
		gap = min(gap, s.starts[i].Sub(s.starts[i-1]))
	}
	return gap
}

// Plan is what a correct crawl of the site, seeded with Site.URL, does.
type Plan struct {
	// Once lists the paths fetched exactly once: pages, redirecting URLs,
	// 404s, files, the flaky pages' second success excluded (see Flaky).
	Once []string
	// Never lists paths that must not be fetched: disallowed by robots.txt
	// or only linked from non-HTML files.
	Never []string
	// Broken lists the paths that always answer 500: fetched once plus the
	// crawler's retries.
	Broken []string
	// Flaky lists the paths that answer 503 once, then the page: fetched
	// exactly twice.
	Flaky []string
	// Calendar is how many calendar months a crawl limited to maxDepth
	// fetches: the first month is linked from the seed at depth 1 and each
	// further month is one more step.
	Calendar int
	// Pages is how many responses are HTML pages (status 200, text/html).
	Pages int
}

// RedirectTrap returns the paths of the endless redirect chain that a crawl
// limited to maxRedirects redirects in a row fetches, once each: /r/0 (linked
// from the seed) to /r/maxRedirects.
func (p Plan) RedirectTrap(maxRedirects int) []string {
	out := make([]string, 0, maxRedirects+1)
	for i := 0; i <= maxRedirects; i++ {
		out = append(out, fmt.Sprintf("/r/%d", i))
	}
	return out
}

// Plan returns the expected crawl for a crawl limited to maxDepth (links of
// pages at maxDepth are not followed; the seed has depth 0). maxDepth must
// be large enough for the page tree: Depth reports its height.
func (s *Site) Plan(maxDepth int) Plan {
	o := s.opts
	var p Plan
	p.Once = append(p.Once, "/")
	for i := 0; i < o.Pages; i++ {
		p.Once = append(p.Once, pagePath(i))
	}
	for k := 0; k < o.Special; k++ {
		p.Once = append(p.Once,
			fmt.Sprintf("/old/%d", k), fmt.Sprintf("/moved/%d", k), fmt.Sprintf("/go/%d", k),
			fmt.Sprintf("/missing/%d", k), fmt.Sprintf("/files/%d.pdf", k), fmt.Sprintf("/files/%d.txt", k))
		p.Never = append(p.Never, fmt.Sprintf("/private/%d", k), fmt.Sprintf("/hidden/%d", k))
		p.Broken = append(p.Broken, fmt.Sprintf("/broken/%d", k))
		p.Flaky = append(p.Flaky, fmt.Sprintf("/flaky/%d", k))
	}
	if maxDepth >= 1 {
		p.Calendar = 1 + 2*(maxDepth-1)
	}
	p.Pages = 1 + o.Pages + len(p.Flaky) + p.Calendar
	sort.Strings(p.Once)
	return p
}

// Depth returns the height of the page tree below the seed: the depth of the
// deepest content page along tree links.
func (s *Site) Depth() int {
	d := 1 // /p/0 at depth 1
	for last := 0; last < s.opts.Pages-1; d++ {
		last = last*s.opts.Fanout + s.opts.Fanout
	}
	return d
}

func pagePath(i int) string { return "/p/" + strconv.Itoa(i) }

// rand is splitmix64: a deterministic stream per (seed, page).
func rand(seed uint64, a, b int) uint64 {
	z := seed + uint64(a)*0x9e3779b97f4a7c15 + uint64(b)*0xbf58476d1ce4e5b9
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// count records a request and returns the function that marks it done.
func (s *Site) count(r *http.Request) (done func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fetches[r.URL.Path]++
	s.raw[r.URL.Path] = append(s.raw[r.URL.Path], r.RequestURI)
	s.agents[r.UserAgent()]++
	if r.URL.Path != "/robots.txt" {
		s.starts = append(s.starts, time.Now())
	}
	s.inFlight++
	s.current[r] = r.UserAgent() + " " + r.RequestURI
	if s.inFlight > s.maxIn {
		s.maxIn = s.inFlight
		s.overlap = s.overlap[:0]
		for _, d := range s.current {
			s.overlap = append(s.overlap, d)
		}
		sort.Strings(s.overlap)
	}
	// A request ends, for the in-flight count, when its response headers
	// are written (the client may go on), its handler returns, or its
	// client goes away: a crawler that reads only the headers of a file
	// closes the connection while the server may still be writing.
	var once sync.Once
	end := func() {
		once.Do(func() {
			s.mu.Lock()
			s.inFlight--
			delete(s.current, r)
			s.mu.Unlock()
		})
	}
	stop := context.AfterFunc(r.Context(), end)
	return func() {
		stop()
		end()
	}
}

func (s *Site) serveOff(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.offCount++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!doctype html><title>elsewhere</title><a href=\"/elsewhere\">more elsewhere</a>")
}

func (s *Site) serve(w http.ResponseWriter, r *http.Request) {
	end := s.count(r)
	defer end()
	hook := &headerHook{ResponseWriter: w, onHeader: end, body: sha1.New()}
	w = hook
	if s.opts.Validators {
		vw := &validating{header: http.Header{}}
		defer vw.finish(hook, r)
		w = vw
	}
	defer func() {
		sum := hex.EncodeToString(hook.body.Sum(nil))
		s.mu.Lock()
		s.served[r.URL.Path] = append(s.served[r.URL.Path], sum)
		s.mu.Unlock()
	}()
	if s.opts.Latency > 0 {
		t := time.NewTimer(s.opts.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	path := r.URL.Path
	head, rest, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	n, numErr := strconv.Atoi(rest)
	o := s.opts
	special := numErr == nil && n >= 0 && n < o.Special
	switch {
	case path == "/robots.txt":
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "# testsite\nUser-agent: *\nDisallow: /private/\nDisallow: /hidden/\n\nUser-agent: colly\nAllow: /\n")
		if o.Sitemaps {
			fmt.Fprintf(w, "\nSitemap: http://%s/sitemap_index.xml\n", s.host)
		}
	case o.Sitemaps && strings.HasPrefix(path, "/sitemap"):
		s.sitemap(w, path)
	case o.Sitemaps && head == "orphan" && numErr == nil && n >= 0 && n < Orphans:
		s.html(w, "orphan "+rest, `<a href="/">home</a>`)
	case path == "/":
		s.page(w, r, -1)
	case head == "p" && numErr == nil && n >= 0 && n < o.Pages && strconv.Itoa(n) == rest:
		s.page(w, r, n)
	case head == "old" && special:
		http.Redirect(w, r, fmt.Sprintf("/moved/%d", n), http.StatusMovedPermanently)
	case head == "moved" && special:
		http.Redirect(w, r, "http://"+s.host+pagePath(n%o.Pages), http.StatusFound)
	case head == "go" && special:
		http.Redirect(w, r, pagePath(n%o.Pages)+"?utm_source=redirect", http.StatusPermanentRedirect)
	case head == "broken" && special:
		http.Error(w, "broken for good", http.StatusInternalServerError)
	case head == "flaky" && special:
		s.mu.Lock()
		first := !s.flaky[path]
		s.flaky[path] = true
		s.mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		s.html(w, "flaky "+rest, fmt.Sprintf(`<a href="/p/%d">back</a>`, n%o.Pages))
	case head == "private" && special:
		s.html(w, "private", `<a href="/p/0">home</a>`)
	case head == "files":
		s.file(w, rest)
	case head == "calendar":
		s.calendar(w, rest)
	case head == "r" && numErr == nil && n >= 0 && strconv.Itoa(n) == rest:
		http.Redirect(w, r, fmt.Sprintf("/r/%d", n+1), http.StatusFound)
	default:
		http.NotFound(w, r)
	}
}

// sitemap serves the sitemaps of Options.Sitemaps.
func (s *Site) sitemap(w http.ResponseWriter, path string) {
	base := "http://" + s.host
	switch path {
	case "/sitemap_index.xml":
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<sitemap><loc>%[1]s/sitemap-1.xml.gz</loc><lastmod>2026-11-01</lastmod></sitemap>
<sitemap><loc>%[1]s/sitemap-2.txt</loc></sitemap>
<sitemap><loc>%[1]s/sitemap-bad.xml</loc></sitemap>
</sitemapindex>
`, base)
	case "/sitemap-1.xml.gz":
		var b strings.Builder
		b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">` + "\n")
		for i := range 10 {
			fmt.Fprintf(&b, "<url><loc>%s/orphan/%d</loc><lastmod>2026-10-%02dT12:00:00Z</lastmod></url>\n", base, i, i+1)
		}
		fmt.Fprintf(&b, "<url><loc>%s/p/0</loc></url>\n</urlset>\n", base)
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write([]byte(b.String()))
		zw.Close()
		w.Header().Set("Content-Type", "application/gzip")
		w.Write(z.Bytes())
	case "/sitemap-2.txt":
		w.Header().Set("Content-Type", "text/plain")
		for i := 10; i < Orphans; i++ {
			fmt.Fprintf(w, "%s/orphan/%d\n", base, i)
		}
		fmt.Fprint(w, "not a url\n")
	case "/sitemap-bad.xml":
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprintf(w, "<urlset><url><loc>%s/p/1</loc></url><url><loc>%s/p/2</lo", base, base)
	default:
		http.NotFound(w, nil)
	}
}

func (s *Site) file(w http.ResponseWriter, name string) {
	base, ext, _ := strings.Cut(name, ".")
	n, err := strconv.Atoi(base)
	if err != nil || n < 0 || n >= s.opts.Special {
		http.Error(w, "no such file", http.StatusNotFound)
		return
	}
	body := fmt.Sprintf(`<a href="/hidden/%d">not a link: this is not HTML</a> http://%s/hidden/%d`, n, s.host, n)
	switch ext {
	case "pdf":
		w.Header().Set("Content-Type", "application/pdf")
		fmt.Fprintf(w, "%%PDF-1.4\n%s\n%s", body, strings.Repeat("binary ", 2000))
	case "txt":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, body)
	default:
		http.Error(w, "no such file", http.StatusNotFound)
	}
}

func (s *Site) calendar(w http.ResponseWriter, rest string) {
	ys, ms, _ := strings.Cut(rest, "/")
	y, err1 := strconv.Atoi(ys)
	m, err2 := strconv.Atoi(ms)
	if err1 != nil || err2 != nil || m < 1 || m > 12 || y < 1 || y > 999999 || rest != fmt.Sprintf("%d/%02d", y, m) {
		http.Error(w, "no such month", http.StatusNotFound)
		return
	}
	prev := time.Date(y, time.Month(m)-1, 1, 0, 0, 0, 0, time.UTC)
	next := time.Date(y, time.Month(m)+1, 1, 0, 0, 0, 0, time.UTC)
	s.html(w, fmt.Sprintf("calendar %d-%02d", y, m), fmt.Sprintf(
		`<a href="/calendar/%d/%02d">previous month</a> <a href="../../calendar/%d/%02d#top">next month</a> <a href="/">home</a>`,
		prev.Year(), prev.Month(), next.Year(), next.Month()))
}

func (s *Site) html(w http.ResponseWriter, title, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!doctype html>\n<html><head><title>%s</title></head><body><h1>%s</h1>\n%s\n<p>%s</p>%s</body></html>\n",
		title, title, body, filler, s.padding(title))
}

// words are what padding is made of: text compresses about as real
// pages' text does when drawn from a vocabulary this size.
var words = strings.Fields(`the of and to in is that it was for on are as with his they at be this from have or by one had not but
what all were when we there can an your which their said if do will each about how up out them then she many some so these would
other into has more her two like him see time could no make than first been its who now people my made over did down only way find
use may water long little very after words called just where most know get through back much before go good new write our used me
man too any day same right look think also around another came come work three word must because does part even place well such
here take why things help put years different away again off went old number great tell men say small every found still between
name should home big give air line set own under read last never us left end along while might next sound below saw something
thought both few those always looked show large often together asked house world going want school important until form food keep
children feet land side without boy once animals life enough took sometimes four head above kind began almost live page got earth`)

// padding is deterministic filler text making a page about PageBytes long.
func (s *Site) padding(title string) string {
	if s.opts.PageBytes <= 0 {
		return ""
	}
	seed := uint64(len(title))
	for _, c := range title {
		seed = seed*31 + uint64(c)
	}
	var b strings.Builder
	b.WriteString("\n<p>")
	for i := 0; b.Len() < s.opts.PageBytes; i++ {
		b.WriteString(words[rand(seed, i, 7)%uint64(len(words))])
		if i%12 == 11 {
			b.WriteString(".</p>\n<p>")
		} else {
			b.WriteByte(' ')
		}
	}
	b.WriteString("</p>")
	return b.String()
}

const filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat."

// page writes the home page (n = -1) or content page n.
func (s *Site) page(w http.ResponseWriter, r *http.Request, n int) {
	o := s.opts
	var b strings.Builder
	if n >= 0 && n%5 == 1 {
		// A <base href>: relative links below resolve against /base/x/,
		// and are written to reach /p/… from there.
		fmt.Fprintf(&b, `<base href="http://%s/base/x/">`+"\n", s.host)
	}
	based := n >= 0 && n%5 == 1
	var targets []int
	if n < 0 {
		targets = append(targets, 0)
		fmt.Fprintf(&b, `<a href="/calendar/2024/06">events</a> <a href="/r/0">moved</a>`+"\n")
		fmt.Fprintf(&b, `<a href="%sp/0">elsewhere</a>`+"\n", s.OffScopeURL)
		for k := 0; k < o.Special; k++ {
			fmt.Fprintf(&b, `<a href="/old/%d">old</a> <a href="/go/%d">go</a> <a href="/missing/%d">missing</a> `+
				`<a href="/broken/%d">broken</a> <a href="/flaky/%d">flaky</a> <a href="/private/%d">private</a> `+
				`<a href="/files/%d.pdf">pdf</a> <a href="files/%d.txt">txt</a>`+"\n", k, k, k, k, k, k, k, k)
		}
		fmt.Fprint(&b, `<a href="mailto:someone@example.com">mail</a> <a href="javascript:void(0)">js</a> <a href="#top">top</a>`+"\n")
	} else {
		for c := 1; c <= o.Fanout; c++ {
			if child := o.Fanout*n + c; child < o.Pages {
				targets = append(targets, child)
			}
		}
		for j := 0; j < o.Links; j++ {
			targets = append(targets, int(rand(o.Seed, n, j)%uint64(o.Pages)))
		}
		// Special URLs again, from inside the site.
		k := n % o.Special
		switch n % 4 {
		case 0:
			fmt.Fprintf(&b, `<a href="/private/%d">private</a> <a href="%sp/%d">elsewhere</a>`+"\n", k, s.OffScopeURL, n)
		case 1:
			fmt.Fprintf(&b, `<a href="http://%s/old/%d">old</a> <a href="/files/%d.pdf#page=2">pdf</a>`+"\n", s.host, k, k)
		case 2:
			fmt.Fprintf(&b, `<a href="/go/%d?utm_medium=x">go</a> <a href="/missing/%d">missing</a>`+"\n", k, k)
		case 3:
			fmt.Fprintf(&b, `<map><area href="/calendar/2024/06" alt="events"></map>`+"\n")
		}
	}
	for j, t := range targets {
		v := int(rand(o.Seed^0xabcdef, n, j) % numSpellings)
		fmt.Fprintf(&b, `<a href="%s">page %d</a>`+"\n", s.spell(n, t, v, based), t)
	}
	title := "home"
	if n >= 0 {
		title = "page " + strconv.Itoa(n)
	}
	s.html(w, title, b.String())
}

const numSpellings = 12

// spell writes a link from page `from` to page `to` in spelling v. based
// says the page has a <base href> of /base/x/.
func (s *Site) spell(from, to, v int, based bool) string {
	p := pagePath(to)
	abs := "http://" + s.host + p
	upper := "http://" + strings.ToUpper(s.host) + p
	if based {
		// Relative references resolve against /base/x/.
		switch v % 3 {
		case 0:
			return "../../p/" + strconv.Itoa(to)
		case 1:
			return "/p/" + strconv.Itoa(to) + "#from-base"
		default:
			return abs
		}
	}
	switch v {
	case 0:
		return p
	case 1:
		if from >= 0 {
			return strconv.Itoa(to) // relative to /p/
		}
		return "p/" + strconv.Itoa(to)
	case 2:
		if from >= 0 {
			return "../p/" + strconv.Itoa(to)
		}
		return "./p/" + strconv.Itoa(to)
	case 3:
		return abs
	case 4:
		return upper
	case 5:
		return p + "#section-" + strconv.Itoa(from+2)
	case 6:
		return p + "?utm_source=newsletter&utm_campaign=spring"
	case 7:
		return abs + "?gclid=abc" + strconv.Itoa(from+2)
	case 8:
		return "HTTP://" + s.host + p + "#top"
	case 9:
		return "/%70/" + strconv.Itoa(to) // %70 is "p": unreserved, RFC 3986 §2.3
	case 10:
		return "/p/./" + strconv.Itoa(to) + "?fbclid=xyz"
	default:
		return "/x/../p/" + strconv.Itoa(to)
	}
}

// validating holds a response back to answer as a static server does:
// with an ETag (the body's digest) on a 200, or 304 Not Modified when the
// request's If-None-Match names it.
type validating struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (v *validating) Header() http.Header { return v.header }

func (v *validating) WriteHeader(code int) {
	if v.status == 0 {
		v.status = code
	}
}

func (v *validating) Write(b []byte) (int, error) {
	v.WriteHeader(http.StatusOK)
	return v.body.Write(b)
}

func (v *validating) finish(w http.ResponseWriter, r *http.Request) {
	if v.status == 0 {
		v.status = http.StatusOK
	}
	for k, vs := range v.header {
		w.Header()[k] = vs
	}
	if v.status == http.StatusOK {
		sum := sha1.Sum(v.body.Bytes())
		etag := `"` + hex.EncodeToString(sum[:8]) + `"`
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.Header().Del("Content-Type")
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.WriteHeader(v.status)
	_, _ = w.Write(v.body.Bytes())
}

// headerHook calls onHeader when the response headers are written, and
// digests the body.
type headerHook struct {
	http.ResponseWriter
	onHeader func()
	done     bool
	body     hash.Hash
}

func (h *headerHook) WriteHeader(code int) {
	h.ResponseWriter.WriteHeader(code)
	if !h.done {
		h.done = true
		h.onHeader()
	}
}

func (h *headerHook) Write(b []byte) (int, error) {
	if !h.done {
		h.WriteHeader(http.StatusOK)
	}
	h.body.Write(b)
	return h.ResponseWriter.Write(b)
}
