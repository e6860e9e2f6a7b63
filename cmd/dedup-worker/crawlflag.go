package main

import (
	"errors"
	"flag"
	"fmt"

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
// stored with it, which opening an existing filter adopts. An empty crawl
// leaves the section alone.
func forCrawl(cfg *config.Config, crawl string) {
	if crawl != "" {
		cfg.Filter = pipeline.CrawlFilter(cfg.Filter, crawl, frontier.CrawlSettings{})
	}
}

// noCrawlFilter says that crawl has no filter where cfg points.
func noCrawlFilter(cfg *config.Config, crawl string, redis bool) error {
	if redis {
		return fmt.Errorf("no filter exists for crawl %q (no filter %q in redis)", crawl, cfg.Filter.Name)
	}
	return fmt.Errorf("no filter exists for crawl %q (no snapshot file %s)", crawl, cfg.Filter.Snapshot)
}
