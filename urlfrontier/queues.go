package urlfrontier

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sievecrawl/sieve/urlstore"
)

// queues is the server's side of the queues' store (package urlstore:
// a Pebble index on local disk, fed by the log in the stores' stream,
// shared by every server): every URL's record, every queue's state and
// the ready queues' index on disk, and in RAM only what a server holds
// per crawl (its default delay, which partitions hold its queues), kept
// from every applied change by urlstore's OnApply, so the same in every
// server. RAM grows with crawls, not queues or URLs.
type queues struct {
	st *urlstore.Store

	mu     sync.Mutex
	crawls map[string]*crawlSum
	// stale takes the queues whose states a server of format 2 wrote
	// (onApply), to be indexed again (Server.reindex).
	stale chan [2]string

	// writers take each partition's updates (update, write).
	writers [Partitions]chan *pending
	closed  chan struct{}
	wg      sync.WaitGroup
}

// crawlSum is what a server holds in RAM of a crawl.
type crawlSum struct {
	parts    uint32 // the partitions holding its queues (their C keys)
	delay    int64  // default delay, ms
	hasDelay bool
}

func newQueues() *queues {
	return &queues{crawls: map[string]*crawlSum{}, stale: make(chan [2]string, 4096)}
}

func (q *queues) crawl(id string) *crawlSum {
	c := q.crawls[id]
	if c == nil {
		c = &crawlSum{}
		q.crawls[id] = c
	}
	return c
}

// load reads every crawl's marks and default delay from the store (a key
// or two per crawl and partition, not per queue). Holding the lock while
// reading, any change applied meanwhile reaches onApply after it: nothing
// is lost.
func (q *queues) load() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, kind := range []byte{kindCrawl, kindDefault} {
		err := q.st.Scan([]byte{kind}, func(k, v []byte) bool {
			q.setLocked(k, v)
			return true
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// onApply keeps the summaries from the changes of an applied entry.
func (q *queues) onApply(_ int, changes []urlstore.Change) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, c := range changes {
		if len(c.Key) > 0 && c.Key[0] == kindQueue && len(c.Value) > 0 && c.Value[0] == formatV2 {
			if p, hasQueue, ok := parseKey(c.Key); ok && hasQueue {
				select {
				case q.stale <- [2]string{p.crawl, p.queue}:
				default: // indexed at the queue's next change
				}
			}
		}
		if len(c.Key) == 0 || (c.Key[0] != kindCrawl && c.Key[0] != kindDefault) {
			continue
		}
		switch {
		case c.Prefix || c.Deleted:
			q.deleteLocked(c.Key)
		default:
			q.setLocked(c.Key, c.Value)
		}
	}
}

func (q *queues) setLocked(k, v []byte) {
	p, _, ok := parseKey(k)
	if !ok {
		return
	}
	switch p.kind {
	case kindDefault:
		d, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return
		}
		c := q.crawl(p.crawl)
		c.delay, c.hasDelay = d, true
	case kindCrawl:
		if len(k) == len(crawlPrefix(kindCrawl, p.crawl, p.part)) {
			q.crawl(p.crawl).parts |= 1 << p.part
		}
	}
}

// deleteLocked forgets what a deleted key or prefix (a crawl's in one
// partition, or all of a crawl's) held.
func (q *queues) deleteLocked(k []byte) {
	p, _, ok := parseKey(k)
	if !ok {
		return
	}
	c := q.crawls[p.crawl]
	if c == nil {
		return
	}
	switch {
	case p.kind == kindDefault:
		c.delay, c.hasDelay = 0, false
	case len(k) == len(crawlPrefix(kindCrawl, p.crawl, p.part)):
		c.parts &^= 1 << p.part
	case p.kind == kindCrawl:
		c.parts = 0
	}
	if c.parts == 0 && !c.hasDelay {
		delete(q.crawls, p.crawl)
	}
}

// crawlDelay is a crawl's default delay, if it has one.
func (q *queues) crawlDelay(crawl string) (int64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if c := q.crawls[crawl]; c != nil {
		return c.delay, c.hasDelay
	}
	return 0, false
}

// crawlParts is the partitions holding a crawl's queues.
func (q *queues) crawlParts(crawl string) uint32 {
	q.mu.Lock()
	defer q.mu.Unlock()
	if c := q.crawls[crawl]; c != nil {
		return c.parts
	}
	return 0
}

// queueView is a queue's state at one time, as a call reads it.
type queueView struct {
	crawl, key string
	state      QueueState
	delay      int64 // the crawl's default, when hasDelay
	hasDelay   bool
	inProcess  int
	queued     int // waiting or scheduled, not in process
}

// view is a queue's view at now from its state.
func (q *queues) view(st *QueueState, now int64) *queueView {
	v := &queueView{crawl: st.Crawl, key: st.Key, state: *st}
	v.delay, v.hasDelay = q.crawlDelay(st.Crawl)
	v.inProcess = st.inProcess(now)
	v.queued = max(int(st.Queued)-v.inProcess, 0)
	return v
}

// blocked reports whether the queue is blocked at now.
func (v *queueView) blocked(now int64) bool { return v.state.Blocked > now }

// active reports whether the queue holds URLs not completed and is not
// blocked (ListQueues, GetStats' active_queues).
func (v *queueView) active(now int64) bool { return v.inProcess+v.queued > 0 && !v.blocked(now) }

// states calls fn with the stored states of a crawl's queues (of one
// queue when key is not empty), in key order (partition, queue), until fn
// returns false: a scan of the index, one key per queue.
func (q *queues) states(crawl, key string, fn func(st *QueueState) bool) error {
	if key != "" {
		st, err := readQueue(q.st, crawl, key)
		if err != nil || !st.stored() {
			return err
		}
		fn(st)
		return nil
	}
	return q.st.Scan(crawlPrefix(kindQueue, crawl, -1), func(_, v []byte) bool {
		st, err := decodeQueue(v)
		if err != nil {
			return true // not ours
		}
		return fn(st)
	})
}

// crawlIDs returns the crawls with queues or a default delay, sorted.
func (q *queues) crawlIDs() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	ids := make([]string, 0, len(q.crawls))
	for id := range q.crawls {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (q *queues) hasCrawl(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.crawls[id] != nil
}

// readyItem is a URL ready to be handed out (or listed).
type readyItem struct {
	e   Entry
	due int64
}

// ready reads up to n of a queue's URLs ready at now, earliest first,
// from r (the store, or an Update's reader): a URL handed out is not,
// its ready key being at the end of its lease. When none is ready, next
// is the earliest time one will be (0: the queue holds none).
func ready(r urlstore.Reader, crawl, key string, now int64, n int) (out []readyItem, next int64, err error) {
	prefix := queuePrefix(kindReady, crawl, key)
	err = r.Scan(prefix, func(k, v []byte) bool {
		rest := k[len(prefix):]
		if len(rest) < 8 {
			return true
		}
		due, u := int64(binary.BigEndian.Uint64(rest)), string(rest[8:])
		if due > now {
			next = due
			return false
		}
		it := readyItem{e: Entry{Crawl: crawl, Key: key, URL: u}, due: due}
		if decodeEntry(v, &it.e) != nil || it.e.at() != due {
			return true
		}
		out = append(out, it)
		return len(out) < n
	})
	if len(out) > 0 {
		next = 0
	}
	return out, next, err
}

// readEntry reads a URL's record from r: its U key, or for a fresh URL
// (putEntry) its R key at due 0.
func readEntry(r urlstore.Reader, crawl, key, u string) (*Entry, error) {
	v, ok, err := r.Get(entryKey(crawl, key, u))
	if err == nil && !ok {
		v, ok, err = r.Get(readyKey(crawl, key, 0, u))
		if ok && !indexOnlyValue(v) {
			ok = false // a copy whose U key is gone: not a record
		}
	}
	if err != nil || !ok {
		return nil, err
	}
	e := &Entry{Crawl: crawl, Key: key, URL: u}
	if err := decodeEntry(v, e); err != nil {
		return nil, err
	}
	return e, nil
}

// readQueue reads a queue's state from r (a new one for a queue without).
func readQueue(r urlstore.Reader, crawl, key string) (*QueueState, error) {
	v, ok, err := r.Get(queueKey(crawl, key))
	if err != nil {
		return nil, err
	}
	if ok {
		if q, err := decodeQueue(v); err == nil {
			return q, nil
		}
	}
	return &QueueState{Crawl: crawl, Key: key}, nil
}

// entries calls fn with a crawl's URL records (one queue's for key != ""),
// until fn returns false: those under U keys in key order (partition,
// queue, URL), then the fresh URLs' under R keys alone, in the same order.
func (q *queues) entries(crawl, key string, fn func(e *Entry) bool) error {
	more := true
	for _, kind := range []byte{kindURL, kindReady} {
		prefix := crawlPrefix(kind, crawl, -1)
		if key != "" {
			prefix = queuePrefix(kind, crawl, key)
		}
		err := q.st.Scan(prefix, func(k, v []byte) bool {
			if kind == kindReady && !indexOnlyValue(v) {
				return true // a copy of a U key's record, listed with it
			}
			e, ok := scannedEntry(crawl, k, v)
			if !ok {
				return true
			}
			more = fn(e)
			return more
		})
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// scannedEntry is the record of a U key, or of an R key (indexOnly says
// whether it is the record or a copy); ok is false for anything else.
func scannedEntry(crawl string, k, v []byte) (*Entry, bool) {
	p, hasQueue, ok := parseKey(k)
	if !ok || !hasQueue {
		return nil, false
	}
	e := &Entry{Crawl: crawl, Key: p.queue}
	switch p.kind {
	case kindURL:
		e.URL = string(p.rest)
	case kindReady:
		if len(p.rest) < 8 {
			return nil, false
		}
		e.URL = string(p.rest[8:])
	default:
		return nil, false
	}
	if decodeEntry(v, e) != nil {
		return nil, false
	}
	return e, true
}

// update is a read-modify-write of one partition (urlstore.Update) that
// keeps the queues' states it reads in hand and writes those it changed
// (set) once at the end.
type updateTx struct {
	q      *queues
	r      urlstore.Reader
	b      *urlstore.Batch
	states map[string]*QueueState // by crawl 0 queue
	dirty  map[string]bool
	// entries are the URL records this update wrote, by key: what a
	// later read in the same update must see.
	entries map[string]*Entry
	// readySet and readyGone are the ready keys this update set (with
	// their times) and deleted, by queue (stateID) then key: what turnOf
	// needs to find a queue's first ready key as the entry leaves it.
	readySet, readyGone map[string]map[string]int64
}

// entry reads a URL's record as the partition holds it, or as this update
// wrote it.
func (u *updateTx) entry(crawl, key, url string) (*Entry, error) {
	if e, ok := u.entries[string(entryKey(crawl, key, url))]; ok {
		return e, nil
	}
	return readEntry(u.r, crawl, key, url)
}

// putEntry writes a URL's record over old (nil: it had none), moving its
// place in the ready index: a queued URL's record is also the value of its
// ready key, at its due time. A fresh URL (never fetched, due at once: most
// of a frontier) has its ready key alone, marked index-only, so that a put
// writes one key, not two: readEntry finds it there. Its first known update
// writes its U key.
//
// old must be the record as read (its indexOnly says where it lives).
func (u *updateTx) putEntry(old, e *Entry) {
	k := entryKey(e.Crawl, e.Key, e.URL)
	if u.entries == nil {
		u.entries = map[string]*Entry{}
	}
	e.indexOnly = e.fresh()
	u.entries[string(k)] = e
	if old != nil && !old.Completed {
		u.deleteReady(old)
	}
	v := encodeEntry(e)
	if e.indexOnly {
		if old != nil && !old.indexOnly {
			u.b.Delete(k)
		}
	} else {
		u.b.Set(k, v)
	}
	if !e.Completed {
		k := readyKey(e.Crawl, e.Key, e.at(), e.URL)
		u.b.Set(k, v)
		moveReady(&u.readyGone, &u.readySet, stateID(e.Crawl, e.Key), k, e.at())
		u.touch(e.Crawl, e.Key)
	}
}

// deleteReady deletes e's ready key.
func (u *updateTx) deleteReady(e *Entry) {
	k := readyKey(e.Crawl, e.Key, e.at(), e.URL)
	u.b.Delete(k)
	moveReady(&u.readySet, &u.readyGone, stateID(e.Crawl, e.Key), k, e.at())
	u.touch(e.Crawl, e.Key)
}

// moveReady notes ready key k of queue id, at at, in to and no longer in
// from (readySet and readyGone, one way or the other).
func moveReady(from, to *map[string]map[string]int64, id string, k []byte, at int64) {
	delete((*from)[id], string(k))
	if *to == nil {
		*to = map[string]map[string]int64{}
	}
	if (*to)[id] == nil {
		(*to)[id] = map[string]int64{}
	}
	(*to)[id][string(k)] = at
}

// touch marks a queue whose ready keys changed: its state is written, with
// its turn, at the end.
func (u *updateTx) touch(crawl, key string) {
	if st, err := u.queue(crawl, key); err == nil {
		u.set(st)
	}
}

func stateID(crawl, key string) string { return crawl + "\x00" + key }

// queue returns a queue's state as the partition holds it (or as this
// update changed it).
func (u *updateTx) queue(crawl, key string) (*QueueState, error) {
	id := stateID(crawl, key)
	if st := u.states[id]; st != nil {
		return st, nil
	}
	st, err := readQueue(u.r, crawl, key)
	if err != nil {
		return nil, err
	}
	if u.states == nil {
		u.states, u.dirty = map[string]*QueueState{}, map[string]bool{}
	}
	u.states[id] = st
	return st, nil
}

// deleteEntry removes a URL's record and its place in the ready index.
func (u *updateTx) deleteEntry(e *Entry) {
	k := entryKey(e.Crawl, e.Key, e.URL)
	if !e.indexOnly {
		u.b.Delete(k)
	}
	if !e.Completed {
		u.deleteReady(e)
	}
	delete(u.entries, string(k))
}

// deletePrefix removes every key starting with prefix, and forgets the
// states and records this update holds under it (a queue's state written
// at the end must not bring back a queue deleted after it changed).
func (u *updateTx) deletePrefix(prefix []byte) {
	u.b.DeletePrefix(prefix)
	for id, st := range u.states {
		if bytes.HasPrefix(queueKey(st.Crawl, st.Key), prefix) {
			delete(u.states, id)
			delete(u.dirty, id)
			delete(u.readySet, id)
			delete(u.readyGone, id)
		}
	}
	for k := range u.entries {
		if strings.HasPrefix(k, string(prefix)) {
			delete(u.entries, k)
		}
	}
}

// finish writes the states this update changed, each with its turn in
// the ready queues' index (turnOf): its old key deleted, its new one set,
// and a new queue's crawl marked in partition p.
func (u *updateTx) finish(p int) error {
	for _, id := range slices.Sorted(maps.Keys(u.dirty)) {
		st := u.states[id]
		turn, err := u.turnOf(st)
		if err != nil {
			return err
		}
		if turn != st.Turn {
			if st.Turn != 0 {
				u.b.Delete(turnKey(st.Crawl, st.Key, st.Turn))
			}
			if turn != 0 {
				u.b.Set(turnKey(st.Crawl, st.Key, turn), nil)
			}
			st.Turn = turn
		}
		if !st.stored() {
			u.b.Set(crawlPrefix(kindCrawl, st.Crawl, p), nil)
		}
		u.b.Set(queueKey(st.Crawl, st.Key), encodeQueue(st))
	}
	return nil
}

// turnOf is when a queue may next hand out a URL, as this update leaves
// it (0: not until its state changes): the latest of its next turn, the
// end of its block and its first ready key's time (a leased URL's is its
// lease's end), and with a limit reached by its fetches and leases, the
// end of enough leases. GetURLs reads the queues whose turn has come,
// earliest first, and checks each against its state.
func (u *updateTx) turnOf(st *QueueState) (int64, error) {
	if st.Queued == 0 {
		return 0, nil
	}
	id := stateID(st.Crawl, st.Key)
	first, found := int64(0), false
	for _, at := range u.readySet[id] {
		if !found || at < first {
			first, found = at, true
		}
	}
	floor := max(st.Next, st.Blocked, 1)
	if found && first <= floor && st.Limit == 0 {
		return floor, nil // a key this entry set is first, or ties: no read (a put's)
	}
	gone := u.readyGone[id]
	prefix := queuePrefix(kindReady, st.Crawl, st.Key)
	err := u.r.Scan(prefix, func(k, _ []byte) bool {
		if _, deleted := gone[string(k)]; deleted || len(k) < len(prefix)+8 {
			return true
		}
		if at := int64(binary.BigEndian.Uint64(k[len(prefix):])); !found || at < first {
			first, found = at, true
		}
		return false
	})
	if err != nil || !found {
		return 0, err
	}
	turn := max(first, floor)
	if l := st.Limit; l > 0 {
		if st.Fetched >= uint64(l) {
			return 0, nil
		}
		for _, c := range st.Leases { // ends in order: the first that brings it under its limit
			if st.Fetched+uint64(st.inProcess(turn)) < uint64(l) {
				break
			}
			turn = max(turn, c.Until)
		}
		if st.Fetched+uint64(st.inProcess(turn)) >= uint64(l) {
			return 0, nil
		}
	}
	return turn, nil
}

// set marks a state returned by queue as changed.
func (u *updateTx) set(st *QueueState) { u.dirty[stateID(st.Crawl, st.Key)] = true }

// update runs fn as a read-modify-write of partition p (urlstore.Update),
// writing the queue states fn changed (updateTx.set); size estimates the
// bytes fn writes.
//
// Updates are group-committed: each partition has one writer, and the
// updates asked of it while it appends are run together, in order, as its
// next entry (up to maxEntryBytes), sharing one updateTx, so that a later
// one reads what an earlier one wrote. A partition's appends are one at a
// time anyway (each waits for the last); grouping turns that wait into
// fewer, larger entries when many clients write at once. An error of one
// fails the whole entry, and every update in it returns it.
func (q *queues) update(ctx context.Context, p int, size int, fn func(u *updateTx) error) error {
	w := &pending{fn: fn, size: size, done: make(chan error, 1)}
	select {
	case q.writers[p] <- w:
	case <-q.closed:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-w.done:
		return err
	case <-q.closed:
		return errClosed
	case <-ctx.Done():
		return ctx.Err() // applied or not: as a lost acknowledgement
	}
}

var errClosed = errors.New("urlfrontier: server closed")

// pending is an update waiting for its partition's writer.
type pending struct {
	fn   func(u *updateTx) error
	size int
	done chan error
}

// writeTimeout bounds one entry's append (and its retries on conflicts).
const writeTimeout = 30 * time.Second

// start runs the partitions' writers until stop.
func (q *queues) start() {
	q.closed = make(chan struct{})
	for p := range q.writers {
		q.writers[p] = make(chan *pending, 64)
		q.wg.Add(1)
		go func() { defer q.wg.Done(); q.write(p) }()
	}
}

// stop ends the writers; updates asked for after it fail.
func (q *queues) stop() {
	close(q.closed)
	q.wg.Wait()
}

// write is partition p's writer.
func (q *queues) write(p int) {
	var next *pending
	for {
		first := next
		next = nil
		if first == nil {
			select {
			case first = <-q.writers[p]:
			case <-q.closed:
				return
			}
		}
		group, size := []*pending{first}, first.size
	drain:
		for size < maxEntryBytes {
			select {
			case w := <-q.writers[p]:
				if size+w.size > maxEntryBytes {
					next = w
					break drain
				}
				group, size = append(group, w), size+w.size
			default:
				break drain
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		err := q.st.Update(ctx, p, func(r urlstore.Reader, b *urlstore.Batch) error {
			u := &updateTx{q: q, r: r, b: b}
			for _, w := range group {
				if err := w.fn(u); err != nil {
					return err
				}
			}
			return u.finish(p)
		})
		cancel()
		for _, w := range group {
			w.done <- err
		}
	}
}

// maxEntryBytes bounds what one log entry carries (NATS's default
// payload limit is 1 MiB): work is split into entries below it.
const maxEntryBytes = 256 << 10

// smallUpdate is the size of an update that writes a key or two.
const smallUpdate = 256

// byPartition splits items into groups of one partition each, in the
// order of their first item, each group under maxEntryBytes by size;
// sizes are the groups' sizes.
func byPartition[T any](items []T, part func(T) int, size func(T) int) (parts []int, groups [][]T, sizes []int) {
	at := map[int]int{} // partition → its open group
	for _, it := range items {
		p := part(it)
		i, ok := at[p]
		if !ok || sizes[i]+size(it) > maxEntryBytes {
			i = len(groups)
			at[p] = i
			parts = append(parts, p)
			groups = append(groups, nil)
			sizes = append(sizes, 0)
		}
		groups[i] = append(groups[i], it)
		sizes[i] += size(it)
	}
	return parts, groups, sizes
}

// parallel runs fn(i) for i in [0, n) on up to Partitions goroutines, returning
// the first error.
func parallel(n int, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	sem := make(chan struct{}, Partitions)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
