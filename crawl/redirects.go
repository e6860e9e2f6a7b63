package crawl

import (
	"container/list"
	"sync"
)

// redirectHops remembers, for the redirect targets a crawler published, how
// many redirects led to them, so that a chain of redirects (a trap: /r/1 →
// /r/2 → …, each new to dedup) ends after Options.MaxRedirects. Redirect
// targets do not take a depth step (they are the same page under another
// address), so depth alone would not end such a chain.
//
// Targets are kept by canonical URL, the form the frontier hands back. A
// target on the same host comes back to the same crawler (the frontier is
// partitioned by host), so same-host chains are always counted; a chain that
// changes host may restart its count on another crawler, and is bounded by
// the crawl's scope. Bounded in entries (least recently used forgotten); safe
// for concurrent use.
type redirectHops struct {
	max   int
	mu    sync.Mutex
	lru   *list.List // of *hopEntry, front = newest
	items map[string]*list.Element
}

type hopEntry struct {
	url  string
	hops int
}

func newRedirectHops(max int) *redirectHops {
	return &redirectHops{max: max, lru: list.New(), items: map[string]*list.Element{}}
}

// hops returns how many redirects led to the canonical URL u (0 if none are
// known).
func (r *redirectHops) hops(u string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.items[u]; ok {
		return el.Value.(*hopEntry).hops
	}
	return 0
}

// record notes that n redirects lead to the canonical URL u.
func (r *redirectHops) record(u string, n int) {
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
