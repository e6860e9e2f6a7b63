package crawl

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/sitemap"
)

// Sitemaps: for each host in scope, the Sitemap: lines of its robots.txt
// are published, once per crawl and host, as links of kind sitemap from the
// first page fetched there, marked in their metadata as sitemap documents
// of level 1. They go through dedup like any URL, so each is fetched once
// per crawl whatever the number of crawlers, politely and archived. A
// fetched sitemap document is parsed (package sitemap: XML, indexes, text,
// gzip, at most 50,000 URLs and 50 MiB) instead of read for HTML links: the
// URLs it lists become links of kind sitemap with their lastmod in the
// metadata; the sitemaps an index lists become sitemap documents of the
// next level, up to maxSitemapLevel. An invalid or oversized document is
// counted by reason (Stats.SitemapInvalid), never fatal: the URLs read
// before the fault are kept.
const (
	// metaSitemap marks an entry whose URL is a sitemap document; its
	// value is the document's level.
	metaSitemap = "sieve.sitemap"
	// metaLastmod is a sitemap URL's <lastmod>, as the sitemap gave it.
	metaLastmod = "lastmod"
	// maxSitemapLevel bounds sitemap indexes: robots.txt's sitemaps are
	// level 1, an index's children one more.
	maxSitemapLevel = 3
	// sitemapReasonTooDeep counts index entries beyond maxSitemapLevel.
	sitemapReasonTooDeep = "index_too_deep"
)

// sitemapLevel is the level of the sitemap document e names, 0 if e is not
// one.
func sitemapLevel(e frontier.Entry) int {
	if v := e.Meta[metaSitemap]; len(v) == 1 {
		if n, err := strconv.Atoi(v[0]); err == nil && n > 0 {
			return n
		}
	}
	return 0
}

func sitemapDoc(loc string, level int) frontier.Link {
	return frontier.Link{URL: loc, Kind: frontier.LinkSitemap, Meta: frontier.Metadata{metaSitemap: {strconv.Itoa(level)}}}
}

// sitemapResult is what a sitemap document held.
type sitemapResult struct {
	entries []sitemap.Entry
	result  sitemap.Result
	err     error // why the document, or its rest, was not read
}

// readSitemap is the body reader of sitemap documents. Only a read that
// failed (the connection) fails the fetch: an invalid document is a result.
func readSitemap(lim sitemap.Limits) bodyReader {
	return func(resp *http.Response, r *fetchResult) error {
		sr := &sitemapResult{}
		sr.result, sr.err = sitemap.Parse(resp.Body, lim, func(e sitemap.Entry) error {
			sr.entries = append(sr.entries, e)
			return nil
		})
		r.sitemap = sr
		var se *sitemap.Error
		if errors.As(sr.err, &se) && se.Reason == sitemap.ReasonRead {
			return sr.err
		}
		return nil
	}
}

// sitemapLinks turns the document fetched for entry (of level level) into
// links, counting it.
func (c *Crawler) sitemapLinks(entry frontier.Entry, level int, sr *sitemapResult) []frontier.Link {
	invalid := ""
	var se *sitemap.Error
	if errors.As(sr.err, &se) {
		invalid = string(se.Reason)
	} else if sr.err != nil {
		invalid = "error"
	}
	var links []frontier.Link
	for _, e := range sr.entries {
		if e.Kind == sitemap.KindIndex {
			if level >= maxSitemapLevel {
				c.stats.sitemapInvalid(sitemapReasonTooDeep)
				continue
			}
			links = append(links, sitemapDoc(e.Loc, level+1))
			continue
		}
		c.listed(entry.Crawl, e.Loc)
		l := frontier.Link{URL: e.Loc, Kind: frontier.LinkSitemap}
		if e.LastMod != "" {
			l.Meta = frontier.Metadata{metaLastmod: {e.LastMod}}
		}
		links = append(links, l)
	}
	c.stats.sitemap(sr.result.URLs, invalid)
	if sr.result.Skipped > 0 {
		c.stats.sitemapInvalid(string(sitemap.ReasonBadURL))
	}
	c.opts.Logger.Debug("sitemap read", "url", entry.URL, "urls", sr.result.URLs, "invalid", invalid)
	return links
}

// sitemapsSeen remembers the crawls and origins whose robots.txt sitemaps
// this crawler published, so a host's pages do not each carry them (dedup
// would drop the repeats anyway). Bounded: past maxSeen it starts over.
type sitemapsSeen struct {
	mu   sync.Mutex
	seen map[string]bool
}

const maxSitemapsSeen = 100_000

// first reports whether crawl's sitemaps of u's origin are new here.
func (s *sitemapsSeen) first(crawl string, u *url.URL) bool {
	key := crawl + " " + u.Scheme + "://" + u.Host
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil || len(s.seen) >= maxSitemapsSeen {
		s.seen = map[string]bool{}
	}
	if s.seen[key] {
		return false
	}
	s.seen[key] = true
	return true
}

// robotsSitemaps returns the sitemap documents robots.txt names for u's
// origin, the first time crawl asks.
func (c *Crawler) robotsSitemaps(crawl string, u *url.URL) []frontier.Link {
	maps := c.fetcher.robots.sitemaps(u)
	if len(maps) == 0 || !c.sitemapsSeen.first(crawl, u) {
		return nil
	}
	links := make([]frontier.Link, 0, len(maps))
	for _, m := range maps {
		links = append(links, sitemapDoc(m, 1))
	}
	return links
}
