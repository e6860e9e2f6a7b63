package frontier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sievecrawl/sieve/admit"
	"github.com/sievecrawl/sieve/dust"
	"github.com/sievecrawl/sieve/internal/jspull"
	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/stats"
)

// Filter is the seen-URL filter a Worker tests and marks canonical URLs in
// (admit.Filter). Every dedup filter implements it.
type Filter = admit.Filter

// FilterSet gives a Worker each crawl's own filter (admit.Filters): a URL
// is unique within a crawl, so the same URL in two crawls is admitted once
// in each. An Acquire error that wraps ErrFilterUnusable parks the crawl.
type FilterSet = admit.Filters

// ErrFilterUnusable is wrapped by a FilterSet's error when a crawl's filter
// cannot be opened until someone acts (repairs or deletes it). A Worker
// then hands that crawl's messages back to JetStream for redelivery after
// WorkerOptions.ParkDelay, acknowledges nothing of that crawl, and goes on
// with the other crawls of the batch: one broken crawl never stalls the
// others, and its URLs are not lost. It is admit.ErrFilterUnusable.
var ErrFilterUnusable = admit.ErrFilterUnusable

// RuleSets gives each crawl's learned rewrite rules; *Rules implements it.
type RuleSets interface {
	// Set returns the crawl's rules (nil: none).
	Set(crawl string) *dust.Set
}

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
	// Rules, when set, gives each crawl's learned rewrite rules: a
	// discovered URL is admitted under its Key (dust.Set.Key), so that a
	// spelling of a page already admitted under another is a duplicate,
	// and is published (fetched) as it was found.
	Rules RuleSets
	// Filters, when set, gives each crawl its own filter, and the filter
	// NewWorker is given may be nil; nil: every crawl shares that filter.
	Filters FilterSet
	// Batch is the number of discovered messages fetched and filtered
	// together (default 64).
	Batch int
	// Concurrency is the number of batches in progress at once (default 4).
	Concurrency int
	// FetchWait bounds how long a fetch waits for a message when none is
	// waiting (default 100 ms); a batch is what is waiting, never held
	// for more to come.
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
	// (default 1,000,000, about 20 MB; negative: no cache). See admit's
	// package documentation.
	SeenCache int
	// PublishTimeout bounds the wait for a frontier publish's
	// acknowledgement before it is retried (default 5 s).
	PublishTimeout time.Duration
	// ParkDelay is how long the messages of a crawl whose filter is
	// unusable (ErrFilterUnusable) wait before they are redelivered and the
	// filter is tried again (default 1 minute).
	ParkDelay time.Duration
	// Replicas, when set, is waited on after every mark, before a batch's
	// messages are acknowledged (admit.Options.Replicas): with
	// dedup.ReplicaWait, a Redis failover then loses no mark.
	Replicas admit.Replicas
	// ID names the worker among the others in the workers' bucket when
	// Topology.Routes > 0 (default: random, new for each Worker).
	ID string
	// RouteLeaseTTL is how long a route partition stays leased to a worker
	// that stopped refreshing it (dead, or cut off); leases are refreshed
	// every third of it (default 10 s).
	RouteLeaseTTL time.Duration
	// HeldBound is how long a batch is in hand before it counts as held
	// (Status.Held; logged once a minute while it lasts; default
	// DefaultHeldBound).
	HeldBound time.Duration
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
	def(&o.HeldBound, DefaultHeldBound)
	def(&o.RouteLeaseTTL, DefaultRouteLeaseTTL)
	if o.ID == "" {
		o.ID = randomID()
	}
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
// each URL the filter has not seen to the frontier, once. It is the
// JetStream adapter around an admit.Core, which runs the protocol: the
// Worker fetches, decodes and canonicalizes batches, hands their URLs to the
// Core with the batch's messages (kept alive with InProgress, parked with
// NakWithDelay), acknowledges a batch once the Core has landed it, and
// turns what the Core reports into counts, metrics and health. Any number of
// workers may run against the same streams and filter; they split the work
// through the consumer and need no coordination of their own; with
// Topology.Routes > 0 they forward pages' links to the worker that owns
// them instead (package doc, "One owner per URL"). A batch's
// URLs are tested and marked crawl by crawl, each crawl's in its own filter
// when WorkerOptions.Filters is set.
//
// Per batch: fetch up to Batch messages; decode them (poison is terminated
// and counted); resolve and canonicalize every link and drop repeats within
// the batch; ask the filter which URLs it holds (Contains); publish the
// others to the frontier asynchronously, each with Nats-Msg-Id = EntryID(crawl, URL),
// and wait for every acknowledgement; mark the published URLs in the filter
// (TestAndAdd); then acknowledge the discovered messages. See the package
// documentation of package admit for why this order lets each URL through
// exactly once.
//
// A Worker's methods are safe for concurrent use; Run may be called once.
type Worker struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	core   *admit.Core
	canon  Canonicalizer
	rec    Recorder
	o      WorkerOptions
	topo   Topology
	log    *slog.Logger
	m      *metrics
	health *health
	held   *holding

	mu         sync.Mutex
	pending    stats.Delta // not yet given to the Recorder
	total      stats.Delta // since the worker started
	started    time.Time
	inflight   atomic.Int64
	unfinished atomic.Int64
	cacheHits  atomic.Int64                // URLs the seen cache answered
	decided    atomic.Int64                // URLs the Core decided (Admitted, Republished, Held or Cached)
	leases     atomic.Pointer[routeLeases] // with Topology.Routes > 0, once Run opened them

	closeCtx context.Context
	closeFn  context.CancelFunc
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
		nc: nc, js: js, canon: canon, rec: rec, o: o, topo: o.Topology,
		log: o.Logger, m: m, started: time.Now(), runDone: make(chan struct{}),
	}
	w.held = newHolding(o.HeldBound, o.Logger)
	w.health = newHealth(o.Logger, func(dep string, up bool) {
		v := 0.0
		if up {
			v = 1
		}
		m.up.WithLabelValues(dep).Set(v)
	})
	w.core, err = admit.New(admit.Options{
		Filters: o.Filters, Filter: filter, Publisher: NewPublisher(js, o.Topology),
		Observer: observer{w}, SeenCache: o.SeenCache, Replicas: o.Replicas,
		Recheck: o.Topology.DuplicateWindow / 2, KeepAlive: o.Topology.AckWait / 4,
		BackoffMin: o.BackoffMin, BackoffMax: o.BackoffMax, ParkDelay: o.ParkDelay, Logger: o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("frontier: %w", err)
	}
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
	handle := w.process
	if w.topo.Routes > 0 {
		// Pages are forwarded, link by link, to the owners of their
		// routes; this worker admits the routes it leases.
		handle = w.forward
		leases, err := w.openLeases(fetchCtx, workCtx)
		if err != nil {
			if fetchCtx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Go(func() { leases.run(fetchCtx) })
	}
	for i := 0; i < w.o.Concurrency; i++ {
		wg.Go(func() { w.loop(fetchCtx, workCtx, cons, w.setup, handle) })
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
			if warn := ReplicasWarning(w.nc, w.topo); warn != "" {
				w.log.Warn(warn)
			}
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
		if !sleep(ctx, b.Next()) {
			return nil, ctx.Err()
		}
	}
}

// loop fetches batches from cons and hands them to handle until fetchCtx
// ends; reopen finds the consumer again if the server lost it.
func (w *Worker) loop(fetchCtx, workCtx context.Context, cons jetstream.Consumer,
	reopen func(context.Context) (jetstream.Consumer, error), handle func(context.Context, []jetstream.Msg)) {
	b := w.newBackoff()
	for fetchCtx.Err() == nil {
		if !w.nc.IsConnected() {
			w.health.set(DepNATS, waitingError(w.nc))
			sleep(fetchCtx, b.Next())
			continue
		}
		msgs, err := w.fetch(fetchCtx, cons)
		if len(msgs) > 0 {
			handle(workCtx, msgs)
		}
		if err != nil {
			w.m.retries.WithLabelValues("fetch").Inc()
			if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
				// The server lost its state (memory storage, or a new
				// server): recreate the streams and consumer.
				if c, serr := reopen(fetchCtx); serr == nil {
					cons = c
				}
			}
			w.health.set(DepNATS, err)
			sleep(fetchCtx, b.Next())
			continue
		}
		w.health.set(DepNATS, nil)
		b.Reset()
	}
}

// fetch takes the next batch: what is waiting, up to Batch, at once; when
// nothing is, it waits up to FetchWait for one message and takes what has
// arrived with it. A batch is thus what arrived while the last one was
// handled (natural batching): full under load, a page's links alone when
// pages come one at a time, and never held back by a timer waiting for it
// to fill, which would add its wait to every page's way to the frontier.
// The server ends the wait, so that no message it sends is lost; a
// stopping worker does not wait for it (jspull.One).
func (w *Worker) fetch(ctx context.Context, cons jetstream.Consumer) ([]jetstream.Msg, error) {
	batch, err := cons.FetchNoWait(w.o.Batch)
	msgs, err := collect(nil, batch, err)
	if len(msgs) > 0 || err != nil {
		return msgs, err
	}
	msg, err := jspull.One(ctx, cons, w.o.FetchWait)
	if msg == nil {
		if ctx.Err() != nil {
			return nil, nil // stopping: not a failure
		}
		return nil, err
	}
	batch, err = cons.FetchNoWait(w.o.Batch - 1)
	return collect([]jetstream.Msg{msg}, batch, err)
}

// collect appends the messages of a fetch (batch, err) to msgs.
func collect(msgs []jetstream.Msg, batch jetstream.MessageBatch, err error) ([]jetstream.Msg, error) {
	if err != nil {
		return msgs, err
	}
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	return msgs, batch.Error()
}

var _ admit.Messages = (*batch)(nil)

// batch is the work of one fetch: the admit.Messages of its URLs.
type batch struct {
	rules   RuleSets                // the crawls' learned rules, or nil
	msgs    []jetstream.Msg         // valid messages, acknowledged at the end
	crawlOf []string                // msgs[i]'s crawl
	urls    []admit.URL             // distinct per crawl
	index   map[string]int          // crawl "\n" URL → its index in urls
	deltas  map[string]*stats.Delta // counts by crawl, recorded once its messages are acknowledged
	poison  stats.Delta             // counts of terminated messages
	touched time.Time               // last InProgress (or fetch)
	ackWait time.Duration
	parked  bool // a crawl of the batch was parked
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

// Park hands the messages of crawl back to JetStream for redelivery after
// delay, and forgets their counts (they are counted when processed).
func (b *batch) Park(crawl string, delay time.Duration) int {
	b.parked = true
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

// process takes a fetched batch of discovered messages through the
// protocol and acknowledges it, unless ctx ends first.
func (w *Worker) process(ctx context.Context, msgs []jetstream.Msg) { w.admit(ctx, msgs, false) }

// processRouted does what process does for a batch of a route partition:
// messages of canonical links that a worker forwarded (and counted).
func (w *Worker) processRouted(ctx context.Context, msgs []jetstream.Msg) { w.admit(ctx, msgs, true) }

// begin counts a batch in hand (in flight, held) until the returned end
// is called.
func (w *Worker) begin() (end func()) {
	w.inflight.Add(1)
	w.m.inflight.Inc()
	held := w.held.begin()
	return func() {
		w.held.end(held)
		w.inflight.Add(-1)
		w.m.inflight.Dec()
	}
}

func (w *Worker) admit(ctx context.Context, msgs []jetstream.Msg, routed bool) {
	start := time.Now()
	defer w.begin()()

	b := w.prepare(msgs, start, routed)
	verdicts, err := w.core.Admit(ctx, b.urls, b)
	w.count(b, verdicts)
	w.finish(b, start, err == nil)
}

// finish acknowledges a batch that was done and records its counts, or,
// when it was not, records only its poison (terminated: not redelivered)
// and leaves its messages to be redelivered.
func (w *Worker) finish(b *batch, start time.Time, done bool) {
	if !done {
		w.unfinished.Add(1)
		w.record(b.poison)
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

// newBatch starts a batch fetched at now.
func (w *Worker) newBatch(now time.Time) *batch {
	return &batch{rules: w.o.Rules, touched: now, deltas: map[string]*stats.Delta{}, index: map[string]int{}, ackWait: w.topo.AckWait}
}

// decode decodes a fetched message. A poison message is terminated at once
// and counted in b, and decode returns false.
func (w *Worker) decode(b *batch, m jetstream.Msg) (Discovered, bool) {
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
		return d, false
	}
	b.msgs, b.crawlOf = append(b.msgs, m), append(b.crawlOf, d.Crawl)
	return d, true
}

// canonicalize resolves and canonicalizes d's links, counting the page,
// each link and each rejection in dl, and calls add with the index and
// canonical URL of every link it accepts.
func (w *Worker) canonicalize(d Discovered, dl *stats.Delta, add func(li int, u string)) {
	dl.Pages++
	base := d.URL
	if d.Base != "" && d.URL != "" {
		if u, err := w.canon.Resolve(d.URL, d.Base); err == nil {
			base = u // an unusable <base href> is ignored, as browsers do
		}
	}
	for li, link := range d.Links {
		dl.Links++
		dl.CountCrawl(d.Crawl, stats.CrawlCounts{Links: 1})
		var u string
		var err error
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
		add(li, u)
	}
}

// prepare decodes and canonicalizes a batch. Poison messages are
// terminated at once. The links of routed messages are canonical already,
// and their page and links were counted by the worker that forwarded them.
func (w *Worker) prepare(msgs []jetstream.Msg, now time.Time, routed bool) *batch {
	b := w.newBatch(now)
	for _, m := range msgs {
		d, ok := w.decode(b, m)
		if !ok {
			continue
		}
		add := func(li int, u string) { b.add(d, li, u) }
		if !routed {
			w.canonicalize(d, b.delta(d.Crawl), add)
			continue
		}
		for li, u := range d.Links {
			add(li, u)
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

// count turns the Core's verdicts on a batch's URLs into its counts.
// URLs left undecided (the batch unfinished, or its crawl parked) count
// nothing.
func (w *Worker) count(b *batch, verdicts []admit.Verdict) {
	for i, v := range verdicts {
		u := b.urls[i]
		if v != admit.Undecided {
			w.decided.Add(1)
		}
		switch v {
		case admit.Cached:
			w.cacheHits.Add(1)
			w.m.cacheHits.Inc()
			b.duplicate(i)
		case admit.Held:
			b.duplicate(i)
		case admit.Republished:
			b.delta(u.Crawl).Republished++
			b.duplicate(i)
		case admit.Admitted:
			d := b.delta(u.Crawl)
			d.Admitted++
			d.CountCrawl(u.Crawl, stats.CrawlCounts{Admitted: 1})
			d.AdmitHost(hostOf(u.URL))
		}
	}
}

// ParkedCrawl is a crawl whose filter cannot be opened (ErrFilterUnusable):
// its messages wait in the stream, redelivered every ParkDelay.
type ParkedCrawl = admit.ParkedCrawl

// ForgetCrawl tells the worker that crawl was deleted: the URLs its seen
// cache holds for it are forgotten, so that a crawl created again under the
// same id starts with nothing seen. (Its filter is the FilterSet's to drop.)
func (w *Worker) ForgetCrawl(crawl string) { w.core.Forget(crawl) }

// Expiring is implemented by a filter whose keys expire, such as a revisit
// window: a Worker does not keep its URLs in the seen cache, which would
// outlive them (admit.Expiring).
type Expiring = admit.Expiring

// add adds link li of d, whose canonical URL is u, to the batch's URLs,
// or counts it a duplicate of the copy already there (which keeps the
// smaller depth).
func (b *batch) add(d Discovered, li int, u string) {
	depth := d.LinkDepth()
	fetch := u
	if b.rules != nil {
		u = b.rules.Set(d.Crawl).Key(u) // the page's spelling under the crawl's rules
	}
	key := d.Crawl + "\n" + u // a URL is unique within its crawl
	if i, ok := b.index[key]; ok {
		b.duplicate(i)
		if depth < b.urls[i].Depth {
			b.urls[i].Depth = depth
		}
		return
	}
	b.index[key] = len(b.urls)
	e := d.EntryFor(li, fetch)
	au := admit.URL{URL: u, Crawl: d.Crawl, Depth: depth, From: d.URL, Kind: string(e.Kind), Key: e.Key, Meta: e.Meta}
	if fetch != u {
		au.Fetch = fetch
	}
	b.urls = append(b.urls, au)
}

// duplicate counts URL i as a duplicate of a URL already enqueued.
func (b *batch) duplicate(i int) { b.duplicateOf(b.urls[i].Crawl, b.urls[i].URL) }

// duplicateOf counts a crawl's canonical URL as a duplicate.
func (b *batch) duplicateOf(crawl, u string) {
	d := b.delta(crawl)
	d.Duplicates++
	d.CountCrawl(crawl, stats.CrawlCounts{Duplicates: 1})
	d.DuplicateHost(hostOf(u))
}

// Touch tells JetStream the batch is still in progress when its messages
// come near their AckWait (at most every AckWait/3).
func (b *batch) Touch() {
	if time.Since(b.touched) < b.ackWait/3 {
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
	// Held is the batches in hand past WorkerOptions.HeldBound, and why;
	// nil when none is.
	Held *Held `json:"held,omitempty"`
	// Routes lists the route partitions the worker owns (Topology.Routes
	// > 0), sorted.
	Routes []int `json:"routes,omitempty"`
	// CacheHits of Decided URLs (distinct within their batch) were
	// answered by the seen cache, without a filter call.
	CacheHits int64 `json:"cache_hits"`
	Decided   int64 `json:"decided"`
}

// Status returns the worker's current state.
func (w *Worker) Status() Status {
	w.mu.Lock()
	totals := w.total.Clone()
	w.mu.Unlock()
	totals.Hosts, totals.DuplicateHosts = nil, nil
	var routes []int
	if l := w.leases.Load(); l != nil {
		routes = l.owned()
	}
	return Status{
		Routes:          routes,
		CacheHits:       w.cacheHits.Load(),
		Decided:         w.decided.Load(),
		Ready:           len(w.health.notReady()) == 0,
		Dependencies:    w.health.states(),
		InflightBatches: w.inflight.Load(),
		Started:         w.started,
		Totals:          totals,
		Parked:          w.core.Parked(),
		Held:            w.held.held(),
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

func (w *Worker) newBackoff() *admit.Backoff {
	return &admit.Backoff{Min: w.o.BackoffMin, Max: w.o.BackoffMax}
}

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

// ErrNotInProcess is AdmitPage's answer when it cannot take a page in
// process: the caller publishes it to the discovered stream instead.
var ErrNotInProcess = errors.New("frontier: page not admitted in process: publish it to the discovered stream")

// AdmitPage admits the links of d, a page fetched by a crawler in this
// process, as a discovered message of d would be (canonicalized, rewritten
// by the crawl's rules, tested, put on the frontier, marked, counted), but
// without the discovered stream: no publish, no pull, no acknowledgement,
// and no wait for the worker's next fetch. It returns nil once every link
// is on the frontier and marked, so that the caller may then acknowledge
// the page's own frontier message, exactly as a worker acknowledges a
// discovered message; an error when ctx ended first (nothing may be
// acknowledged: some links may be on the frontier and not marked, which
// the page's redelivery repairs); a *PoisonError for a page no worker
// would take; ErrNotInProcess when the page's crawl is parked (its filter
// unusable) or the worker forwards pages to route owners (Routes), where
// the stream is the only way in.
//
// The embedded mode (crawler run --embedded) takes every page this way:
// of the six JetStream operations a page cost, the three of the discovered
// stream are gone.
func (w *Worker) AdmitPage(ctx context.Context, d Discovered) error {
	if w.topo.Routes > 0 {
		return ErrNotInProcess
	}
	d.V = Version
	for _, part := range d.Split(w.topo.Limits.MaxLinks) {
		if err := part.check(w.topo.Limits); err != nil {
			return err
		}
	}
	start := time.Now()
	defer w.begin()()

	b := w.newBatch(start)
	w.canonicalize(d, b.delta(d.Crawl), func(li int, u string) { b.add(d, li, u) })
	verdicts, err := w.core.Admit(ctx, b.urls, b)
	switch {
	case err != nil:
		return err // nothing counted: the page comes again
	case b.parked:
		return ErrNotInProcess // counted when it comes through the stream
	}
	w.count(b, verdicts)
	w.finish(b, start, true)
	return nil
}
