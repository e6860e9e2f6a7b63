package politeness

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/internal/heaptest"
)

// fakeClock is a Clock that moves only when told to.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{c.now.Add(d), ch})
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
			continue
		}
		kept = append(kept, w)
	}
	c.waiters = kept
}

// take hands out what may start now, in order.
func takeAll[T any](s *Scheduler[T]) []T {
	var out []T
	for {
		_, it, ok := s.TryTake()
		if !ok {
			return out
		}
		out = append(out, it)
	}
}

// step is one moment of a scenario: advance the clock, act, then check what
// TryTake hands out.
type step struct {
	advance time.Duration
	do      func(s *Scheduler[string], now time.Time)
	want    []string // items handed out at this moment, in order
}

func TestSchedulerScenarios(t *testing.T) {
	offer := func(key string, items ...string) func(*Scheduler[string], time.Time) {
		return func(s *Scheduler[string], _ time.Time) {
			for _, it := range items {
				if ok, _ := s.Offer(key, it); !ok {
					panic("offer refused " + it)
				}
			}
		}
	}
	done := func(key string, pause time.Duration) func(*Scheduler[string], time.Time) {
		return func(s *Scheduler[string], now time.Time) { s.Done(key, now, pause) }
	}
	cases := []struct {
		name  string
		opts  Options
		steps []step
	}{
		{
			// The default: one start per second per host.
			name: "delay between starts",
			steps: []step{
				{do: offer("a", "a1", "a2"), want: []string{"a1"}},
				{do: done("a", 0)},
				{advance: 999 * time.Millisecond},
				{advance: time.Millisecond, want: []string{"a2"}},
			},
		},
		{
			// Parallel 1: the second start waits for the first to end,
			// however long it takes beyond the delay.
			name: "parallel bounds items in process",
			steps: []step{
				{do: offer("a", "a1", "a2"), want: []string{"a1"}},
				{advance: 5 * time.Second},
				{do: done("a", 0), want: []string{"a2"}},
			},
		},
		{
			// Parallel 2, no delay: two at once, the third after one ends.
			name: "parallel 2",
			opts: Options{Parallel: 2, Delay: -1},
			steps: []step{
				{do: offer("a", "a1", "a2", "a3"), want: []string{"a1", "a2"}},
				{do: done("a", 0), want: []string{"a3"}},
			},
		},
		{
			// A robots.txt Crawl-delay of 5s, passed at Done, holds the
			// next start 5s after the end.
			name: "pause asked at done",
			steps: []step{
				{do: offer("a", "a1", "a2"), want: []string{"a1"}},
				{advance: 2 * time.Second},
				{do: done("a", 5*time.Second)},
				{advance: 4999 * time.Millisecond},
				{advance: time.Millisecond, want: []string{"a2"}},
			},
		},
		{
			// A 429's Retry-After blocks host a; host b goes on.
			name: "block until",
			steps: []step{
				{do: offer("a", "a1", "a2"), want: []string{"a1"}},
				{do: func(s *Scheduler[string], now time.Time) {
					s.Done("a", now, 0)
					s.BlockUntil("a", now.Add(10*time.Second))
					offer("b", "b1")(s, now)
				}, want: []string{"b1"}},
				{advance: 9 * time.Second},
				{advance: time.Second, want: []string{"a2"}},
			},
		},
		{
			// Per-queue limits (the demo's own site): no delay, 3 at once;
			// other hosts keep the default.
			name: "queue limits",
			opts: Options{Queues: map[string]Limits{"own": {Parallel: 3, Delay: -1}}},
			steps: []step{
				{do: func(s *Scheduler[string], now time.Time) {
					offer("own", "o1", "o2", "o3", "o4")(s, now)
					offer("x", "x1", "x2")(s, now)
				}, want: []string{"o1", "x1", "o2", "o3"}}, // x's turn came before own's second
				{do: done("own", 0), want: []string{"o4"}},
			},
		},
		{
			// SetDelay on one queue and on the default ("").
			name: "set delay",
			steps: []step{
				{do: func(s *Scheduler[string], now time.Time) {
					s.SetDelay("a", 3*time.Second)
					s.SetDelay("", 2*time.Second)
					offer("a", "a1", "a2")(s, now)
					offer("b", "b1", "b2")(s, now)
				}, want: []string{"a1", "b1"}},
				{do: func(s *Scheduler[string], now time.Time) { s.Done("a", now, 0); s.Done("b", now, 0) }},
				{advance: 2 * time.Second, want: []string{"b2"}},
				{advance: time.Second, want: []string{"a2"}},
			},
		},
		{
			// Queues are served in the order their turns came: c, whose
			// turn came first, before a and b.
			name: "first ready first served",
			opts: Options{Delay: 3 * time.Second},
			steps: []step{
				{do: offer("c", "c1", "c2"), want: []string{"c1"}},
				{advance: time.Second, do: offer("b", "b1", "b2"), want: []string{"b1"}},
				{advance: time.Second, do: offer("a", "a1", "a2"), want: []string{"a1"}},
				{do: func(s *Scheduler[string], now time.Time) {
					s.Done("a", now, 0)
					s.Done("b", now, 0)
					s.Done("c", now, 0)
				}},
				{advance: 10 * time.Second, want: []string{"c2", "b2", "a2"}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			tc.opts.Clock = clock
			s := New[string](tc.opts)
			defer s.Close()
			start := clock.Now()
			for i, st := range tc.steps {
				clock.Advance(st.advance)
				if st.do != nil {
					st.do(s, clock.Now())
				}
				if got := takeAll(s); !slices.Equal(got, st.want) {
					t.Fatalf("step %d (t=%v): handed out %q, want %q", i, clock.Now().Sub(start), got, st.want)
				}
			}
		})
	}
}

// TestOfferBoundsBuffer checks that a queue holds at most Buffer items and
// that refused items are told turns one interval apart, after those held:
// the 10,000-URL backlog of one host stays where it came from.
func TestOfferBoundsBuffer(t *testing.T) {
	clock := newFakeClock()
	s := New[int](Options{Clock: clock, Buffer: 2})
	now := clock.Now()
	var turns []time.Duration
	for i := range 6 {
		ok, at := s.Offer("big", i)
		if i < 2 {
			if !ok {
				t.Fatalf("Offer(%d) refused with an empty buffer", i)
			}
			continue
		}
		if ok {
			t.Fatalf("Offer(%d) accepted beyond the buffer of 2", i)
		}
		turns = append(turns, at.Sub(now))
	}
	// Two waiting (turns at 0s and 1s): the refused come back one
	// interval before their turns (2s, 3s, …), when one item still waits.
	want := []time.Duration{1 * time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}
	if !slices.Equal(turns, want) {
		t.Errorf("refused items' turns = %v, want %v", turns, want)
	}
	if st := s.Stats(); st.Buffered != 2 {
		t.Errorf("Buffered = %d, want 2", st.Buffered)
	}

	// Another host behind it in the stream is held at once.
	if ok, _ := s.Offer("small", 100); !ok {
		t.Error("a second queue's item was refused because of the first's backlog")
	}
	if got := takeAll(s); !slices.Equal(got, []int{0, 100}) && !slices.Equal(got, []int{100, 0}) {
		t.Errorf("handed out %v, want the first item of each queue", got)
	}

	// With no delay, the interval is the items' mean duration over the
	// parallelism: 200ms each, 2 at once → 100ms apart, once the moving
	// mean has learnt it (it starts from 0, so estimates err early).
	fast := New[int](Options{Clock: clock, Delay: -1, Parallel: 2, Buffer: 1})
	fast.Offer("f", 0)
	for range 40 {
		_, _, _ = fast.TryTake()
		start := clock.Now()
		clock.Advance(200 * time.Millisecond)
		fast.Offer("f", 0) // never idle, so never forgotten
		fast.Done("f", start, 0)
	}
	_, at1 := fast.Offer("f", 2)
	_, at2 := fast.Offer("f", 3)
	if d := at2.Sub(at1); d < 95*time.Millisecond || d > 100*time.Millisecond {
		t.Errorf("refused items of a queue without delay are %v apart, want about 100ms (200ms / 2)", d)
	}
}

// TestBufferFollowsPace checks that a queue's buffer holds what it starts
// while a refused item is away: 2 × Parallel for a polite queue, more for a
// queue without a delay whose items are fast (Parallel + Ahead over its
// interval), MaxBuffer before any duration is known, never more than
// MaxBuffer; and that a refused item of a fast queue is asked back when half
// the buffer still waits, not when it is nearly empty.
func TestBufferFollowsPace(t *testing.T) {
	for _, tc := range []struct {
		name      string
		o         Options
		item      time.Duration // each item's duration; 0: none done yet
		min, max  int           // the buffer's bounds
		halfTurns bool          // check the refused item's turn
	}{
		{name: "polite", o: Options{}, min: 2, max: 2},
		{name: "polite, 4 at once", o: Options{Parallel: 4}, min: 8, max: 8},
		{name: "no delay, 2ms items", o: Options{Delay: -1, Ahead: 200 * time.Millisecond}, item: 2 * time.Millisecond, min: 95, max: 105, halfTurns: true},
		{name: "no delay, 4 at once, 8ms items", o: Options{Delay: -1, Parallel: 4, Ahead: 200 * time.Millisecond}, item: 8 * time.Millisecond, min: 95, max: 110, halfTurns: true},
		{name: "no delay, 10ms items: 5s ahead", o: Options{Delay: -1}, item: 10 * time.Millisecond, min: 495, max: 505, halfTurns: true},
		{name: "150ms delay: not fast", o: Options{Delay: 150 * time.Millisecond}, min: 2, max: 2},
		{name: "no delay, nothing done yet", o: Options{Delay: -1}, min: 1024, max: 1024},
		{name: "no delay, 100µs items: capped", o: Options{Delay: -1}, item: 100 * time.Microsecond, min: 1024, max: 1024},
		{name: "MaxBuffer", o: Options{Delay: -1, MaxBuffer: 16}, item: 2 * time.Millisecond, min: 16, max: 16},
		{name: "Buffer wins", o: Options{Delay: -1, Buffer: 3}, item: 2 * time.Millisecond, min: 3, max: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			tc.o.Clock = clock
			s := New[int](tc.o)
			if tc.item > 0 {
				// Learn the pace: one item at a time, each tc.item long.
				s.Offer("h", 0)
				for range 60 {
					_, _, _ = s.TryTake()
					start := clock.Now()
					clock.Advance(tc.item)
					s.Offer("h", 0)
					s.Done("h", start, 0)
				}
				takeAll(s)
				clock.Advance(time.Second) // past any delay
			}
			now := clock.Now()
			n := 0
			var at time.Time
			for i := range 2000 {
				ok, turn := s.Offer("h", i)
				if !ok {
					at = turn
					break
				}
				n++
			}
			if n < tc.min || n > tc.max {
				t.Fatalf("buffer = %d, want %d–%d", n, tc.min, tc.max)
			}
			if tc.halfTurns {
				// Asked back after about half the buffer's turns.
				iv := tc.item / time.Duration(max(tc.o.Parallel, 1))
				half := time.Duration(n/2) * iv
				if d := at.Sub(now); d < half*9/10 || d > half*11/10 {
					t.Errorf("first refused item asked back after %v, want about %v (half the buffer)", d, half)
				}
			}
		})
	}
}

// TestOfferKeepsOrder checks that a queue's items start in the order they
// came: a new item goes behind the items refused before it until they had
// their turn, and those come back with OfferDeferred. A crawl that let new
// (deeper) links pass older ones would find pages first at a greater depth
// and cut their subtrees at the depth limit.
func TestOfferKeepsOrder(t *testing.T) {
	clock := newFakeClock()
	s := New[int](Options{Clock: clock, Buffer: 2})
	type deferred struct {
		item int
		at   time.Time
	}
	var out []deferred
	offer := func(item int, again bool) {
		ok, at := s.Offer("h", item)
		if again {
			ok, at = s.OfferDeferred("h", item)
		}
		if !ok {
			out = append(out, deferred{item, at})
		}
	}
	var order []int
	for i := range 4 {
		offer(i, false) // 0, 1 held; 2, 3 refused
	}
	for range 12 {
		if _, it, ok := s.TryTake(); ok {
			order = append(order, it)
			s.Done("h", clock.Now(), 0)
		}
		offer(100+len(order), false) // a new item each step: behind 2 and 3
		clock.Advance(500 * time.Millisecond)
		now := clock.Now()
		keep := out[:0]
		var back []deferred
		for _, d := range out {
			if !d.at.After(now) {
				back = append(back, d)
			} else {
				keep = append(keep, d)
			}
		}
		out = keep
		for _, d := range back {
			offer(d.item, true)
		}
	}
	if len(order) < 5 || !slices.Equal(order[:4], []int{0, 1, 2, 3}) {
		t.Errorf("items started in the order %v, want 0 1 2 3 first (new items behind the refused ones)", order)
	}
}

// TestQueuesForgotten checks that memory follows the hosts with work: a
// queue with nothing to do is forgotten once its delay and block passed,
// while limits set for it stay.
func TestQueuesForgotten(t *testing.T) {
	clock := newFakeClock()
	s := New[int](Options{Clock: clock})
	s.SetLimits("own", Limits{Parallel: 4, Delay: -1})
	for i := range 1000 {
		s.Offer(fmt.Sprintf("h%d", i), i)
	}
	s.Offer("own", 1)
	s.BlockUntil("blocked", clock.Now().Add(time.Minute))
	for range 1001 {
		key, _, ok := s.TryTake()
		if !ok {
			t.Fatal("an item of a fresh queue was not handed out")
		}
		s.Done(key, clock.Now(), 0)
	}
	if st := s.Stats(); st.Queues != 1002 {
		t.Fatalf("Queues = %d right after, want 1002 (delays running)", st.Queues)
	}
	clock.Advance(2 * time.Second)
	s.Offer("h0", 0) // any call sweeps
	if st := s.Stats(); st.Queues != 2 || st.Blocked != 1 {
		t.Errorf("after the delay: Queues = %d, Blocked = %d; want 2 (h0 again, the blocked one) and 1", st.Queues, st.Blocked)
	}
	clock.Advance(time.Minute)
	_, _, _ = s.TryTake()
	s.Offer("own", 1)
	s.Offer("own", 2)
	if got := takeAll(s); len(got) != 2 {
		t.Errorf("own handed out %v at once, want 2 items: its limits (parallel 4, no delay) must outlive its queue", got)
	}
}

// TestRemove checks that a partition given back takes its waiting items out.
func TestRemove(t *testing.T) {
	s := New[int](Options{Clock: newFakeClock(), Buffer: 10})
	for i := range 6 {
		s.Offer(fmt.Sprint("h", i%2), i)
	}
	got := s.Remove(func(_ string, it int) bool { return it%3 == 0 })
	slices.Sort(got)
	if !slices.Equal(got, []int{0, 3}) {
		t.Errorf("Remove = %v, want [0 3]", got)
	}
	if st := s.Stats(); st.Buffered != 4 {
		t.Errorf("Buffered = %d after Remove, want 4", st.Buffered)
	}
	if got := takeAll(s); !slices.Equal(got, []int{1, 2}) && !slices.Equal(got, []int{2, 1}) {
		t.Errorf("handed out %v after Remove, want each queue's first remaining item, 1 and 2", got)
	}
}

// TestTakeWaits checks the blocking Take: it wakes when an item is offered,
// when a queue's delay passes on the clock, and returns when its context
// ends or the scheduler closes.
func TestTakeWaits(t *testing.T) {
	clock := newFakeClock()
	s := New[string](Options{Clock: clock})
	type got struct {
		item string
		err  error
	}
	taken := make(chan got, 1)
	take := func(ctx context.Context) {
		go func() {
			_, it, err := s.Take(ctx)
			taken <- got{it, err}
		}()
	}
	expect := func(want got) {
		t.Helper()
		select {
		case g := <-taken:
			if g.item != want.item || !errors.Is(g.err, want.err) {
				t.Fatalf("Take = %q, %v; want %q, %v", g.item, g.err, want.item, want.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Take did not return %q", want.item)
		}
	}
	take(t.Context())
	s.Offer("a", "a1")
	expect(got{item: "a1"})

	s.Offer("a", "a2")
	take(t.Context())
	s.Done("a", clock.Now(), 0)
	// The waiter sleeps on the clock until a's delay has passed; advance
	// until it wakes (it may not be asleep yet at the first advance).
	deadline := time.Now().Add(10 * time.Second)
	for len(taken) == 0 && time.Now().Before(deadline) {
		clock.Advance(100 * time.Millisecond)
		runtime.Gosched()
	}
	expect(got{item: "a2"})

	ctx, cancel := context.WithCancel(t.Context())
	take(ctx)
	cancel()
	expect(got{err: context.Canceled})

	take(t.Context())
	s.Close()
	expect(got{err: ErrClosed})
}

// BenchmarkQueueMemory measures the heap a queue with one item waiting takes,
// beside the same items in a plain slice (the baseline): the scheduler's cost
// per host.
func BenchmarkQueueMemory(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprint("queues=", n), func(b *testing.B) {
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("host-%d.example.com", i)
			}
			var perQueue, baseline float64
			for range b.N {
				base := heaptest.Live(func() any {
					items := make([]string, 0, n)
					for i := range n {
						items = append(items, keys[i])
					}
					return items
				})
				used := heaptest.Live(func() any {
					s := New[string](Options{Clock: newFakeClock()})
					for i := range n {
						s.Offer(keys[i], keys[i])
					}
					return s
				})
				perQueue, baseline = float64(used)/float64(n), float64(base)/float64(n)
			}
			b.ReportMetric(perQueue, "B/queue")
			b.ReportMetric(baseline, "B/item-baseline")
			b.ReportMetric(perQueue/baseline, "ratio")
		})
	}
}

// TestUnusedGivesTheTurnBack checks that an item ended without a request
// (Unused) does not cost its queue a delay: with one at a time the next
// item starts at once, where after Done it waits the delay; a queue of
// several at once keeps its next start, which another item may have set.
func TestUnusedGivesTheTurnBack(t *testing.T) {
	for _, tc := range []struct {
		name     string
		parallel int
		unused   bool
		wantNow  bool // the next item may start right after
	}{
		{"one at a time, Done", 1, false, false},
		{"one at a time, Unused", 1, true, true},
		{"two at a time, Unused", 2, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			s := New[int](Options{Parallel: tc.parallel, Delay: time.Second, Clock: clock})
			for i := range 2 * tc.parallel { // the buffer's size
				if ok, _ := s.Offer("h", i); !ok {
					t.Fatalf("item %d refused", i)
				}
			}
			key, _, ok := s.TryTake()
			if !ok {
				t.Fatal("the first item did not start")
			}
			if tc.parallel > 1 {
				// The second starts a delay after the first.
				clock.Advance(time.Second)
				if _, _, ok := s.TryTake(); !ok {
					t.Fatal("the second item did not start a delay after the first")
				}
				s.Done(key, clock.Now(), 0)
			}
			clock.Advance(10 * time.Millisecond)
			if tc.unused {
				s.Unused(key)
			} else {
				s.Done(key, clock.Now().Add(-10*time.Millisecond), 0)
			}
			if _, _, ok := s.TryTake(); ok != tc.wantNow {
				t.Errorf("next item may start at once: %v, want %v", ok, tc.wantNow)
			}
		})
	}
}
