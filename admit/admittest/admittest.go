// Package admittest provides in-memory fakes of admit's dependencies — a
// filter, a set of filters, a frontier publisher, a batch's messages and a
// clock — so that the admission protocol can be tested in one process,
// without Redis or NATS, with faults injected where a test wants them.
// Every fake records what happened to it in a shared Log, in order, so a
// test can check the protocol's ordering promises (no URL is marked before
// the frontier stored it).
//
// The fakes are for testing the Core; the adapters around it (the
// frontier worker, the dedup filters) are tested against real servers.
package admittest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sievecrawl/sieve/admit"
)

// Event is one thing that happened to a fake.
type Event struct {
	// Op is admit.OpContains, admit.OpMark, admit.OpPublish or admit.OpOpen.
	Op string
	// Crawl and Key name the URL (Key is empty for OpOpen).
	Crawl, Key string
	// Err is the injected failure, if the operation failed.
	Err error
	// Duplicate is a publish the frontier already held.
	Duplicate bool
}

// Log is the ordered record of what happened to the fakes sharing it. It
// is safe for concurrent use.
type Log struct {
	mu     sync.Mutex
	events []Event
}

func (l *Log) add(evs ...Event) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, evs...)
}

// Events returns a copy of the events so far.
func (l *Log) Events() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}

// Fault decides whether one operation fails: it is called with the
// operation's context, its name (admit.OpContains or admit.OpMark for a
// filter, admit.OpPublish for a publisher, admit.OpOpen for a set of
// filters), the crawl and the keys, and returns the error to fail with, or
// nil. It may block (until ctx ends, to model a hang).
type Fault func(ctx context.Context, op, crawl string, keys []string) error

// Filter is an exact in-memory seen-URL filter: a set of keys. Its zero
// value is not usable; use NewFilter. It is safe for concurrent use.
type Filter struct {
	crawl string
	log   *Log
	fault Fault

	mu          sync.Mutex
	keys        map[string]bool
	calls       map[string]int
	expiring    bool
	incarnation string
}

// NewFilter returns an empty filter of crawl that records its calls in log
// (which may be nil) and fails an operation when fault (which may be nil)
// says so. A failed call reads and adds nothing.
func NewFilter(crawl string, log *Log, fault Fault) *Filter {
	return &Filter{crawl: crawl, log: log, fault: fault, keys: map[string]bool{}, calls: map[string]int{}}
}

func strs(keys [][]byte) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = string(k)
	}
	return out
}

func (f *Filter) call(ctx context.Context, op string, keys [][]byte, add bool) ([]bool, error) {
	ks := strs(keys)
	f.mu.Lock()
	f.calls[op]++
	f.mu.Unlock()
	if f.fault != nil {
		if err := f.fault(ctx, op, f.crawl, ks); err != nil {
			f.log.add(Event{Op: op, Crawl: f.crawl, Key: strings.Join(ks, " "), Err: err})
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]bool, len(ks))
	evs := make([]Event, len(ks))
	for i, k := range ks {
		if add {
			out[i] = !f.keys[k]
			f.keys[k] = true
		} else {
			out[i] = f.keys[k]
		}
		evs[i] = Event{Op: op, Crawl: f.crawl, Key: k}
	}
	f.log.add(evs...)
	return out, nil
}

// Contains reports, per key, whether the filter holds it.
func (f *Filter) Contains(ctx context.Context, keys [][]byte) ([]bool, error) {
	return f.call(ctx, admit.OpContains, keys, false)
}

// TestAndAdd adds the keys and reports, per key, whether it was new.
func (f *Filter) TestAndAdd(ctx context.Context, keys [][]byte) ([]bool, error) {
	return f.call(ctx, admit.OpMark, keys, true)
}

// Add puts keys in the filter directly, as another process would.
func (f *Filter) Add(keys ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		f.keys[k] = true
	}
}

// Remove takes keys out of the filter, as a failover to a replica that
// never received their marks would.
func (f *Filter) Remove(keys ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		delete(f.keys, k)
	}
}

// Has reports whether the filter holds key.
func (f *Filter) Has(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[key]
}

// Calls returns how many times op (admit.OpContains, admit.OpMark) was
// called, failed calls included.
func (f *Filter) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// SetExpiring makes the filter report that its keys expire
// (admit.Expiring), as a revisit window does.
func (f *Filter) SetExpiring(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expiring = on
}

// Expires implements admit.Expiring.
func (f *Filter) Expires() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.expiring
}

// SetIncarnation sets the incarnation of the filter's crawl
// (admit.Incarnated): "" for none.
func (f *Filter) SetIncarnation(incarnation string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.incarnation = incarnation
}

// Incarnation implements admit.Incarnated.
func (f *Filter) Incarnation() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.incarnation
}

// Filters is a set of Filters, one per crawl, made on first use. It is
// safe for concurrent use.
type Filters struct {
	log   *Log
	fault Fault

	mu       sync.Mutex
	filters  map[string]*Filter
	unusable map[string]error
	inUse    int
}

// NewFilters returns a set of filters that share log and fault (both may
// be nil); fault is also asked, with admit.OpOpen, before each Acquire.
func NewFilters(log *Log, fault Fault) *Filters {
	return &Filters{log: log, fault: fault, filters: map[string]*Filter{}, unusable: map[string]error{}}
}

// Filter returns crawl's filter, making it if needed.
func (s *Filters) Filter(crawl string) *Filter {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.filters[crawl]
	if f == nil {
		f = NewFilter(crawl, s.log, s.fault)
		s.filters[crawl] = f
	}
	return f
}

// Drop forgets crawl's filter, as deleting the crawl does: the next use
// makes a new, empty one.
func (s *Filters) Drop(crawl string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.filters, crawl)
}

// SetUnusable makes Acquire of crawl fail with err wrapped with
// admit.ErrFilterUnusable, until it is called again with a nil err.
func (s *Filters) SetUnusable(crawl string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.unusable, crawl)
		return
	}
	s.unusable[crawl] = fmt.Errorf("%w: %w", admit.ErrFilterUnusable, err)
}

// InUse returns how many acquired filters were not released yet.
func (s *Filters) InUse() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inUse
}

// Acquire returns crawl's filter.
func (s *Filters) Acquire(ctx context.Context, crawl string) (admit.Filter, func(), error) {
	if s.fault != nil {
		if err := s.fault(ctx, admit.OpOpen, crawl, nil); err != nil {
			s.log.add(Event{Op: admit.OpOpen, Crawl: crawl, Err: err})
			return nil, nil, err
		}
	}
	s.mu.Lock()
	err := s.unusable[crawl]
	s.mu.Unlock()
	if err != nil {
		s.log.add(Event{Op: admit.OpOpen, Crawl: crawl, Err: err})
		return nil, nil, err
	}
	f := s.Filter(crawl)
	s.log.add(Event{Op: admit.OpOpen, Crawl: crawl})
	s.mu.Lock()
	s.inUse++
	s.mu.Unlock()
	var once sync.Once
	return f, func() {
		once.Do(func() {
			s.mu.Lock()
			s.inUse--
			s.mu.Unlock()
		})
	}, nil
}

// Publisher is an in-memory frontier: it stores each URL once by its crawl
// and URL (the message ID), and answers a second publish of it as a
// duplicate, as JetStream's duplicate window does (a window that never
// forgets). It is safe for concurrent use.
type Publisher struct {
	log   *Log
	fault Fault

	mu     sync.Mutex
	stored []admit.URL
	ids    map[string]bool
	tries  map[string]int
}

// NewPublisher returns an empty frontier that records its publishes in log
// (which may be nil) and fails the publish of a URL when fault (which may
// be nil), asked with admit.OpPublish and that one URL, says so.
func NewPublisher(log *Log, fault Fault) *Publisher {
	return &Publisher{log: log, fault: fault, ids: map[string]bool{}, tries: map[string]int{}}
}

// id is the URL's message ID: its crawl, incarnation and URL, as
// frontier.EntryIDIn digests them.
func id(u admit.URL) string {
	if u.Incarnation != "" {
		return u.Crawl + "@" + u.Incarnation + "\n" + u.URL
	}
	return u.Crawl + "\n" + u.URL
}

// Publish stores each URL not stored yet.
func (p *Publisher) Publish(ctx context.Context, urls []admit.URL) ([]admit.Ack, error) {
	acks := make([]admit.Ack, len(urls))
	for i, u := range urls {
		p.mu.Lock()
		p.tries[id(u)]++
		p.mu.Unlock()
		if p.fault != nil {
			if err := p.fault(ctx, admit.OpPublish, u.Crawl, []string{u.URL}); err != nil {
				acks[i].Err = err
				p.log.add(Event{Op: admit.OpPublish, Crawl: u.Crawl, Key: u.URL, Err: err})
				continue
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p.mu.Lock()
		acks[i].Duplicate = p.ids[id(u)]
		if !acks[i].Duplicate {
			p.ids[id(u)] = true
			p.stored = append(p.stored, u)
		}
		p.log.add(Event{Op: admit.OpPublish, Crawl: u.Crawl, Key: u.URL, Duplicate: acks[i].Duplicate})
		p.mu.Unlock()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return acks, nil
}

// Store puts u on the frontier directly, as a publish whose worker died
// before marking it would have.
func (p *Publisher) Store(u admit.URL) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ids[id(u)] {
		p.ids[id(u)] = true
		p.stored = append(p.stored, u)
	}
}

// Stored returns the URLs stored, in order.
func (p *Publisher) Stored() []admit.URL {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]admit.URL(nil), p.stored...)
}

// Tries returns how many times the URL of crawl was published, failed
// attempts included.
func (p *Publisher) Tries(crawl, url string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tries[crawl+"\n"+url]
}

// Messages are a batch's messages: it counts touches and records parks.
// It is safe for concurrent use.
type Messages struct {
	mu      sync.Mutex
	touches int
	perCr   map[string]int
	parked  map[string]time.Duration
}

// NewMessages returns the messages of a batch that holds perCrawl[c]
// messages of crawl c (what Park reports).
func NewMessages(perCrawl map[string]int) *Messages {
	return &Messages{perCr: perCrawl, parked: map[string]time.Duration{}}
}

// Touch counts a touch.
func (m *Messages) Touch() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.touches++
}

// Park records that crawl's messages were handed back with delay.
func (m *Messages) Park(crawl string, delay time.Duration) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.parked[crawl] = delay
	n := m.perCr[crawl]
	delete(m.perCr, crawl)
	return n
}

// Touches returns how many times the batch was touched.
func (m *Messages) Touches() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.touches
}

// Parked returns the parked crawls and their delays.
func (m *Messages) Parked() map[string]time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]time.Duration, len(m.parked))
	for k, v := range m.parked {
		out[k] = v
	}
	return out
}

// Clock is a clock in which every wait passes at once: After(d) moves the
// time forward by d and returns a channel that has fired. A Core's
// backoffs then take no real time, and a test sees exactly how much time
// the protocol waited. Use it for one batch at a time: a batch waiting for
// another (which the Core does with After) would spin, moving the time.
// It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock set to start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After moves the clock forward by d and returns a fired channel.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.After(d) }

var (
	_ admit.Filter    = (*Filter)(nil)
	_ admit.Expiring  = (*Filter)(nil)
	_ admit.Filters   = (*Filters)(nil)
	_ admit.Publisher = (*Publisher)(nil)
	_ admit.Messages  = (*Messages)(nil)
	_ admit.Clock     = (*Clock)(nil)
)
