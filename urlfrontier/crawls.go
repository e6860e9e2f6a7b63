package urlfrontier

import (
	"context"

	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/frontier"
)

// StoreCrawls is the Crawls of a program: package crawls' Store, and
// its registry (for the ids), and Forget, called after a delete, to drop what the process keeps open of
// the crawl at once (its dedup worker's filter, pipeline.Worker.ForgetCrawl)
// rather than when the record's deletion reaches its watch.
type StoreCrawls struct {
	Store    *crawls.Store
	Registry *frontier.Crawls // lists the ids
	Forget   func(id string)
}

var _ Crawls = StoreCrawls{}

// Create records the crawl with no settings of its own if it has no record.
func (c StoreCrawls) Create(ctx context.Context, id string) error {
	_, err := c.Store.Create(ctx, id, frontier.CrawlSettings{}, frontier.CrawlSettings{})
	return err
}

// Delete deletes the crawl (crawls.Store.Delete), dropping what the
// process keeps open of it before and after: before, so that an in-memory
// filter's save cannot write its snapshot file back once the delete has
// removed it (the URLFrontier reference's DumpURLsTest lost a URL put after
// a delete, one run in about 40); after, for a filter a put opened again
// meanwhile from the file not yet removed.
func (c StoreCrawls) Delete(ctx context.Context, id string) (bool, error) {
	if c.Forget != nil {
		c.Forget(id)
	}
	d, err := c.Store.Delete(ctx, id)
	if err == nil && c.Forget != nil {
		c.Forget(id)
	}
	return d.Record != nil, err
}

// IDs lists the recorded crawls.
func (c StoreCrawls) IDs(ctx context.Context) ([]string, error) {
	return c.Registry.IDs(ctx)
}
