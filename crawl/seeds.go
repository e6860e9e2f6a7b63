package crawl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
)

// A crawl's seeds decide its scope (which hosts its links may lead to) and
// which forbidden-range hosts it may fetch (a seed on localhost allows
// localhost). They are kept in its record in the crawl registry
// (frontier.Crawls, the bucket <PREFIX>_CRAWLS), where package crawls puts
// them, so every crawler applies the same scope whichever crawler or command
// seeded the crawl. A crawler only reads them, and records where a seed
// redirected to.

func openCrawls(ctx context.Context, js jetstream.JetStream, topo frontier.Topology) (*frontier.Crawls, error) {
	c, err := frontier.OpenCrawls(ctx, js, topo)
	if err != nil {
		return nil, fmt.Errorf("crawl: %w", err)
	}
	return c, nil
}

// addMoved records where a seed redirected to.
func addMoved(ctx context.Context, crawls *frontier.Crawls, crawl string, targets []string) error {
	_, err := updateCrawl(ctx, crawls, crawl, func(rec *frontier.CrawlRecord) bool { return rec.AddMoved(targets) })
	return err
}

// updateCrawl applies change to the crawl's record with compare-and-set.
func updateCrawl(ctx context.Context, crawls *frontier.Crawls, crawl string, change func(*frontier.CrawlRecord) bool) (frontier.CrawlRecord, error) {
	rec, err := crawls.Update(ctx, crawl, func(rec *frontier.CrawlRecord) (bool, error) { return change(rec), nil })
	if err != nil {
		return rec, fmt.Errorf("crawl: %w", err)
	}
	return rec, nil
}

// moved records that a seed of crawl redirected to target, and forgets the
// cached seeds so the next look-up sees it.
func (c *seedCache) moved(ctx context.Context, crawl, target string) error {
	if err := addMoved(ctx, c.reg, crawl, []string{target}); err != nil {
		return err
	}
	c.forget(crawl)
	return nil
}

// addArchive records that the crawler writes crawl's WARC files to dir.
func (c *seedCache) addArchive(ctx context.Context, crawl, dir string) error {
	if _, err := updateCrawl(ctx, c.reg, crawl, func(rec *frontier.CrawlRecord) bool { return rec.AddArchive(dir) }); err != nil {
		return err
	}
	c.forget(crawl)
	return nil
}

// seedCache keeps the crawls' seed sets a crawler has looked up, reading the
// bucket again when a URL seems out of scope (its seeds may have grown), at
// most once per refresh interval per crawl. It is safe for concurrent use.
type seedCache struct {
	reg     *frontier.Crawls
	refresh time.Duration
	onSeeds func(seeds []string) // called with every seed list read

	mu     sync.Mutex
	crawls map[string]*cachedSeeds
}

type cachedSeeds struct {
	set     seedSet
	archive []string // the crawl's WARC directories
	read    time.Time
}

func newSeedCache(crawls *frontier.Crawls, refresh time.Duration, onSeeds func([]string)) *seedCache {
	return &seedCache{reg: crawls, refresh: refresh, onSeeds: onSeeds, crawls: map[string]*cachedSeeds{}}
}

// get returns the crawl's seeds; stale asks for a re-read if the cached copy
// is older than the refresh interval.
func (c *seedCache) get(ctx context.Context, crawl string, stale bool) (seedSet, error) {
	cs, err := c.record(ctx, crawl, stale)
	if err != nil {
		return seedSet{}, err
	}
	return cs.set, nil
}

// archive returns the crawl's WARC directories, read again if the cached
// copy is older than the refresh interval.
func (c *seedCache) archive(ctx context.Context, crawl string) ([]string, error) {
	cs, err := c.record(ctx, crawl, true)
	if err != nil {
		return nil, err
	}
	return cs.archive, nil
}

// forget drops the cached record of crawl: the next look-up reads it.
func (c *seedCache) forget(crawl string) {
	c.mu.Lock()
	delete(c.crawls, crawl)
	c.mu.Unlock()
}

// record returns what the cache holds of the crawl's record; stale asks
// for a re-read if it is older than the refresh interval.
func (c *seedCache) record(ctx context.Context, crawl string, stale bool) (*cachedSeeds, error) {
	c.mu.Lock()
	cs := c.crawls[crawl]
	c.mu.Unlock()
	if cs != nil && (!stale || time.Since(cs.read) < c.refresh) {
		return cs, nil
	}
	rec, err := c.reg.Get(ctx, crawl)
	if err != nil && !errors.Is(err, frontier.ErrNoCrawl) {
		// A crawl nobody recorded has no seeds: nothing is in scope but
		// what Scope.Allow names.
		return nil, fmt.Errorf("crawl: %w", err)
	}
	if c.onSeeds != nil {
		c.onSeeds(rec.Seeds)
	}
	cs = &cachedSeeds{set: newSeedSet(append(rec.Seeds, rec.Moved...)), archive: rec.Archive, read: time.Now()}
	cs.set.mode = ScopeMode(rec.Settings.Scope)
	c.mu.Lock()
	c.crawls[crawl] = cs
	c.mu.Unlock()
	return cs, nil
}
