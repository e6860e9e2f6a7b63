package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/pipeline"
)

// crawlID is the value of --crawl: empty, or a valid crawl id.
type crawlID string

func (c *crawlID) String() string { return string(*c) }

// Set refuses what cannot name a crawl, so that a bad id is a usage error
// naming the flag.
func (c *crawlID) Set(s string) error {
	if !frontier.ValidCrawl(s) {
		return errors.New("not a crawl id (1 to 64 of A-Z a-z 0-9 _ -)")
	}
	*c = crawlID(s)
	return nil
}

// crawlFlag adds --crawl: the commands that open a filter can be pointed at
// one crawl's own.
func crawlFlag(fs *flag.FlagSet) {
	fs.Var(new(crawlID), "crawl", "use crawl `ID`'s own filter: <filter.name>:ID in Redis, else the snapshot seen.ID.<kind> beside filter.snapshot or in --data-dir")
}

// crawlOf is the --crawl of the command's flags, "" if none was given or
// the command has no such flag.
func crawlOf(fs *flag.FlagSet) string {
	if f := fs.Lookup("crawl"); f != nil {
		return f.Value.String()
	}
	return ""
}

// forCrawl names cfg's filter section for crawl's own filter, as workers
// name it (pipeline.CrawlFilter); the filter's kind and sizes are the ones
// stored with it, which opening an existing filter adopts, whatever
// filter.kind, filter.capacity and filter.fpp say (config.SizedByCrawl).
// An empty crawl leaves the section alone.
func forCrawl(cfg *config.Config, crawl string) {
	if crawl == "" {
		return
	}
	f := pipeline.CrawlFilter(cfg.Filter.SizedByCrawl(), crawl, frontier.CrawlSettings{})
	// A crawl's snapshot is named after its own kind (seen.<crawl>.<kind>):
	// without its settings, the kind whose file is there.
	if _, err := os.Stat(f.Snapshot); f.Snapshot != "" && errors.Is(err, fs.ErrNotExist) {
		for _, kind := range []string{"bloom", "cuckoo"} {
			g := pipeline.CrawlFilter(cfg.Filter.SizedByCrawl(), crawl, frontier.CrawlSettings{Kind: kind})
			if _, err := os.Stat(g.Snapshot); err == nil {
				f = g
				break
			}
		}
	}
	cfg.Filter = f
}

// lookupCrawl reads crawl's record from the crawl registry on cfg's NATS
// server (frontier.Crawls): an error wrapping frontier.ErrNoCrawl if it has
// none.
func lookupCrawl(ctx context.Context, cfg *config.Config, crawl string) (frontier.CrawlRecord, error) {
	nc, err := cliNATS(cfg)
	if err != nil {
		return frontier.CrawlRecord{}, fmt.Errorf("read the crawl registry: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return frontier.CrawlRecord{}, fmt.Errorf("read the crawl registry: %w", err)
	}
	reg, err := frontier.OpenCrawls(ctx, js, cfg.Frontier.Topology())
	if err != nil {
		return frontier.CrawlRecord{}, fmt.Errorf("read the crawl registry: %w", err)
	}
	return reg.Get(ctx, crawl)
}

// openCrawl opens crawl's own filter for a command that writes it (import
// with create, forget without), as the crawl's workers open it: a crawl in
// the registry by its stored settings (kind, expected URLs, fpp, revisit
// window: pipeline.CrawlFilter and OpenCrawlFilter), never by the section's
// sizing settings. A crawl the registry does not know is refused (a
// mistyped id would otherwise make a new filter), unless its filter
// exists, which is opened as stored; so is an existing filter while the
// registry cannot be read. cfg's filter section is left naming the
// crawl's filter.
func (t *tools) openCrawl(ctx context.Context, cfg *config.Config, policy string, create bool) error {
	rec, err := lookupCrawl(ctx, cfg, t.crawl)
	if err == nil {
		cfg.Filter = pipeline.CrawlFilter(cfg.Filter.SizedByCrawl(), t.crawl, rec.Settings)
		if create {
			t.filter, err = pipeline.OpenCrawlFilter(ctx, cfg.Filter, rec.Settings, t.rdb, policy)
		} else {
			t.filter, err = openExisting(ctx, cfg, t.rdb, policy, t.crawl)
		}
		return err
	}
	forCrawl(cfg, t.crawl)
	exists, xerr := pipeline.FilterExists(ctx, cfg.Filter, t.rdb)
	switch {
	case xerr != nil:
		return fmt.Errorf("look for crawl %q's filter: %w", t.crawl, xerr)
	case !exists && errors.Is(err, frontier.ErrNoCrawl):
		return fmt.Errorf("crawl %q does not exist (not in the crawl registry on %s, and no filter %s): "+
			"'crawler seed --crawl-id %s URL…' creates it, 'crawler crawls' lists the crawls", t.crawl, cfg.NATS.URL, filterPlace(cfg, t.rdb != nil), t.crawl)
	case !exists:
		return fmt.Errorf("crawl %q has no filter yet (no filter %s), and its settings, which size it, cannot be read: %w",
			t.crawl, filterPlace(cfg, t.rdb != nil), err)
	case !errors.Is(err, frontier.ErrNoCrawl):
		cfg.Filter.Log.Warn("the crawl registry cannot be read; the crawl's existing filter is opened as stored", "crawl", t.crawl, "error", err)
	}
	if create {
		t.filter, err = pipeline.OpenFilter(ctx, cfg.Filter, t.rdb, policy)
	} else {
		t.filter, err = openExisting(ctx, cfg, t.rdb, policy, t.crawl)
	}
	return err
}

// filterPlace names where cfg's filter lives.
func filterPlace(cfg *config.Config, redis bool) string {
	if redis {
		return fmt.Sprintf("%q in redis", cfg.Filter.Name)
	}
	return "file " + cfg.Filter.Snapshot
}

// noCrawlFilter says that crawl has no filter where cfg points.
func noCrawlFilter(cfg *config.Config, crawl string, redis bool) error {
	return fmt.Errorf("no filter exists for crawl %q (no filter %s)", crawl, filterPlace(cfg, redis))
}
