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
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/politeness"
	"github.com/sievecrawl/sieve/warc"
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
	// InFlight bounds the frontier messages the crawler holds at once, over
	// all hosts: in their host's buffer (a few per host; the rest waits in
	// JetStream) or being fetched: 4,096. It bounds memory, not speed: at
	// the defaults it holds 2 messages for each of 2,000 hosts.
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
	// Registerer receives the crawler's Prometheus metrics (crawl/metrics.go);
	// nil: no metrics.
	Registerer prometheus.Registerer
	// Archive, if set, records every exchange (pages, redirects, errors,
	// robots.txt) in WARC files; a page's message is acknowledged only
	// after its records are written, and a failure to write stops the run
	// with ErrArchive.
	Archive *warc.Recorder
	// SkipFetchEvents: no event per fetch on the fetched stream (the
	// embedded mode's default: no other process can read it).
	SkipFetchEvents bool
	// Admitter, if set, takes each fetched page's links in process, in
	// place of the discovered stream: a dedup worker running beside the
	// crawler (the embedded mode). Nil: pages go to the discovered stream.
	Admitter Admitter
}

// Admitter admits a fetched page's links in process: canonicalized,
// tested, on the frontier and marked when Admit returns nil, so that the
// page's frontier message may be acknowledged. frontier.ErrNotInProcess
// sends the page to the discovered stream instead; a *frontier.PoisonError
// is a page no worker would take; any other error is retried while the
// page's message is kept alive, as a failed publish is.
// pipeline.Worker.AdmitPage is one.
type Admitter interface {
	AdmitPage(ctx context.Context, d frontier.Discovered) error
}

func (o Options) withDefaults() Options {
	o.Topology = o.Topology.WithDefaults()
	if o.MaxDepth <= 0 {
		o.MaxDepth = 16
	}
	if o.InFlight <= 0 {
		o.InFlight = 4096
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
	attempts  *attempts
	sched     *politeness.Scheduler[*job] // messages in hand, by host, until their turn
	learn     *learning                   // which spellings name one page, per crawl

	mu       sync.Mutex
	inflight map[jetstream.Msg]struct{}
	owned    map[int]*partitionRun
	started  atomic.Int64 // fetches reserved (MaxPages: no more are taken)
	finished atomic.Int64 // fetches done (MaxPages: the run ends)
	settled  atomic.Int64 // when the last message in hand was settled (unix ns): IdleExit counts from it
	jobs     sync.WaitGroup

	jobCtx    context.Context // fetches and publishes; ends on Close or after ShutdownTimeout
	jobCancel context.CancelFunc
	closeOnce sync.Once

	sitemapsSeen sitemapsSeen

	stopMu      sync.Mutex
	stop        context.CancelCauseFunc // ends Run with a cause
	archiveOnce sync.Once

	archiveDirs   sync.Map // crawl id → struct{}: this crawler's WARC directory is in its record
	unreadableLog sync.Map // file name → struct{}: unreadable captures' files already logged
}

// stopRun ends Run with cause.
func (c *Crawler) stopRun(cause error) {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	if c.stop != nil {
		c.stop(cause)
	}
}

// New returns a Crawler using js. It does not contact NATS until Run.
func New(js jetstream.JetStream, opts Options) (*Crawler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	c := &Crawler{
		js:       js,
		inflight: map[jetstream.Msg]struct{}{},
		owned:    map[int]*partitionRun{},
	}
	if opts.Archive != nil {
		// Captures' files are looked for in every directory the crawl
		// has written, which its record lists.
		opts.Archive = opts.Archive.WithDirectories(archiveDirs{c})
	}
	f, err := NewFetcher(archive(opts.Fetcher, opts.Archive))
	if err != nil {
		return nil, err
	}
	c.opts, c.fetcher, c.sched = opts, f, newScheduler(f.opts, opts.InFlight)
	m, err := newMetrics(opts.Registerer, c)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("crawl: metrics: %w", err)
	}
	c.stats = newCounters(m)
	f.observe = m.observe
	c.jobCtx, c.jobCancel = context.WithCancel(context.Background())
	return c, nil
}

// newScheduler returns the politeness scheduler of the fetcher options fo
// (with their defaults applied): HostParallel and HostDelay for every host,
// Hosts' policies for theirs. Their delays read as politeness reads them:
// 0 the default, negative none. A fast host's buffer holds at most a
// quarter of the inFlight messages in hand (and 256), so that it never
// leaves the partitions' pullers without room for the hosts behind it.
func newScheduler(fo FetcherOptions, inFlight int) *politeness.Scheduler[*job] {
	queues := make(map[string]politeness.Limits, len(fo.Hosts))
	for h, p := range fo.Hosts {
		queues[h] = politeness.Limits{Parallel: p.Parallel, Delay: p.Delay}
	}
	return politeness.New[*job](politeness.Options{
		Parallel:  fo.HostParallel,
		Delay:     fo.HostDelay,
		MaxPause:  max(fo.MaxCrawlDelay, time.Minute),
		MaxBuffer: max(inFlight/4, 1),
		Queues:    queues,
	})
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
	if !o.SkipFetchEvents {
		if err := o.Topology.EnsureFetched(ctx, c.js); err != nil {
			return err
		}
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
	if c.attempts, err = openAttempts(ctx, c.js, o.Topology); err != nil {
		return err
	}
	c.leases, err = openLeases(ctx, c.js, o.Topology, o.LeaseTTL, o.ID)
	if err != nil {
		return err
	}
	rules, err := frontier.OpenRules(ctx, c.js, o.Topology)
	if err != nil {
		return fmt.Errorf("crawl: %w", err)
	}
	c.learn = newLearning(rules, c.seeds.reg)
	shareCtx, stopSharing := context.WithCancel(context.Background())
	shared := make(chan struct{})
	go func() {
		defer close(shared)
		c.learn.share(shareCtx, time.Second, o.Logger.Warn)
	}()
	defer func() {
		stopSharing()
		<-shared
	}()

	// The dispatcher and its jobs outlive the pullers: on the way out, the
	// URLs in hand finish (up to ShutdownTimeout) after the pullers
	// stopped.
	loopCtx, stopLoops := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	loops.Add(1)
	go func() {
		defer loops.Done()
		c.dispatch(loopCtx, &loops)
	}()
	defer func() {
		stopLoops()
		loops.Wait()
	}()

	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	c.stopMu.Lock()
	c.stop = stop
	c.stopMu.Unlock()
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
	parts := make([]int, 0, len(c.owned))
	for p, r := range c.owned {
		r.cancel() // gctx ended too: this only makes it explicit
		runs, parts = append(runs, r), append(parts, p)
	}
	c.mu.Unlock()
	for _, r := range runs {
		<-r.done
	}
	c.handBack(nil) // those waiting for their host's turn
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
	if o.Exclusive {
		// The next run recreates them (startPartition); deleted now, the
		// embedded server's stop does not wait on each one's state flush
		// (up to 10 ms apiece, 180 ms for the 16 partitions).
		for _, p := range parts {
			if derr := c.js.DeleteConsumer(leaveCtx, o.Topology.FrontierStream(), o.Topology.PartitionConsumer(p)); derr != nil && !errors.Is(derr, jetstream.ErrConsumerNotFound) {
				o.Logger.Debug("delete partition consumer", "partition", p, "err", derr)
			}
		}
	}
	if lerr := c.leases.leave(leaveCtx); lerr != nil {
		o.Logger.Warn("giving partitions back failed; they expire by themselves", "err", lerr)
	}
	c.mu.Lock()
	clear(c.owned)
	c.mu.Unlock()

	if cause := context.Cause(runCtx); errors.Is(cause, ErrIdle) || errors.Is(cause, ErrMaxPages) || errors.Is(cause, ErrArchive) {
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
		c.sched.Close()
		c.fetcher.Close()
	})
	return nil
}

// idleLoop ends the run when the pipeline has been empty for IdleExit: no
// message on the frontier or the discovered stream (both are work queues:
// a message leaves them when acknowledged, so one in flight anywhere is
// still counted) and nothing in hand here. The empty spell is counted from
// the later of the last check that found work and the last message settled
// here, not from the check that first found none, so that the run ends
// IdleExit after its last work, within one check (IdleExit/20).
func (c *Crawler) idleLoop(ctx context.Context, stop context.CancelCauseFunc) error {
	o := c.opts
	every := min(max(o.IdleExit/20, 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	var since time.Time
	busyAt := time.Now() // the run's start counts as work
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		checked := time.Now()
		c.mu.Lock()
		busy := len(c.inflight)
		c.mu.Unlock()
		if busy > 0 {
			// Work in hand: the streams need not be asked.
			since, busyAt = time.Time{}, checked
			continue
		}
		depth, err := QueueDepth(ctx, c.js, o.Topology)
		if err != nil || depth.Frontier+depth.Discovered > 0 {
			since, busyAt = time.Time{}, checked
			continue
		}
		if since.IsZero() {
			since = busyAt
			if s := time.Unix(0, c.settled.Load()); s.After(since) {
				since = s
			}
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
	s.Hosts = c.sched.Stats().Queues
	for p := range c.owned {
		s.Partitions = append(s.Partitions, p)
	}
	c.mu.Unlock()
	slices.Sort(s.Partitions)
	return s
}
