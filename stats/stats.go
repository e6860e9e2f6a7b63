// Package stats keeps the seen-URL counters that all dedup workers of a
// deployment share: pages and links discovered, URLs admitted to the
// frontier, duplicates dropped, links rejected by reason, poison messages,
// admitted URLs per host, and recent rates.
//
// Redis keeps them for a deployment (Redis); Memory keeps them inside one
// process for the single-machine mode. Both have the same methods. Workers
// accumulate a Delta in memory and Add it once per interval, in one round
// trip, so the counters cost Redis almost nothing next to the filter.
//
// The counts are exact while workers live and approximate across crashes: a
// worker killed before its next Add loses the counts of its last interval,
// and a discovered message redelivered after a lost acknowledgement is
// counted again. The frontier stream's own message sequence is the exact
// number of URLs ever admitted.
package stats

import (
	"maps"
	"sort"
	"time"
)

// Delta is a set of counts to add. The zero value is an empty Delta, ready
// to use; it is not safe for concurrent use.
type Delta struct {
	// Pages counts discovered messages processed (one per crawled page).
	Pages int64 `json:"pages"`
	// Links counts the links in them: every discovered URL.
	Links int64 `json:"links"`
	// Admitted counts URLs put on the frontier (first seen).
	Admitted int64 `json:"admitted"`
	// Duplicates counts links dropped as already seen: by the filter,
	// repeated within a batch, or absorbed by the frontier's duplicate
	// window. Links = Admitted + Duplicates + Σ Rejected.
	Duplicates int64 `json:"duplicates"`
	// Republished counts publishes the frontier's duplicate window
	// absorbed: worker races and crash recoveries at work (also counted in
	// Duplicates).
	Republished int64 `json:"republished"`
	// Imported counts URLs bulk-marked as seen that were new to the filter;
	// ImportedSeen those it already held.
	Imported     int64 `json:"imported"`
	ImportedSeen int64 `json:"imported_seen"`
	// Rejected counts links that are not crawlable URLs, by reason (the
	// normalize reasons).
	Rejected map[string]int64 `json:"rejected,omitempty"`
	// Poison counts discovered messages rejected whole, by reason.
	Poison map[string]int64 `json:"poison,omitempty"`
	// Hosts counts admitted URLs by host, DuplicateHosts duplicate links.
	Hosts          map[string]int64 `json:"-"`
	DuplicateHosts map[string]int64 `json:"-"`
	// Crawls splits the link counts by crawl id.
	Crawls map[string]CrawlCounts `json:"crawls,omitempty"`
}

// CrawlCounts are one crawl's links: Links = Admitted + Duplicates +
// Rejected.
type CrawlCounts struct {
	Links      int64 `json:"links"`
	Admitted   int64 `json:"admitted"`
	Duplicates int64 `json:"duplicates"`
	Rejected   int64 `json:"rejected"`
}

func (c CrawlCounts) add(o CrawlCounts) CrawlCounts {
	return CrawlCounts{c.Links + o.Links, c.Admitted + o.Admitted, c.Duplicates + o.Duplicates, c.Rejected + o.Rejected}
}

// CountCrawl adds c to crawl's counts (the totals are counted apart).
func (d *Delta) CountCrawl(crawl string, c CrawlCounts) {
	if d.Crawls == nil {
		d.Crawls = map[string]CrawlCounts{}
	}
	d.Crawls[crawl] = d.Crawls[crawl].add(c)
}

// Reject counts one rejected link under reason.
func (d *Delta) Reject(reason string) { d.Rejected = inc(d.Rejected, reason, 1) }

// AddPoison counts one poison message under reason.
func (d *Delta) AddPoison(reason string) { d.Poison = inc(d.Poison, reason, 1) }

// AdmitHost counts one admitted URL of host (Admitted is counted apart).
func (d *Delta) AdmitHost(host string) { d.Hosts = inc(d.Hosts, host, 1) }

// DuplicateHost counts one duplicate link to host (Duplicates is counted
// apart).
func (d *Delta) DuplicateHost(host string) { d.DuplicateHosts = inc(d.DuplicateHosts, host, 1) }

func inc(m map[string]int64, k string, n int64) map[string]int64 {
	if m == nil {
		m = map[string]int64{}
	}
	m[k] += n
	return m
}

// Merge adds o's counts to d.
func (d *Delta) Merge(o Delta) {
	d.Pages += o.Pages
	d.Links += o.Links
	d.Admitted += o.Admitted
	d.Duplicates += o.Duplicates
	d.Republished += o.Republished
	d.Imported += o.Imported
	d.ImportedSeen += o.ImportedSeen
	for k, n := range o.Rejected {
		d.Rejected = inc(d.Rejected, k, n)
	}
	for k, n := range o.Poison {
		d.Poison = inc(d.Poison, k, n)
	}
	for k, n := range o.Hosts {
		d.Hosts = inc(d.Hosts, k, n)
	}
	for k, n := range o.DuplicateHosts {
		d.DuplicateHosts = inc(d.DuplicateHosts, k, n)
	}
	for k, c := range o.Crawls {
		d.CountCrawl(k, c)
	}
}

// IsZero reports whether d counts nothing.
func (d Delta) IsZero() bool {
	return d.Pages == 0 && d.Links == 0 && d.Admitted == 0 && d.Duplicates == 0 && d.Republished == 0 &&
		d.Imported == 0 && d.ImportedSeen == 0 && len(d.Rejected) == 0 && len(d.Poison) == 0 && len(d.Hosts) == 0 &&
		len(d.DuplicateHosts) == 0 && len(d.Crawls) == 0
}

// Clone returns a deep copy of d.
func (d Delta) Clone() Delta {
	d.Rejected = maps.Clone(d.Rejected)
	d.Poison = maps.Clone(d.Poison)
	d.Hosts = maps.Clone(d.Hosts)
	d.DuplicateHosts = maps.Clone(d.DuplicateHosts)
	d.Crawls = maps.Clone(d.Crawls)
	return d
}

// RejectedTotal sums Rejected.
func (d Delta) RejectedTotal() int64 { return sum(d.Rejected) }

// PoisonTotal sums Poison.
func (d Delta) PoisonTotal() int64 { return sum(d.Poison) }

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// HostCount is one host's admitted URLs and duplicate links.
type HostCount struct {
	Host       string `json:"host"`
	Admitted   int64  `json:"admitted"`
	Duplicates int64  `json:"duplicates"`
}

// Rates are per-second rates over the last minute and the last five
// minutes, from 10-second buckets (only complete buckets count).
type Rates struct {
	LinksPerSec1m    float64 `json:"links_per_sec_1m"`
	AdmittedPerSec1m float64 `json:"admitted_per_sec_1m"`
	LinksPerSec5m    float64 `json:"links_per_sec_5m"`
	AdmittedPerSec5m float64 `json:"admitted_per_sec_5m"`
}

// Snapshot is the shared statistics at one moment.
type Snapshot struct {
	// Totals holds every counter since the statistics began (Hosts and
	// DuplicateHosts unset; see TopHosts).
	Totals Delta `json:"totals"`
	// TopHosts lists the hosts with the most admitted URLs, most first,
	// with their duplicates.
	TopHosts []HostCount `json:"top_hosts"`
	// HostCount is the number of distinct hosts admitted.
	HostCount int64 `json:"host_count"`
	// Rates are recent rates.
	Rates Rates `json:"rates"`
	// Since is when the first counts were added; Updated when the last were.
	Since   time.Time `json:"since"`
	Updated time.Time `json:"updated"`
}

// bucketSeconds is the width of a rate bucket.
const bucketSeconds = 10

// bucketOf returns the rate bucket of t.
func bucketOf(t time.Time) int64 { return t.Unix() / bucketSeconds }

// rates computes Rates at now from per-bucket (links, admitted) counts,
// counting only complete buckets and, in a young deployment, only the time
// since `since`.
func rates(now, since time.Time, bucket func(b int64) (links, admitted int64)) Rates {
	cur := bucketOf(now)
	window := func(n int64) (float64, float64) {
		var links, admitted int64
		for b := cur - n; b < cur; b++ {
			l, a := bucket(b)
			links += l
			admitted += a
		}
		secs := float64(n * bucketSeconds)
		if !since.IsZero() {
			if lived := float64(cur*bucketSeconds - since.Unix()); lived < secs {
				secs = lived
			}
		}
		if secs <= 0 {
			return 0, 0
		}
		return float64(links) / secs, float64(admitted) / secs
	}
	var r Rates
	r.LinksPerSec1m, r.AdmittedPerSec1m = window(60 / bucketSeconds)
	r.LinksPerSec5m, r.AdmittedPerSec5m = window(300 / bucketSeconds)
	return r
}

// topHosts sorts hosts by admitted count (then name), keeps n, and gives
// them their duplicates.
func topHosts(m, dups map[string]int64, n int) []HostCount {
	out := make([]HostCount, 0, len(m))
	for h, c := range m {
		out = append(out, HostCount{h, c, dups[h]})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Admitted != out[j].Admitted {
			return out[i].Admitted > out[j].Admitted
		}
		return out[i].Host < out[j].Host
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}
