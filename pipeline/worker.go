// Package pipeline is the one path from settings (a config.Config) to a
// running dedup worker: the connections, each crawl's filter (opened on the
// crawl's first message from the settings stored with the crawl, with
// retries while Redis is down), the shared statistics, the frontier.Worker
// and, for in-memory filters, their snapshot files. `dedup-worker run` and the
// crawler's embedded mode both run a Worker, so they cannot drift apart.
//
// A Worker also answers what a status page shows: its readiness (with a
// failing snapshot save), the worker's status, the filter's health and the
// shared statistics.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/stats"
)

// statsStore is the shared statistics: stats.Redis or stats.Memory.
type statsStore interface {
	frontier.Recorder
	Snapshot(ctx context.Context, topN int) (stats.Snapshot, error)
	Close() error
}

// Worker states, as Readiness reports them.
const (
	StateStarting = "starting"
	StateRunning  = "running"
	StateStopping = "stopping"
)

// ErrNotOpen is returned by the read methods of a Worker whose filter or
// worker is not open yet.
var ErrNotOpen = errors.New("pipeline: not open yet")

// Worker is one dedup worker built from settings. Set its exported fields,
// then Open, Run until the context ends, and Close. Its read methods
// (Readiness, Status, FilterStats, StatsSnapshot, SnapshotStatus) are safe
// for concurrent use at any time.
type Worker struct {
	// Config is the validated settings.
	Config config.Config
	// Logger receives state changes (nil: discard).
	Logger *slog.Logger
	// Registerer receives the worker's and the filter's metrics (nil:
	// none).
	Registerer prometheus.Registerer
	// Conn is the NATS connection to use, left open by Close; nil: Open
	// connects to Config.NATS and Close drains that connection.
	Conn *nats.Conn
	// Name names the connection Open makes (default "dedup-worker").
	Name string
	// Crawls are opened by Open (in memory) or Run (in Redis) before any
	// message arrives, so that a damaged filter is an error at once; other
	// crawls' filters open on their first message.
	Crawls []string
	// IdleFilter is how long a crawl's filter stays open unused before it
	// is saved and closed (default DefaultIdleFilter).
	IdleFilter time.Duration

	nc      *nats.Conn
	ownConn bool
	rdb     redis.UniversalClient
	canon   *normalize.Normalizer
	rec     statsStore
	filters *crawlFilters
	worker  atomic.Pointer[frontier.Worker]
	state   atomic.Value // string
	// waiting is why Run waits for Redis before the worker runs (nil:
	// it does not).
	waiting atomic.Pointer[frontier.DepState]

	regMu sync.Mutex
	reg   *frontier.Crawls

	closeOnce sync.Once
	closeErr  error
}

func (w *Worker) log() *slog.Logger {
	if w.Logger == nil {
		w.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return w.Logger
}

// Open connects to NATS (which may still be down: the client keeps trying)
// and Redis, and opens the in-memory filters of Crawls from their snapshot
// files, whose errors are final (a damaged file, another filter's
// parameters). Redis filters are opened by Run, which waits for Redis.
func (w *Worker) Open(ctx context.Context) error {
	w.state.Store(StateStarting)
	log := w.log()
	canon, err := w.Config.Normalize.Normalizer()
	if err != nil {
		return fmt.Errorf("normalizer: %w", err)
	}
	w.canon = canon
	w.nc = w.Conn
	if w.nc == nil {
		name := w.Name
		if name == "" {
			name = "dedup-worker"
		}
		nc, err := w.Config.NATS.Connect(name,
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				if err != nil { // nil: we closed it
					log.Warn("nats disconnected", "error", err)
				}
			}),
			nats.ReconnectHandler(func(c *nats.Conn) { log.Info("nats reconnected", "url", c.ConnectedUrlRedacted()) }),
		)
		if err != nil {
			return err
		}
		w.nc, w.ownConn = nc, true
	}
	if w.Config.Redis.Enabled() {
		rdb, err := w.Config.Redis.Client()
		if err != nil {
			w.Close()
			return err
		}
		w.rdb = rdb
		w.rec = stats.NewRedis(rdb, w.Config.Frontier.Prefix)
	} else {
		w.rec = stats.NewMemory()
	}
	fcfg := w.Config.Filter
	// Marks waited on must be written again after a failover, not
	// answered from a mirror that remembers them.
	fcfg.NoMirror = fcfg.NoMirror || w.Config.Redis.WaitReplicas > 0
	w.filters = newCrawlFilters(fcfg, w.rdb, canon.Version(), w.IdleFilter, log, w.registry)
	if w.rdb == nil {
		for _, id := range w.Crawls {
			if err := w.preopen(ctx, id); err != nil {
				w.Close()
				return fmt.Errorf("open filter: %w", err)
			}
		}
	}
	return nil
}

// registry returns the crawl registry, opening it on first use.
func (w *Worker) registry(ctx context.Context) (*frontier.Crawls, error) {
	w.regMu.Lock()
	defer w.regMu.Unlock()
	if w.reg != nil {
		return w.reg, nil
	}
	js, err := jetstream.New(w.nc)
	if err != nil {
		return nil, err
	}
	reg, err := frontier.OpenCrawls(ctx, js, w.Topology())
	if err != nil {
		return nil, err
	}
	w.reg = reg
	return reg, nil
}

// preopen opens a crawl's filter and leaves it open (until idle).
func (w *Worker) preopen(ctx context.Context, crawl string) error {
	_, release, err := w.filters.Acquire(ctx, crawl)
	if err != nil {
		return err
	}
	release()
	return nil
}

// Run opens the Redis filters of Crawls (retrying while Redis is
// unreachable; a parameter mismatch is final), then runs the worker until
// ctx ends, opening each crawl's filter on its first message, saving
// in-memory filters' snapshots as they change and closing idle filters. It returns the worker's
// error, if any; a ctx ended while the filter opens is not an error.
func (w *Worker) Run(ctx context.Context) error {
	// Stopping as soon as ctx ends, while the batches in hand finish.
	stopMark := context.AfterFunc(ctx, func() { w.state.Store(StateStopping) })
	defer stopMark()
	if w.rdb != nil {
		// A Redis too old for the filters is refused before any work, and
		// one that refuses the credentials is waited for, saying so; then
		// the filters of Crawls open.
		steps := []func(context.Context) error{func(ctx context.Context) error { return dedup.CheckRedis(ctx, w.rdb) }}
		for _, id := range w.Crawls {
			steps = append(steps, func(ctx context.Context) error { return w.preopen(ctx, id) })
		}
		for i, step := range steps {
			what := "open filter"
			if i == 0 {
				what = "check redis (credentials, version)"
			}
			if err := w.untilRedis(ctx, what, step); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
	opts := w.Config.WorkerOptions()
	if n := w.Config.Redis.WaitReplicas; n > 0 && w.rdb != nil {
		opts.Replicas = dedup.NewReplicaWait(w.rdb, n, w.Config.Redis.WaitTimeout)
	}
	opts.Logger = w.log()
	opts.Registerer = w.Registerer
	opts.Filters = w.filters
	rules, err := w.openRules(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer rules.Close()
	opts.Rules = rules
	fw, err := frontier.NewWorker(w.nc, nil, w.canon, w.rec, opts)
	if err != nil {
		return err
	}
	if w.Registerer != nil {
		if err := w.Registerer.Register(filterCollector{w.filters}); err != nil {
			_ = fw.Close()
			return fmt.Errorf("register filter metrics: %w", err)
		}
	}
	w.worker.Store(fw)
	if ctx.Err() == nil {
		w.state.Store(StateRunning)
	}
	var saving sync.WaitGroup
	sctx, stopSaving := context.WithCancel(context.WithoutCancel(ctx))
	saving.Go(func() { w.filters.loop(sctx, w.Config.Filter.SnapshotInterval) })
	saving.Go(func() { w.watchDeletes(sctx) })
	err = fw.Run(ctx)
	stopSaving()
	saving.Wait()
	return err
}

// openRules follows the crawls' learned rewrite rules (package dust), so
// that every discovered URL is admitted under its page's key. It waits a
// little for what the bucket holds: a URL admitted before the rules are
// read is a spelling the crawler drops at fetch time, never a page lost.
func (w *Worker) openRules(ctx context.Context) (*frontier.Rules, error) {
	js, err := jetstream.New(w.nc)
	if err != nil {
		return nil, err
	}
	rules, err := frontier.OpenRules(ctx, js, w.Topology())
	if err != nil {
		return nil, err
	}
	log := w.log()
	if err := rules.Follow(ctx, func(key string, err error) {
		log.Warn("learned rules not applied: unreadable record", "key", key, "error", err)
	}); err != nil {
		return nil, err
	}
	select {
	case <-rules.Ready():
	case <-time.After(5 * time.Second):
	case <-ctx.Done():
	}
	return rules, nil
}

// watchDeletes drops the filter of each crawl deleted while the worker
// runs (crawlFilters.forget), re-watching after a failure until ctx ends.
func (w *Worker) watchDeletes(ctx context.Context) {
	wait := w.Config.Worker.BackoffMin
	for ctx.Err() == nil {
		reg, err := w.registry(ctx)
		if err == nil {
			err = reg.WatchDeletes(ctx, func(id string) {
				w.filters.forgetDeleted(ctx, id)
				if fw := w.worker.Load(); fw != nil {
					fw.ForgetCrawl(id)
				}
			})
		}
		if ctx.Err() != nil {
			return
		}
		w.log().Debug("watching for deleted crawls: retrying", "error", err)
		if !pause(ctx, wait) {
			return
		}
		wait = min(2*wait, w.Config.Worker.BackoffMax)
	}
}

// pause waits for d or until ctx ends; it reports whether ctx is live.
func pause(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// untilRedis runs step (opening a crawl's Redis filter, checking the
// server), waiting while Redis is unreachable. An error that waiting cannot
// cure (permanent) is returned at once.
func (w *Worker) untilRedis(ctx context.Context, what string, step func(context.Context) error) error {
	wait := w.Config.Worker.BackoffMin
	logged := false
	for {
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := step(octx)
		cancel()
		if err == nil {
			w.waiting.Store(nil)
			if logged {
				w.log().Info("redis answered: " + what + " done")
			}
			return nil
		}
		if permanent(err) || ctx.Err() != nil {
			w.waiting.Store(nil)
			return fmt.Errorf("%s: %w", what, err)
		}
		since := time.Now()
		if d := w.waiting.Load(); d != nil {
			since = d.Since
		}
		w.waiting.Store(&frontier.DepState{Since: since, Error: fmt.Sprintf("cannot %s: %v", what, err)})
		if !logged {
			w.log().Error("cannot "+what+" yet: retrying", "error", err)
			logged = true
		}
		if !pause(ctx, wait) {
			return ctx.Err()
		}
		wait = min(2*wait, w.Config.Worker.BackoffMax)
	}
}

// Close stops the worker and releases everything Open and Run acquired, in
// reverse order, saving in-memory filters to their snapshot files; a failed
// final save is in its error. Close is idempotent; call it after Run
// returned.
func (w *Worker) Close() error {
	w.closeOnce.Do(func() {
		var errs []error
		if fw := w.worker.Load(); fw != nil {
			errs = append(errs, fw.Close())
		}
		if w.filters != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			errs = append(errs, w.filters.closeAll(ctx))
			cancel()
		}
		if w.rec != nil {
			errs = append(errs, w.rec.Close())
		}
		if w.rdb != nil {
			errs = append(errs, w.rdb.Close())
		}
		if w.nc != nil && w.ownConn {
			if w.nc.IsConnected() {
				_ = w.nc.Drain() // flushes acks; closes the connection
				deadline := time.Now().Add(5 * time.Second)
				for !w.nc.IsClosed() && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
			}
			w.nc.Close()
		}
		w.closeErr = errors.Join(errs...)
	})
	return w.closeErr
}

// NATS returns the worker's NATS connection (nil before Open).
func (w *Worker) NATS() *nats.Conn { return w.nc }

// Topology returns the shape of the streams the worker uses.
func (w *Worker) Topology() frontier.Topology { return w.Config.Frontier.Topology() }

// Readiness is whether a worker takes work, and why not.
type Readiness struct {
	// Ready is true while the worker runs with NATS and the filter
	// available and its snapshot (if any) saved.
	Ready bool `json:"ready"`
	// State is starting, running or stopping.
	State string `json:"state"`
	// Error says why the worker is not ready.
	Error string `json:"error,omitempty"`
	// Dependencies maps nats, filter, stats and frontier to their state.
	Dependencies map[string]frontier.DepState `json:"dependencies,omitempty"`
	// Snapshot is the in-memory filter's snapshot file, if it has one.
	Snapshot *SnapshotStatus `json:"snapshot,omitempty"`
}

// Readiness reports whether the worker takes work.
func (w *Worker) Readiness() Readiness {
	r := Readiness{State: StateStarting}
	if s, ok := w.state.Load().(string); ok {
		r.State = s
	}
	fw := w.worker.Load()
	switch {
	case fw == nil:
		r.Error = "starting: opening the filters"
		if d := w.waiting.Load(); d != nil {
			r.Error = "starting: " + d.Error
			r.Dependencies = map[string]frontier.DepState{frontier.DepFilter: *d}
		}
	case r.State != StateRunning:
		r.Error = r.State
	default:
		if err := fw.Ready(); err != nil {
			r.Error = err.Error()
		} else {
			r.Ready = true
		}
	}
	if fw != nil {
		r.Dependencies = fw.Status().Dependencies
	}
	if s, ok := w.SnapshotStatus(); ok {
		r.Snapshot = &s
		if s.Error != "" && r.Ready {
			r.Ready, r.Error = false, "filter snapshot: "+s.Error
		}
	}
	return r
}

// Status returns the running worker's state, or false before it runs.
func (w *Worker) Status() (frontier.Status, bool) {
	fw := w.worker.Load()
	if fw == nil {
		return frontier.Status{}, false
	}
	return fw.Status(), true
}

// AdmitPage admits the links of a page fetched in this process without the
// discovered stream (frontier.Worker.AdmitPage); before the worker runs it
// returns frontier.ErrNotInProcess, and the caller publishes the page.
func (w *Worker) AdmitPage(ctx context.Context, d frontier.Discovered) error {
	fw := w.worker.Load()
	if fw == nil {
		return frontier.ErrNotInProcess
	}
	return fw.AdmitPage(ctx, d)
}

// FilterStats returns the open crawl filters' health summed (items and
// memory add up, rates are the highest), or ErrNotOpen before Open.
func (w *Worker) FilterStats(ctx context.Context) (dedup.Stats, error) {
	if w.filters == nil {
		return dedup.Stats{}, ErrNotOpen
	}
	return w.filters.stats(ctx)
}

// CrawlFilters returns each open crawl filter's state, by crawl (none
// before Open).
func (w *Worker) CrawlFilters(ctx context.Context) []CrawlFilterStatus {
	if w.filters == nil {
		return nil
	}
	return w.filters.status(ctx)
}

// Contains reports, per key, whether the filter of the first of Crawls
// holds it (adding nothing); without Crawls, whether any open crawl filter
// does. Before Open it returns ErrNotOpen.
func (w *Worker) Contains(ctx context.Context, keys [][]byte) ([]bool, error) {
	if w.filters == nil {
		return nil, ErrNotOpen
	}
	if len(w.Crawls) > 0 {
		return w.ContainsIn(ctx, w.Crawls[0], keys)
	}
	out := make([]bool, len(keys))
	for _, id := range slices.Sorted(maps.Keys(w.filters.readyFilters())) {
		seen, err := w.ContainsIn(ctx, id, keys)
		if err != nil {
			return nil, err
		}
		for i, s := range seen {
			out[i] = out[i] || s
		}
	}
	return out, nil
}

// ContainsIn reports, per key, whether the crawl's filter holds it (adding
// nothing), opening the filter if needed; before Open it returns
// ErrNotOpen.
func (w *Worker) ContainsIn(ctx context.Context, crawl string, keys [][]byte) ([]bool, error) {
	if w.filters == nil {
		return nil, ErrNotOpen
	}
	f, release, err := w.filters.Acquire(ctx, crawl)
	if err != nil {
		return nil, err
	}
	defer release()
	return f.Contains(ctx, keys)
}

// StatsSnapshot returns the shared statistics with the topN hosts, or
// ErrNotOpen.
func (w *Worker) StatsSnapshot(ctx context.Context, topN int) (stats.Snapshot, error) {
	if w.rec == nil {
		return stats.Snapshot{}, ErrNotOpen
	}
	return w.rec.Snapshot(ctx, topN)
}

// SnapshotStatus returns the state of the open in-memory filters' snapshot
// files summed, or false when there are none (Redis filters, or no file
// configured).
func (w *Worker) SnapshotStatus() (SnapshotStatus, bool) {
	if w.filters == nil || w.rdb != nil || w.Config.Filter.Snapshot == "" {
		return SnapshotStatus{}, false
	}
	return w.filters.snapshotStatus(), true
}
