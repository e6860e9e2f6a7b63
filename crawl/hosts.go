package crawl

import (
	"context"
	"sync"
	"time"
)

// hostGate enforces per-host politeness: at most perHost requests to one host
// at a time, and at least delay between the starts of two requests to it
// (longer when the host asked for more with Crawl-delay or Retry-After).
// It is safe for concurrent use; idle hosts are forgotten.
type hostGate struct {
	perHost int
	delay   time.Duration
	special map[string]HostPolicy // hosts with their own Parallel and Delay

	mu        sync.Mutex
	hosts     map[string]*hostSlot
	lastSweep time.Time
}

type hostSlot struct {
	delay time.Duration
	sem   chan struct{} // one token per request in flight
	users int           // holders and waiters, guarded by hostGate.mu
	next  time.Time     // earliest start of the next request, guarded by hostGate.mu
}

func newHostGate(perHost int, delay time.Duration, special map[string]HostPolicy) *hostGate {
	return &hostGate{perHost: max(perHost, 1), delay: delay, special: special, hosts: map[string]*hostSlot{}}
}

// acquire waits for a request slot for host and for the host's delay to pass.
// The caller must call release once the request is done, with how long the
// host asked to be left alone (Crawl-delay, Retry-After; 0 for nothing more
// than the configured delay).
func (g *hostGate) acquire(ctx context.Context, host string) (release func(pause time.Duration), err error) {
	g.mu.Lock()
	g.sweepLocked()
	s := g.hosts[host]
	if s == nil {
		s = &hostSlot{sem: make(chan struct{}, g.perHost), delay: g.delay}
		if p, ok := g.special[host]; ok {
			s.sem, s.delay = make(chan struct{}, max(p.Parallel, 1)), p.Delay
		}
		g.hosts[host] = s
	}
	s.users++
	g.mu.Unlock()
	leave := func() {
		g.mu.Lock()
		s.users--
		g.mu.Unlock()
	}

	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
	if err := ctx.Err(); err != nil { // both were ready: select chose at random
		<-s.sem
		leave()
		return nil, err
	}
	for {
		g.mu.Lock()
		now := time.Now()
		wait := s.next.Sub(now)
		if wait <= 0 {
			s.next = now.Add(s.delay)
			g.mu.Unlock()
			break
		}
		g.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			<-s.sem
			leave()
			return nil, ctx.Err()
		}
	}
	var once sync.Once
	return func(pause time.Duration) {
		once.Do(func() {
			g.mu.Lock()
			if t := time.Now().Add(pause); pause > 0 && t.After(s.next) {
				s.next = t
			}
			s.users--
			g.mu.Unlock()
			<-s.sem
		})
	}, nil
}

// sweepLocked forgets hosts nobody uses whose delay has passed, at most once a
// second.
func (g *hostGate) sweepLocked() {
	now := time.Now()
	if now.Sub(g.lastSweep) < time.Second {
		return
	}
	g.lastSweep = now
	for h, s := range g.hosts {
		if s.users == 0 && !now.Before(s.next) {
			delete(g.hosts, h)
		}
	}
}

// size returns the number of hosts remembered.
func (g *hostGate) size() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.hosts)
}
