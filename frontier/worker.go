package frontier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/stats"
)

// Filter is the seen-URL filter a Worker tests and marks canonical URLs in.
// Every dedup filter implements it.
type Filter interface {
	// Contains reports, per key, whether the filter holds it (read-only).
	Contains(ctx context.Context, keys [][]byte) ([]bool, error)
	// TestAndAdd adds the keys and reports, per key, whether it was new.
	TestAndAdd(ctx context.Context, keys [][]byte) ([]bool, error)
}

// FilterSet gives a Worker each crawl's own filter: a URL is unique within
// a crawl, so the same URL in two crawls is admitted once in each.
type FilterSet interface {
	// Acquire returns the crawl's filter, opening it if needed; the filter
	// stays open until release is called (release may be called once). An
	// error that wraps ErrFilterUnusable says that trying again soon will
	// not help (a corrupt snapshot, parameters that conflict with the
	// stored ones): the Worker then parks the crawl's messages instead of
	// holding its batch.
	Acquire(ctx context.Context, crawl string) (f Filter, release func(), err error)
}

// ErrFilterUnusable is wrapped by a FilterSet's error when a crawl's filter
// cannot be opened until someone acts (repairs or deletes it). A Worker
// then hands that crawl's messages back to JetStream for redelivery after
// WorkerOptions.ParkDelay, acknowledges nothing of that crawl, and goes on
// with the other crawls of the batch: one broken crawl never stalls the
// others, and its URLs are not lost.
var ErrFilterUnusable = errors.New("frontier: crawl's filter unusable")

// Canonicalizer turns raw links into canonical URLs; *normalize.Normalizer
// implements it. A rejected link's error should be a *normalize.Error,
// whose Reason labels the rejection counters ("invalid" otherwise).
type Canonicalizer interface {
	// Resolve resolves ref against the absolute URL base.
	Resolve(base, ref string) (string, error)
	// URL canonicalizes an absolute URL.
	URL(raw string) (string, error)
}

// Recorder receives a worker's counts once per StatsInterval; stats.Redis
// and stats.Memory implement it.
type Recorder interface {
	Add(ctx context.Context, d stats.Delta) error
}

// WorkerOptions configures a Worker. The zero value of every field means
// its default.
type WorkerOptions struct {
	// Topology names the streams; Run calls its Ensure.
	Topology Topology
	// Filters, when set, gives each crawl its own filter, and the filter
	// NewWorker is given may be nil; nil: every crawl shares that filter.
	Filters FilterSet
	// Batch is the number of discovered messages fetched and filtered
	// together (default 64).
	Batch int
	// Concurrency is the number of batches in progress at once (default 4).
	Concurrency int
	// FetchWait bounds how long a fetch waits for its batch to fill
	// (default 100 ms).
	FetchWait time.Duration
	// BackoffMin and BackoffMax bound the pause between retries while a
	// dependency fails (defaults 100 ms and 5 s).
	BackoffMin, BackoffMax time.Duration
	// ShutdownTimeout bounds how long a stopping worker finishes the
	// batches in hand (default 30 s).
	ShutdownTimeout time.Duration
	// StatsInterval is how often counts go to the Recorder (default 1 s).
	StatsInterval time.Duration
	// SeenCache is the number of canonical URLs the worker remembers as
	// held by the filter, so that repeated links skip the filter call
	// (default 1,000,000, about 20 MB; negative: no cache). See the package
	// documentation.
	SeenCache int
	// PublishTimeout bounds the wait for a frontier publish's
	// acknowledgement before it is retried (default 5 s).
	PublishTimeout time.Duration
	// ParkDelay is how long the messages of a crawl whose filter is
	// unusable (ErrFilterUnusable) wait before they are redelivered and the
	// filter is tried again (default 1 minute).
	ParkDelay time.Duration
	// Logger receives state changes (default: discard).
	Logger *slog.Logger
	// Registerer receives the worker's metrics (default: none).
	Registerer prometheus.Registerer
}

func (o WorkerOptions) withDefaults() WorkerOptions {
	o.Topology = o.Topology.WithDefaults()
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.Batch <= 0 {
		o.Batch = 64
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	def(&o.FetchWait, 100*time.Millisecond)
	def(&o.BackoffMin, 100*time.Millisecond)
	def(&o.BackoffMax, 5*time.Second)
	def(&o.ShutdownTimeout, 30*time.Second)
	def(&o.StatsInterval, time.Second)
	def(&o.PublishTimeout, 5*time.Second)
	def(&o.ParkDelay, time.Minute)
	if o.SeenCache == 0 {
		o.SeenCache = 1_000_000
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	return o
}

// Worker is a dedup worker: it consumes discovered messages from the
// workers' shared durable consumer, canonicalizes their links, and publishes
// each URL the filter has not seen to the frontier, once. Any number of
// workers may run against the same streams and filter; they split the work
// through the consumer and need no coordination of their own. A batch's
// URLs are tested and marked crawl by crawl, each crawl's in its own filter
// when WorkerOptions.Filters is set.
//
// Per batch: fetch up to Batch messages; decode them (poison is terminated
// and counted); resolve and canonicalize every link and drop repeats within
// the batch; ask the filter which URLs it holds (Contains); publish the
// others to the frontier asynchronously, each with Nats-Msg-Id = EntryID(crawl, URL),
// and wait for every acknowledgement; mark the published URLs in the filter
// (TestAndAdd); then acknowledge the discovered messages. See the package
// documentation for why this order lets each URL through exactly once.
//
// A Worker's methods are safe for concurrent use; Run may be called once.
type Worker struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	filter Filter
	canon  Canonicalizer
	rec    Recorder
	o      WorkerOptions
	topo   Topology
	log    *slog.Logger
	m      *metrics
	health *health
	cache  *seenCache
	fl     *flights

	mu         sync.Mutex
	pending    stats.Delta // not yet given to the Recorder
	total      stats.Delta // since the worker started
	started    time.Time
	inflight   atomic.Int64
	unfinished atomic.Int64
	parked     map[string]*ParkedCrawl // under mu

	closeCtx context.Context
	closeFn  context.CancelFunc
	runOnce  sync.Once
	runDone  chan struct{}
	ran      atomic.Bool
}

// NewWorker returns a Worker that reads and writes the pipeline's streams
// over nc, tests and marks URLs in filter, canonicalizes with canon and
// reports counts to rec. It does not take ownership of nc, filter or rec.
func NewWorker(nc *nats.Conn, filter Filter, canon Canonicalizer, rec Recorder, opts WorkerOptions) (*Worker, error) {
	if nc == nil || (filter == nil && opts.Filters == nil) || canon == nil || rec == nil {
		return nil, errors.New("frontier: NewWorker needs a connection, a filter, a canonicalizer and a recorder")
	}
	o := opts.withDefaults()
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(max(4096, 4*o.Concurrency*o.Batch)),
		jetstream.WithPublishAsyncTimeout(o.PublishTimeout))
	if err != nil {
		return nil, fmt.Errorf("frontier: jetstream: %w", err)
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("frontier: register metrics: %w", err)
	}
	w := &Worker{
		nc: nc, js: js, filter: filter, canon: canon, rec: rec, o: o, topo: o.Topology,
		log: o.Logger, m: m, started: time.Now(), parked: map[string]*ParkedCrawl{}, runDone: make(chan struct{}), cache: newSeenCache(o.SeenCache), fl: newFlights(),
	}
	w.health = newHealth(o.Logger, func(dep string, up bool) {
		v := 0.0
		if up {
			v = 1
		}
		m.up.WithLabelValues(dep).Set(v)
	})
	w.closeCtx, w.closeFn = context.WithCancel(context.Background())
	return w, nil
}

// Run processes discovered messages until ctx is cancelled or Close is
// called. On cancellation it stops fetching, finishes the batches in hand
// (for at most ShutdownTimeout), hands its last counts to the Recorder and
// returns nil; if a batch could not be finished in time it returns an error
// (the batch is not lost: its messages are redelivered). Run also returns
// an error if the streams exist with another topology. While NATS or the
// filter is unavailable, Run holds its batches, retries with backoff, and
// reports the state in Status; it never acknowledges a message whose URLs
// are not all on the frontier and marked.
func (w *Worker) Run(ctx context.Context) error {
	if !w.ran.CompareAndSwap(false, true) {
		return errors.New("frontier: Worker.Run called twice")
	}
	defer close(w.runDone)
	defer w.js.CleanupPublisher() // its reply subscription and timers

	fetchCtx, stopFetch := context.WithCancel(ctx)
	defer stopFetch()
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	// Close stops both at once: no grace.
	defer context.AfterFunc(w.closeCtx, func() { stopWork(); stopFetch() })()

	cons, err := w.setup(fetchCtx)
	if err != nil {
		if fetchCtx.Err() != nil {
			return nil
		}
		return err
	}
	w.log.Info("worker running", "stream", w.topo.DiscoveredStream(), "consumer", w.topo.Consumer(),
		"batch", w.o.Batch, "concurrency", w.o.Concurrency)

	var wg sync.WaitGroup
	for i := 0; i < w.o.Concurrency; i++ {
		wg.Go(func() { w.loop(fetchCtx, workCtx, cons) })
	}
	flushCtx, stopFlush := context.WithCancel(context.Background())
	var fwg sync.WaitGroup
	fwg.Go(func() { w.flushLoop(flushCtx) })

	<-fetchCtx.Done()
	w.log.Info("worker stopping: finishing batches in hand", "timeout", w.o.ShutdownTimeout)
	grace := time.AfterFunc(w.o.ShutdownTimeout, stopWork)
	wg.Wait()
	grace.Stop()
	stopFlush()
	fwg.Wait()
	final, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.flush(final); err != nil {
		w.log.Warn("last counts not recorded", "error", err)
	}
	if n := w.unfinished.Load(); n > 0 {
		return fmt.Errorf("frontier: stopped with %d batches unfinished (their messages will be redelivered)", n)
	}
	w.log.Info("worker stopped")
	return nil
}

// Close stops Run at once, without finishing the batches in hand (their
// messages are redelivered to other workers after AckWait), and waits for
// Run to return. It is idempotent and safe to call without Run.
func (w *Worker) Close() error {
	w.closeFn()
	if w.ran.Load() {
		<-w.runDone
	}
	return nil
}

// setup checks the server's version and ensures the streams and consumer
// exist, retrying while NATS is unavailable (Status names the servers it
// waits for). A server older than MinServerVersion is final.
func (w *Worker) setup(ctx context.Context) (jetstream.Consumer, error) {
	b := w.newBackoff()
	for {
		var cons jetstream.Consumer
		err := CheckServer(w.nc)
		if errors.Is(err, ErrNotConnected) {
			err = waitingError(w.nc)
		} else if err == nil {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = w.topo.Ensure(cctx, w.js)
			if err == nil {
				cons, err = w.js.Consumer(cctx, w.topo.DiscoveredStream(), w.topo.Consumer())
			}
			cancel()
		}
		if err == nil {
			w.health.set(DepNATS, nil)
			return cons, nil
		}
		if errors.Is(err, ErrTopologyMismatch) || errors.Is(err, ErrServerTooOld) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		w.health.set(DepNATS, err)
		if !sleep(ctx, b.next()) {
			return nil, ctx.Err()
		}
	}
}

// loop fetches and processes batches until fetchCtx ends.
func (w *Worker) loop(fetchCtx, workCtx context.Context, cons jetstream.Consumer) {
	b := w.newBackoff()
	for fetchCtx.Err() == nil {
		if !w.nc.IsConnected() {
			w.health.set(DepNATS, waitingError(w.nc))
			sleep(fetchCtx, b.next())
			continue
		}
		msgs, err := w.fetch(cons)
		if len(msgs) > 0 {
			w.process(workCtx, msgs)
		}
		if err != nil {
			w.m.retries.WithLabelValues("fetch").Inc()
			if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
				// The server lost its state (memory storage, or a new
				// server): recreate the streams and consumer.
				if c, serr := w.setup(fetchCtx); serr == nil {
					cons = c
				}
			}
			w.health.set(DepNATS, err)
			sleep(fetchCtx, b.next())
			continue
		}
		w.health.set(DepNATS, nil)
		b.reset()
	}
}

func (w *Worker) fetch(cons jetstream.Consumer) ([]jetstream.Msg, error) {
	batch, err := cons.Fetch(w.o.Batch, jetstream.FetchMaxWait(w.o.FetchWait))
	if err != nil {
		return nil, err
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	return msgs, batch.Error()
}

// candidate is one URL of a batch, first seen in the batch at index msg.
type candidate struct {
	url   string
	crawl string
	depth int
	from  string
}

// batch is the work of one fetch.
type batch struct {
	msgs    []jetstream.Msg // valid messages, acknowledged at the end
	crawlOf []string        // msgs[i]'s crawl
	cands   []candidate
	deltas  map[string]*stats.Delta // counts by crawl, recorded once its messages are acknowledged
	poison  stats.Delta             // counts of terminated messages
	touched time.Time               // last InProgress (or fetch)
}

// delta returns the counts of the batch's messages of crawl.
func (b *batch) delta(crawl string) *stats.Delta {
	d := b.deltas[crawl]
	if d == nil {
		d = &stats.Delta{}
		b.deltas[crawl] = d
	}
	return d
}

// park hands the messages of crawl back to JetStream for redelivery after
// delay, and forgets their counts (they are counted when processed).
func (b *batch) park(crawl string, delay time.Duration) int {
	n := 0
	msgs, of := b.msgs[:0], b.crawlOf[:0]
	for i, m := range b.msgs {
		if b.crawlOf[i] == crawl {
			_ = m.NakWithDelay(delay) // if lost, AckWait redelivers it
			n++
			continue
		}
		msgs, of = append(msgs, m), append(of, b.crawlOf[i])
	}
	b.msgs, b.crawlOf = msgs, of
	delete(b.deltas, crawl)
	return n
}

// process takes a fetched batch through the protocol and acknowledges it,
// unless ctx ends first.
func (w *Worker) process(ctx context.Context, msgs []jetstream.Msg) {
	start := time.Now()
	w.inflight.Add(1)
	w.m.inflight.Inc()
	defer func() { w.inflight.Add(-1); w.m.inflight.Dec() }()

	b := w.prepare(msgs, start)
	if !w.admit(ctx, b) {
		w.unfinished.Add(1)
		w.record(b.poison) // terminated: not redelivered
		return
	}
	for _, m := range b.msgs {
		_ = m.Ack() // a lost ack redelivers the message, which is then a no-op
	}
	w.m.batches.Inc()
	w.m.batchSeconds.Observe(time.Since(start).Seconds())
	d := b.poison
	for _, cd := range b.deltas {
		d.Merge(*cd)
	}
	w.record(d)
}

// prepare decodes and canonicalizes a batch. Poison messages are
// terminated at once.
func (w *Worker) prepare(msgs []jetstream.Msg, now time.Time) *batch {
	b := &batch{touched: now, deltas: map[string]*stats.Delta{}}
	index := make(map[string]int, len(msgs)*16)
	for _, m := range msgs {
		d, err := DecodeDiscovered(m.Data(), w.topo.Limits)
		if err != nil {
			var pe *PoisonError
			reason := PoisonMalformed
			if errors.As(err, &pe) {
				reason = pe.Reason
			}
			b.poison.AddPoison(reason)
			w.log.Warn("poison message rejected", "reason", reason, "error", err, "subject", m.Subject())
			_ = m.TermWithReason("sieve: " + reason)
			continue
		}
		b.msgs, b.crawlOf = append(b.msgs, m), append(b.crawlOf, d.Crawl)
		dl := b.delta(d.Crawl)
		dl.Pages++
		base := d.URL
		if d.Base != "" && d.URL != "" {
			if u, err := w.canon.Resolve(d.URL, d.Base); err == nil {
				base = u // an unusable <base href> is ignored, as browsers do
			}
		}
		depth := d.LinkDepth()
		for _, link := range d.Links {
			dl.Links++
			dl.CountCrawl(d.Crawl, stats.CrawlCounts{Links: 1})
			var u string
			if d.Kind == KindSeed || base == "" {
				u, err = w.canon.URL(link)
			} else {
				u, err = w.canon.Resolve(base, link)
			}
			if err != nil {
				dl.Reject(rejectReason(err))
				dl.CountCrawl(d.Crawl, stats.CrawlCounts{Rejected: 1})
				continue
			}
			key := d.Crawl + "\n" + u // a URL is unique within its crawl
			if i, ok := index[key]; ok {
				b.duplicate(i)
				if depth < b.cands[i].depth {
					b.cands[i].depth = depth
				}
				continue
			}
			index[key] = len(b.cands)
			b.cands = append(b.cands, candidate{url: u, crawl: d.Crawl, depth: depth, from: d.URL})
		}
	}
	return b
}

func rejectReason(err error) string {
	var ne *normalize.Error
	if errors.As(err, &ne) && ne.Reason != "" {
		return string(ne.Reason)
	}
	return "invalid"
}

// admit runs the protocol on a prepared batch, one crawl at a time, each in
// its own filter. It reports false if ctx ended first.
func (w *Worker) admit(ctx context.Context, b *batch) bool {
	var crawls []string
	byCrawl := map[string][]int{}
	for i, c := range b.cands {
		if _, ok := byCrawl[c.crawl]; !ok {
			crawls = append(crawls, c.crawl)
		}
		byCrawl[c.crawl] = append(byCrawl[c.crawl], i)
	}
	for _, crawl := range crawls {
		f, release, err := w.filterOf(ctx, b, crawl)
		if errors.Is(err, ErrFilterUnusable) {
			w.park(b, crawl, err)
			continue
		}
		if err != nil {
			return false
		}
		ok := w.admitIn(ctx, b, f, byCrawl[crawl])
		release()
		if !ok {
			return false
		}
	}
	return true
}

// filterOf returns the crawl's filter, retrying while it cannot be opened,
// unless the error says it is unusable. An error means ctx ended, or
// ErrFilterUnusable.
func (w *Worker) filterOf(ctx context.Context, b *batch, crawl string) (Filter, func(), error) {
	if w.o.Filters == nil {
		return w.filter, func() {}, nil
	}
	var (
		f        Filter
		release  func()
		unusable error
	)
	_, ok := w.retry(ctx, b, "open", func(ctx context.Context) (_ []bool, err error) {
		f, release, err = w.o.Filters.Acquire(ctx, crawl)
		if errors.Is(err, ErrFilterUnusable) {
			unusable = err
			return nil, nil // not a failure of the filter service: stop retrying
		}
		return nil, err
	})
	switch {
	case unusable != nil:
		return nil, nil, unusable
	case !ok:
		return nil, nil, ctx.Err()
	}
	w.unpark(crawl)
	return f, release, nil
}

// ParkedCrawl is a crawl whose filter cannot be opened (ErrFilterUnusable):
// its messages wait in the stream, redelivered every ParkDelay.
type ParkedCrawl struct {
	// Error is why the filter cannot be opened.
	Error string `json:"error"`
	// Since is when the crawl was first parked.
	Since time.Time `json:"since"`
	// Messages counts the deliveries of its messages handed back.
	Messages int64 `json:"messages"`
	logged   time.Time
}

// park hands the crawl's messages of batch b back to JetStream, counts
// them and logs the cause (at most once per ParkDelay per crawl).
func (w *Worker) park(b *batch, crawl string, err error) {
	n := b.park(crawl, w.o.ParkDelay)
	w.m.parked.Add(float64(n))
	w.mu.Lock()
	p := w.parked[crawl]
	if p == nil {
		p = &ParkedCrawl{Since: time.Now()}
		w.parked[crawl] = p
	}
	p.Error, p.Messages = err.Error(), p.Messages+int64(n)
	logNow := time.Since(p.logged) >= w.o.ParkDelay
	if logNow {
		p.logged = time.Now()
	}
	w.mu.Unlock()
	if logNow {
		w.log.Error("crawl parked: its filter cannot be opened; its messages wait in the stream and are retried",
			"crawl", crawl, "error", err, "messages", n, "retry_after", w.o.ParkDelay)
	}
}

// unpark forgets that crawl was parked, once its filter opened.
func (w *Worker) unpark(crawl string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p, ok := w.parked[crawl]; ok {
		delete(w.parked, crawl)
		w.log.Info("crawl unparked: its filter opened", "crawl", crawl, "parked_since", p.Since)
	}
}

// ForgetCrawl tells the worker that crawl was deleted: the URLs its seen
// cache holds for it are forgotten, so that a crawl created again under the
// same id starts with nothing seen. (Its filter is the FilterSet's to drop.)
func (w *Worker) ForgetCrawl(crawl string) { w.cache.forget(crawl) }

// Expiring is implemented by a filter whose keys expire, such as a revisit
// window: a Worker does not keep its URLs in the seen cache, which would
// outlive them.
type Expiring interface {
	// Expires reports whether keys leave the filter by themselves.
	Expires() bool
}

// cacheFor returns the seen cache for URLs of filter f: none if its keys
// expire.
func (w *Worker) cacheFor(f Filter) *seenCache {
	if e, ok := f.(Expiring); ok && e.Expires() {
		return nil
	}
	return w.cache
}

// admitIn runs the protocol on the candidates all of a batch, which belong
// to one crawl whose filter is f: Contains, publish the unseen, mark the
// published. URLs another of this worker's batches is admitting are left to
// it (flights). It reports false if ctx ended first.
func (w *Worker) admitIn(ctx context.Context, b *batch, f Filter, all []int) bool {
	// URLs this worker already knows the filter holds are duplicates
	// without asking it.
	var ask []int
	for j, hit := range w.cacheFor(f).known(b.cands, all) {
		if hit {
			b.duplicate(all[j])
			w.m.cacheHits.Inc()
		} else {
			ask = append(ask, all[j])
		}
	}
	own, others := w.fl.claim(b.cands, ask)
	ok := w.admitOwn(ctx, b, f, own)
	w.fl.land(b.cands, own, ok)
	if !ok {
		return false
	}
	var again []int
	for _, o := range others {
		if !w.await(ctx, b, o.f) {
			return false
		}
		if o.f.marked {
			b.duplicate(o.i)
		} else {
			again = append(again, o.i) // its owner gave up
		}
	}
	if len(again) > 0 {
		return w.admitIn(ctx, b, f, again)
	}
	return true
}

// admitOwn runs the protocol on candidates no other batch of this worker
// holds. When it reports true, every one of them is in the filter.
func (w *Worker) admitOwn(ctx context.Context, b *batch, f Filter, own []int) bool {
	todo, ok := w.unseen(ctx, b, f, own)
	if !ok {
		return false
	}
	published, ok := w.publish(ctx, b, f, todo)
	if !ok {
		return false
	}
	if len(published) == 0 {
		return true
	}
	keys := make([][]byte, len(published))
	for j, i := range published {
		keys[j] = []byte(b.cands[i].url)
	}
	if _, ok = w.retry(ctx, b, "mark", func(ctx context.Context) ([]bool, error) { return f.TestAndAdd(ctx, keys) }); !ok {
		return false
	}
	w.cacheFor(f).add(b.cands, published)
	return true
}

// duplicate counts candidate i as a duplicate of a URL already enqueued.
func (b *batch) duplicate(i int) {
	d := b.delta(b.cands[i].crawl)
	d.Duplicates++
	d.CountCrawl(b.cands[i].crawl, stats.CrawlCounts{Duplicates: 1})
	d.DuplicateHost(hostOf(b.cands[i].url))
}

// unseen returns the candidates (indexes into b.cands) the filter does not
// hold, counting the others as duplicates.
func (w *Worker) unseen(ctx context.Context, b *batch, f Filter, idx []int) ([]int, bool) {
	if len(idx) == 0 {
		return nil, true
	}
	keys := make([][]byte, len(idx))
	for j, i := range idx {
		keys[j] = []byte(b.cands[i].url)
	}
	seen, ok := w.retry(ctx, b, "contains", func(ctx context.Context) ([]bool, error) { return f.Contains(ctx, keys) })
	if !ok {
		return nil, false
	}
	out := idx[:0:0]
	var held []int
	for j, i := range idx {
		if seen[j] {
			b.duplicate(i)
			held = append(held, i)
		} else {
			out = append(out, i)
		}
	}
	w.cacheFor(f).add(b.cands, held)
	return out, true
}

// retry calls a filter operation until it succeeds or ctx ends, backing off
// and keeping the batch's messages alive in between. Each failure (a Redis
// timeout included: the client bounds a call by redis.timeout and leaves
// retrying to this loop) is counted, marks the filter down (logged once per
// outage, shown by Ready) and is retried; the batch is touched before every
// attempt, so a call that hangs until its timeout cannot outlast AckWait as
// long as the timeout is under two thirds of it.
func (w *Worker) retry(ctx context.Context, b *batch, op string, call func(context.Context) ([]bool, error)) ([]bool, bool) {
	bo := w.newBackoff()
	for {
		w.keepAlive(b)
		res, err := call(ctx)
		if err == nil {
			w.health.set(DepFilter, nil)
			return res, true
		}
		if ctx.Err() != nil {
			return nil, false
		}
		w.health.set(DepFilter, fmt.Errorf("%s: %w", op, err))
		w.m.retries.WithLabelValues(op).Inc()
		if !w.wait(ctx, b, bo.next()) {
			return nil, false
		}
	}
}

// publish puts the candidates todo on the frontier and returns those
// JetStream stored or recognised as duplicates: all of todo, except any
// that a re-check found marked meanwhile. It retries failed publishes
// (stream full, NATS away) with the same message ID until they succeed.
func (w *Worker) publish(ctx context.Context, b *batch, f Filter, todo []int) ([]int, bool) {
	checked := time.Now()
	bo := w.newBackoff()
	var done []int
	futures := make([]jetstream.PubAckFuture, 0, len(todo))
	for len(todo) > 0 {
		// A verdict "unseen" is only trusted for half the duplicate window:
		// after that, a racing worker may have published and marked the URL
		// long enough ago that its message ID is forgotten.
		if time.Since(checked) > w.topo.DuplicateWindow/2 {
			var ok bool
			if todo, ok = w.unseen(ctx, b, f, todo); !ok {
				return nil, false
			}
			checked = time.Now()
			continue
		}
		futures = futures[:0]
		var failed []int
		var lastErr error
		for _, i := range todo {
			f, err := w.js.PublishMsgAsync(w.entryMsg(b.cands[i]), jetstream.WithMsgID(EntryID(b.cands[i].crawl, b.cands[i].url)))
			if err != nil {
				failed, lastErr = append(failed, i), err
			}
			futures = append(futures, f)
		}
		for j, f := range futures {
			if f == nil {
				continue
			}
			i := todo[j]
			select {
			case ack := <-f.Ok():
				done = append(done, i)
				if ack.Duplicate {
					b.delta(b.cands[i].crawl).Republished++
					b.duplicate(i)
				} else {
					d := b.delta(b.cands[i].crawl)
					d.Admitted++
					d.CountCrawl(b.cands[i].crawl, stats.CrawlCounts{Admitted: 1})
					d.AdmitHost(hostOf(b.cands[i].url))
				}
			case err := <-f.Err():
				failed, lastErr = append(failed, i), err
			case <-ctx.Done():
				return nil, false
			}
		}
		if len(failed) == 0 {
			w.health.set(DepFrontier, nil)
			w.health.set(DepNATS, nil)
			return done, true
		}
		if isFull(lastErr) {
			w.health.set(DepFrontier, lastErr)
			w.health.set(DepNATS, nil)
		} else {
			w.health.set(DepNATS, fmt.Errorf("publish: %w", lastErr))
		}
		w.m.retries.WithLabelValues("publish").Add(float64(len(failed)))
		if !w.wait(ctx, b, bo.next()) {
			return nil, false
		}
		todo = failed
	}
	return done, true
}

// isFull reports whether a publish failed because the frontier stream is at
// its limits (JetStream error 10077, "maximum messages/bytes exceeded").
func isFull(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrStoreFailed
}

// jsErrStoreFailed is JSStreamStoreFailedF: the stream refused to store a
// message, which with DiscardNew means it is at MaxMsgs or MaxBytes.
const jsErrStoreFailed jetstream.ErrorCode = 10077

func (w *Worker) entryMsg(c candidate) *nats.Msg {
	data, _ := Entry{Crawl: c.crawl, URL: c.url, Depth: c.depth, From: c.from}.Encode() // strings and ints: cannot fail
	return &nats.Msg{
		Subject: w.topo.FrontierSubject(c.crawl, w.topo.Partition(hostOf(c.url))),
		Data:    data,
		Header:  nats.Header{},
	}
}

// hostOf returns the host name of a canonical URL (no port, no brackets).
func hostOf(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return ""
	}
	rest := u[i+3:]
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
		rest = rest[:j]
	}
	if strings.HasPrefix(rest, "[") {
		if j := strings.IndexByte(rest, ']'); j > 0 {
			return rest[1:j]
		}
		return rest
	}
	if j := strings.LastIndexByte(rest, ':'); j >= 0 {
		return rest[:j]
	}
	return rest
}

// wait pauses for d, telling JetStream the batch is still in progress when
// its messages come near their AckWait. It reports false if ctx ended.
func (w *Worker) wait(ctx context.Context, b *batch, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		w.keepAlive(b)
		left := time.Until(deadline)
		if left <= 0 {
			return true
		}
		if !sleep(ctx, min(left, w.topo.AckWait/4)) {
			return false
		}
	}
}

func (w *Worker) keepAlive(b *batch) {
	if time.Since(b.touched) < w.topo.AckWait/3 {
		return
	}
	for _, m := range b.msgs {
		_ = m.InProgress() // if NATS is away this fails; the message is redelivered, which is safe
	}
	b.touched = time.Now()
}

func (w *Worker) record(d stats.Delta) {
	w.m.count(d)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending.Merge(d)
	w.total.Merge(d)
}

func (w *Worker) flushLoop(ctx context.Context) {
	t := time.NewTicker(w.o.StatsInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = w.flush(ctx)
		}
	}
}

// flush hands the pending counts to the Recorder; on failure they are kept
// for the next try.
func (w *Worker) flush(ctx context.Context) error {
	w.mu.Lock()
	d := w.pending
	w.pending = stats.Delta{}
	w.mu.Unlock()
	if d.IsZero() {
		return nil
	}
	err := w.rec.Add(ctx, d)
	w.health.set(DepStats, err)
	if err != nil {
		w.mu.Lock()
		w.pending.Merge(d)
		w.mu.Unlock()
	}
	return err
}

// Status is a worker's state, for /readyz and /stats.
type Status struct {
	// Ready is true while NATS and the filter work.
	Ready bool `json:"ready"`
	// Dependencies maps nats, filter, stats and frontier to their state.
	Dependencies map[string]DepState `json:"dependencies"`
	// InflightBatches is the number of batches being processed.
	InflightBatches int64 `json:"inflight_batches"`
	// Started is when the worker was created.
	Started time.Time `json:"started"`
	// Totals counts this worker's work since it started.
	Totals stats.Delta `json:"totals"`
	// Parked lists the crawls whose filter cannot be opened, by id.
	Parked map[string]ParkedCrawl `json:"parked,omitempty"`
}

// Status returns the worker's current state.
func (w *Worker) Status() Status {
	w.mu.Lock()
	totals := w.total.Clone()
	var parked map[string]ParkedCrawl
	for id, p := range w.parked {
		if parked == nil {
			parked = map[string]ParkedCrawl{}
		}
		parked[id] = *p
	}
	w.mu.Unlock()
	totals.Hosts, totals.DuplicateHosts = nil, nil
	return Status{
		Ready:           len(w.health.notReady()) == 0,
		Dependencies:    w.health.states(),
		InflightBatches: w.inflight.Load(),
		Started:         w.started,
		Totals:          totals,
		Parked:          parked,
	}
}

// ErrNotReady is returned (wrapped) by Ready while a dependency is down.
var ErrNotReady = errors.New("frontier: worker not ready")

// Ready returns nil while NATS and the filter work, else an error naming
// what is down.
func (w *Worker) Ready() error {
	if down := w.health.notReady(); len(down) > 0 {
		return fmt.Errorf("%w: %s unavailable", ErrNotReady, strings.Join(down, ", "))
	}
	return nil
}

// backoff is an exponential backoff with jitter between min and max.
type backoff struct {
	min, max, cur time.Duration
}

func (w *Worker) newBackoff() *backoff { return &backoff{min: w.o.BackoffMin, max: w.o.BackoffMax} }

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	// Full jitter in [cur/2, cur): workers retrying together spread out.
	return b.cur/2 + rand.N(b.cur/2+1)
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits for d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
