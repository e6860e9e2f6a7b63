package crawl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
)

// A crawl's seeds decide its scope (which hosts its links may lead to) and
// which forbidden-range hosts it may fetch (a seed on localhost allows
// localhost). They are kept in its record in the crawl registry
// (frontier.Crawls, the bucket <PREFIX>_CRAWLS), so every crawler applies the
// same scope whichever crawler or command seeded the crawl.

// ErrBadSeed is wrapped by the error Seed returns for a seed that is not an
// absolute http(s) URL.
var ErrBadSeed = errors.New("crawl: bad seed")

func openCrawls(ctx context.Context, js jetstream.JetStream, topo frontier.Topology) (*frontier.Crawls, error) {
	c, err := frontier.OpenCrawls(ctx, js, topo)
	if err != nil {
		return nil, fmt.Errorf("crawl: %w", err)
	}
	return c, nil
}

// CheckSeeds returns an error wrapping ErrBadSeed for the first seed that is
// not an absolute http(s) URL with a host.
func CheckSeeds(seeds []string) error {
	if len(seeds) == 0 {
		return fmt.Errorf("%w: no seed given", ErrBadSeed)
	}
	for _, s := range seeds {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: %q is not an absolute http(s) URL", ErrBadSeed, s)
		}
	}
	return nil
}

// Seed adds seeds to a crawl: it records them as the crawl's seeds (its
// scope), then publishes them to the discovered stream as one seed message,
// so they reach the frontier through dedup like every other URL (a seed
// already crawled is not crawled again). The streams are created if missing.
// A crawl Seed creates has no settings of its own (workers use their
// configured filter settings for it); SeedWith gives it some.
func Seed(ctx context.Context, js jetstream.JetStream, topo frontier.Topology, crawl string, seeds []string) error {
	_, err := seed(ctx, js, topo, crawl, seeds, nil)
	return err
}

// SeedWith seeds a crawl as Seed does, first creating it with settings
// given over def (frontier.Crawls.Create) if it has none yet; settings
// given for a crawl that has other ones are an error naming both values,
// and nothing is seeded. It returns the crawl's record.
func SeedWith(ctx context.Context, js jetstream.JetStream, topo frontier.Topology, crawl string, seeds []string, given, def frontier.CrawlSettings) (frontier.CrawlRecord, error) {
	return seed(ctx, js, topo, crawl, seeds, &[2]frontier.CrawlSettings{given, def})
}

func seed(ctx context.Context, js jetstream.JetStream, topo frontier.Topology, crawl string, seeds []string, settings *[2]frontier.CrawlSettings) (frontier.CrawlRecord, error) {
	var rec frontier.CrawlRecord
	if !frontier.ValidCrawl(crawl) {
		return rec, fmt.Errorf("crawl: crawl id %q: want 1-64 of [A-Za-z0-9_-]", crawl)
	}
	if err := CheckSeeds(seeds); err != nil {
		return rec, err
	}
	if err := topo.Ensure(ctx, js); err != nil {
		return rec, err
	}
	crawls, err := openCrawls(ctx, js, topo)
	if err != nil {
		return rec, err
	}
	if settings != nil {
		if _, err := crawls.Create(ctx, crawl, settings[0], settings[1]); err != nil {
			return rec, err
		}
	}
	if rec, err = addSeeds(ctx, crawls, crawl, seeds); err != nil {
		return rec, err
	}
	return rec, topo.PublishDiscovered(ctx, js, frontier.Discovered{Crawl: crawl, Kind: frontier.KindSeed, Links: seeds})
}

// addSeeds merges seeds into the crawl's record with compare-and-set.
func addSeeds(ctx context.Context, crawls *frontier.Crawls, crawl string, seeds []string) (frontier.CrawlRecord, error) {
	return updateCrawl(ctx, crawls, crawl, func(rec *frontier.CrawlRecord) bool { return merge(&rec.Seeds, seeds) })
}

// addMoved records where a seed redirected to.
func addMoved(ctx context.Context, crawls *frontier.Crawls, crawl string, targets []string) error {
	_, err := updateCrawl(ctx, crawls, crawl, func(rec *frontier.CrawlRecord) bool { return merge(&rec.Moved, targets) })
	return err
}

func merge(list *[]string, add []string) bool {
	changed := false
	for _, s := range add {
		if !slices.Contains(*list, s) {
			*list = append(*list, s)
			changed = true
		}
	}
	return changed
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
	c.mu.Lock()
	delete(c.crawls, crawl)
	c.mu.Unlock()
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
	set  seedSet
	read time.Time
}

func newSeedCache(crawls *frontier.Crawls, refresh time.Duration, onSeeds func([]string)) *seedCache {
	return &seedCache{reg: crawls, refresh: refresh, onSeeds: onSeeds, crawls: map[string]*cachedSeeds{}}
}

// get returns the crawl's seeds; stale asks for a re-read if the cached copy
// is older than the refresh interval.
func (c *seedCache) get(ctx context.Context, crawl string, stale bool) (seedSet, error) {
	c.mu.Lock()
	cs := c.crawls[crawl]
	c.mu.Unlock()
	if cs != nil && (!stale || time.Since(cs.read) < c.refresh) {
		return cs.set, nil
	}
	rec, err := c.reg.Get(ctx, crawl)
	if err != nil && !errors.Is(err, frontier.ErrNoCrawl) {
		// A crawl nobody recorded has no seeds: nothing is in scope but
		// what Scope.Allow names.
		return seedSet{}, fmt.Errorf("crawl: %w", err)
	}
	if c.onSeeds != nil {
		c.onSeeds(rec.Seeds)
	}
	cs = &cachedSeeds{set: newSeedSet(append(rec.Seeds, rec.Moved...)), read: time.Now()}
	cs.set.mode = ScopeMode(rec.Settings.Scope)
	c.mu.Lock()
	c.crawls[crawl] = cs
	c.mu.Unlock()
	return cs.set, nil
}
