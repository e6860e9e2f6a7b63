package crawl

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
)

// redirectHops remembers, for the redirect targets crawlers published, how
// many redirects in a row led to them, so that a chain of redirects (a trap:
// /r/1 → /r/2 → …, each new to dedup) ends after Options.MaxRedirects.
// Redirect targets take no depth step (they are the same page under another
// address), so depth alone would not end such a chain.
//
// The counts live in the key-value bucket <PREFIX>_REDIRECTS under the
// frontier message id of the target's canonical URL (the form the frontier
// hands back), so they hold across crawlers (a chain whose partition moves
// to another crawler) and across runs; entries expire after a week. A local
// LRU keeps the recent ones. Safe for concurrent use.
type redirectHops struct {
	kv    jetstream.KeyValue // nil: local only
	max   int
	mu    sync.Mutex
	lru   *list.List // of *hopEntry, front = newest
	items map[string]*list.Element
}

type hopEntry struct {
	url  string
	hops int
}

func openRedirects(ctx context.Context, js jetstream.JetStream, topo frontier.Topology) (jetstream.KeyValue, error) {
	topo = topo.WithDefaults()
	kv, err := frontier.Provision(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      topo.RedirectsBucket(),
			Description: "Sieve: redirects in a row that led to each redirect target",
			History:     1,
			TTL:         7 * 24 * time.Hour,
			Storage:     topo.Storage,
			Replicas:    topo.Replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("crawl: redirects bucket: %w", err)
	}
	return kv, nil
}

func newRedirectHops(kv jetstream.KeyValue, max int) *redirectHops {
	return &redirectHops{kv: kv, max: max, lru: list.New(), items: map[string]*list.Element{}}
}

// hops returns how many redirects led to the canonical URL u (0 if none are
// known).
func (r *redirectHops) hops(ctx context.Context, u string) (int, error) {
	r.mu.Lock()
	if el, ok := r.items[u]; ok {
		n := el.Value.(*hopEntry).hops
		r.mu.Unlock()
		return n, nil
	}
	r.mu.Unlock()
	if r.kv == nil {
		return 0, nil
	}
	e, err := r.kv.Get(ctx, frontier.MsgID(u))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("crawl: redirect count of %s: %w", u, err)
	}
	n, err := strconv.Atoi(string(e.Value()))
	if err != nil {
		return 0, nil // not ours: start over
	}
	r.remember(u, n)
	return n, nil
}

// record notes that n redirects lead to the canonical URL u.
func (r *redirectHops) record(ctx context.Context, u string, n int) error {
	r.remember(u, n)
	if r.kv == nil {
		return nil
	}
	if _, err := r.kv.Put(ctx, frontier.MsgID(u), []byte(strconv.Itoa(n))); err != nil {
		return fmt.Errorf("crawl: record redirect count of %s: %w", u, err)
	}
	return nil
}

func (r *redirectHops) remember(u string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.items[u]; ok {
		el.Value.(*hopEntry).hops = n
		r.lru.MoveToFront(el)
		return
	}
	r.items[u] = r.lru.PushFront(&hopEntry{u, n})
	for r.lru.Len() > r.max {
		last := r.lru.Back()
		r.lru.Remove(last)
		delete(r.items, last.Value.(*hopEntry).url)
	}
}
