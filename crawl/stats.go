package crawl

import (
	"maps"
	"sync"
)

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
	// InFlight is the frontier messages in hand now.
	InFlight int `json:"in_flight"`
	// Partitions lists the frontier partitions owned now.
	Partitions []int `json:"partitions"`
}

// Sum adds the values of a count map.
func Sum[K comparable](m map[K]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// counters is the mutable side of Stats; safe for concurrent use.
type counters struct {
	mu sync.Mutex
	s  Stats
}

func newCounters() counters {
	return counters{s: Stats{
		Retried: map[Reason]int64{}, Failed: map[Reason]int64{},
		Skipped: map[string]int64{}, Dropped: map[string]int64{},
	}}
}

func (c *counters) fetched(p *Page) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Fetched++
	switch {
	case p.Redirect != "" || p.Status >= 300:
		c.s.Redirects++
	case p.ContentType == "" || p.ContentType == "text/html" || p.ContentType == "application/xhtml+xml":
		c.s.Pages++
	default:
		c.s.Files++
	}
}

// response counts a response that was a failure (4xx, 5xx).
func (c *counters) response() {
	c.mu.Lock()
	c.s.Fetched++
	c.mu.Unlock()
}

func (c *counters) retry(r Reason) {
	c.mu.Lock()
	c.s.Retried[r]++
	c.mu.Unlock()
}

func (c *counters) fail(r Reason) {
	c.mu.Lock()
	c.s.Failed[r]++
	c.mu.Unlock()
}

func (c *counters) skip(why string) {
	c.mu.Lock()
	c.s.Skipped[why]++
	c.mu.Unlock()
}

func (c *counters) dropLink(why string) {
	c.mu.Lock()
	c.s.Dropped[why]++
	c.mu.Unlock()
}

func (c *counters) published(links int) {
	c.mu.Lock()
	c.s.Published++
	c.s.Links += int64(links)
	c.mu.Unlock()
}

func (c *counters) snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.s
	s.Retried = maps.Clone(c.s.Retried)
	s.Failed = maps.Clone(c.s.Failed)
	s.Skipped = maps.Clone(c.s.Skipped)
	s.Dropped = maps.Clone(c.s.Dropped)
	return s
}
