package crawl

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/temoto/robotstxt"
	"golang.org/x/sync/singleflight"
)

// ErrRobotsDisallowed is returned when robots.txt forbids fetching a URL.
var ErrRobotsDisallowed = errors.New("crawl: disallowed by robots.txt")

// errRobotsUnavailable means robots.txt could not be read for a transient
// reason (network error, 5xx, 429): RFC 9309 §2.3.1.4 says to assume a
// complete disallow, so the page is retried later.
var errRobotsUnavailable = errors.New("crawl: robots.txt unavailable")

// maxRobotsSize is the part of a robots.txt a crawler must parse at least
// (RFC 9309 §2.5: 500 kibibytes).
const maxRobotsSize = 500 << 10

// robotsRules is what the cache keeps for one origin.
type robotsRules struct {
	data       *robotstxt.RobotsData // nil when unavailable
	crawlDelay time.Duration
	expires    time.Time
	err        error // errRobotsUnavailable (wrapped) when the file could not be read
}

// robotsCache fetches, parses and caches robots.txt per origin (scheme and
// authority), bounded in entries (least recently used evicted) and in age
// (RFC 9309 §2.4: no longer than 24 hours). Concurrent misses for one origin
// cause one fetch. It is safe for concurrent use.
type robotsCache struct {
	client   *http.Client
	agent    string // the product token matched against User-agent lines
	ua       string // the full User-Agent header
	ttl      time.Duration
	errTTL   time.Duration
	maxItems int

	group singleflight.Group
	mu    sync.Mutex
	lru   *list.List               // of *robotsEntry, front = most recent
	items map[string]*list.Element // origin → element
}

type robotsEntry struct {
	origin string
	rules  *robotsRules
}

func newRobotsCache(client *http.Client, ua string, ttl time.Duration, maxItems int) *robotsCache {
	agent, _, _ := strings.Cut(ua, "/")
	agent, _, _ = strings.Cut(agent, " ")
	return &robotsCache{
		client: client, agent: strings.ToLower(agent), ua: ua, ttl: ttl,
		errTTL: min(ttl, time.Minute), maxItems: maxItems,
		lru: list.New(), items: map[string]*list.Element{},
	}
}

// allowed reports whether u may be fetched and the Crawl-delay the site asks
// for. It returns ErrRobotsDisallowed, or an error wrapping
// errRobotsUnavailable when the file could not be read.
func (c *robotsCache) allowed(ctx context.Context, u *url.URL) (time.Duration, error) {
	rules, err := c.rules(ctx, u)
	if err != nil {
		return 0, err
	}
	if rules.err != nil {
		return 0, rules.err
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	if rules.data != nil && !rules.data.TestAgent(path, c.agent) {
		return rules.crawlDelay, ErrRobotsDisallowed
	}
	return rules.crawlDelay, nil
}

// sitemaps returns the Sitemap: lines of the robots.txt cached for u's
// origin (none when it is not cached or could not be read).
func (c *robotsCache) sitemaps(u *url.URL) []string {
	origin := originOf(u)
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[origin]
	if !ok {
		return nil
	}
	if r := el.Value.(*robotsEntry).rules; r.data != nil {
		return r.data.Sitemaps
	}
	return nil
}

// originOf is the cache's key of u: scheme and authority.
func originOf(u *url.URL) string {
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
}

func (c *robotsCache) rules(ctx context.Context, u *url.URL) (*robotsRules, error) {
	origin := originOf(u)
	now := time.Now()
	c.mu.Lock()
	if el, ok := c.items[origin]; ok {
		e := el.Value.(*robotsEntry)
		if now.Before(e.rules.expires) {
			c.lru.MoveToFront(el)
			c.mu.Unlock()
			return e.rules, nil
		}
	}
	c.mu.Unlock()

	ch := c.group.DoChan(origin, func() (any, error) {
		// The fetch belongs to no single caller: it is bounded by the
		// client's timeout, not by the first caller's context.
		rules := c.fetch(context.WithoutCancel(ctx), origin)
		c.store(origin, rules)
		return rules, nil
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		return r.Val.(*robotsRules), nil
	}
}

func (c *robotsCache) store(origin string, rules *robotsRules) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[origin]; ok {
		el.Value.(*robotsEntry).rules = rules
		c.lru.MoveToFront(el)
		return
	}
	c.items[origin] = c.lru.PushFront(&robotsEntry{origin: origin, rules: rules})
	for c.lru.Len() > c.maxItems {
		last := c.lru.Back()
		c.lru.Remove(last)
		delete(c.items, last.Value.(*robotsEntry).origin)
	}
}

// fetch reads origin/robots.txt and interprets it as RFC 9309 §2.3.1 says:
// 2xx parsed; 4xx (other than 429) a full allow; 5xx, 429 and network
// errors unavailable, retried after errTTL.
func (c *robotsCache) fetch(ctx context.Context, origin string) *robotsRules {
	now := time.Now()
	unavailable := func(err error) *robotsRules {
		return &robotsRules{expires: now.Add(c.errTTL), err: fmt.Errorf("%w: %w", errRobotsUnavailable, err)}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, origin+"/robots.txt", nil)
	if err != nil {
		// An origin that does not make a request can hold no robots.txt:
		// the page fetch will fail on its own.
		return &robotsRules{expires: now.Add(c.ttl)}
	}
	req.Header.Set("User-Agent", c.ua)
	resp, err := c.client.Do(req)
	if err != nil {
		if errors.Is(err, ErrForbiddenAddress) {
			// The page itself will be refused by the same check.
			return &robotsRules{expires: now.Add(c.ttl)}
		}
		return unavailable(err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxRobotsSize))
		if err != nil {
			return unavailable(err)
		}
		data, err := robotstxt.FromBytes(body)
		if err != nil {
			// Unparseable lines: RFC 9309 §2.2 asks to use what
			// parses; the library refuses the whole file, so allow.
			return &robotsRules{expires: now.Add(c.ttl)}
		}
		rules := &robotsRules{data: data, expires: now.Add(c.ttl)}
		if g := data.FindGroup(c.agent); g != nil {
			rules.crawlDelay = g.CrawlDelay
		}
		return rules
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return unavailable(fmt.Errorf("status %d", resp.StatusCode))
	case resp.StatusCode >= 400:
		return &robotsRules{expires: now.Add(c.ttl)}
	default:
		// 1xx or 3xx left after the client's own redirect following.
		return unavailable(fmt.Errorf("status %d", resp.StatusCode))
	}
}
