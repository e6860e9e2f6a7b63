package crawl

import (
	"maps"
	"net/http"
	"sort"
	"sync"
)

// The outcomes of a fetch attempt, as counted in Stats.Outcomes: the class of
// the response's status, robots.txt's refusal, or no response at all.
const (
	Outcome2xx    = "2xx"
	Outcome3xx    = "3xx"
	Outcome4xx    = "4xx"
	Outcome5xx    = "5xx"
	OutcomeRobots = "robots"
	OutcomeFailed = "failed" // no response: DNS, network, timeout, TLS, forbidden address
)

// Outcomes lists the outcomes in display order.
func Outcomes() []string {
	return []string{Outcome2xx, Outcome3xx, Outcome4xx, Outcome5xx, OutcomeRobots, OutcomeFailed}
}

// Stats are one crawler's counts since it started.
type Stats struct {
	// Fetched counts HTTP responses received, whatever their status
	// (robots.txt not included).
	Fetched int64 `json:"fetched"`
	// Pages counts 2xx HTML pages, Files 2xx responses of other types
	// (not read), Redirects 3xx responses.
	Pages     int64 `json:"pages"`
	Files     int64 `json:"files"`
	Redirects int64 `json:"redirects"`
	// Unchanged counts 304 Not Modified answers to conditional requests
	// (revisits of an archived crawl).
	Unchanged int64 `json:"unchanged,omitempty"`
	// Refetched counts pages fetched again in full (an unconditional
	// request, a response record) because the archive record of their
	// last capture could not be read, by reason: missing (the file is in
	// none of the crawl's WARC directories), corrupt, io_error.
	Refetched map[string]int64 `json:"refetched,omitempty"`
	// Outcomes counts fetch attempts by outcome (Outcome2xx …
	// OutcomeFailed); a retried URL counts once per attempt.
	Outcomes map[string]int64 `json:"outcomes"`
	// Retried counts temporary failures handed back for a later try, by
	// reason.
	Retried map[Reason]int64 `json:"retried"`
	// Failed counts URLs given up on, by reason (permanent failures, and
	// temporary ones out of retries).
	Failed map[Reason]int64 `json:"failed"`
	// Skipped counts frontier entries not fetched, by reason: off_host,
	// off_domain, denied, too_deep, poison_*.
	Skipped map[string]int64 `json:"skipped"`
	// Published counts discovered messages published (one per page or
	// redirect), Links the links they carried.
	Published int64 `json:"published"`
	Links     int64 `json:"links"`
	// Dropped counts links not published, by reason: off_host,
	// off_domain, denied, too_deep, scheme.
	Dropped map[string]int64 `json:"dropped"`
	// Sitemaps counts sitemap documents read (named by robots.txt or by
	// a sitemap index), SitemapURLs the URLs they listed, SitemapInvalid
	// the documents (or the rest of one) not read, by reason
	// (sitemap.Reason, index_too_deep).
	Sitemaps       int64            `json:"sitemaps,omitempty"`
	SitemapURLs    int64            `json:"sitemap_urls,omitempty"`
	SitemapInvalid map[string]int64 `json:"sitemap_invalid,omitempty"`
	// Duplicates counts fetched pages that were an earlier URL's page,
	// by kind (exact: the same bytes; near: the same page but for its
	// render-to-render noise), DuplicateBytes the bytes they cost.
	Duplicates     map[string]int64 `json:"duplicates,omitempty"`
	DuplicateBytes map[string]int64 `json:"duplicate_bytes,omitempty"`
	// Spellings counts frontier entries dropped unfetched: spellings of a
	// page fetched already, by the crawl's learned rules.
	Spellings int64 `json:"spellings,omitempty"`
	// NoiseFetches counts second fetches of a page, made to measure what
	// changes between two renders.
	NoiseFetches int64 `json:"noise_fetches,omitempty"`
	// Crawls holds the counts of each crawl, by crawl id.
	Crawls map[string]CrawlStats `json:"crawls,omitempty"`
	// TopHosts lists the hosts with the most responses, most first (at most
	// TopHostsShown); HostCount is the number of hosts counted.
	TopHosts  []HostFetches `json:"top_hosts,omitempty"`
	HostCount int           `json:"host_count"`
	// Deferred counts frontier messages handed back to JetStream to wait
	// for their host's turn, its buffer being full (a message may be
	// deferred more than once).
	Deferred int64 `json:"deferred"`
	// InFlight is the frontier messages in hand now: in their host's
	// buffer or being fetched.
	InFlight int `json:"in_flight"`
	// Hosts is the number of politeness queues (hosts) remembered now: those
	// with URLs in hand or a delay still running.
	Hosts int `json:"hosts"`
	// Partitions lists the frontier partitions owned now.
	Partitions []int `json:"partitions"`
}

// CrawlStats are the counts of one crawl within a crawler's Stats.
type CrawlStats struct {
	// Fetched counts HTTP responses, Outcomes attempts by outcome.
	Fetched  int64            `json:"fetched"`
	Outcomes map[string]int64 `json:"outcomes"`
	// Retried counts attempts handed back for a later try, Failed URLs
	// given up on.
	Retried int64 `json:"retried"`
	Failed  int64 `json:"failed"`
	// Links counts the links published.
	Links int64 `json:"links"`
	// Refetched counts pages fetched again in full, their last
	// capture's record unreadable.
	Refetched int64 `json:"refetched,omitempty"`
	// Duplicates, DuplicateBytes, Spellings and NoiseFetches are the
	// crawl's, as in Stats; DuplicateHosts the same per host (at most
	// maxDupHosts hosts, the rest under "(other)").
	Duplicates     map[string]int64          `json:"duplicates,omitempty"`
	DuplicateBytes int64                     `json:"duplicate_bytes,omitempty"`
	Spellings      int64                     `json:"spellings,omitempty"`
	NoiseFetches   int64                     `json:"noise_fetches,omitempty"`
	DuplicateHosts map[string]HostDuplicates `json:"duplicate_hosts,omitempty"`
}

// HostDuplicates are one host's duplicate pages within a crawl.
type HostDuplicates struct {
	Exact     int64 `json:"exact,omitempty"`
	Near      int64 `json:"near,omitempty"`
	Bytes     int64 `json:"bytes,omitempty"`
	Spellings int64 `json:"spellings,omitempty"`
}

// maxDupHosts bounds the hosts a crawl's duplicates are counted under.
const maxDupHosts = 1000

// HostFetches is one host's responses.
type HostFetches struct {
	Host    string `json:"host"`
	Fetched int64  `json:"fetched"`
}

// Bounds on what Stats holds, so a crawl of many hosts or crawls keeps the
// crawler's memory flat: hosts past maxHosts and crawls past maxCrawls are
// counted under "(other)".
const (
	TopHostsShown = 50
	maxHosts      = 10_000
	maxCrawls     = 256
	otherKey      = "(other)"
)

// Sum adds the values of a count map.
func Sum[K comparable](m map[K]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// counters is the mutable side of Stats; safe for concurrent use. Each count
// also goes to the Prometheus metrics when m is set.
type counters struct {
	mu    sync.Mutex
	s     Stats
	hosts map[string]int64
	m     *metrics
}

func newCounters(m *metrics) counters {
	return counters{s: Stats{
		Outcomes: map[string]int64{},
		Retried:  map[Reason]int64{}, Failed: map[Reason]int64{},
		Skipped: map[string]int64{}, Dropped: map[string]int64{},
		SitemapInvalid: map[string]int64{},
		Refetched:      map[string]int64{},
		Crawls:         map[string]CrawlStats{},
		Duplicates:     map[string]int64{}, DuplicateBytes: map[string]int64{},
	}, hosts: map[string]int64{}, m: m}
}

// crawl returns the counts of crawl id, with c.mu held.
func (c *counters) crawl(id string) CrawlStats {
	cs, ok := c.s.Crawls[id]
	if !ok && len(c.s.Crawls) >= maxCrawls {
		id = otherKey
		cs = c.s.Crawls[id]
	}
	if cs.Outcomes == nil {
		cs.Outcomes = map[string]int64{}
	}
	return cs
}

func (c *counters) setCrawl(id string, cs CrawlStats) {
	if _, ok := c.s.Crawls[id]; !ok && len(c.s.Crawls) >= maxCrawls {
		id = otherKey
	}
	c.s.Crawls[id] = cs
}

// outcome counts one attempt of crawl id, with c.mu held; response says it
// got an HTTP response from host.
func (c *counters) outcome(id, host, outcome string, response bool) {
	cs := c.crawl(id)
	cs.Outcomes[outcome]++
	c.s.Outcomes[outcome]++
	if response {
		c.s.Fetched++
		cs.Fetched++
		if _, ok := c.hosts[host]; !ok && len(c.hosts) >= maxHosts {
			host = otherKey
		}
		c.hosts[host]++
	}
	c.setCrawl(id, cs)
	c.m.fetch(id, outcome)
}

func statusOutcome(status int) string {
	switch {
	case status >= 500:
		return Outcome5xx
	case status >= 400:
		return Outcome4xx
	case status >= 300:
		return Outcome3xx
	}
	return Outcome2xx
}

func (c *counters) fetched(crawl, host string, p *Page) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case p.Status == http.StatusNotModified:
		c.s.Unchanged++
	case p.Redirect != "" || p.Status >= 300:
		c.s.Redirects++
	case p.ContentType == "" || p.ContentType == "text/html" || p.ContentType == "application/xhtml+xml":
		c.s.Pages++
	default:
		c.s.Files++
	}
	c.outcome(crawl, host, statusOutcome(p.Status), true)
}

// attempt counts a fetch attempt that ended in err: a response that was a
// failure (4xx, 5xx), robots.txt's refusal, or no response.
func (c *counters) attempt(crawl, host string, fe *FetchError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case fe.Status != 0:
		c.outcome(crawl, host, statusOutcome(fe.Status), true)
	case fe.Reason == ReasonRobots:
		c.outcome(crawl, host, OutcomeRobots, false)
	default:
		c.outcome(crawl, host, OutcomeFailed, false)
	}
}

func (c *counters) retry(crawl string, r Reason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Retried[r]++
	cs := c.crawl(crawl)
	cs.Retried++
	c.setCrawl(crawl, cs)
	c.m.retry(crawl, r)
}

func (c *counters) fail(crawl string, r Reason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Failed[r]++
	cs := c.crawl(crawl)
	cs.Failed++
	c.setCrawl(crawl, cs)
	c.m.fail(crawl, r)
}

// refetch counts a page fetched in full because its last capture's
// record could not be read, for the reason why.
func (c *counters) refetch(crawl, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Refetched[why]++
	cs := c.crawl(crawl)
	cs.Refetched++
	c.setCrawl(crawl, cs)
	c.m.refetch(crawl, why)
}

// dupHost returns the duplicates of host in cs, with c.mu held.
func dupHost(cs *CrawlStats, host string) HostDuplicates {
	if cs.DuplicateHosts == nil {
		cs.DuplicateHosts = map[string]HostDuplicates{}
	}
	if _, ok := cs.DuplicateHosts[host]; !ok && len(cs.DuplicateHosts) >= maxDupHosts {
		host = otherKey
	}
	return cs.DuplicateHosts[host]
}

func setDupHost(cs *CrawlStats, host string, h HostDuplicates) {
	if _, ok := cs.DuplicateHosts[host]; !ok && len(cs.DuplicateHosts) >= maxDupHosts {
		host = otherKey
	}
	cs.DuplicateHosts[host] = h
}

// duplicate counts a fetched page of host that was an earlier URL's page.
func (c *counters) duplicate(crawl, host, kind string, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Duplicates[kind]++
	c.s.DuplicateBytes[kind] += int64(size)
	cs := c.crawl(crawl)
	if cs.Duplicates == nil {
		cs.Duplicates = map[string]int64{}
	}
	cs.Duplicates[kind]++
	cs.DuplicateBytes += int64(size)
	h := dupHost(&cs, host)
	if kind == "exact" {
		h.Exact++
	} else {
		h.Near++
	}
	h.Bytes += int64(size)
	setDupHost(&cs, host, h)
	c.setCrawl(crawl, cs)
	c.m.duplicate(crawl, kind, size)
}

// spelling counts an entry dropped unfetched: a spelling of a page
// fetched already.
func (c *counters) spelling(crawl, host string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Spellings++
	cs := c.crawl(crawl)
	cs.Spellings++
	h := dupHost(&cs, host)
	h.Spellings++
	setDupHost(&cs, host, h)
	c.setCrawl(crawl, cs)
	c.m.spelling(crawl)
}

// noiseRefetch counts a second fetch made to measure a page's noise.
func (c *counters) noiseRefetch(crawl string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.NoiseFetches++
	cs := c.crawl(crawl)
	cs.NoiseFetches++
	c.setCrawl(crawl, cs)
}

func (c *counters) skip(why string) {
	c.mu.Lock()
	c.s.Skipped[why]++
	c.mu.Unlock()
}

func (c *counters) deferred() {
	c.mu.Lock()
	c.s.Deferred++
	c.mu.Unlock()
}

// sitemap counts a sitemap document read, the URLs it listed, and why it
// (or its rest) was not read, if it was not.
func (c *counters) sitemap(urls int, invalid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Sitemaps++
	c.s.SitemapURLs += int64(urls)
	if invalid != "" {
		c.s.SitemapInvalid[invalid]++
	}
}

func (c *counters) sitemapInvalid(why string) {
	c.mu.Lock()
	c.s.SitemapInvalid[why]++
	c.mu.Unlock()
}

func (c *counters) dropLink(why string) {
	c.mu.Lock()
	c.s.Dropped[why]++
	c.mu.Unlock()
}

func (c *counters) published(crawl string, links int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Published++
	c.s.Links += int64(links)
	cs := c.crawl(crawl)
	cs.Links += int64(links)
	c.setCrawl(crawl, cs)
	c.m.links(crawl, links)
}

func (c *counters) snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.s
	s.Outcomes = maps.Clone(c.s.Outcomes)
	s.Retried = maps.Clone(c.s.Retried)
	s.Failed = maps.Clone(c.s.Failed)
	s.Skipped = maps.Clone(c.s.Skipped)
	s.Dropped = maps.Clone(c.s.Dropped)
	s.SitemapInvalid = maps.Clone(c.s.SitemapInvalid)
	s.Refetched = maps.Clone(c.s.Refetched)
	s.Duplicates = maps.Clone(c.s.Duplicates)
	s.DuplicateBytes = maps.Clone(c.s.DuplicateBytes)
	s.Crawls = make(map[string]CrawlStats, len(c.s.Crawls))
	for id, cs := range c.s.Crawls {
		cs.Outcomes = maps.Clone(cs.Outcomes)
		cs.Duplicates = maps.Clone(cs.Duplicates)
		cs.DuplicateHosts = maps.Clone(cs.DuplicateHosts)
		s.Crawls[id] = cs
	}
	s.HostCount = len(c.hosts)
	s.TopHosts = make([]HostFetches, 0, len(c.hosts))
	for h, n := range c.hosts {
		s.TopHosts = append(s.TopHosts, HostFetches{h, n})
	}
	sort.Slice(s.TopHosts, func(i, j int) bool {
		a, b := s.TopHosts[i], s.TopHosts[j]
		if a.Fetched != b.Fetched {
			return a.Fetched > b.Fetched
		}
		return a.Host < b.Host
	})
	if len(s.TopHosts) > TopHostsShown {
		s.TopHosts = s.TopHosts[:TopHostsShown]
	}
	return s
}
