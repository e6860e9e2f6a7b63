package crawl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/normalize"
)

// Options configures a Crawler. Zero values mean the defaults beside them.
type Options struct {
	// Topology names the streams; it must match the dedup workers'.
	Topology frontier.Topology
	Fetcher  FetcherOptions
	Scope    Scope
	// MaxDepth is the deepest page fetched (seeds are 0): links of pages at
	// MaxDepth are not published. 16.
	MaxDepth int
	// MaxPages stops this crawler after it fetched that many URLs; what is
	// left stays on the frontier for the next run. 0: no limit.
	MaxPages int64
	// InFlight is how many frontier messages the crawler holds at once,
	// waiting for their host's turn or being fetched: 256.
	InFlight int
	// MaxRedirects ends a chain of redirects: a URL reached through that
	// many redirects in a row that redirects again fails with
	// ReasonTooManyRedirects (counts are shared by all crawlers through a
	// key-value bucket): 5.
	MaxRedirects int
	// Canonicalize gives the canonical form of a URL as the dedup workers
	// compute it (their normalize policy), to recognise redirect targets
	// coming back from the frontier. nil: normalize.URL.
	Canonicalize func(string) (string, error)
	// MaxRetries is how many times a URL failing temporarily (timeout,
	// network error, 5xx, 429, robots.txt unavailable) is tried again: 3.
	MaxRetries int
	// RetryBackoff is the wait before the first retry, doubled for each
	// next one (a longer Retry-After wins): 5s.
	RetryBackoff time.Duration
	// MaxRetryDelay bounds the wait before a retry: 5m.
	MaxRetryDelay time.Duration
	// AckWait is how long a fetched frontier message may go without news
	// from its crawler before JetStream hands it to another (the crawler
	// extends it while the message waits): 60s.
	AckWait time.Duration
	// LeaseTTL is how long a crawler's partitions stay its own after it
	// stops renewing them (it renews every LeaseTTL/3): 15s.
	LeaseTTL time.Duration
	// IdleExit ends Run when the frontier and the discovered stream have
	// been empty, with nothing in flight, for that long. 0: run until ctx
	// ends.
	IdleExit time.Duration
	// ShutdownTimeout is how long Run lets fetches in hand finish after ctx
	// ends; those still running are then abandoned to redelivery: 10s.
	ShutdownTimeout time.Duration
	// Exclusive says this crawler is the only one (the embedded mode): it
	// recreates the partition consumers when it takes them, so messages a
	// previous run left unacknowledged (being retried, or in hand when it
	// was killed) come back at once instead of after AckWait.
	Exclusive bool
	// ID names this crawler among others (lease owner): host-pid-random.
	ID string
	// Logger receives state changes and failures; nil discards them.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	o.Topology = o.Topology.WithDefaults()
	if o.MaxDepth <= 0 {
		o.MaxDepth = 16
	}
	if o.InFlight <= 0 {
		o.InFlight = 256
	}
	if o.MaxRedirects <= 0 {
		o.MaxRedirects = 5
	}
	if o.Canonicalize == nil {
		o.Canonicalize = normalize.URL
	}
	if o.MaxRetries < 0 {
		o.MaxRetries = 0
	} else if o.MaxRetries == 0 {
		o.MaxRetries = 3
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 5 * time.Second
	}
	if o.MaxRetryDelay <= 0 {
		o.MaxRetryDelay = 5 * time.Minute
	}
	if o.AckWait <= 0 {
		o.AckWait = time.Minute
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 15 * time.Second
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 10 * time.Second
	}
	if o.ID == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.ID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	if err := o.Scope.Validate(); err != nil {
		return err
	}
	if o.MaxPages < 0 {
		return fmt.Errorf("crawl: max pages %d: must be ≥ 0", o.MaxPages)
	}
	return nil
}

// Crawler consumes the frontier partitions it owns, fetches each URL with a
// Fetcher, and publishes one discovered message per page (its links, or a
// redirect's target) before acknowledging the frontier message, so a crawler
// killed at any point loses nothing: an unacknowledged message is delivered
// again. Temporary failures are retried through delayed redelivery, at most
// MaxRetries times; permanent ones are counted and acknowledged.
//
// Construct with New, call Run once, then Close. Stats may be called from any
// goroutine.
type Crawler struct {
	opts    Options
	js      jetstream.JetStream
	fetcher *Fetcher
	stats   counters

	seeds     *seedCache
	leases    *leaseTable
	redirects *redirectHops

	slots    chan struct{} // one token per message held
	mu       sync.Mutex
	inflight map[jetstream.Msg]struct{}
	owned    map[int]*partitionRun
	started  atomic.Int64 // fetches reserved (MaxPages: no more are taken)
	finished atomic.Int64 // fetches done (MaxPages: the run ends)
	jobs     sync.WaitGroup

	jobCtx    context.Context // fetches and publishes; ends on Close or after ShutdownTimeout
	jobCancel context.CancelFunc
	closeOnce sync.Once
}

// partitionRun is the pulling of one owned partition.
type partitionRun struct {
	ctx      context.Context // ends when the partition is lost or the run ends: waiting jobs hand their message back
	cancel   context.CancelFunc
	stopPull context.CancelFunc // stops the puller only (giving the partition back: jobs in hand finish)
	done     chan struct{}      // closed when the puller returned
	jobs     sync.WaitGroup
	draining chan struct{} // non-nil while giving back: closed once the jobs in hand are done
}

// New returns a Crawler using js. It does not contact NATS until Run.
func New(js jetstream.JetStream, opts Options) (*Crawler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	f, err := NewFetcher(opts.Fetcher)
	if err != nil {
		return nil, err
	}
	c := &Crawler{
		opts:    opts,
		js:      js,
		fetcher: f,
		stats:   newCounters(),
		slots:   make(chan struct{}, opts.InFlight),

		inflight: map[jetstream.Msg]struct{}{},
		owned:    map[int]*partitionRun{},
	}
	c.jobCtx, c.jobCancel = context.WithCancel(context.Background())
	return c, nil
}

// ID returns the crawler's name among its peers.
func (c *Crawler) ID() string { return c.opts.ID }

// ErrMaxPages is returned by Run when the crawler stopped at Options.MaxPages.
var ErrMaxPages = errors.New("crawl: max pages reached")

// ErrIdle is returned by Run when it ended after Options.IdleExit of an empty
// pipeline.
var ErrIdle = errors.New("crawl: idle")

// Run crawls until ctx ends (nil error), the pipeline is idle for IdleExit
// (ErrIdle), MaxPages is reached (ErrMaxPages) or NATS fails in a way it cannot
// recover from. On the way out it stops taking messages, lets the ones in hand
// finish for up to ShutdownTimeout, and gives its partitions back.
func (c *Crawler) Run(ctx context.Context) error {
	o := c.opts
	if err := o.Topology.Ensure(ctx, c.js); err != nil {
		return err
	}
	kv, err := openCrawls(ctx, c.js, o.Topology)
	if err != nil {
		return err
	}
	c.seeds = newSeedCache(kv, 5*time.Second, func(seeds []string) {
		for _, s := range seeds {
			if u, err := url.Parse(s); err == nil && u.Host != "" {
				c.fetcher.AllowHost(u.Host)
			}
		}
	})
	rkv, err := openRedirects(ctx, c.js, o.Topology)
	if err != nil {
		return err
	}
	c.redirects = newRedirectHops(rkv, 100_000)
	c.leases, err = openLeases(ctx, c.js, o.Topology.Prefix, o.Topology.Partitions, o.LeaseTTL, o.ID, o.Topology.Replicas)
	if err != nil {
		return err
	}

	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return c.leaseLoop(gctx) })
	g.Go(func() error { c.keepAlive(gctx); return nil })
	if o.IdleExit > 0 {
		g.Go(func() error { return c.idleLoop(gctx, stop) })
	}
	if o.MaxPages > 0 {
		g.Go(func() error {
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-gctx.Done():
					return nil
				case <-t.C:
					if c.finished.Load() >= o.MaxPages {
						stop(ErrMaxPages)
						return nil
					}
				}
			}
		})
	}
	<-gctx.Done()
	err = g.Wait()

	// Stop every puller, let the jobs in hand finish, give partitions back.
	c.mu.Lock()
	runs := make([]*partitionRun, 0, len(c.owned))
	for _, r := range c.owned {
		r.cancel() // gctx ended too: this only makes it explicit
		runs = append(runs, r)
	}
	c.mu.Unlock()
	for _, r := range runs {
		<-r.done
	}
	c.waitJobs(o.ShutdownTimeout)
	// Acknowledgements and hand-backs are plain publishes: make sure the
	// server has them before we go, or their messages would wait out
	// AckWait before anyone gets them again.
	if nc := c.js.Conn(); nc != nil {
		if ferr := nc.FlushTimeout(5 * time.Second); ferr != nil {
			o.Logger.Warn("flushing acknowledgements", "err", ferr)
		}
	}
	leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if lerr := c.leases.leave(leaveCtx); lerr != nil {
		o.Logger.Warn("giving partitions back failed; they expire by themselves", "err", lerr)
	}
	c.mu.Lock()
	clear(c.owned)
	c.mu.Unlock()

	if cause := context.Cause(runCtx); errors.Is(cause, ErrIdle) || errors.Is(cause, ErrMaxPages) {
		return cause
	}
	if err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// waitJobs waits for the messages in hand, cancelling them after d.
func (c *Crawler) waitJobs(d time.Duration) {
	done := make(chan struct{})
	go func() { c.jobs.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		c.jobCancel()
		<-done
	}
}

// Close cancels fetches in flight and releases the fetcher. It is
// idempotent; call it after Run returned.
func (c *Crawler) Close() error {
	c.closeOnce.Do(func() {
		c.jobCancel()
		c.jobs.Wait()
		c.fetcher.Close()
	})
	return nil
}

// leaseLoop keeps our membership and partition leases, starting and stopping
// a puller per owned partition.
func (c *Crawler) leaseLoop(ctx context.Context) error {
	o := c.opts
	tick := time.NewTicker(o.LeaseTTL / 3)
	defer tick.Stop()
	var failing error
	for {
		err := c.balance(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil:
			if failing == nil {
				o.Logger.Warn("partition leases failing; retrying", "err", err)
			}
			failing = err
		case failing != nil:
			o.Logger.Info("partition leases working again")
			failing = nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// balance renews our leases, gives back partitions above our share (once
// their messages in hand are done, so a host never has two crawlers) and
// takes free ones up to it.
func (c *Crawler) balance(ctx context.Context) error {
	members, err := c.leases.heartbeat(ctx)
	if err != nil {
		return err
	}
	lost, err := c.leases.renew(ctx)
	for _, p := range lost {
		c.opts.Logger.Warn("lost partition lease", "partition", p)
		c.mu.Lock()
		r := c.owned[p]
		delete(c.owned, p)
		c.mu.Unlock()
		if r != nil {
			r.cancel()
		}
	}
	if err != nil {
		return err
	}
	want := share(c.opts.Topology.Partitions, members)

	c.mu.Lock()
	var active, drained []int
	for p, r := range c.owned {
		if r.draining == nil {
			active = append(active, p)
			continue
		}
		select {
		case <-r.draining:
			drained = append(drained, p)
			delete(c.owned, p)
		default:
		}
	}
	slices.Sort(active)
	for len(active) > want {
		p := active[len(active)-1]
		active = active[:len(active)-1]
		r := c.owned[p]
		r.draining = make(chan struct{})
		r.stopPull()
		go func() {
			<-r.done
			r.jobs.Wait()
			close(r.draining)
		}()
	}
	c.mu.Unlock()
	for _, p := range drained {
		if err := c.leases.release(ctx, p); err != nil {
			return err
		}
		c.opts.Logger.Debug("gave partition back", "partition", p, "crawlers", members)
	}

	got, err := c.leases.claim(ctx, want)
	for _, p := range got {
		if serr := c.startPartition(ctx, p); serr != nil {
			_ = c.leases.release(ctx, p)
			return serr
		}
	}
	return err
}

// PartitionConsumer is the durable consumer name of a frontier partition:
// <prefix>-crawl-<partition>.
func PartitionConsumer(topo frontier.Topology, p int) string {
	return fmt.Sprintf("%s-crawl-%d", topo.WithDefaults().Prefix, p)
}

func (c *Crawler) startPartition(ctx context.Context, p int) error {
	o := c.opts
	if o.Exclusive {
		err := c.js.DeleteConsumer(ctx, o.Topology.FrontierStream(), PartitionConsumer(o.Topology, p))
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("crawl: reset consumer of partition %d: %w", p, err)
		}
	}
	cons, err := c.js.CreateOrUpdateConsumer(ctx, o.Topology.FrontierStream(), jetstream.ConsumerConfig{
		Durable:       PartitionConsumer(o.Topology, p),
		Description:   fmt.Sprintf("Sieve crawlers: frontier partition %d", p),
		FilterSubject: o.Topology.PartitionFilter(p),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.AckWait,
		MaxDeliver:    -1, // retries are bounded by the crawler, which terminates
		MaxAckPending: o.InFlight,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("crawl: consumer of partition %d: %w", p, err)
	}
	pctx, cancel := context.WithCancel(ctx)
	context.AfterFunc(c.jobCtx, cancel)
	pullCtx, stopPull := context.WithCancel(pctx)
	r := &partitionRun{ctx: pctx, cancel: cancel, stopPull: stopPull, done: make(chan struct{})}
	c.mu.Lock()
	c.owned[p] = r
	c.mu.Unlock()
	c.opts.Logger.Debug("took partition", "partition", p)
	go func() {
		defer close(r.done)
		c.pull(pullCtx, p, cons, r)
	}()
	return nil
}

// pull fetches messages of one partition while free slots last. It takes
// what is waiting without waiting (FetchNoWait, as many as there are free
// slots), and when nothing is, waits for one message at a time: no slot is
// held for a message that has not come, and no message waits in a client
// buffer where AckWait would run out unseen.
func (c *Crawler) pull(ctx context.Context, p int, cons jetstream.Consumer, r *partitionRun) {
	const maxBatch = 64
	backoff := 100 * time.Millisecond
	wait := false // the last no-wait fetch found nothing: block for one
	for ctx.Err() == nil {
		if c.opts.MaxPages > 0 && c.started.Load() >= c.opts.MaxPages {
			// Every fetch allowed is reserved; one handed back frees
			// its place again.
			sleep(ctx, 50*time.Millisecond)
			continue
		}
		// One slot, waiting; then as many more as are free.
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		n := 1
		for !wait && n < maxBatch {
			select {
			case c.slots <- struct{}{}:
				n++
				continue
			default:
			}
			break
		}
		var batch jetstream.MessageBatch
		var err error
		if wait {
			// Short, so that stopping never waits long for it.
			batch, err = cons.Fetch(1, jetstream.FetchMaxWait(250*time.Millisecond))
		} else {
			batch, err = cons.FetchNoWait(n)
		}
		if err != nil {
			c.freeSlots(n)
			if ctx.Err() != nil {
				return
			}
			c.opts.Logger.Debug("fetch from frontier", "partition", p, "err", err)
			sleep(ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		got := 0
		for msg := range batch.Messages() {
			got++
			c.start(msg, r)
		}
		c.freeSlots(n - got)
		wait = got == 0
	}
}

// start runs the job of one message, which holds a slot.
func (c *Crawler) start(msg jetstream.Msg, r *partitionRun) {
	c.mu.Lock()
	c.inflight[msg] = struct{}{}
	c.mu.Unlock()
	c.jobs.Add(1)
	r.jobs.Add(1)
	go func() {
		defer func() {
			c.mu.Lock()
			delete(c.inflight, msg)
			c.mu.Unlock()
			<-c.slots
			r.jobs.Done()
			c.jobs.Done()
		}()
		c.handle(msg, r)
	}()
}

func (c *Crawler) freeSlots(n int) {
	for range n {
		<-c.slots
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// keepAlive tells JetStream, every AckWait/3, that the messages in hand are
// still being worked on, so that waiting for a polite host's turn does not
// get them redelivered to another crawler.
func (c *Crawler) keepAlive(ctx context.Context) {
	t := time.NewTicker(c.opts.AckWait / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		msgs := make([]jetstream.Msg, 0, len(c.inflight))
		for m := range c.inflight {
			msgs = append(msgs, m)
		}
		c.mu.Unlock()
		for _, m := range msgs {
			_ = m.InProgress()
		}
	}
}

// handle processes one frontier message to its end: acknowledged,
// terminated, or handed back for a later try.
func (c *Crawler) handle(msg jetstream.Msg, r *partitionRun) {
	ctx := c.jobCtx
	o := c.opts
	entry, err := frontier.DecodeEntry(msg.Data())
	if err != nil {
		var pe *frontier.PoisonError
		reason := "poison"
		if errors.As(err, &pe) {
			reason = "poison_" + pe.Reason
		}
		c.stats.skip(reason)
		o.Logger.Warn("unreadable frontier message", "err", err)
		_ = msg.TermWithReason(reason)
		return
	}
	u, err := url.Parse(entry.URL)
	if err != nil {
		c.stats.skip("bad_url")
		_ = msg.TermWithReason("bad_url")
		return
	}
	seeds, err := c.seeds.get(ctx, entry.Crawl, false)
	if err != nil {
		c.retryLater(msg, "crawl record: "+err.Error())
		return
	}
	in, why := o.Scope.in(seeds, u)
	if !in && entry.Depth == 0 {
		// A new seed of a known crawl: read the seeds again.
		if seeds, err = c.seeds.get(ctx, entry.Crawl, true); err == nil {
			in, why = o.Scope.in(seeds, u)
		}
	}
	switch {
	case !in:
		c.stats.skip(why)
		c.ack(ctx, msg)
		return
	case entry.Depth > o.MaxDepth:
		c.stats.skip("too_deep")
		c.ack(ctx, msg)
		return
	}
	if o.MaxPages > 0 && c.started.Add(1) > o.MaxPages {
		_ = msg.Nak() // for the next run
		return
	} else if o.MaxPages == 0 {
		c.started.Add(1)
	}

	page, err := c.fetcher.fetch(r.ctx, ctx, entry.URL)
	if err != nil {
		if r.ctx.Err() != nil && ctx.Err() == nil && !isFetchError(err) {
			// Given back before its turn came: unfetched, for the
			// partition's next owner.
			c.started.Add(-1)
			_ = msg.Nak()
			return
		}
		if isFetchError(err) {
			c.finished.Add(1)
		}
		c.failed(ctx, msg, entry, err)
		return
	}
	c.finished.Add(1)
	c.stats.fetched(page)
	d := frontier.Discovered{Crawl: entry.Crawl, URL: entry.URL, Depth: entry.Depth, Kind: frontier.KindPage}
	links := page.Links
	if page.Redirect != "" {
		hops, err := c.redirects.hops(ctx, entry.URL)
		if err != nil {
			c.retryLater(msg, err.Error())
			return
		}
		if hops++; hops > o.MaxRedirects {
			c.stats.fail(ReasonTooManyRedirects)
			c.ack(ctx, msg)
			return
		}
		if target, err := o.Canonicalize(page.Redirect); err == nil {
			if err := c.redirects.record(ctx, target, hops); err != nil {
				c.retryLater(msg, err.Error())
				return
			}
		}
		if entry.Depth == 0 {
			// A seed that moved (http://example.com/ →
			// https://www.example.com/) takes its scope along.
			if tu, err := url.Parse(page.Redirect); err == nil {
				if in, _ := o.Scope.in(seeds, tu); !in {
					if err := c.seeds.moved(ctx, entry.Crawl, page.Redirect); err != nil {
						c.retryLater(msg, err.Error())
						return
					}
					if seeds, err = c.seeds.get(ctx, entry.Crawl, true); err != nil {
						c.retryLater(msg, err.Error())
						return
					}
				}
			}
		}
		d.Kind = frontier.KindRedirect
		links = []string{page.Redirect}
	}
	linkDepth := d.LinkDepth()
	for _, l := range links {
		lu, err := url.Parse(l)
		if err != nil {
			c.stats.dropLink("bad_url")
			continue
		}
		if ok, why := o.Scope.in(seeds, lu); !ok {
			c.stats.dropLink(why)
			continue
		}
		if linkDepth > o.MaxDepth {
			c.stats.dropLink("too_deep")
			continue
		}
		d.Links = append(d.Links, l)
	}
	if !c.publish(ctx, msg, d) {
		return
	}
	c.stats.published(len(d.Links))
	c.ack(ctx, msg)
}

func isFetchError(err error) bool {
	var fe *FetchError
	return errors.As(err, &fe)
}

// publish puts d on the discovered stream, retrying while NATS is away (the
// message is kept alive meanwhile). A page whose links do not fit in one
// message is published in several. It returns false if it gave up, having
// settled msg.
func (c *Crawler) publish(ctx context.Context, msg jetstream.Msg, d frontier.Discovered) bool {
	backoff := 100 * time.Millisecond
	for {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.publishParts(pctx, d)
		cancel()
		if err == nil {
			return true
		}
		var pe *frontier.PoisonError
		if errors.As(err, &pe) {
			// Cannot happen for a well-formed page; count it and move on.
			c.stats.skip("unpublishable_" + pe.Reason)
			c.opts.Logger.Warn("page not publishable", "url", d.URL, "err", err)
			c.ack(ctx, msg)
			return false
		}
		if ctx.Err() != nil {
			_ = msg.Nak()
			return false
		}
		c.opts.Logger.Debug("publish discovered", "url", d.URL, "err", err)
		_ = msg.InProgress()
		sleep(ctx, backoff)
		backoff = min(2*backoff, 5*time.Second)
	}
}

// publishParts publishes d, halving its links until each part fits in a
// message. A retried part is stored once (its id is a digest of its bytes).
func (c *Crawler) publishParts(ctx context.Context, d frontier.Discovered) error {
	err := c.opts.Topology.PublishDiscovered(ctx, c.js, d)
	var pe *frontier.PoisonError
	if errors.As(err, &pe) && pe.Reason == frontier.PoisonTooLarge && len(d.Links) > 1 {
		half := len(d.Links) / 2
		a, b := d, d
		a.Links, b.Links = d.Links[:half], d.Links[half:]
		if err := c.publishParts(ctx, a); err != nil {
			return err
		}
		return c.publishParts(ctx, b)
	}
	return err
}

func (c *Crawler) ack(ctx context.Context, msg jetstream.Msg) {
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := msg.DoubleAck(actx); err != nil {
		// The message will be delivered again: its page is fetched twice
		// at worst, its links deduplicated.
		c.opts.Logger.Debug("ack frontier message", "err", err)
	}
}

func (c *Crawler) retryLater(msg jetstream.Msg, why string) {
	c.opts.Logger.Debug("message handed back", "why", why)
	_ = msg.NakWithDelay(time.Second)
}

// failed settles a message whose fetch failed.
func (c *Crawler) failed(ctx context.Context, msg jetstream.Msg, entry frontier.Entry, err error) {
	o := c.opts
	if ctx.Err() != nil {
		c.started.Add(-1)
		_ = msg.Nak()
		return
	}
	var fe *FetchError
	if !errors.As(err, &fe) {
		c.started.Add(-1)
		c.retryLater(msg, err.Error())
		return
	}
	if fe.Status != 0 {
		c.stats.response()
	}
	if fe.Temporary {
		n := uint64(1)
		if md, merr := msg.Metadata(); merr == nil {
			n = md.NumDelivered
		}
		if n <= uint64(o.MaxRetries) {
			delay := min(o.RetryBackoff<<(n-1), o.MaxRetryDelay)
			delay = max(delay, min(fe.RetryAfter, o.MaxRetryDelay))
			c.stats.retry(fe.Reason)
			o.Logger.Debug("retrying later", "url", entry.URL, "reason", fe.Reason, "try", n, "delay", delay)
			_ = msg.NakWithDelay(delay)
			return
		}
	}
	c.stats.fail(fe.Reason)
	o.Logger.Debug("giving up", "url", entry.URL, "reason", fe.Reason, "err", fe.Err)
	c.ack(ctx, msg)
}

// idleLoop ends the run when the pipeline has been empty for IdleExit: no
// message on the frontier or the discovered stream (both are work queues:
// a message leaves them when acknowledged, so one in flight anywhere is
// still counted) and nothing in hand here.
func (c *Crawler) idleLoop(ctx context.Context, stop context.CancelCauseFunc) error {
	o := c.opts
	every := min(max(o.IdleExit/5, 20*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	var since time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		depth, err := QueueDepth(ctx, c.js, o.Topology)
		c.mu.Lock()
		busy := len(c.inflight)
		c.mu.Unlock()
		if err != nil || depth.Frontier+depth.Discovered > 0 || busy > 0 {
			since = time.Time{}
			continue
		}
		if since.IsZero() {
			since = time.Now()
		}
		if time.Since(since) >= o.IdleExit {
			stop(ErrIdle)
			return nil
		}
	}
}

// Depth counts the messages waiting in the pipeline's two streams, those in
// flight included.
type Depth struct {
	Frontier   uint64 `json:"frontier"`   // admitted URLs not yet acknowledged by a crawler
	Discovered uint64 `json:"discovered"` // pages not yet acknowledged by a dedup worker
}

// QueueDepth reads the pipeline's stream sizes.
func QueueDepth(ctx context.Context, js jetstream.JetStream, topo frontier.Topology) (Depth, error) {
	var d Depth
	for _, x := range []struct {
		name string
		n    *uint64
	}{{topo.FrontierStream(), &d.Frontier}, {topo.DiscoveredStream(), &d.Discovered}} {
		s, err := js.Stream(ctx, x.name)
		if err != nil {
			return d, fmt.Errorf("crawl: stream %s: %w", x.name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return d, fmt.Errorf("crawl: stream %s: %w", x.name, err)
		}
		*x.n = info.State.Msgs
	}
	return d, nil
}

// Stats returns the crawler's counts so far.
func (c *Crawler) Stats() Stats {
	s := c.stats.snapshot()
	c.mu.Lock()
	s.InFlight = len(c.inflight)
	for p := range c.owned {
		s.Partitions = append(s.Partitions, p)
	}
	c.mu.Unlock()
	slices.Sort(s.Partitions)
	return s
}
