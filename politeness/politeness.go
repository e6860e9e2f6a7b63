// Package politeness hands out work one queue at a time, at the pace each
// queue allows: a crawler's scheduler, apart from fetching.
//
// # Queues
//
// Work is grouped in queues, keyed by a string (the URL's host by default;
// any key a caller chooses, such as URLFrontier's queue keys). A queue may
// start a new item when
//
//   - fewer than its Parallel items are in process (handed out, not Done),
//   - its Delay has passed since its last start, and since the end of its
//     last item plus the pause that item asked for (a robots.txt
//     Crawl-delay),
//   - it is not blocked (BlockUntil: a Retry-After, a 429 or 503 backoff, an
//     API caller's block).
//
// Take hands out the item of the queue that became ready first, so queues
// share the fetch loop in the order their turns come and none is starved by
// another's backlog.
//
// # Nothing held for a queue's turn
//
// Each queue holds a few items waiting (its buffer). Offer refuses an item when
// its queue's buffer is full and says when to offer it again: the queue's
// next start, plus one interval for every item waiting before it but the
// last half of the buffer and for every item already refused (the queue's
// horizon), so it comes back when the buffer has room and half of it still
// waits, and a little lateness in coming back never leaves the queue idle. The caller leaves the
// item where it came from until then (the crawler hands a frontier message
// back to JetStream with that delay), so a host with a backlog of 10,000
// URLs holds Buffer of them, not 10,000, and the items of other hosts behind
// them in the same stream are reached at once. The interval is the larger of
// the queue's delay and its mean item duration divided by its parallelism,
// so the estimate holds for queues without a delay too.
//
// A buffer is 2 × Parallel for a polite queue. A fast queue (an interval
// under MinDefer: no delay, quick answers) holds what it starts within
// Ahead, up to MaxBuffer: a refused item costs the caller a round trip
// away and back, which for a queue starting an item every 3 ms is as long
// as the item, so holding only a short horizon sent nearly every item
// away once (1,118 hand-backs for 1,169 pages of one site).
//
// # Memory
//
// A queue with nothing buffered, nothing in process, and no delay, block or
// refused item's turn still running is forgotten a second later, so memory
// follows the hosts with work, not every host ever seen. Such queues wait in
// a second heap, by the time they may be forgotten, so forgetting costs
// O(log n) a queue and nothing while none is due, however many hosts the
// scheduler holds; when the queues fall to a quarter of their peak, the map
// and heaps are copied to their size, so a burst of hosts does not keep its
// room. Limits set with SetLimits are kept apart and are not forgotten.
// BenchmarkQueueMemory measures the bytes per queue; BenchmarkBroadMemory
// and BenchmarkBroadHandOut the bytes per host and a hand-out's cost at
// 10,000 and 1,000,000 hosts (RAMBytesPerQueue).
//
// # Time
//
// Time comes from a Clock (Options.Clock), so tests drive the scheduler with
// a fake one and run in microseconds.
package politeness

import (
	"container/heap"
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Clock tells the time and waits for it. The zero Options use the system
// clock.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Limits are the politeness of one queue. Zero fields mean the defaults of
// Options.
type Limits struct {
	// Parallel is the most items of the queue in process at once.
	Parallel int
	// Delay is the least time between two starts; negative for none.
	Delay time.Duration
}

// Options configures a Scheduler. Zero values mean the defaults beside them.
type Options struct {
	// Parallel is the most items of one queue in process at once: 1.
	Parallel int
	// Delay is the least time between two starts of one queue: 1s;
	// negative for none.
	Delay time.Duration
	// Buffer, if set, is the most items one queue holds waiting;
	// otherwise a queue holds 2 × its Parallel, or what it starts in two
	// MinDefers, whichever is more, and a fast queue (one whose interval
	// is under MinDefer) what it starts within Ahead; up to MaxBuffer.
	Buffer int
	// MaxBuffer bounds the buffer of a fast queue: 1024.
	MaxBuffer int
	// Ahead is the work a fast queue holds: 5s. Each item a queue refuses
	// costs its caller a round trip elsewhere and back (for the crawler,
	// a JetStream hand-back and a redelivery); for a queue that starts an
	// item every few milliseconds, a few of MinDefer's worth meant nearly
	// every item went away once before its turn.
	Ahead time.Duration
	// MaxPause bounds the pause an item may ask for at Done and the block of
	// BlockUntil, counted from now: 1h.
	MaxPause time.Duration
	// MinDefer is the least wait Offer asks of an item it refuses: 100ms.
	MinDefer time.Duration
	// Queues sets the limits of some queues (a site one owns).
	Queues map[string]Limits
	// Clock tells the time: the system clock.
	Clock Clock
}

func (o Options) withDefaults() Options {
	if o.Parallel <= 0 {
		o.Parallel = 1
	}
	o.Delay = delayOr(o.Delay, time.Second)
	if o.MaxPause <= 0 {
		o.MaxPause = time.Hour
	}
	if o.MinDefer <= 0 {
		o.MinDefer = 100 * time.Millisecond
	}
	if o.MaxBuffer <= 0 {
		o.MaxBuffer = 1024
	}
	if o.Ahead <= 0 {
		o.Ahead = 5 * time.Second
	}
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	return o
}

// delayOr maps a delay setting to the delay: 0 is def, negative none.
func delayOr(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// ErrClosed is returned by Take once the Scheduler is closed.
var ErrClosed = errors.New("politeness: scheduler closed")

// Scheduler holds items of type T in per-queue buffers and hands them out
// when their queue may start one. It is safe for concurrent use. Construct
// with New; Close wakes the callers of Take.
type Scheduler[T any] struct {
	o Options

	mu        sync.Mutex
	queues    map[string]*queue[T]
	peak      int                    // most queues since the map was last copied
	limits    map[string]Limits      // set by SetLimits and Options.Queues
	ready     readyHeap[T]           // queues with an item they may start, by readyAt
	idle      idleHeap[T]            // queues holding and running nothing, by forgetAt
	blocked   map[*queue[T]]struct{} // queues blocked by BlockUntil, until Stats sees the block end
	buffered  int
	inProcess int
	wake      chan struct{} // closed and replaced when something may have become ready
	closed    bool
}

// forgetAfter is how long a queue with nothing to do is remembered after
// its delay, block and refused items' turns have passed.
const forgetAfter = time.Second

// queue is one key's state; guarded by Scheduler.mu.
type queue[T any] struct {
	key     string
	limits  Limits // resolved: Parallel ≥ 1, Delay ≥ 0
	items   []T    // waiting, oldest first
	running int    // handed out, not Done
	next    time.Time
	blocked time.Time
	horizon time.Time     // the expected turn of the last item refused
	mean    time.Duration // moving mean of item durations
	heapIdx int           // index in Scheduler.ready, -1 when not in it
	idleIdx int           // index in Scheduler.idle, -1 when not in it
}

// readyAt is when q may start its next item, if it holds one and runs fewer
// than its Parallel.
func (q *queue[T]) readyAt() time.Time { return later(q.next, q.blocked) }

// forgetAt is when q may be forgotten, if it holds and runs nothing.
func (q *queue[T]) forgetAt() time.Time {
	return later(q.next, q.blocked, q.horizon).Add(forgetAfter)
}

// New returns a Scheduler configured by o.
func New[T any](o Options) *Scheduler[T] {
	o = o.withDefaults()
	s := &Scheduler[T]{o: o, queues: map[string]*queue[T]{}, limits: map[string]Limits{},
		blocked: map[*queue[T]]struct{}{}, wake: make(chan struct{})}
	for k, l := range o.Queues {
		s.limits[k] = l
	}
	return s
}

// resolve returns the limits of key with defaults applied.
func (s *Scheduler[T]) resolve(key string) Limits {
	l := s.limits[key]
	if l.Parallel <= 0 {
		l.Parallel = s.o.Parallel
	}
	l.Delay = delayOr(l.Delay, s.o.Delay)
	return l
}

// bufferOf is the most items q holds waiting: see "Nothing held for a
// queue's turn".
func (s *Scheduler[T]) bufferOf(q *queue[T]) int {
	if s.o.Buffer > 0 {
		return s.o.Buffer
	}
	n := 2 * q.limits.Parallel
	if n >= s.o.MaxBuffer {
		return n
	}
	iv := q.interval()
	if iv <= 0 {
		// No delay and no duration measured yet: as fast as can be.
		return s.o.MaxBuffer
	}
	horizon := 2 * s.o.MinDefer
	if iv < s.o.MinDefer {
		horizon = max(horizon, s.o.Ahead)
	}
	return min(max(n, q.limits.Parallel+int(horizon/iv)), s.o.MaxBuffer)
}

func (s *Scheduler[T]) queueLocked(key string) *queue[T] {
	q := s.queues[key]
	if q == nil {
		q = &queue[T]{key: key, limits: s.resolve(key), heapIdx: -1, idleIdx: -1}
		s.queues[key] = q
		s.peak = max(s.peak, len(s.queues))
	}
	return q
}

// interval is the expected time between two starts of q.
func (q *queue[T]) interval() time.Duration {
	return max(q.limits.Delay, q.mean/time.Duration(q.limits.Parallel))
}

// Offer adds a new item to the queue key. It returns true if the item is now
// held by the scheduler, to be handed out by Take; false if the queue's
// buffer is full, or items it refused before have not had their turn yet,
// with the time the item's turn is expected: the caller keeps it elsewhere
// until then and offers it again with OfferDeferred. New items thus go
// behind the refused ones, and a queue's items start in the order they came
// (a crawl stays breadth-first per host, so a page is first found at its
// least depth).
func (s *Scheduler[T]) Offer(key string, item T) (bool, time.Time) {
	return s.offer(key, item, false)
}

// OfferDeferred offers an item refused before (or any item older than those
// refused since, such as a retry): it is held if the buffer has room, even
// if other refused items have not had their turn yet.
func (s *Scheduler[T]) OfferDeferred(key string, item T) (bool, time.Time) {
	return s.offer(key, item, true)
}

func (s *Scheduler[T]) offer(key string, item T, deferred bool) (bool, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.Clock.Now()
	s.sweepLocked(now)
	q := s.queueLocked(key)
	if len(q.items) < s.bufferOf(q) && (deferred || !now.Before(q.horizon)) {
		q.items = append(q.items, item)
		s.buffered++
		s.updateLocked(q, now)
		return true, time.Time{}
	}
	// Its turn: after the items waiting and those refused before it. It
	// is asked back early, when the buffer has room again and half of it
	// still waits (one item of a buffer of two), so that a little lateness
	// in coming back never leaves the queue idle.
	iv := q.interval()
	start := later(now, q.next, q.blocked)
	at := start.Add(time.Duration(max(len(q.items)-s.bufferOf(q)/2, 0)) * iv)
	if q.horizon.After(at) {
		at = q.horizon
	}
	at = later(at, now.Add(s.o.MinDefer))
	q.horizon = at.Add(iv)
	s.idleLocked(q) // a new queue, or one remembered longer
	return false, at
}

// Take waits until an item may start and hands it out: its queue counts it
// in process until Done(key, …). It returns ctx's error when ctx ends first
// and ErrClosed once the Scheduler is closed.
func (s *Scheduler[T]) Take(ctx context.Context) (key string, item T, err error) {
	for {
		k, it, ok, wake, at := s.tryTake()
		if ok {
			return k, it, nil
		}
		if wake == nil {
			return "", item, ErrClosed
		}
		var timer <-chan time.Time
		if !at.IsZero() {
			timer = s.o.Clock.After(at.Sub(s.o.Clock.Now()))
		}
		select {
		case <-ctx.Done():
			return "", item, ctx.Err()
		case <-wake:
		case <-timer:
		}
	}
}

// TryTake hands out an item that may start now, if there is one.
func (s *Scheduler[T]) TryTake() (key string, item T, ok bool) {
	key, item, ok, _, _ = s.tryTake()
	return key, item, ok
}

// tryTake hands out an item that may start now; otherwise it returns the
// channel closed on the next change and the time the first queue becomes
// ready (zero: none waits). A nil channel means closed.
func (s *Scheduler[T]) tryTake() (key string, item T, ok bool, wake <-chan struct{}, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", item, false, nil, time.Time{}
	}
	now := s.o.Clock.Now()
	s.sweepLocked(now)
	if len(s.ready) == 0 {
		return "", item, false, s.wake, time.Time{}
	}
	q := s.ready[0]
	if at := q.readyAt(); at.After(now) {
		return "", item, false, s.wake, at
	}
	item = q.items[0]
	var zero T
	q.items[0] = zero
	q.items = q.items[1:]
	if len(q.items) == 0 {
		q.items = nil // let the backing array go
	}
	s.buffered--
	q.running++
	s.inProcess++
	q.next = now.Add(q.limits.Delay)
	s.updateLocked(q, now)
	return q.key, item, true, nil, time.Time{}
}

// Done ends an item of key handed out by Take, started at start (its
// duration feeds the queue's estimates). The queue's next start is at least
// pause after now (a robots.txt Crawl-delay; bounded by Options.MaxPause).
func (s *Scheduler[T]) Done(key string, start time.Time, pause time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, now, ok := s.endLocked(key)
	if !ok {
		return
	}
	if d := now.Sub(start); d >= 0 && !start.IsZero() {
		// From 0, so a first slow answer (a new connection, a big
		// index page) does not push the estimates of a queue far out: an
		// item offered too early is only refused again. A sample counts
		// for at most twice the mean: a lasting slowdown still moves it
		// (×1.125 an item), one stalled exchange (a SYN dropped by a full
		// listen queue costs 1 s) does not send the refused items of a
		// fast queue away for seconds while its buffer runs dry.
		if q.mean > 0 {
			d = min(d, 2*q.mean)
		}
		q.mean = (7*q.mean + d) / 8
	}
	if pause > 0 {
		q.next = later(q.next, now.Add(min(pause, s.o.MaxPause)))
	}
	s.updateLocked(q, now)
}

// Unused ends an item of key handed out by Take that made no request (the
// crawler's spelling of a page fetched already, dropped at its turn): its
// duration is not measured, and for a queue of one item at a time the turn
// is given back, so the next item may start at once instead of a delay
// after a request that never was. (A queue running several at once keeps
// its next start: another item taken since may have set it.)
func (s *Scheduler[T]) Unused(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, now, ok := s.endLocked(key)
	if !ok {
		return
	}
	if q.limits.Parallel == 1 && q.next.After(now) {
		// Take found q.next passed, and set it a delay after itself:
		// now is as late as the turn allowed, and no later than it.
		q.next = now
	}
	s.updateLocked(q, now)
}

// endLocked counts an item of key out of process: its queue and the time,
// or false if key has none in process.
func (s *Scheduler[T]) endLocked(key string) (*queue[T], time.Time, bool) {
	q := s.queues[key]
	if q == nil || q.running == 0 {
		return nil, time.Time{}, false
	}
	q.running--
	s.inProcess--
	return q, s.o.Clock.Now(), true
}

// BlockUntil keeps the queue key from starting anything before t (bounded by
// Options.MaxPause from now); a zero or past t lifts a block.
func (s *Scheduler[T]) BlockUntil(key string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.Clock.Now()
	if t.After(now.Add(s.o.MaxPause)) {
		t = now.Add(s.o.MaxPause)
	}
	q := s.queueLocked(key)
	q.blocked = t
	if t.After(now) {
		s.blocked[q] = struct{}{}
	}
	s.updateLocked(q, now)
}

// SetDelay sets the delay between two starts of the queue key (negative:
// none; 0: the default); an empty key sets the default of every queue
// without its own.
func (s *Scheduler[T]) SetDelay(key string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if key == "" {
		s.o.Delay = delayOr(d, time.Second)
	} else {
		l := s.limits[key]
		l.Delay = d
		s.limits[key] = l
	}
	s.refreshLocked()
}

// SetLimits sets the limits of the queue key (zero fields: the defaults).
func (s *Scheduler[T]) SetLimits(key string, l Limits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits[key] = l
	s.refreshLocked()
}

// refreshLocked applies changed limits to the queues.
func (s *Scheduler[T]) refreshLocked() {
	now := s.o.Clock.Now()
	for k, q := range s.queues {
		q.limits = s.resolve(k)
		s.updateLocked(q, now)
	}
}

// Remove takes every waiting item for which drop is true out of the
// scheduler and returns them (a partition given back hands its messages
// back).
func (s *Scheduler[T]) Remove(drop func(key string, item T) bool) []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []T
	now := s.o.Clock.Now()
	for k, q := range s.queues {
		kept := q.items[:0]
		for _, it := range q.items {
			if drop(k, it) {
				out = append(out, it)
				s.buffered--
				continue
			}
			kept = append(kept, it)
		}
		if len(kept) == len(q.items) {
			continue
		}
		clear(q.items[len(kept):])
		q.items = kept
		s.updateLocked(q, now)
	}
	return out
}

// Stats are a Scheduler's counts now.
type Stats struct {
	Queues    int // queues remembered
	Ready     int // queues with an item waiting that they may start now
	Buffered  int // items waiting
	InProcess int // items handed out, not Done
	Blocked   int // queues blocked now
}

// Stats returns the scheduler's counts now. It costs the queues ready and
// blocked now, not every queue.
func (s *Scheduler[T]) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.Clock.Now()
	st := Stats{Queues: len(s.queues), Buffered: s.buffered, InProcess: s.inProcess}
	// The ready ones are the heap's top: a node later than now has no
	// ready one below it.
	for stack := []int{0}; len(stack) > 0; {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i < len(s.ready) && !s.ready[i].readyAt().After(now) {
			st.Ready++
			stack = append(stack, 2*i+1, 2*i+2)
		}
	}
	for q := range s.blocked {
		if q.blocked.After(now) {
			st.Blocked++
		} else {
			delete(s.blocked, q)
		}
	}
	return st
}

// Close wakes the callers of Take, which return ErrClosed. Items still held
// are dropped: take them out with Remove first if they must be handed back.
// Close is idempotent.
func (s *Scheduler[T]) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.wake)
	}
	return nil
}

// updateLocked puts q in the ready heap, moves it, or takes it out, after a
// change, and wakes the callers of Take.
func (s *Scheduler[T]) updateLocked(q *queue[T], now time.Time) {
	canStart := len(q.items) > 0 && q.running < q.limits.Parallel
	switch {
	case canStart:
		if q.heapIdx < 0 {
			heap.Push(&s.ready, q)
		} else {
			heap.Fix(&s.ready, q.heapIdx)
		}
	case q.heapIdx >= 0:
		heap.Remove(&s.ready, q.heapIdx)
	}
	s.idleLocked(q)
	if !s.closed {
		close(s.wake)
		s.wake = make(chan struct{})
	}
}

// idleLocked puts q in the idle heap if it holds and runs nothing, moves
// it there after a change of its times, or takes it out.
func (s *Scheduler[T]) idleLocked(q *queue[T]) {
	switch {
	case len(q.items) == 0 && q.running == 0:
		if q.idleIdx < 0 {
			heap.Push(&s.idle, q)
		} else {
			heap.Fix(&s.idle, q.idleIdx)
		}
	case q.idleIdx >= 0:
		heap.Remove(&s.idle, q.idleIdx)
	}
}

// sweepLocked forgets the queues that held nothing and waited for nothing
// for forgetAfter, and copies the map and heaps to their size once they
// are a quarter of their peak.
func (s *Scheduler[T]) sweepLocked(now time.Time) {
	for len(s.idle) > 0 && !now.Before(s.idle[0].forgetAt()) {
		q := heap.Pop(&s.idle).(*queue[T])
		delete(s.queues, q.key)
		delete(s.blocked, q)
	}
	// Go's maps and slices keep their room when emptied.
	if s.peak < 4096 || len(s.queues) > s.peak/4 {
		return
	}
	queues := make(map[string]*queue[T], len(s.queues))
	for k, q := range s.queues {
		queues[k] = q
	}
	s.queues, s.peak = queues, len(queues)
	s.ready = slices.Clone(s.ready)
	s.idle = slices.Clone(s.idle)
}

func later(t time.Time, more ...time.Time) time.Time {
	for _, u := range more {
		if u.After(t) {
			t = u
		}
	}
	return t
}

// readyHeap orders queues by the time they may start their next item.
type readyHeap[T any] []*queue[T]

func (h readyHeap[T]) Len() int { return len(h) }
func (h readyHeap[T]) Less(i, j int) bool {
	a, b := h[i].readyAt(), h[j].readyAt()
	if a.Equal(b) {
		return h[i].key < h[j].key
	}
	return a.Before(b)
}
func (h readyHeap[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}
func (h *readyHeap[T]) Push(x any) {
	q := x.(*queue[T])
	q.heapIdx = len(*h)
	*h = append(*h, q)
}
func (h *readyHeap[T]) Pop() any {
	old := *h
	q := old[len(old)-1]
	old[len(old)-1] = nil
	q.heapIdx = -1
	*h = old[:len(old)-1]
	return q
}

// idleHeap orders the queues that hold and run nothing by the time they may
// be forgotten.
type idleHeap[T any] []*queue[T]

func (h idleHeap[T]) Len() int           { return len(h) }
func (h idleHeap[T]) Less(i, j int) bool { return h[i].forgetAt().Before(h[j].forgetAt()) }
func (h idleHeap[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idleIdx, h[j].idleIdx = i, j
}
func (h *idleHeap[T]) Push(x any) {
	q := x.(*queue[T])
	q.idleIdx = len(*h)
	*h = append(*h, q)
}
func (h *idleHeap[T]) Pop() any {
	old := *h
	q := old[len(old)-1]
	old[len(old)-1] = nil
	q.idleIdx = -1
	*h = old[:len(old)-1]
	return q
}
