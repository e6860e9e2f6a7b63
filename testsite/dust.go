// Package testsite serves test webs on loopback. StartDust starts the DUST
// web: six hosts whose sites spell each page many ways, for measuring "one
// page, one fetch". DUST is "Different URLs with Similar Text" (Bar-Yossef,
// Keidar and Schonfeld, "Do not crawl in the DUST", WWW 2007; Sieve
// issue 37). A crawler that canonicalizes URLs only by fixed rules
// (lower-case host, no fragment, no utm_*, no default port, sorted query)
// fetches each page of this web many times; one that learns rewrite rules
// from the content it fetched should fetch each page about once. The
// families, each on its own host:
//
//   - shop: a session parameter no list knows (zsid), new on every render
//     and appended to every internal link, plus ref=nav|footer|related;
//     listings (?p=2; no p and p=1 are one page) and related-product boxes
//     link each product from several places.
//   - news: every render changes a "rendered at" block, a "readers now"
//     block and a "Most read" box, and every internal link carries its own
//     random cmp= campaign parameter.
//   - docs: a case-insensitive static server: .htm, .html and no extension
//     are one file, /dir/, /dir/index.html and /dir one directory page, and
//     a doubled segment (/guide/guide/intro.html) the page without it; all
//     spellings of a page serve the same bytes.
//   - mirror: the docs pages, byte for byte, under the same paths on another
//     host; PageOf names them by the docs page they copy.
//   - blog: view=full, from=home|archive|tag and lang=en in any combination
//     and order, and /post/N beside /post/N/, all one page; a post's comment
//     count is part of the page, not noise.
//   - control: look-alike URLs that are distinct pages (id=N, color=red and
//     blue, /Page/N and /page/N, .htm and .html, /dir/N/ and its
//     index.html, /a/N/a/ and /a/a/N/ and /a/N/, ?page=N), each with a
//     "rendered at" block that changes on every render. A learner must
//     never merge any two of them.
//
// At Scale 1 the web has 794 pages: shop 160, news 129, docs 145 (the
// mirror's are the same), blog 114, control 246; every one is at most
// three links from its host's seed.
//
// Each page has a title and a paragraph of 60 to 200 pseudo-random words
// seeded by its id, so distinct pages share no text by accident (the
// colours of a control item share all but one line on purpose).
package testsite

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"html"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DustOptions sizes a DustWeb; zero values mean the defaults beside them.
type DustOptions struct {
	Seed  uint64 // 1: the pseudo-random text, link graph and spellings
	Scale int    // 1: multiplies every family's page count (about 790 pages)
}

func (o DustOptions) withDefaults() DustOptions {
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Scale <= 0 {
		o.Scale = 1
	}
	return o
}

// dustFamilies are the DUST web's hosts, in the order of Seeds.
var dustFamilies = []string{"shop", "news", "docs", "mirror", "blog", "control"}

// DustWeb is a running DUST web: one HTTP server per family on a loopback
// port of its own. It counts the requests it serves. It is safe for
// concurrent use; StartDust makes one (the zero DustWeb is not usable) and
// Close stops it.
type DustWeb struct {
	opts    DustOptions
	hosts   map[string]string   // family → host:port
	sites   map[string]dustSite // host:port → site (the mirror's is the docs site)
	pages   []string            // every page id, sorted
	servers []*http.Server
	wg      sync.WaitGroup
	renders atomic.Uint64 // numbers the renders, so each draws noise of its own

	mu       sync.Mutex
	fetches  map[string]int // page id → HTML 200 responses
	requests int
	closed   bool
}

// dustSite is one family's site: the mapping from URLs to pages, shared by
// the handler and PageOf so the two cannot disagree, and the renderer.
type dustSite interface {
	// resolve names the page u spells; u.Path is never empty.
	resolve(u *url.URL) (dustRef, bool)
	// render writes page p; it may differ on every call (noise).
	render(p dustRef) []byte
	// ids lists the site's pages.
	ids() []string
}

// dustRef is a page of a site: its id and what the renderer needs.
type dustRef struct {
	id   string // "family:/canonical/path?query"
	kind string // site-specific: "home", "product", "dir", …
	n    int
	name string
}

// StartDust starts a DUST web, one server per family on 127.0.0.1 ports
// chosen by the system.
func StartDust(opts DustOptions) (*DustWeb, error) {
	opts = opts.withDefaults()
	w := &DustWeb{
		opts:    opts,
		hosts:   map[string]string{},
		sites:   map[string]dustSite{},
		fetches: map[string]int{},
	}
	var ls []net.Listener
	for _, f := range dustFamilies {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return nil, fmt.Errorf("testsite: listen: %w", err)
		}
		ls = append(ls, l)
		w.hosts[f] = l.Addr().String()
	}
	docs := newDustDocs(w, w.hosts["mirror"])
	sites := map[string]dustSite{
		"shop":    newDustShop(w),
		"news":    &dustNews{w: w, articles: 120 * opts.Scale},
		"docs":    docs,
		"mirror":  docs,
		"blog":    newDustBlog(w),
		"control": newDustControl(w),
	}
	for i, f := range dustFamilies {
		site := sites[f]
		w.sites[w.hosts[f]] = site
		if f != "mirror" {
			w.pages = append(w.pages, site.ids()...)
		}
		srv := &http.Server{Handler: w.handler(site), ReadHeaderTimeout: 10 * time.Second}
		w.servers = append(w.servers, srv)
		w.wg.Add(1)
		go func(l net.Listener) {
			defer w.wg.Done()
			srv.Serve(l)
		}(ls[i])
	}
	sort.Strings(w.pages)
	return w, nil
}

// Close stops the servers and waits for their goroutines. It is idempotent.
func (w *DustWeb) Close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	for _, s := range w.servers {
		errs = append(errs, s.Shutdown(ctx))
	}
	if errors.Join(errs...) != nil {
		for _, s := range w.servers {
			s.Close()
		}
	}
	w.wg.Wait()
}

// Seeds returns one seed URL per host, its home page, in the order shop,
// news, docs, mirror, blog, control.
func (w *DustWeb) Seeds() []string {
	out := make([]string, 0, len(dustFamilies))
	for _, f := range dustFamilies {
		out = append(out, "http://"+w.hosts[f]+"/")
	}
	return out
}

// Hosts returns each family's authority (127.0.0.1:PORT) by family name:
// shop, news, docs, mirror, blog, control.
func (w *DustWeb) Hosts() map[string]string {
	out := make(map[string]string, len(w.hosts))
	for f, h := range w.hosts {
		out[f] = h
	}
	return out
}

// PageOf returns the id of the page rawURL names, as the server would
// answer it, or false if the server answers it 404 (or it is not an http
// URL of the web). Ids read "family:/canonical/path"; a mirror URL names
// the docs page it copies.
func (w *DustWeb) PageOf(rawURL string) (id string, ok bool) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" || u.Opaque != "" {
		return "", false
	}
	site := w.sites[strings.ToLower(u.Host)]
	if site == nil {
		return "", false
	}
	p, ok := dustLookup(site, u)
	if !ok {
		return "", false
	}
	return p.id, true
}

// dustLookup is the one mapping from a request URL to a page, for the
// handlers and PageOf alike.
func dustLookup(site dustSite, u *url.URL) (dustRef, bool) {
	if u.Path == "" {
		v := *u
		v.Path = "/" // what a client requests for an empty path
		u = &v
	}
	if u.Path == "/robots.txt" {
		return dustRef{}, false
	}
	return site.resolve(u)
}

// Pages returns every page id of the web, sorted: the pages of the shop,
// news, docs, blog and control hosts (the mirror's are the docs pages).
func (w *DustWeb) Pages() []string {
	return append([]string(nil), w.pages...)
}

// Fetches returns how many HTML pages (200 responses) were served per page
// id since the start or the last Reset. robots.txt and 404s are not pages.
func (w *DustWeb) Fetches() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.fetches))
	for k, v := range w.fetches {
		out[k] = v
	}
	return out
}

// Requests returns how many requests the web served, of any kind.
func (w *DustWeb) Requests() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.requests
}

// Reset zeroes the counters.
func (w *DustWeb) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fetches = map[string]int{}
	w.requests = 0
}

func (w *DustWeb) handler(site dustSite) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.requests++
		w.mu.Unlock()
		p, ok := dustLookup(site, r.URL)
		if !ok {
			http.NotFound(rw, r) // robots.txt too: all is allowed
			return
		}
		body := site.render(p)
		w.mu.Lock()
		w.fetches[p.id]++
		w.mu.Unlock()
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		rw.Write(body)
	})
}

// key hashes s with the web's seed: the root of everything drawn for s.
func (w *DustWeb) key(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return rand(w.opts.Seed, int(h.Sum64()), 0)
}

// pick draws a number below n for the j-th choice made on page id.
func (w *DustWeb) pick(id string, j, n int) int {
	return int(rand(w.key(id), j, 17) % uint64(n))
}

// noise returns a number new on every call: the seed of one render's noise.
func (w *DustWeb) noise() uint64 {
	return rand(w.opts.Seed^0x5eed, int(w.renders.Add(1)), 1)
}

// dustText returns n words drawn from h.
func dustText(h uint64, salt, n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = words[rand(h, i, salt)%uint64(len(words))]
	}
	return strings.Join(ws, " ")
}

// dustTitle returns a title of n capitalized words drawn from h.
func dustTitle(h uint64, n int) string {
	ws := strings.Fields(dustText(h, 5, n))
	for i, s := range ws {
		ws[i] = strings.ToUpper(s[:1]) + s[1:]
	}
	return strings.Join(ws, " ")
}

// dustParagraph returns the 60 to 200 words that make page h distinctive.
func dustParagraph(h uint64) string {
	return dustText(h, 3, 60+int(h%141))
}

// dustNumber parses s as a number from 1 to hi written canonically.
func dustNumber(s string, hi int) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > hi || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

// dustCut returns the number (1 to hi) between prefix and suffix of s.
func dustCut(s, prefix, suffix string, hi int) (int, bool) {
	s, ok1 := strings.CutPrefix(s, prefix)
	s, ok2 := strings.CutSuffix(s, suffix)
	if !ok1 || !ok2 {
		return 0, false
	}
	return dustNumber(s, hi)
}

// dustHTML builds a page.
type dustHTML struct{ b strings.Builder }

func (h *dustHTML) open(title string) {
	fmt.Fprintf(&h.b, "<!doctype html>\n<html><head><title>%s</title></head><body>\n", title)
}

func (h *dustHTML) heading(title, text string) {
	fmt.Fprintf(&h.b, "<h1>%s</h1>\n<p>%s</p>\n", title, text)
}

func (h *dustHTML) a(href, text string) {
	fmt.Fprintf(&h.b, "<a href=\"%s\">%s</a>\n", html.EscapeString(href), text)
}

func (h *dustHTML) li(href, text string) {
	h.raw("<li>")
	h.a(href, text)
}

func (h *dustHTML) raw(s string) { h.b.WriteString(s) }

func (h *dustHTML) close() []byte {
	h.raw("</body></html>\n")
	return []byte(h.b.String())
}

// ---- shop -----------------------------------------------------------------

var shopCats = []string{"garden", "kitchen", "books", "toys", "tools", "music", "sports", "beauty", "office", "pets"}

const shopPerPage = 9

// dustShop is a shop whose links carry a session id (zsid) new on every
// render and a ref= naming the box the link is in; neither names a page.
type dustShop struct {
	w        *DustWeb
	products int
	lists    [][]int // category → its products, ascending
}

func newDustShop(w *DustWeb) *dustShop {
	s := &dustShop{w: w, products: 127 * w.opts.Scale, lists: make([][]int, len(shopCats))}
	for n := 1; n <= s.products; n++ {
		for _, c := range s.cats(n) {
			s.lists[c] = append(s.lists[c], n)
		}
	}
	return s
}

// cats returns product n's two categories (never equal: 6n+3 is odd).
func (s *dustShop) cats(n int) [2]int { return [2]int{n % 10, (7*n + 3) % 10} }

func (s *dustShop) listPages(c int) int { return (len(s.lists[c]) + shopPerPage - 1) / shopPerPage }

// listing returns the listing page of category c that shows product n.
func (s *dustShop) listing(c, n int) int {
	i := sort.SearchInts(s.lists[c], n)
	return i/shopPerPage + 1
}

func (s *dustShop) listID(c, k int) string {
	if k == 1 {
		return "shop:/c/" + shopCats[c]
	}
	return "shop:/c/" + shopCats[c] + "?p=" + strconv.Itoa(k)
}

func (s *dustShop) ids() []string {
	out := []string{"shop:/", "shop:/about", "shop:/help"}
	for c := range shopCats {
		for k := 1; k <= s.listPages(c); k++ {
			out = append(out, s.listID(c, k))
		}
	}
	for n := 1; n <= s.products; n++ {
		out = append(out, "shop:/product/"+strconv.Itoa(n))
	}
	return out
}

// resolve ignores every parameter but a listing's p.
func (s *dustShop) resolve(u *url.URL) (dustRef, bool) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return dustRef{}, false
	}
	switch path := u.Path; {
	case path == "/":
		return dustRef{id: "shop:/", kind: "home"}, true
	case path == "/about" || path == "/help":
		return dustRef{id: "shop:" + path, kind: path[1:]}, true
	case strings.HasPrefix(path, "/c/"):
		c := -1
		for i, name := range shopCats {
			if path == "/c/"+name {
				c = i
			}
		}
		if c < 0 || len(q["p"]) > 1 {
			return dustRef{}, false
		}
		k := 1
		if p := q.Get("p"); p != "" {
			var ok bool
			if k, ok = dustNumber(p, s.listPages(c)); !ok {
				return dustRef{}, false
			}
		}
		return dustRef{id: s.listID(c, k), kind: "list", n: k, name: shopCats[c]}, true
	default:
		n, ok := dustCut(path, "/product/", "", s.products)
		if !ok {
			return dustRef{}, false
		}
		return dustRef{id: "shop:" + path, kind: "product", n: n}, true
	}
}

func (s *dustShop) title(n int) string {
	return "Product " + strconv.Itoa(n) + ": " + dustTitle(s.w.key("shop:/product/"+strconv.Itoa(n)), 2)
}

func (s *dustShop) price(n int) string {
	h := s.w.key("shop:/product/" + strconv.Itoa(n))
	return fmt.Sprintf("%d.%02d", 2+h%180, h/7%100)
}

func (s *dustShop) render(p dustRef) []byte {
	sid := fmt.Sprintf("%016x", s.w.noise())
	// href appends the session and the box to a path that may hold a query.
	href := func(path, ref string) string {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		if ref != "" {
			path += sep + "ref=" + ref
			sep = "&"
		}
		return path + sep + "zsid=" + sid
	}
	// list spells listing page k of category c; page 1 with or without p=1.
	list := func(c, k, j int) string {
		path := strings.TrimPrefix(s.listID(c, k), "shop:")
		if k == 1 && s.w.pick(p.id, j, 2) == 1 {
			path += "?p=1"
		}
		return path
	}
	var h dustHTML
	title := "Shop"
	switch p.kind {
	case "about":
		title = "About the shop"
	case "help":
		title = "Shop help"
	case "list":
		title = strings.ToUpper(p.name[:1]) + p.name[1:] + ", page " + strconv.Itoa(p.n)
	case "product":
		title = s.title(p.n)
	}
	h.open(title)
	h.raw("<nav>\n")
	h.a(href("/", "nav"), "Home")
	for c, name := range shopCats {
		h.a(href(list(c, 1, 100+c), "nav"), name)
	}
	h.raw("</nav>\n")
	h.heading(title, dustParagraph(s.w.key(p.id)))
	switch p.kind {
	case "home":
		h.raw("<h2>Categories</h2><ul>\n")
		for c, name := range shopCats {
			fmt.Fprintf(&h.b, "<li>%s:\n", name)
			for k := 1; k <= s.listPages(c); k++ {
				h.a(href(list(c, k, 200+c), ""), strconv.Itoa(k))
			}
		}
		h.raw("</ul>\n<h2>Featured</h2><ul>\n")
		for j := range 6 {
			n := 1 + s.w.pick(p.id, j, s.products)
			h.li(href("/product/"+strconv.Itoa(n), ""), s.title(n))
		}
		h.raw("</ul>\n")
	case "list":
		c := 0
		for i, name := range shopCats {
			if name == p.name {
				c = i
			}
		}
		h.raw("<ul>\n")
		items := s.lists[c][(p.n-1)*shopPerPage : min(p.n*shopPerPage, len(s.lists[c]))]
		for _, n := range items {
			h.li(href("/product/"+strconv.Itoa(n), ""), s.title(n)+", "+s.price(n))
		}
		h.raw("</ul>\n<p>Pages:\n")
		for k := 1; k <= s.listPages(c); k++ {
			h.a(href(list(c, k, 300+k), ""), strconv.Itoa(k))
		}
		h.raw("</p>\n")
	case "product":
		cs := s.cats(p.n)
		fmt.Fprintf(&h.b, "<p>Price: %s</p>\n<p>In\n", s.price(p.n))
		for _, c := range cs {
			h.a(href(list(c, s.listing(c, p.n), 400+c), ""), shopCats[c])
		}
		h.raw("</p>\n<h2>Related products</h2><ul>\n")
		for j := range 4 {
			n := 1 + s.w.pick(p.id, j, s.products)
			h.li(href("/product/"+strconv.Itoa(n), "related"), s.title(n))
		}
		h.raw("</ul>\n")
	}
	h.raw("<footer>\n")
	h.a(href("/help", "footer"), "Help")
	h.a(href("/about", "footer"), "About us")
	h.a(href("/", "footer"), "Back to the shop")
	h.raw("</footer>\n")
	return h.close()
}

// ---- news -----------------------------------------------------------------

var newsSections = []string{"world", "politics", "business", "science", "sport", "culture", "tech", "health"}

// dustNews is a news site whose pages change on every render (a time, a
// reader count, a "Most read" box) and whose links each carry a random
// campaign parameter (cmp). It ignores every parameter.
type dustNews struct {
	w        *DustWeb
	articles int // article n is in section (n-1) mod 8
}

func (s *dustNews) ids() []string {
	out := []string{"news:/"}
	for _, name := range newsSections {
		out = append(out, "news:/section/"+name)
	}
	for n := 1; n <= s.articles; n++ {
		out = append(out, "news:/article/"+strconv.Itoa(n))
	}
	return out
}

func (s *dustNews) resolve(u *url.URL) (dustRef, bool) {
	path := u.Path
	if path == "/" {
		return dustRef{id: "news:/", kind: "home"}, true
	}
	if name, ok := strings.CutPrefix(path, "/section/"); ok {
		for i, sec := range newsSections {
			if name == sec {
				return dustRef{id: "news:" + path, kind: "section", n: i}, true
			}
		}
		return dustRef{}, false
	}
	n, ok := dustCut(path, "/article/", "", s.articles)
	if !ok {
		return dustRef{}, false
	}
	return dustRef{id: "news:" + path, kind: "article", n: n}, true
}

func (s *dustNews) headline(n int) string {
	return dustTitle(s.w.key("news:/article/"+strconv.Itoa(n)), 5)
}

func (s *dustNews) render(p dustRef) []byte {
	noise := s.w.noise()
	j := 0
	href := func(path string) string {
		j++
		return path + "?cmp=" + fmt.Sprintf("%08x", uint32(rand(noise, j, 9)))
	}
	title := "The Daily Sieve"
	switch p.kind {
	case "section":
		title = "News: " + newsSections[p.n]
	case "article":
		title = s.headline(p.n)
	}
	var h dustHTML
	h.open(title)
	h.raw("<nav>\n")
	h.a(href("/"), "Front page")
	for _, sec := range newsSections {
		h.a(href("/section/"+sec), sec)
	}
	h.raw("</nav>\n")
	fmt.Fprintf(&h.b, "<div class=\"rendered\">Rendered at %s</div>\n", time.Now().UTC().Format("2006-01-02 15:04:05.000000000"))
	fmt.Fprintf(&h.b, "<div class=\"readers\">%d readers now</div>\n", 100+rand(noise, 0, 3)%9000)
	h.heading(title, dustParagraph(s.w.key(p.id)))
	h.raw("<ul>\n")
	switch p.kind {
	case "home":
		for n := s.articles; n > max(0, s.articles-10); n-- {
			h.li(href("/article/"+strconv.Itoa(n)), s.headline(n))
		}
	case "section":
		for n := s.articles; n >= 1; n-- {
			if (n-1)%len(newsSections) == p.n {
				h.li(href("/article/"+strconv.Itoa(n)), s.headline(n))
			}
		}
	case "article":
		sec := (p.n - 1) % len(newsSections)
		h.li(href("/section/"+newsSections[sec]), "More "+newsSections[sec])
		for j := range 3 {
			n := 1 + s.w.pick(p.id, j, s.articles)
			h.li(href("/article/"+strconv.Itoa(n)), "See also: "+s.headline(n))
		}
		if n := p.n + len(newsSections); n <= s.articles {
			h.li(href("/article/"+strconv.Itoa(n)), "Next: "+s.headline(n))
		}
	}
	h.raw("</ul>\n<aside class=\"most-read\"><h2>Most read</h2><ul>\n")
	for i := range 3 {
		n := 1 + int(rand(noise, i, 4)%uint64(s.articles))
		h.li(href("/article/"+strconv.Itoa(n)), s.headline(n))
	}
	h.raw("</ul></aside>\n")
	return h.close()
}

// ---- docs and mirror ------------------------------------------------------

// docsDirs are the docs directories ("" is the root); no file may share a
// name with one, or /ref/api would name both a file and a directory.
var docsDirs = []string{"", "guide/", "tutorial/", "ref/", "ref/api/", "ref/cli/", "ref/config/", "howto/", "admin/", "admin/security/", "faq/"}

var docsWords = strings.Fields(`intro install quickstart overview concepts setup usage examples errors logging
metrics tuning upgrade migrate backup restore deploy scaling storage network auth tokens users roles queues
workers scheduler plugins hooks testing debugging glossary changelog license contributing release cache
indexes search filters routing proxies timeouts retries batching streaming webhooks templates`)

// dustDocs is a case-insensitive static server: a file is name.html,
// name.htm or name in any letter case; a directory page is dir/,
// dir/index.html (or .htm, or index) and dir; a doubled segment
// (guide/guide/) is the segment once. Every spelling gets the same bytes,
// on the docs host and on the mirror.
type dustDocs struct {
	w      *DustWeb
	mirror string              // the mirror's host:port
	files  map[string][]string // directory → its files' names
}

func newDustDocs(w *DustWeb, mirror string) *dustDocs {
	d := &dustDocs{w: w, mirror: mirror, files: map[string][]string{}}
	for _, dir := range docsDirs {
		n := 13 * w.opts.Scale
		if dir == "" {
			n = 4 * w.opts.Scale
		}
		off := w.pick("docs:/"+dir, 0, len(docsWords))
		for j := range n {
			name := docsWords[(off+j)%len(docsWords)]
			if j >= len(docsWords) {
				name += "-" + strconv.Itoa(j/len(docsWords)+1)
			}
			d.files[dir] = append(d.files[dir], name)
		}
	}
	return d
}

func (d *dustDocs) ids() []string {
	var out []string
	for _, dir := range docsDirs {
		out = append(out, "docs:/"+dir)
		for _, f := range d.files[dir] {
			out = append(out, "docs:/"+dir+f+".html")
		}
	}
	return out
}

// resolve ignores the query, as static servers do.
func (d *dustDocs) resolve(u *url.URL) (dustRef, bool) {
	p := strings.ToLower(u.Path)
	dirOnly := strings.HasSuffix(p, "/")
	var segs []string
	for _, s := range strings.Split(strings.Trim(p, "/"), "/") {
		if s == "" || s == "." || s == ".." {
			if p == "/" {
				break
			}
			return dustRef{}, false
		}
		if len(segs) > 0 && segs[len(segs)-1] == s {
			continue // a doubled segment
		}
		segs = append(segs, s)
	}
	dirPage := func(segs []string) (dustRef, bool) {
		dir := strings.Join(segs, "/")
		if dir != "" {
			dir += "/"
		}
		if _, ok := d.files[dir]; !ok {
			return dustRef{}, false
		}
		return dustRef{id: "docs:/" + dir, kind: "dir", name: dir}, true
	}
	if dirOnly || len(segs) == 0 {
		return dirPage(segs)
	}
	last := segs[len(segs)-1]
	name, ext := strings.CutSuffix(last, ".html")
	if !ext {
		name, ext = strings.CutSuffix(last, ".htm")
	}
	parent := segs[:len(segs)-1]
	if name == "index" {
		return dirPage(parent)
	}
	dir := strings.Join(parent, "/")
	if dir != "" {
		dir += "/"
	}
	for _, f := range d.files[dir] {
		if f == name {
			return dustRef{id: "docs:/" + dir + f + ".html", kind: "file", name: dir}, true
		}
	}
	if !ext {
		return dirPage(segs)
	}
	return dustRef{}, false
}

// dustCap capitalizes each segment of a path.
func dustCap(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if s != "" {
			segs[i] = strings.ToUpper(s[:1]) + s[1:]
		}
	}
	return strings.Join(segs, "/")
}

// fileHref spells file f of dir from the root, in spelling v.
func (d *dustDocs) fileHref(dir, f string, v int) string {
	switch v {
	case 1:
		return "/" + dir + f + ".htm"
	case 2:
		return "/" + dir + f
	case 3:
		return "/" + dustCap(dir+f) + ".html"
	case 4:
		return "/" + strings.ToUpper(dir+f) + ".HTM"
	case 5:
		if first, _, ok := strings.Cut(dir, "/"); ok {
			return "/" + first + "/" + dir + f + ".html" // as a relative-link bug writes it
		}
	case 6:
		return "/" + dir + strings.ToUpper(f) + ".html"
	}
	return "/" + dir + f + ".html"
}

// dirHref spells directory page dir, in spelling v.
func (d *dustDocs) dirHref(dir string, v int) string {
	if dir == "" {
		return [...]string{"/", "/index.html", "/index.htm", "/Index.html", "/index", "/INDEX.HTML", "/"}[v]
	}
	switch v {
	case 1:
		return "/" + dir + "index.html"
	case 2:
		return "/" + strings.TrimSuffix(dir, "/")
	case 3:
		return "/" + dustCap(dir)
	case 4:
		return "/" + dir + "index.htm"
	case 5:
		first, _, _ := strings.Cut(dir, "/")
		return "/" + first + "/" + dir
	case 6:
		return "/" + strings.ToUpper(dir) + "INDEX.HTML"
	}
	return "/" + dir
}

// siblingHref spells file f relative to a file of the same directory.
func siblingHref(f string, v int) string {
	return [...]string{f + ".html", f + ".htm", f, dustCap(f) + ".html"}[v]
}

func (d *dustDocs) title(dir, f string) string {
	if f == "" {
		if dir == "" {
			return "Sieve documentation"
		}
		return "Sieve documentation: " + strings.TrimSuffix(dir, "/")
	}
	if dir == "" {
		return dustCap(f)
	}
	return dustCap(f) + " (" + strings.TrimSuffix(dir, "/") + ")"
}

// render writes the same bytes for every spelling and on both hosts: links
// are root-relative or, on file pages, relative to siblings, so they work
// whatever spelling of the page they are read from.
func (d *dustDocs) render(p dustRef) []byte {
	dir := p.name
	f := strings.TrimSuffix(strings.TrimPrefix(p.id, "docs:/"+dir), ".html")
	j := 0
	v := func(n int) int { j++; return d.w.pick(p.id, j, n) }
	var h dustHTML
	title := d.title(dir, f)
	h.open(title)
	h.raw("<nav>\n")
	h.a(d.dirHref("", v(7)), "Docs home")
	up := dir
	if p.kind == "dir" {
		// The parent directory: "ref/" for "ref/api/", the root for "guide/".
		up = up[:strings.LastIndex(strings.TrimSuffix(up, "/"), "/")+1]
	}
	if up != "" {
		h.a(d.dirHref(up, v(7)), "Up: "+strings.TrimSuffix(up, "/"))
	}
	h.raw("</nav>\n")
	h.heading(title, dustParagraph(d.w.key(p.id)))
	h.raw("<ul>\n")
	mirror := d.w.pick(p.id, 1000, 6) == 0
	if p.kind == "dir" {
		mirror = dir == ""
		for _, sub := range docsDirs {
			if rest, ok := strings.CutPrefix(sub, dir); ok && rest != "" && strings.Count(rest, "/") == 1 {
				h.li(d.dirHref(sub, v(7)), d.title(sub, ""))
			}
		}
		for _, file := range d.files[dir] {
			h.li(d.fileHref(dir, file, v(7)), d.title(dir, file))
		}
	} else {
		fs := d.files[dir]
		i := 0
		for i < len(fs) && fs[i] != f {
			i++
		}
		for _, k := range []int{i - 1, i + 1, v(len(fs))} {
			if k >= 0 && k < len(fs) && k != i {
				h.li(siblingHref(fs[k], v(4)), d.title(dir, fs[k]))
			}
		}
		for range 2 {
			other := docsDirs[v(len(docsDirs))]
			of := d.files[other][v(len(d.files[other]))]
			h.li(d.fileHref(other, of, v(7)), d.title(other, of))
		}
	}
	h.raw("</ul>\n")
	if mirror {
		h.raw("<footer>\n")
		h.a("http://"+d.mirror+strings.TrimPrefix(p.id, "docs:"), "This page on the mirror")
		h.raw("</footer>\n")
	}
	return h.close()
}

// ---- blog -----------------------------------------------------------------

var blogTags = []string{"go", "crawling", "search", "web", "databases", "ops", "notes", "travel"}

const blogPerArchive = 20

// dustBlog is a blog whose links carry parameters that change nothing
// (view=full, from=home|archive|tag, lang=en) and whose pages answer with
// and without a trailing slash. Other parameters or values are 404s.
type dustBlog struct {
	w        *DustWeb
	posts    int
	archives int
}

func newDustBlog(w *DustWeb) *dustBlog {
	s := &dustBlog{w: w, posts: 100 * w.opts.Scale}
	s.archives = (s.posts + blogPerArchive - 1) / blogPerArchive
	return s
}

// tags returns post n's two tags (never equal: 2n+1 is odd).
func (s *dustBlog) tags(n int) [2]int { return [2]int{n % 8, (3*n + 1) % 8} }

func (s *dustBlog) ids() []string {
	out := []string{"blog:/"}
	for k := 1; k <= s.archives; k++ {
		out = append(out, "blog:/archive/"+strconv.Itoa(k))
	}
	for _, t := range blogTags {
		out = append(out, "blog:/tag/"+t)
	}
	for n := 1; n <= s.posts; n++ {
		out = append(out, "blog:/post/"+strconv.Itoa(n))
	}
	return out
}

func blogParam(k, v string) bool {
	switch k {
	case "view":
		return v == "full"
	case "from":
		return v == "home" || v == "archive" || v == "tag"
	case "lang":
		return v == "en"
	}
	return false
}

func (s *dustBlog) resolve(u *url.URL) (dustRef, bool) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return dustRef{}, false
	}
	for k, vs := range q {
		for _, v := range vs {
			if !blogParam(k, v) {
				return dustRef{}, false
			}
		}
	}
	path := u.Path
	if path != "/" {
		path = strings.TrimSuffix(path, "/")
	}
	if path == "/" {
		return dustRef{id: "blog:/", kind: "home"}, true
	}
	if k, ok := dustCut(path, "/archive/", "", s.archives); ok {
		return dustRef{id: "blog:" + path, kind: "archive", n: k}, true
	}
	if t, ok := strings.CutPrefix(path, "/tag/"); ok {
		for i, tag := range blogTags {
			if t == tag {
				return dustRef{id: "blog:" + path, kind: "tag", n: i}, true
			}
		}
		return dustRef{}, false
	}
	if n, ok := dustCut(path, "/post/", "", s.posts); ok {
		return dustRef{id: "blog:" + path, kind: "post", n: n}, true
	}
	return dustRef{}, false
}

// postHref spells post n as linked from a page of kind from ("" from a
// post), with choice h: which parameters, in which order, with a slash.
func postHref(n int, from string, h int) string {
	var params []string
	if h&1 != 0 {
		params = append(params, "view=full")
	}
	if h&2 != 0 && from != "" {
		params = append(params, "from="+from)
	}
	if h&4 != 0 {
		params = append(params, "lang=en")
	}
	if r := (h >> 4) % 3; len(params) > 1 && r > 0 {
		params = append(params[r:], params[:r]...)
	}
	if len(params) > 1 && h&64 != 0 {
		params[0], params[1] = params[1], params[0]
	}
	p := "/post/" + strconv.Itoa(n)
	if h&8 != 0 {
		p += "/"
	}
	if len(params) > 0 {
		p += "?" + strings.Join(params, "&")
	}
	return p
}

// pageHref spells a blog path other than a post: plain, with a slash,
// with lang=en.
func pageHref(path string, h int) string {
	if h&1 != 0 && path != "/" {
		path += "/"
	}
	if h&2 != 0 {
		path += "?lang=en"
	}
	return path
}

func (s *dustBlog) title(n int) string {
	return dustTitle(s.w.key("blog:/post/"+strconv.Itoa(n)), 4)
}

func (s *dustBlog) render(p dustRef) []byte {
	j := 0
	v := func() int { j++; return s.w.pick(p.id, j, 128) }
	title := "Notes from a crawler"
	switch p.kind {
	case "archive":
		title = "Archive, page " + strconv.Itoa(p.n)
	case "tag":
		title = "Posts tagged " + blogTags[p.n]
	case "post":
		title = s.title(p.n)
	}
	var h dustHTML
	h.open(title)
	h.raw("<nav>\n")
	h.a(pageHref("/", v()), "Home")
	h.a(pageHref("/archive/1", v()), "Archive")
	h.raw("</nav>\n")
	h.heading(title, dustParagraph(s.w.key(p.id)))
	if p.kind == "post" {
		fmt.Fprintf(&h.b, "<p>comments: %d</p>\n", s.w.key(p.id)%40)
	}
	h.raw("<ul>\n")
	switch p.kind {
	case "home":
		for n := s.posts; n > max(0, s.posts-15); n-- {
			h.li(postHref(n, "home", v()), s.title(n))
		}
		for _, t := range blogTags {
			h.li(pageHref("/tag/"+t, v()), "Tag "+t)
		}
	case "archive":
		hi := s.posts - (p.n-1)*blogPerArchive
		for n := hi; n > max(0, hi-blogPerArchive); n-- {
			h.li(postHref(n, "archive", v()), s.title(n))
		}
		for _, k := range []int{p.n - 1, p.n + 1} {
			if k >= 1 && k <= s.archives {
				h.li(pageHref("/archive/"+strconv.Itoa(k), v()), "Archive page "+strconv.Itoa(k))
			}
		}
	case "tag":
		for n := s.posts; n >= 1; n-- {
			if ts := s.tags(n); ts[0] == p.n || ts[1] == p.n {
				h.li(postHref(n, "tag", v()), s.title(n))
			}
		}
	case "post":
		for _, t := range s.tags(p.n) {
			h.li(pageHref("/tag/"+blogTags[t], v()), "Tag "+blogTags[t])
		}
		for _, n := range []int{p.n - 1, p.n + 1} {
			if n >= 1 && n <= s.posts {
				h.li(postHref(n, "", v()), s.title(n))
			}
		}
		k := (s.posts-p.n)/blogPerArchive + 1
		h.li(pageHref("/archive/"+strconv.Itoa(k), v()), "In the archive")
	}
	h.raw("</ul>\n")
	return h.close()
}

// ---- control --------------------------------------------------------------

const controlPerList = 8

// dustControl is the host a learner must not merge anything on: its
// look-alike URLs are distinct pages, and every render carries a time.
// Its parameters all matter; an unknown one is a 404, and so is a path in
// another letter case than the ones below.
type dustControl struct {
	w       *DustWeb
	items   int // /item?id=N
	colored int // items 1…colored also come in red and blue
	pairs   int // N of each look-alike pair
	lists   int // /list?page=N
}

func newDustControl(w *DustWeb) *dustControl {
	s := &dustControl{w: w, items: 70 * w.opts.Scale, colored: 20 * w.opts.Scale, pairs: 14 * w.opts.Scale}
	s.lists = (s.items + controlPerList - 1) / controlPerList
	return s
}

// controlPairs are the look-alike path patterns, N between prefix and
// suffix; each pattern's pages are distinct from every other's.
var controlPairs = [][2]string{
	{"/Page/", ""}, {"/page/", ""},
	{"/doc/", ".htm"}, {"/doc/", ".html"},
	{"/dir/", "/"}, {"/dir/", "/index.html"},
	{"/a/", "/"}, {"/a/", "/a/"}, {"/a/a/", "/"},
}

func (s *dustControl) itemID(n int, color string) string {
	id := "control:/item?id=" + strconv.Itoa(n)
	if color != "" {
		id += "&color=" + color
	}
	return id
}

func (s *dustControl) ids() []string {
	out := []string{"control:/"}
	for k := 1; k <= s.lists; k++ {
		out = append(out, "control:/list?page="+strconv.Itoa(k))
	}
	for n := 1; n <= s.items; n++ {
		out = append(out, s.itemID(n, ""))
		if n <= s.colored {
			out = append(out, s.itemID(n, "red"), s.itemID(n, "blue"))
		}
	}
	for _, pp := range controlPairs {
		for n := 1; n <= s.pairs; n++ {
			out = append(out, "control:"+pp[0]+strconv.Itoa(n)+pp[1])
		}
	}
	return out
}

func (s *dustControl) resolve(u *url.URL) (dustRef, bool) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return dustRef{}, false
	}
	// only reports whether q holds one value of each key and no other key.
	only := func(keys ...string) bool {
		for _, k := range keys {
			if len(q[k]) != 1 {
				return false
			}
		}
		return len(q) == len(keys)
	}
	switch path := u.Path; path {
	case "/":
		if !only() {
			return dustRef{}, false
		}
		return dustRef{id: "control:/", kind: "home"}, true
	case "/list":
		if !only("page") {
			return dustRef{}, false
		}
		k, ok := dustNumber(q.Get("page"), s.lists)
		if !ok {
			return dustRef{}, false
		}
		return dustRef{id: "control:/list?page=" + strconv.Itoa(k), kind: "list", n: k}, true
	case "/item":
		color := q.Get("color")
		if !only("id") && !(only("id", "color") && (color == "red" || color == "blue")) {
			return dustRef{}, false
		}
		n, ok := dustNumber(q.Get("id"), s.items)
		if !ok || color != "" && n > s.colored {
			return dustRef{}, false
		}
		return dustRef{id: s.itemID(n, color), kind: "item", n: n, name: color}, true
	}
	if !only() {
		return dustRef{}, false
	}
	for i, pp := range controlPairs {
		if n, ok := dustCut(u.Path, pp[0], pp[1], s.pairs); ok {
			return dustRef{id: "control:" + u.Path, kind: "pair", n: n, name: strconv.Itoa(i)}, true
		}
	}
	return dustRef{}, false
}

func (s *dustControl) price(n int, color string) string {
	h := s.w.key(s.itemID(n, color))
	return fmt.Sprintf("%d.%02d", 5+h%90, h/7%100)
}

func (s *dustControl) render(p dustRef) []byte {
	var h dustHTML
	body := p.id
	title := "Control"
	switch p.kind {
	case "list":
		title = "All items, page " + strconv.Itoa(p.n)
	case "item":
		// The colours of an item are one text but for a line.
		body = s.itemID(p.n, "")
		title = "Item " + strconv.Itoa(p.n) + ": " + dustTitle(s.w.key(body), 2)
	case "pair":
		title = dustTitle(s.w.key(p.id), 3) + " " + strconv.Itoa(p.n)
	}
	h.open(title)
	fmt.Fprintf(&h.b, "<div class=\"rendered\">Rendered at %s</div>\n", time.Now().UTC().Format("2006-01-02 15:04:05.000000000"))
	h.heading(title, dustParagraph(s.w.key(body)))
	if p.kind == "item" {
		color, price := "as pictured", s.price(p.n, "")
		if p.name != "" {
			color, price = p.name, s.price(p.n, p.name)
		}
		fmt.Fprintf(&h.b, "<p>Colour: %s, %s</p>\n", color, price)
	}
	h.raw("<ul>\n")
	h.li("/", "Home")
	switch p.kind {
	case "home":
		for k := 1; k <= s.lists; k++ {
			h.li("/list?page="+strconv.Itoa(k), "Items, page "+strconv.Itoa(k))
		}
		for _, pp := range controlPairs {
			for n := 1; n <= s.pairs; n++ {
				path := pp[0] + strconv.Itoa(n) + pp[1]
				h.li(path, path)
			}
		}
	case "list":
		for n := (p.n-1)*controlPerList + 1; n <= min(p.n*controlPerList, s.items); n++ {
			h.li("/item?id="+strconv.Itoa(n), "Item "+strconv.Itoa(n))
			if n <= s.colored {
				h.li("/item?id="+strconv.Itoa(n)+"&color=red", "Item "+strconv.Itoa(n)+" in red")
				h.li("/item?id="+strconv.Itoa(n)+"&color=blue", "Item "+strconv.Itoa(n)+" in blue")
			}
		}
		for _, k := range []int{p.n - 1, p.n + 1} {
			if k >= 1 && k <= s.lists {
				h.li("/list?page="+strconv.Itoa(k), "Items, page "+strconv.Itoa(k))
			}
		}
	case "item":
		h.li("/list?page="+strconv.Itoa((p.n-1)/controlPerList+1), "All items")
		if p.n <= s.colored {
			h.li("/item?id="+strconv.Itoa(p.n)+"&color=red", "In red")
			h.li("/item?id="+strconv.Itoa(p.n)+"&color=blue", "In blue")
		}
	case "pair":
		i, _ := strconv.Atoi(p.name)
		for k, pp := range controlPairs {
			if k != i && (pp[0] == controlPairs[i][0] || pp[1] == controlPairs[i][1]) {
				path := pp[0] + strconv.Itoa(p.n) + pp[1]
				h.li(path, "Not to be confused with "+path)
			}
		}
	}
	h.raw("</ul>\n")
	return h.close()
}
