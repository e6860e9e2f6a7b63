package urlfrontier

import (
	"container/heap"
	"slices"
	"strings"
	"sync"
)

// index is a server's view of the queues bucket (queues and their URLs),
// kept by watching it (and by applying its own writes at once): the queues of
// each crawl, each with its URLs in order of their due time. It answers
// the reads (stats, listings, counts) and chooses what GetURLs offers; the
// buckets stay the truth, and every hand-out is a compare-and-set on them,
// so two servers with the same view never hand out one URL twice.
//
// Revisions are the bucket's stream sequence, so they grow over all keys:
// a value older than the one held is ignored, and a server's own write is
// applied only while the watch has not delivered it yet (its revision is
// above the watch's), so a stale write never brings back a deleted URL.
// It is safe for concurrent use.
type index struct {
	mu     sync.Mutex
	crawls map[string]*crawlIndex
	items  map[string]*item // by key in the bucket
	// seen is the last revision the watch delivered.
	seen uint64
}

type crawlIndex struct {
	id     string
	queues map[string]*queueIndex // by queue state key (crawl.qhash)
	// defDelay is the crawl's default delay in ms (hasDef false: the
	// server's).
	defDelay int64
	hasDef   bool
	defRev   uint64
}

type queueIndex struct {
	crawl    *crawlIndex
	stateKey string
	key      string
	state    *QueueState // nil: none stored
	stateRev uint64
	// due holds the queue's URLs (each also in index.items by key),
	// earliest due first.
	due itemHeap
}

type item struct {
	key string // in the bucket
	e   Entry  // by value: one allocation per URL
	rev uint64
	q   *queueIndex
	pos int // in q.due
}

func newIndex() *index {
	return &index{crawls: map[string]*crawlIndex{}, items: map[string]*item{}}
}

func (x *index) crawl(id string) *crawlIndex {
	c := x.crawls[id]
	if c == nil {
		c = &crawlIndex{id: id, queues: map[string]*queueIndex{}}
		x.crawls[id] = c
	}
	return c
}

func (c *crawlIndex) queue(stateKey, key string) *queueIndex {
	q := c.queues[stateKey]
	if q == nil {
		q = &queueIndex{crawl: c, stateKey: stateKey, key: key}
		c.queues[stateKey] = q
	}
	return q
}

// intern returns e with its crawl and queue key strings the queue's own:
// each decoded value has strings of its own, kept once per queue instead.
func (q *queueIndex) intern(e Entry) Entry {
	if e.Crawl == q.crawl.id {
		e.Crawl = q.crawl.id
	}
	if e.Key == q.key {
		e.Key = q.key
	}
	return e
}

// stateKeyOf returns the queue state key of a URL key (crawl.qhash.uhash).
func stateKeyOf(urlKey string) string {
	if i := strings.LastIndexByte(urlKey, '.'); i > 0 {
		return urlKey[:i]
	}
	return urlKey
}

// watched returns the last revision a watch delivered: the index holds
// every change of the bucket up to it.
func (x *index) watched() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.seen
}

// fresh reports whether a change at rev is to be applied, given the last
// revision its bucket's watch delivered (seen): a watched one always is
// (and moves seen), a server's own only while the watch is behind it.
func fresh(seen *uint64, rev uint64, own bool) bool {
	if own {
		return rev > *seen
	}
	*seen = max(*seen, rev)
	return true
}

// putEntry stores a URL's value at rev; own says it is this server's write.
func (x *index) putEntry(key string, rev uint64, e *Entry, own bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !fresh(&x.seen, rev, own) {
		return
	}
	if it := x.items[key]; it != nil {
		if it.rev >= rev {
			return
		}
		it.e, it.rev = it.q.intern(*e), rev
		heap.Fix(&it.q.due, it.pos)
		return
	}
	q := x.crawl(e.Crawl).queue(stateKeyOf(key), e.Key)
	it := &item{key: key, e: q.intern(*e), rev: rev, q: q}
	x.items[key] = it
	heap.Push(&q.due, it)
}

// has reports whether the index holds key at rev or later: the watch need
// not decode a value the server applied already.
func (x *index) has(key string, rev uint64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	it := x.items[key]
	if it != nil && it.rev >= rev {
		x.seen = max(x.seen, rev)
		return true
	}
	return false
}

// deleteEntry removes a URL at rev.
//
// A server's own removal applies even when the watch is past rev: it
// removes nothing newer (a value stored after it has a higher revision),
// and waiting for the watch would leave the URL ready in the index after
// the queue's next state, which may come from the bucket first
// (putQueueFrom), so it would be handed out again.
func (x *index) deleteEntry(key string, rev uint64, own bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !own {
		x.seen = max(x.seen, rev)
	}
	it := x.items[key]
	if it == nil || it.rev >= rev {
		return
	}
	x.dropLocked(it)
}

func (x *index) dropLocked(it *item) {
	delete(x.items, it.key)
	q := it.q
	heap.Remove(&q.due, it.pos)
	x.pruneLocked(q)
}

// pruneLocked forgets a queue with neither URLs nor stored state.
func (x *index) pruneLocked(q *queueIndex) {
	if len(q.due) == 0 && q.state == nil {
		delete(q.crawl.queues, q.stateKey)
		if len(q.crawl.queues) == 0 && !q.crawl.hasDef {
			delete(x.crawls, q.crawl.id)
		}
	}
}

// putQueue stores a queue's state at rev.
func (x *index) putQueue(stateKey string, rev uint64, s *QueueState, own bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !fresh(&x.seen, rev, own) {
		return
	}
	q := x.crawl(s.Crawl).queue(stateKey, s.Key)
	if q.stateRev >= rev {
		return
	}
	q.state, q.stateRev = s, rev
}

// putQueueFrom stores a queue's state at rev written by this server over
// the state at base, which it read from the bucket, only if the index held
// that state: an index behind the bucket must not take a queue's new state
// before the URL changes that came before it (another server's completion
// of a URL, say), which its watch delivers first. Else the watch brings
// both, in order.
func (x *index) putQueueFrom(stateKey string, base, rev uint64, s *QueueState) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !fresh(&x.seen, rev, true) {
		return
	}
	q := x.crawl(s.Crawl).queue(stateKey, s.Key)
	if q.stateRev != base && (base != 0 || q.state != nil) {
		x.pruneLocked(q)
		return
	}
	if q.stateRev >= rev {
		return
	}
	q.state, q.stateRev = s, rev
}

// putDefault stores a crawl's default delay at rev.
func (x *index) putDefault(crawl string, rev uint64, delay int64, own bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !fresh(&x.seen, rev, own) {
		return
	}
	c := x.crawl(crawl)
	if c.defRev >= rev {
		return
	}
	c.defDelay, c.hasDef, c.defRev = delay, true, rev
}

// deleteQueueKey removes a queue's state (or a crawl's default) at rev;
// own says it is this server's write.
func (x *index) deleteQueueKey(stateKey string, rev uint64, own bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !fresh(&x.seen, rev, own) {
		return
	}
	crawl, rest, _ := strings.Cut(stateKey, ".")
	c := x.crawls[crawl]
	if c == nil {
		return
	}
	if rest == "_default" {
		if c.defRev < rev {
			c.hasDef, c.defDelay, c.defRev = false, 0, rev
		}
		if len(c.queues) == 0 {
			delete(x.crawls, crawl)
		}
		return
	}
	q := c.queues[stateKey]
	if q == nil || q.stateRev >= rev {
		return
	}
	q.state, q.stateRev = nil, rev
	x.pruneLocked(q)
}

// queueView is a copy of what a queue holds at one time.
type queueView struct {
	crawl, key, stateKey string
	state                QueueState // zero when none is stored
	hasState             bool
	stateRev             uint64
	defDelay             int64
	hasDef               bool
	inProcess            int
	queued               int // ready or waiting, not in process
	// ready are the URLs due now, earliest first (at most the limit
	// asked for).
	ready []readyItem
}

type readyItem struct {
	key string
	e   Entry
	rev uint64
	// lease is when the URL's running lease ends (0: not in process).
	lease int64
}

// blocked reports whether the queue is blocked at now.
func (v *queueView) blocked(now int64) bool { return v.state.Blocked > now }

// active reports whether the queue holds URLs not completed and is not
// blocked (ListQueues, GetStats' active_queues).
func (v *queueView) active(now int64) bool { return v.inProcess+v.queued > 0 && !v.blocked(now) }

// view copies q at now with at most maxReady ready URLs (-1: all); items
// are the index's, by key.
func (q *queueIndex) view(items map[string]*item, now int64, maxReady int) queueView {
	v := queueView{crawl: q.crawl.id, key: q.key, stateKey: q.stateKey, stateRev: q.stateRev,
		defDelay: q.crawl.defDelay, hasDef: q.crawl.hasDef}
	if q.state != nil {
		v.state, v.hasState = *q.state, true
	}
	if q.state != nil {
		for h, until := range q.state.Leases {
			if until > now && items[q.stateKey+"."+h] != nil {
				v.inProcess++
			}
		}
	}
	v.queued = len(q.due) - v.inProcess
	if maxReady != 0 {
		// The heap's order is by due time: pop the due ones, then put
		// them back; those leased are not ready.
		var popped []*item
		for q.due.Len() > 0 && (maxReady < 0 || len(v.ready) < maxReady) {
			it := q.due[0]
			if !it.e.ready(now) {
				break
			}
			popped = append(popped, heap.Pop(&q.due).(*item))
			if q.state != nil {
				if _, ok := q.state.leased(it.key, now); ok {
					continue
				}
			}
			v.ready = append(v.ready, readyItem{key: it.key, e: it.e, rev: it.rev})
		}
		for _, it := range popped {
			heap.Push(&q.due, it)
		}
	}
	return v
}

// queues returns views of the crawls' queues (every crawl for nil), with
// at most maxReady ready URLs each, in no particular order; key, when not
// empty, selects one queue.
func (x *index) queues(now int64, crawls []string, key string, maxReady int) []queueView {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []queueView
	each := func(c *crawlIndex) {
		for _, q := range c.queues {
			if key != "" && q.key != key {
				continue
			}
			out = append(out, q.view(x.items, now, maxReady))
		}
	}
	if crawls == nil {
		for _, c := range x.crawls {
			each(c)
		}
	} else {
		for _, id := range crawls {
			if c := x.crawls[id]; c != nil {
				each(c)
			}
		}
	}
	return out
}

// ready returns at most n of a queue's URLs ready at now, earliest first.
func (x *index) ready(stateKey string, now int64, n int) []readyItem {
	x.mu.Lock()
	defer x.mu.Unlock()
	crawl, _, _ := strings.Cut(stateKey, ".")
	c := x.crawls[crawl]
	if c == nil || c.queues[stateKey] == nil {
		return nil
	}
	return c.queues[stateKey].view(x.items, now, n).ready
}

// crawlIDs returns the crawls that have URLs or queue state, sorted.
func (x *index) crawlIDs() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	ids := make([]string, 0, len(x.crawls))
	for id := range x.crawls {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// entries returns copies of a crawl's URLs (one queue's for key != ""),
// sorted by queue key and then URL, with their revisions and leases at
// now.
func (x *index) entries(crawl, key string, now int64) []readyItem {
	x.mu.Lock()
	defer x.mu.Unlock()
	c := x.crawls[crawl]
	if c == nil {
		return nil
	}
	var out []readyItem
	for _, q := range c.queues {
		if key != "" && q.key != key {
			continue
		}
		for _, it := range q.due {
			r := readyItem{key: it.key, e: it.e, rev: it.rev}
			if q.state != nil {
				if until, ok := q.state.leased(it.key, now); ok {
					r.lease = until
				}
			}
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b readyItem) int {
		if c := strings.Compare(a.e.Key, b.e.Key); c != 0 {
			return c
		}
		return strings.Compare(a.e.URL, b.e.URL)
	})
	return out
}

// entry returns a copy of one URL's value.
func (x *index) entry(key string) (readyItem, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	it := x.items[key]
	if it == nil {
		return readyItem{}, false
	}
	return readyItem{key: key, e: it.e, rev: it.rev}, true
}

// itemHeap orders a queue's URLs by due time, then by URL.
type itemHeap []*item

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	if h[i].e.Due != h[j].e.Due {
		return h[i].e.Due < h[j].e.Due
	}
	return h[i].e.Created < h[j].e.Created || (h[i].e.Created == h[j].e.Created && h[i].e.URL < h[j].e.URL)
}
func (h itemHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}
func (h *itemHeap) Push(x any) {
	it := x.(*item)
	it.pos = len(*h)
	*h = append(*h, it)
}
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	it.pos = -1
	return it
}
