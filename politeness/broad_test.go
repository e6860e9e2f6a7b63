package politeness

import (
	"container/heap"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// Broad crawls (issue 40): a scheduler holding a million hosts. The
// benchmarks here measure, at 10,000 hosts (the baseline, in the same run)
// and 1,000,000, the live heap per host and the cost of a hand-out; the test
// and BenchmarkBroadPoliteness check that the scheduler keeps every host at
// its pace when nothing else limits it.

// broadSizes are the host counts of the benchmarks: the baseline first.
var broadSizes = []int{10_000, 1_000_000}

// hostKey spells host i as a crawl's queue key: a host name of 23 to 27
// bytes, a fresh string each time (the scheduler keeps the caller's key, so
// its bytes are the host's cost too).
func hostKey(i int) string {
	return "host-" + strconv.Itoa(i) + ".example.com"
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// broadMemory is what a scheduler of n hosts keeps, in bytes per host.
type broadMemory struct {
	one, four, done float64 // one item buffered a host, four, and all done and swept
	queuesLeft      int     // queues remembered after the sweep
}

// measureBroadMemory fills a scheduler with n hosts holding items items each
// (keys and items built inside the measurement), then hands every item out,
// ends it and lets the delay pass.
func measureBroadMemory(n, items int) (perHost, afterDone float64, left int) {
	clock := newFakeClock()
	before := liveHeap()
	s := New[int](Options{Clock: clock, Buffer: items})
	for i := range n {
		k := hostKey(i)
		for j := range items {
			s.Offer(k, j)
		}
	}
	full := liveHeap()
	for range items {
		for {
			key, _, ok := s.TryTake()
			if !ok {
				break
			}
			s.Done(key, clock.Now(), 0)
		}
		clock.Advance(2 * time.Second) // past every delay: the next item's turn
	}
	s.TryTake() // sweeps
	done := liveHeap()
	left = s.Stats().Queues
	runtime.KeepAlive(s)
	return float64(full-before) / float64(n), float64(done-before) / float64(n), left
}

// BenchmarkBroadMemory measures the live heap a host costs the scheduler
// with one and with four items buffered (the host's key included), and what
// is left once every item is done and the hosts' delays have passed (the
// queues are forgotten; what stays is the map's and the heap's room). The
// 1,000,000-host run reports each figure's ratio to the 10,000-host one.
func BenchmarkBroadMemory(b *testing.B) {
	var base broadMemory
	for _, n := range broadSizes {
		b.Run(fmt.Sprint("hosts=", n), func(b *testing.B) {
			var m broadMemory
			for range b.N {
				m.one, m.done, m.queuesLeft = measureBroadMemory(n, 1)
				m.four, _, _ = measureBroadMemory(n, 4)
			}
			if m.queuesLeft != 0 {
				b.Errorf("%d queues remembered after every item was done and the delays passed, want 0", m.queuesLeft)
			}
			b.ReportMetric(m.one, "B/host-1item")
			b.ReportMetric(m.four, "B/host-4items")
			b.ReportMetric(m.done, "B/host-after")
			if n == broadSizes[0] {
				base = m
				return
			}
			if base.one > 0 {
				b.ReportMetric(m.one/base.one, "x10k-1item")
				b.ReportMetric(m.four/base.four, "x10k-4items")
			}
		})
	}
}

// steadyScheduler returns a scheduler of n hosts, each with a delay of one
// second and one item buffered, whose turns are spread evenly over a
// second: one host's turn comes every second/n. It hands out n items to
// get there.
func steadyScheduler(tb testing.TB, n int) (*Scheduler[int], *fakeClock, []string) {
	tb.Helper()
	clock := newFakeClock()
	s := New[int](Options{Clock: clock, Delay: time.Second})
	keys := make([]string, n)
	for i := range keys {
		keys[i] = hostKey(i)
		s.Offer(keys[i], i)
	}
	step := time.Second / time.Duration(n)
	for range n {
		handOut(tb, s, clock, step)
	}
	return s, clock, keys
}

// handOut advances the clock by step until an item may start, takes it,
// ends it and offers the host another: one Offer, Take and Done.
func handOut(tb testing.TB, s *Scheduler[int], clock *fakeClock, step time.Duration) {
	for range 1000 {
		clock.Advance(step)
		key, it, ok := s.TryTake()
		if !ok {
			continue
		}
		s.Done(key, clock.Now(), 0)
		if ok, _ := s.Offer(key, it); !ok {
			tb.Fatalf("Offer(%q) refused with the host's buffer empty", key)
		}
		return
	}
	tb.Fatalf("nothing handed out in 1000 steps of %v", step)
}

// BenchmarkBroadHandOut measures one hand-out (Offer, TryTake and Done, with
// the clock moved on to the next host's turn) among n hosts at their pace,
// and the sweep that looks for queues to forget (at most once a second,
// under the scheduler's lock). The 1,000,000-host run reports its ratio to
// the 10,000-host one.
func BenchmarkBroadHandOut(b *testing.B) {
	var base, baseSweep float64
	for _, n := range broadSizes {
		b.Run(fmt.Sprint("hosts=", n), func(b *testing.B) {
			s, clock, _ := steadyScheduler(b, n)
			step := time.Second / time.Duration(n)
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				handOut(b, s, clock, step)
			}
			ns := float64(time.Since(start).Nanoseconds()) / float64(b.N)
			b.StopTimer()
			sweep := measureSweep(s, clock)
			b.ReportMetric(sweep, "ms/sweep")
			if n == broadSizes[0] {
				base, baseSweep = ns, sweep
				return
			}
			if base > 0 {
				b.ReportMetric(ns/base, "x10k-handout")
				b.ReportMetric(sweep/max(baseSweep, 1e-6), "x10k-sweep")
			}
		})
	}
}

// measureSweep times the sweep of s when nothing can be forgotten (every
// host holds an item), in milliseconds: the median of five.
func measureSweep(s *Scheduler[int], clock *fakeClock) float64 {
	var ds []time.Duration
	for range 5 {
		clock.Advance(time.Second)
		s.mu.Lock()
		t := time.Now()
		s.sweepLocked(clock.Now())
		ds = append(ds, time.Since(t))
		s.mu.Unlock()
	}
	for i := range ds {
		for j := i + 1; j < len(ds); j++ {
			if ds[j] < ds[i] {
				ds[i], ds[j] = ds[j], ds[i]
			}
		}
	}
	return float64(ds[len(ds)/2].Nanoseconds()) / 1e6
}

// simEvent is a moment of the politeness simulation: an item handed back
// comes again (OfferDeferred), or a fetch ends (Done).
type simEvent struct {
	at   time.Time
	host int
	done bool
}

type simEvents []simEvent

func (h simEvents) Len() int           { return len(h) }
func (h simEvents) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h simEvents) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *simEvents) Push(x any)        { *h = append(*h, x.(simEvent)) }
func (h *simEvents) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// simResult is what a politeness simulation saw.
type simResult struct {
	handOuts  int           // items started in the period
	limit     float64       // Σ hosts' limits over the period: hosts × period / delay
	tooSoon   int           // starts of a host within its delay of its last
	minGap    time.Duration // least time between two starts of one host
	refused   int           // offers refused and handed back
	wallClock time.Duration
}

// simulatePoliteness drives a scheduler of n hosts, each with delay and a
// backlog of backlog items offered at once, for period of simulated time,
// as the crawler does: an item refused is handed back and offered again
// (OfferDeferred) at the time Offer said, each fetch takes fetch, and
// fetch loops are never short. It returns the hand-outs against Σ of the
// hosts' limits and checks every host's gaps.
func simulatePoliteness(n, backlog int, delay, fetch, period time.Duration) simResult {
	t0 := time.Now()
	clock := newFakeClock()
	start := clock.Now()
	s := New[int](Options{Clock: clock, Delay: delay})
	keys := make([]string, n)
	last := make([]time.Time, n)
	var events simEvents
	r := simResult{limit: float64(n) * float64(period) / float64(delay), minGap: period}
	offer := func(h int, deferred bool) {
		o := s.Offer
		if deferred {
			o = s.OfferDeferred
		}
		if ok, at := o(keys[h], h); !ok {
			r.refused++
			heap.Push(&events, simEvent{at: at, host: h})
		}
	}
	for h := range n {
		keys[h] = hostKey(h)
		for range backlog {
			offer(h, false)
		}
	}
	end := start.Add(period)
	for {
		now := clock.Now()
		for len(events) > 0 && !events[0].at.After(now) {
			e := heap.Pop(&events).(simEvent)
			if e.done {
				s.Done(keys[e.host], e.at.Add(-fetch), 0)
				continue
			}
			offer(e.host, true)
		}
		for {
			_, h, ok := s.TryTake()
			if !ok {
				break
			}
			if !last[h].IsZero() {
				gap := now.Sub(last[h])
				r.minGap = min(r.minGap, gap)
				if gap < delay {
					r.tooSoon++
				}
			}
			last[h] = now
			if now.Before(end) {
				r.handOuts++
			}
			heap.Push(&events, simEvent{at: now.Add(fetch), host: h, done: true})
		}
		if !now.Before(end) {
			break
		}
		// Nothing may start now: on to the first queue's turn or the
		// next event, whichever comes first.
		next := end
		if _, _, _, _, at := s.tryTake(); !at.IsZero() && at.Before(next) {
			next = at
		}
		if len(events) > 0 && events[0].at.Before(next) {
			next = events[0].at
		}
		clock.Advance(next.Sub(now))
	}
	r.wallClock = time.Since(t0)
	return r
}

// TestBroadPoliteness checks the pace at 100,000 hosts, each with a delay of
// one second, a fetch of 200 ms and a backlog of 8 (two buffered, six
// handed back as the crawler hands them back to JetStream, and offered again
// when Offer said): over 4 simulated seconds the scheduler hands out at
// least 0.9 × Σ of the hosts' limits (hosts / delay), and never starts a
// host twice within its delay. BenchmarkBroadPoliteness runs it at
// 1,000,000 hosts.
func TestBroadPoliteness(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	r := simulatePoliteness(n, 8, time.Second, 200*time.Millisecond, 4*time.Second)
	ratio := float64(r.handOuts) / r.limit
	t.Logf("%d hosts: %d hand-outs in 4 s against a limit of %.0f: ratio %.4f; least gap %v; %d offers refused; %v",
		n, r.handOuts, r.limit, ratio, r.minGap, r.refused, r.wallClock)
	if ratio < 0.9 {
		t.Errorf("hand-outs = %.4f × Σ host limits, want ≥ 0.9", ratio)
	}
	if r.tooSoon > 0 {
		t.Errorf("%d starts within a host's delay of its last (least gap %v), want none", r.tooSoon, r.minGap)
	}
}

// BenchmarkBroadPoliteness is TestBroadPoliteness at 10,000 hosts (the
// baseline) and 1,000,000, with a backlog of 6 over 5 simulated seconds:
// the ratio of hand-outs to Σ host limits, and the simulation's wall clock
// per hand-out.
func BenchmarkBroadPoliteness(b *testing.B) {
	var base float64
	for _, n := range broadSizes {
		b.Run(fmt.Sprint("hosts=", n), func(b *testing.B) {
			var r simResult
			for range b.N {
				r = simulatePoliteness(n, 6, time.Second, 200*time.Millisecond, 5*time.Second)
			}
			ratio := float64(r.handOuts) / r.limit
			if ratio < 0.9 || r.tooSoon > 0 {
				b.Errorf("ratio %.4f (want ≥ 0.9), %d starts too soon (want 0)", ratio, r.tooSoon)
			}
			ns := float64(r.wallClock.Nanoseconds()) / float64(r.handOuts)
			b.ReportMetric(ratio, "of-limit")
			b.ReportMetric(ns, "ns/handout-sim")
			if n == broadSizes[0] {
				base = ns
			} else if base > 0 {
				b.ReportMetric(ns/base, "x10k-sim")
			}
		})
	}
}
