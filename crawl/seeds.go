package crawl

import (
	"context"
	"encoding/json"
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
// localhost). They are kept in the key-value bucket <PREFIX>_CRAWLS, under the
// crawl's id, as {"seeds":["https://…",…]}, so every crawler applies the same
// scope whichever crawler or command seeded the crawl.

// ErrBadSeed is wrapped by the error Seed returns for a seed that is not an
// absolute http(s) URL.
var ErrBadSeed = errors.New("crawl: bad seed")

type crawlRecord struct {
	// Seeds are the URLs given as seeds: they set the scope, and a seed on
	// a loopback or private host allows that host.
	Seeds []string `json:"seeds"`
	// Moved are the targets seeds redirected to (http://example.com/ →
	// https://www.example.com/): they widen the scope like seeds, but
	// allow no forbidden address, since a site chose them, not a person.
	Moved []string `json:"moved,omitempty"`
}

func openCrawls(ctx context.Context, js jetstream.JetStream, topo frontier.Topology) (jetstream.KeyValue, error) {
	topo = topo.WithDefaults()
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      topo.CrawlsBucket(),
		Description: "Sieve: each crawl's seeds, which decide its scope",
		History:     1,
		Storage:     topo.Storage,
		Replicas:    topo.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("crawl: crawls bucket: %w", err)
	}
	return kv, nil
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
func Seed(ctx context.Context, js jetstream.JetStream, topo frontier.Topology, crawl string, seeds []string) error {
	if !frontier.ValidCrawl(crawl) {
		return fmt.Errorf("crawl: crawl id %q: want 1-64 of [A-Za-z0-9_-]", crawl)
	}
	if err := CheckSeeds(seeds); err != nil {
		return err
	}
	if err := topo.Ensure(ctx, js); err != nil {
		return err
	}
	kv, err := openCrawls(ctx, js, topo)
	if err != nil {
		return err
	}
	if err := addSeeds(ctx, kv, crawl, seeds); err != nil {
		return err
	}
	return topo.PublishDiscovered(ctx, js, frontier.Discovered{Crawl: crawl, Kind: frontier.KindSeed, Links: seeds})
}

// addSeeds merges seeds into the crawl's record with compare-and-set.
func addSeeds(ctx context.Context, kv jetstream.KeyValue, crawl string, seeds []string) error {
	return updateCrawl(ctx, kv, crawl, func(rec *crawlRecord) bool { return merge(&rec.Seeds, seeds) })
}

// addMoved records where a seed redirected to.
func addMoved(ctx context.Context, kv jetstream.KeyValue, crawl string, targets []string) error {
	return updateCrawl(ctx, kv, crawl, func(rec *crawlRecord) bool { return merge(&rec.Moved, targets) })
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

// updateCrawl applies change to the crawl's record with compare-and-set,
// retrying when another process changed it meanwhile.
func updateCrawl(ctx context.Context, kv jetstream.KeyValue, crawl string, change func(*crawlRecord) bool) error {
	for {
		var rec crawlRecord
		var rev uint64
		e, err := kv.Get(ctx, crawl)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		case err != nil:
			return fmt.Errorf("crawl: read crawl %s: %w", crawl, err)
		default:
			rev = e.Revision()
			if err := json.Unmarshal(e.Value(), &rec); err != nil {
				return fmt.Errorf("crawl: crawl %s record: %w", crawl, err)
			}
		}
		if !change(&rec) {
			return nil
		}
		data, _ := json.Marshal(rec)
		if rev == 0 {
			_, err = kv.Create(ctx, crawl, data)
		} else {
			_, err = kv.Update(ctx, crawl, data, rev)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongSequence(err) {
			return fmt.Errorf("crawl: record crawl %s: %w", crawl, err)
		}
	}
}

// moved records that a seed of crawl redirected to target, and forgets the
// cached seeds so the next look-up sees it.
func (c *seedCache) moved(ctx context.Context, crawl, target string) error {
	if err := addMoved(ctx, c.kv, crawl, []string{target}); err != nil {
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
	kv      jetstream.KeyValue
	refresh time.Duration
	onSeeds func(seeds []string) // called with every seed list read

	mu     sync.Mutex
	crawls map[string]*cachedSeeds
}

type cachedSeeds struct {
	set  seedSet
	read time.Time
}

func newSeedCache(kv jetstream.KeyValue, refresh time.Duration, onSeeds func([]string)) *seedCache {
	return &seedCache{kv: kv, refresh: refresh, onSeeds: onSeeds, crawls: map[string]*cachedSeeds{}}
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
	e, err := c.kv.Get(ctx, crawl)
	var rec crawlRecord
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		// A crawl nobody recorded: no seeds, nothing in scope but what
		// Scope.Allow names.
	case err != nil:
		return seedSet{}, fmt.Errorf("crawl: read crawl %s: %w", crawl, err)
	default:
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			return seedSet{}, fmt.Errorf("crawl: crawl %s record: %w", crawl, err)
		}
	}
	if c.onSeeds != nil {
		c.onSeeds(rec.Seeds)
	}
	cs = &cachedSeeds{set: newSeedSet(append(rec.Seeds, rec.Moved...)), read: time.Now()}
	c.mu.Lock()
	c.crawls[crawl] = cs
	c.mu.Unlock()
	return cs.set, nil
}
