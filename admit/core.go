package admit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Filter is the seen-URL filter a Core tests and marks canonical URLs in.
// Every dedup filter implements it.
type Filter interface {
	// Contains reports, per key, whether the filter holds it (read-only).
	Contains(ctx context.Context, keys [][]byte) ([]bool, error)
	// TestAndAdd adds the keys and reports, per key, whether it was new.
	TestAndAdd(ctx context.Context, keys [][]byte) ([]bool, error)
}

// Filters gives a Core each crawl's own filter: a URL is unique within a
// crawl, so the same URL in two crawls is admitted once in each.
type Filters interface {
	// Acquire returns the crawl's filter, opening it if needed; the filter
	// stays open until release is called (release may be called once). An
	// error that wraps ErrFilterUnusable says that trying again soon will
	// not help (a corrupt snapshot, parameters that conflict with the
	// stored ones): the Core then parks the crawl instead of retrying.
	Acquire(ctx context.Context, crawl string) (f Filter, release func(), err error)
}

// ErrFilterUnusable is wrapped by a Filters' error when a crawl's filter
// cannot be opened until someone acts (repairs or deletes it). A Core then
// parks the crawl: it hands the crawl's messages back (Messages.Park) for
// redelivery after Options.ParkDelay, decides none of its URLs, and goes on
// with the other crawls of the batch: one broken crawl never stalls the
// others, and its URLs are not lost.
var ErrFilterUnusable = errors.New("admit: crawl's filter unusable")

// Expiring is implemented by a filter whose keys expire, such as a revisit
// window: a Core does not keep its URLs in the seen cache, which would
// outlive them.
type Expiring interface {
	// Expires reports whether keys leave the filter by themselves.
	Expires() bool
}

// URL is one canonical URL of a batch, to be admitted to its crawl's
// frontier. Within a batch a (Crawl, URL) pair appears once.
type URL struct {
	Crawl string
	URL   string
	// Depth and From (the page it was found on) go with it to the frontier.
	Depth int
	From  string
	// Kind, Key and Meta are the link's kind, queue key and metadata
	// (wire format v2), carried to the frontier unchanged; the core does
	// not read them.
	Kind string
	Key  string
	Meta map[string][]string
	// Fetch, when set, is the spelling to fetch: URL is then the page's
	// spelling under the crawl's learned rules (package dust), which the
	// filter holds and the frontier's IDs are made of, and Fetch the one
	// it was found under, which the server is known to serve.
	Fetch string
	// Incarnation tells the crawl apart from an earlier crawl under the
	// same id (the filter's Incarnation; "" for none). The Core sets it
	// before publishing, and the Publisher derives the URL's ID from it.
	Incarnation string
}

// Incarnated is implemented by the filter of a crawl that may be deleted
// and created again under its id: the Core publishes the crawl's URLs
// with its Incarnation, so that the frontier's duplicate window, which a
// delete does not clear, does not take a new crawl's URLs for the deleted
// one's (and the Core mark them seen without their being queued).
type Incarnated interface {
	Incarnation() string
}

// Ack is the frontier's answer to the publish of one URL.
type Ack struct {
	// Duplicate is true when the frontier already held a message with the
	// URL's ID (its duplicate window caught the publish): the URL is on the
	// frontier, but not because of this publish.
	Duplicate bool
	// Err is why the URL is not on the frontier; the Core publishes it
	// again after a backoff.
	Err error
}

// Publisher puts URLs on the frontier.
type Publisher interface {
	// Publish puts every URL on the frontier under an ID derived from its
	// crawl and URL, so that the frontier stores a URL published twice
	// within its duplicate window once (Ack.Duplicate), and waits until
	// the frontier has durably stored or refused each: acks[i] is urls[i]'s
	// outcome. It returns an error only if ctx ended first.
	Publish(ctx context.Context, urls []URL) (acks []Ack, err error)
}

// Messages are the messages a batch of URLs came from, which the caller
// acknowledges once Admit has decided every URL. A Core calls them from the
// goroutine that called Admit only.
type Messages interface {
	// Touch tells the source that the batch is still being worked on
	// (JetStream: InProgress), so that it is not redelivered meanwhile. A
	// Core calls it before every filter or publish attempt and while it
	// waits; the implementation may skip calls that come too soon.
	Touch()
	// Park hands the messages of crawl back to the source for redelivery
	// after delay, drops them from the batch, and returns how many there
	// were.
	Park(crawl string, delay time.Duration) int
}

// Operations a Core reports to its Observer.
const (
	OpOpen     = "open"     // Filters.Acquire
	OpContains = "contains" // Filter.Contains
	OpPublish  = "publish"  // Publisher.Publish
	OpMark     = "mark"     // Filter.TestAndAdd
)

// Replicas makes marks durable beyond the filter's primary: a filter on a
// Redis with replicas acknowledges a mark before any replica has it, and
// a failover to a replica then forgets it. Wait returns nil once every
// mark acknowledged before the call is on enough replicas (Redis: WAIT);
// an error says that some may not be, and the Core marks again.
type Replicas interface {
	Wait(ctx context.Context) error
}

// Observer hears how a Core's dependencies fare: the adapter turns it into
// health and metrics. Its methods are called from the goroutines that call
// Admit, concurrently.
type Observer interface {
	// Failed reports that op failed for n URLs (n is 1 for a filter call)
	// with err, and will be retried after a backoff.
	Failed(op string, n int, err error)
	// Succeeded reports that op succeeded (for OpPublish: every URL of a
	// round was stored).
	Succeeded(op string)
	// Parked reports that n messages of crawl were handed back.
	Parked(crawl string, n int)
}

// Clock tells the time and waits; the real one is the time package's.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options configures a Core. The zero value of every field but Filters (or
// Filter) and Publisher means its default.
type Options struct {
	// Filters gives each crawl its filter; when it is nil, Filter is every
	// crawl's filter. One of them is required.
	Filters Filters
	Filter  Filter
	// Publisher puts admitted URLs on the frontier (required).
	Publisher Publisher
	// Replicas, when set, is waited on after every mark, before the
	// batch's URLs count as marked (and its messages are acknowledged): a
	// failed wait is a failed mark, retried with TestAndAdd, which writes
	// the keys again wherever the filter now lives (default: none).
	Replicas Replicas
	// Observer hears about failures and recoveries (default: none).
	Observer Observer
	// Clock tells the time (default: the real one).
	Clock Clock
	// SeenCache is the number of canonical URLs the Core remembers as held
	// by their filter, so that repeated links skip the filter call
	// (default 1,000,000, about 20 MB; negative: no cache). See the
	// package documentation.
	SeenCache int
	// Recheck is how long a verdict "not in the filter" is trusted: a URL
	// still unpublished after it (the frontier full, NATS away) is asked
	// about again before it is published. It must be at most half the
	// frontier's duplicate window (default 5 minutes, half the default
	// window).
	Recheck time.Duration
	// KeepAlive is how often a batch that waits (a backoff, another
	// batch's verdict) touches its Messages (default 7.5 s, a quarter of
	// the default AckWait).
	KeepAlive time.Duration
	// BackoffMin and BackoffMax bound the pause between retries while a
	// dependency fails (defaults 100 ms and 5 s).
	BackoffMin, BackoffMax time.Duration
	// ParkDelay is how long the messages of a crawl whose filter is
	// unusable wait before they are redelivered and the filter is tried
	// again (default 1 minute).
	ParkDelay time.Duration
	// Logger receives parking and unparking (default: discard).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Recheck, 5*time.Minute)
	def(&o.KeepAlive, 7500*time.Millisecond)
	def(&o.BackoffMin, 100*time.Millisecond)
	def(&o.BackoffMax, 5*time.Second)
	def(&o.ParkDelay, time.Minute)
	if o.SeenCache == 0 {
		o.SeenCache = 1_000_000
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// errAnswers is a filter or publisher that did not answer for every key.
var errAnswers = errors.New("admit: wrong number of answers")

type nopObserver struct{}

func (nopObserver) Failed(string, int, error) {}
func (nopObserver) Succeeded(string)          {}
func (nopObserver) Parked(string, int)        {}

// Verdict is what Admit decided about one URL.
type Verdict uint8

const (
	// Undecided: Admit's context ended first, or the URL's crawl was
	// parked.
	Undecided Verdict = iota
	// Admitted: published, the frontier stored it as new, and marked.
	Admitted
	// Republished: published, but the frontier held it already (its
	// duplicate window caught the publish: crash recovery, or another
	// process that held the URL at once); marked.
	Republished
	// Held: the filter holds it (Contains said so, or another batch of
	// this Core marked it): a duplicate, not published.
	Held
	// Cached: the seen cache knows the filter holds it: a duplicate, and
	// the filter was not asked.
	Cached
)

// Core runs the admission protocol (see the package documentation) on
// batches of URLs: each URL a batch holds is put on the frontier and
// marked in its crawl's filter once, whatever other batches of the Core,
// or other processes with the same filter and frontier, hold at the same
// time. It holds no goroutine; all its state is the seen cache, the
// flights of its batches and the parked crawls. It is safe for concurrent
// use: Admit is meant to be called by several goroutines at once.
type Core struct {
	o     Options
	clk   Clock
	obs   Observer
	cache *seenCache
	fl    *flights

	mu     sync.Mutex
	parked map[string]*ParkedCrawl
}

// New returns a Core with the options o.
func New(o Options) (*Core, error) {
	if (o.Filters == nil && o.Filter == nil) || o.Publisher == nil {
		return nil, errors.New("admit: New needs a filter and a publisher")
	}
	o = o.withDefaults()
	return &Core{o: o, clk: o.Clock, obs: o.Observer, cache: newSeenCache(o.SeenCache), fl: newFlights(),
		parked: map[string]*ParkedCrawl{}}, nil
}

// Forget tells the Core that crawl was deleted: the URLs its seen cache
// holds for it are forgotten, so that a crawl created again under the same
// id starts with nothing seen. (Its filter is the Filters' to drop.)
func (c *Core) Forget(crawl string) { c.cache.forget(crawl) }

// Admit runs the protocol on a batch of URLs that came from msgs, crawl by
// crawl in the order of their first URL, each in its own filter: it skips
// the URLs the seen cache knows, leaves those another of its batches is
// admitting to that batch and takes its verdict, asks the filter about the
// others (Contains), publishes those the filter does not hold, waits for
// every acknowledgement, and marks what was published (TestAndAdd). Every
// failure of the filter or the frontier is retried with backoff, for as
// long as ctx lives, touching msgs meanwhile. A crawl whose filter is
// unusable (ErrFilterUnusable) is parked: its messages are handed back and
// its URLs stay Undecided.
//
// When Admit returns nil, every URL of a crawl not parked is on the
// frontier and in the filter: the caller may acknowledge the messages of
// those crawls. Otherwise it returns ctx's error, and nothing may be
// acknowledged (some URLs may be on the frontier and not marked, which a
// redelivery repairs). verdicts[i] says what happened to urls[i]: the
// caller counts with it.
func (c *Core) Admit(ctx context.Context, urls []URL, msgs Messages) (verdicts []Verdict, err error) {
	b := &batch{Core: c, urls: urls, msgs: msgs, v: make([]Verdict, len(urls))}
	var crawls []string
	byCrawl := map[string][]int{}
	for i, u := range urls {
		if _, ok := byCrawl[u.Crawl]; !ok {
			crawls = append(crawls, u.Crawl)
		}
		byCrawl[u.Crawl] = append(byCrawl[u.Crawl], i)
	}
	for _, crawl := range crawls {
		f, release, err := b.filterOf(ctx, crawl)
		if errors.Is(err, ErrFilterUnusable) {
			c.park(msgs, crawl, err)
			continue
		}
		if err != nil {
			return b.v, err
		}
		err = b.admitIn(ctx, f, byCrawl[crawl])
		release()
		if err != nil {
			return b.v, err
		}
	}
	return b.v, nil
}

// batch is one call of Admit.
type batch struct {
	*Core
	urls []URL
	msgs Messages
	v    []Verdict
}

// filterOf returns the crawl's filter, retrying while it cannot be opened,
// unless the error says it is unusable. An error means ctx ended, or
// ErrFilterUnusable.
func (b *batch) filterOf(ctx context.Context, crawl string) (Filter, func(), error) {
	if b.o.Filters == nil {
		return b.o.Filter, func() {}, nil
	}
	var (
		f        Filter
		release  func()
		unusable error
	)
	_, err := b.retry(ctx, OpOpen, func(ctx context.Context) (_ []bool, err error) {
		f, release, err = b.o.Filters.Acquire(ctx, crawl)
		if errors.Is(err, ErrFilterUnusable) {
			unusable = err
			return nil, nil // not a failure of the filter service: stop retrying
		}
		return nil, err
	})
	switch {
	case unusable != nil:
		return nil, nil, unusable
	case err != nil:
		return nil, nil, err
	}
	b.unpark(crawl)
	return f, release, nil
}

// cacheFor returns the seen cache for URLs of filter f: none if its keys
// expire.
func (c *Core) cacheFor(f Filter) *seenCache {
	if e, ok := f.(Expiring); ok && e.Expires() {
		return nil
	}
	return c.cache
}

// admitIn runs the protocol on the URLs all of the batch, which belong to
// one crawl whose filter is f: Contains, publish the unseen, mark the
// published. URLs another batch of this Core is admitting are left to it
// (flights), and waited for only once the batch has landed all it owns, so
// waits never form a cycle.
func (b *batch) admitIn(ctx context.Context, f Filter, all []int) error {
	// URLs this Core already knows the filter holds are duplicates without
	// asking it.
	var ask []int
	for j, hit := range b.cacheFor(f).known(b.urls, all) {
		if hit {
			b.v[all[j]] = Cached
		} else {
			ask = append(ask, all[j])
		}
	}
	own, others := b.fl.claim(b.urls, ask)
	err := b.admitOwn(ctx, f, own)
	b.fl.land(b.urls, own, err == nil)
	if err != nil {
		return err
	}
	var again []int
	for _, o := range others {
		if err := b.await(ctx, o.f); err != nil {
			return err
		}
		if o.f.marked {
			b.v[o.i] = Held
		} else {
			again = append(again, o.i) // its owner gave up
		}
	}
	if len(again) > 0 {
		return b.admitIn(ctx, f, again)
	}
	return nil
}

// admitOwn runs the protocol on URLs no other batch of this Core holds.
// When it returns nil, every one of them is in the filter.
func (b *batch) admitOwn(ctx context.Context, f Filter, own []int) error {
	todo, err := b.unseen(ctx, f, own)
	if err != nil {
		return err
	}
	published, err := b.publish(ctx, f, todo)
	if err != nil || len(published) == 0 {
		return err
	}
	keys := b.keys(published)
	mark := func(ctx context.Context) ([]bool, error) {
		added, err := f.TestAndAdd(ctx, keys)
		if err == nil && b.o.Replicas != nil {
			if err = b.o.Replicas.Wait(ctx); err != nil {
				return nil, fmt.Errorf("admit: marks not on replicas: %w", err)
			}
		}
		return added, err
	}
	if _, err := b.retry(ctx, OpMark, mark); err != nil {
		return err
	}
	b.cacheFor(f).add(b.urls, published)
	return nil
}

func (b *batch) keys(idx []int) [][]byte {
	keys := make([][]byte, len(idx))
	for j, i := range idx {
		keys[j] = []byte(b.urls[i].URL)
	}
	return keys
}

// unseen returns the URLs of idx the filter does not hold; the others are
// Held, and go to the seen cache.
func (b *batch) unseen(ctx context.Context, f Filter, idx []int) ([]int, error) {
	if len(idx) == 0 {
		return nil, nil
	}
	keys := b.keys(idx)
	seen, err := b.retry(ctx, OpContains, func(ctx context.Context) ([]bool, error) {
		seen, err := f.Contains(ctx, keys)
		if err == nil && len(seen) != len(keys) {
			err = fmt.Errorf("%w: %d answers to %d keys", errAnswers, len(seen), len(keys))
		}
		return seen, err
	})
	if err != nil {
		return nil, err
	}
	out := idx[:0:0]
	var held []int
	for j, i := range idx {
		if seen[j] {
			b.v[i] = Held
			held = append(held, i)
		} else {
			out = append(out, i)
		}
	}
	b.cacheFor(f).add(b.urls, held)
	return out, nil
}

// publish puts the URLs todo on the frontier and returns those the
// frontier stored or recognised as duplicates: all of todo, except any
// that a re-check found marked meanwhile. It retries failed publishes
// (frontier full, NATS away) until they succeed.
func (b *batch) publish(ctx context.Context, f Filter, todo []int) ([]int, error) {
	checked := b.clk.Now()
	bo := b.backoff()
	var done []int
	urls := make([]URL, 0, len(todo))
	var incarnation string
	if i, ok := f.(Incarnated); ok {
		incarnation = i.Incarnation()
	}
	for len(todo) > 0 {
		// A verdict "unseen" is only trusted for half the duplicate window:
		// after that, a racing worker may have published and marked the URL
		// long enough ago that its message ID is forgotten.
		if b.clk.Now().Sub(checked) > b.o.Recheck {
			var err error
			if todo, err = b.unseen(ctx, f, todo); err != nil {
				return nil, err
			}
			checked = b.clk.Now()
			continue
		}
		b.msgs.Touch()
		urls = urls[:0]
		for _, i := range todo {
			u := b.urls[i]
			u.Incarnation = incarnation
			urls = append(urls, u)
		}
		acks, err := b.o.Publisher.Publish(ctx, urls)
		if err != nil {
			return nil, err
		}
		if len(acks) != len(todo) { // a broken publisher: all failed
			err := fmt.Errorf("%w: %d answers to %d urls", errAnswers, len(acks), len(todo))
			acks = make([]Ack, len(todo))
			for j := range acks {
				acks[j].Err = err
			}
		}
		var failed []int
		var lastErr error
		for j, a := range acks {
			i := todo[j]
			switch {
			case a.Err != nil:
				failed, lastErr = append(failed, i), a.Err
			case a.Duplicate:
				b.v[i] = Republished
				done = append(done, i)
			default:
				b.v[i] = Admitted
				done = append(done, i)
			}
		}
		if len(failed) == 0 {
			b.obs.Succeeded(OpPublish)
			return done, nil
		}
		b.obs.Failed(OpPublish, len(failed), lastErr)
		if err := b.wait(ctx, bo.Next()); err != nil {
			return nil, err
		}
		todo = failed
	}
	return done, nil
}

// retry calls a filter operation until it succeeds or ctx ends, backing off
// and touching the batch's messages in between. Each failure (a Redis
// timeout included: the client bounds a call by redis.timeout and leaves
// retrying to this loop) goes to the Observer and is retried; the batch is
// touched before every attempt, so a call that hangs until its timeout
// cannot outlast AckWait as long as the timeout is under two thirds of it.
func (b *batch) retry(ctx context.Context, op string, call func(context.Context) ([]bool, error)) ([]bool, error) {
	bo := b.backoff()
	for {
		b.msgs.Touch()
		res, err := call(ctx)
		if err == nil {
			b.obs.Succeeded(op)
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		b.obs.Failed(op, 1, err)
		if err := b.wait(ctx, bo.Next()); err != nil {
			return nil, err
		}
	}
}

// wait pauses for d, touching the batch's messages every KeepAlive. It
// returns ctx's error if ctx ended first.
func (b *batch) wait(ctx context.Context, d time.Duration) error {
	deadline := b.clk.Now().Add(d)
	for {
		b.msgs.Touch()
		left := deadline.Sub(b.clk.Now())
		if left <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-b.clk.After(min(left, b.o.KeepAlive)):
		}
	}
}

// await waits until f lands, touching the batch's messages every KeepAlive.
// It returns ctx's error if ctx ended first.
func (b *batch) await(ctx context.Context, f *flight) error {
	for {
		b.msgs.Touch()
		select {
		case <-f.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-b.clk.After(b.o.KeepAlive):
		}
	}
}

func (c *Core) backoff() *Backoff { return &Backoff{Min: c.o.BackoffMin, Max: c.o.BackoffMax} }
