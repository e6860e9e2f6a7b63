package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/stats"
)

// errNoCrawl: stats without --crawl finds neither the section's own filter
// nor any crawl. Workers keep one filter per crawl, named after it
// (pipeline.CrawlFilter), so before a crawl exists there is none.
var errNoCrawl = errors.New("no crawl yet, so no filter: 'crawler seed URL…' creates a crawl, whose workers make its filter; " +
	"--crawl ID reads one crawl's")

// crawlFilter is one crawl's filter as "dedup-worker stats" without
// --crawl describes it.
type crawlFilter struct {
	Crawl string `json:"crawl"`
	// Filter is nil while the crawl has no filter yet (its workers make it
	// with its first discovered page).
	Filter *dedup.Stats       `json:"filter,omitempty"`
	Window *dedup.WindowStats `json:"window,omitempty"`
	// Error says why a filter that exists could not be read.
	Error string `json:"error,omitempty"`
}

// describeCrawls describes the filter of every crawl there is, writing
// nothing: the crawls recorded in the registry (when NATS answers, nc not
// nil), each sized by its stored settings, and the crawls the workers have
// counted links of (shared, when Redis answered), which covers crawls
// whose record is gone or was never written. Each filter is read as the
// workers name it (crawls.DedupFilters, pipeline.CrawlFilter): before this,
// stats read only the section's own filter, <filter.name>, which no worker
// writes since filters are per crawl, and said no worker had run while
// workers were admitting URLs.
func describeCrawls(ctx context.Context, cfg *config.Config, rdb redis.UniversalClient, nc *nats.Conn, policy string,
	shared *stats.Snapshot) ([]crawlFilter, error) {
	settings := map[string]frontier.CrawlSettings{}
	var regErr error
	if nc != nil {
		settings, regErr = recordedSettings(ctx, nc, cfg.Frontier.Topology())
	}
	ids := slices.Collect(maps.Keys(settings))
	if shared != nil {
		for id := range shared.Totals.Crawls {
			if _, ok := settings[id]; !ok {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	filters := crawls.DedupFilters{Section: cfg.Filter, Redis: rdb, Policy: policy}
	out := make([]crawlFilter, 0, len(ids))
	for _, id := range ids {
		c := crawlFilter{Crawl: id}
		var err error
		if c.Filter, c.Window, err = filters.Describe(ctx, id, settings[id]); err != nil {
			c.Error = err.Error()
		}
		out = append(out, c)
	}
	return out, regErr
}

// recordedSettings returns the settings of every crawl in the registry, by
// id, creating nothing: none before the first crawl is created.
func recordedSettings(ctx context.Context, nc *nats.Conn, topo frontier.Topology) (map[string]frontier.CrawlSettings, error) {
	out := map[string]frontier.CrawlSettings{}
	js, err := jetstream.New(nc)
	if err != nil {
		return out, fmt.Errorf("read the crawl registry: %w", err)
	}
	reg, err := frontier.LookupCrawls(ctx, js, topo)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("read the crawl registry: %w", err)
	}
	list, err := reg.List(ctx)
	if err != nil {
		return out, fmt.Errorf("read the crawl registry: %w", err)
	}
	for _, c := range list {
		out[c.ID] = c.Settings
	}
	return out, nil
}
