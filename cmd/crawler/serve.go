package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/internal/memtrim"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/urlfrontier"
	"github.com/sievecrawl/sieve/watch"
)

// serveCommand is `crawler serve`: the URLFrontier API (package
// urlfrontier) on s.URLFrontier.Addr, over the embedded pipeline or a
// deployment's, with a dedup worker whose filters it shares, and the
// watch page. It runs until ctx ends.
func serveCommand(ctx context.Context, s settings, stderr io.Writer) error {
	level := new(slog.LevelVar)
	_ = level.UnmarshalText([]byte(s.Log.Level))
	logger := newLeveledLogger(s, stderr, level)
	reg := newRegistry()
	var p *backend
	var err error
	if s.Embedded {
		p, err = startEmbedded(ctx, s, logger, reg)
	} else {
		p, err = connect(s)
		if err == nil {
			err = p.startWorker(ctx, s, logger, reg)
		}
	}
	if err != nil {
		if p != nil {
			p.close()
		}
		return err
	}
	defer p.close()
	// A fill of millions of URLs grows the heap by hundreds of MB that
	// the runtime would keep for long after; give them back once the API
	// is quiet: no URL put or handed out for trimQuiet, whatever the
	// stores still do in the background (not quiet while opening).
	var opened atomic.Pointer[urlfrontier.Server]
	var opening atomic.Uint64
	tctx, stopTrim := context.WithCancel(ctx)
	defer stopTrim()
	go memtrim.Run(tctx, memtrim.Options{Quiet: trimQuiet, Work: func() uint64 {
		if srv := opened.Load(); srv != nil {
			return srv.Work()
		}
		return opening.Add(1)
	}, Trimmed: func(b uint64) {
		logger.Debug("serve: returned free memory to the system", "MB", b>>20)
	}})
	if !s.Embedded {
		if err := frontier.WaitServer(ctx, p.nc, logger); err != nil {
			return err
		}
	}
	sec, err := openServerSecurity("urlfrontier", s.URLFrontier.Addr, s.URLFrontier.Security, reg, logger)
	if err != nil {
		return err
	}
	defer sec.close()
	lis, err := net.Listen("tcp", s.URLFrontier.Addr)
	if err != nil {
		return fmt.Errorf("urlfrontier.addr: %w", err)
	}
	defer lis.Close()
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rdb, closeRedis, err := s.redisClient()
	if err != nil {
		return err
	}
	defer closeRedis()
	store, err := s.crawlStore(octx, p.js, rdb, false)
	if err != nil {
		return err
	}
	registry, err := frontier.OpenCrawls(octx, p.js, s.Frontier.Topology())
	if err != nil {
		return err
	}
	canon, err := s.Normalize.Normalizer()
	if err != nil {
		return fmt.Errorf("normalizer: %w", err)
	}
	rules, err := followRules(ctx, octx, p.js, s.Frontier.Topology(), logger)
	if err != nil {
		return err
	}
	defer rules.Close()
	u := s.URLFrontier
	// The page first: while the queues' index catches up with its log, it
	// says how far (not ready, with the progress as the reason).
	var loading atomic.Value
	loading.Store("opening the queues' store")
	w, err := startServeWatch(s, p, reg, logger, stderr, func() error {
		if m := loading.Load().(string); m != "" {
			return errors.New(m)
		}
		if srv := opened.Load(); srv != nil {
			return srv.Err() // its index fell behind the log's trims
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer w.close(logger)
	// Not octx: the queues' index catches up with its log for as long as
	// it was away (a lost directory: the whole log), reporting progress; a
	// fixed deadline would keep such a server from ever starting.
	srv, err := urlfrontier.Open(ctx, urlfrontier.Options{
		JetStream: p.js, Dir: filepath.Join(s.DataDir, "urlfrontier"), Topology: s.Frontier.Topology(), Filters: p.worker.Filters(), Canonicalize: canon.URL,
		Crawls: urlfrontier.StoreCrawls{Store: store, Registry: registry, Forget: p.worker.ForgetCrawl},
		Rules:  rules, // the crawls' learned rules: the workers' keys
		Node:   lis.Addr().String(), DefaultDelay: u.DefaultDelay, DefaultLease: u.DefaultLease,
		MaxBatch: u.MaxBatch, CompactEvery: u.CompactEvery, Registerer: reg, Logger: logger, LogLevel: level,
		Progress: func(m string) { loading.Store(m) },
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	opened.Store(srv)
	loading.Store("")
	hs := newHandshakes()
	opts := append(srv.ServerOptions(int(u.MaxMessageBytes)), sec.grpcOptions(urlfrontier.Roles())...)
	g := grpc.NewServer(append(opts, hs.serverOptions()...)...)
	srv.Register(g)
	served := make(chan error, 1)
	go func() { served <- g.Serve(hs.listen(lis)) }()
	fmt.Fprintf(stderr, "urlfrontier listening on %s (%s)\n", lis.Addr(), sec.describe())
	// A queues' index that fell behind the log's trims cannot be made
	// current from the log: serve stops, and started again (as compose and
	// systemd do) restores it from the snapshot. One that met a newer
	// build's entry stops too, and refuses to start until upgraded.
	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("urlfrontier: %w", err)
	case <-srv.Stopped():
		hs.cutAll()
		g.Stop()
		return fmt.Errorf("urlfrontier: the queues' index stopped following their log: %w", srv.Err())
	}
	// Finish the calls in hand for a while, then cut the streams. The
	// handshakes under way are cut at once: the server's stop would wait
	// for them, and they have no call to finish.
	hs.cutAll()
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(s.Crawl.ShutdownTimeout):
		g.Stop()
	}
	return nil
}

// trimQuiet is how long serve's API must go without a URL put or handed
// out before serve returns its free memory (package memtrim), and the
// least time between two trims: memtrim's default, 30 s of a low
// allocation rate, came 40 s after a fill of 5 M URLs on a busy box,
// since the stores' background work allocates.
const trimQuiet = 10 * time.Second

// rulesWait bounds how long serve waits for the crawls' learned rules
// before it opens the API.
const rulesWait = 5 * time.Second

// followRules opens the crawls' learned rewrite rules (package dust, in
// the bucket <PREFIX>_RULES) with octx and follows them until ctx ends or
// Close, as the dedup workers do, so that the API admits a URL under the
// same key as they do. It waits up to rulesWait for what the bucket holds:
// a URL put before its rule is read is admitted under its own spelling (a
// second fetch of a page, never a page lost).
func followRules(ctx, octx context.Context, js jetstream.JetStream, topo frontier.Topology, logger *slog.Logger) (*frontier.Rules, error) {
	rules, err := frontier.OpenRules(octx, js, topo)
	if err != nil {
		return nil, err
	}
	if err := rules.Follow(ctx, func(key string, err error) {
		logger.Warn("serve: learned rules not applied: unreadable record", "key", key, "error", err)
	}); err != nil {
		return nil, err
	}
	select {
	case <-rules.Ready():
	case <-time.After(rulesWait):
		logger.Warn("serve: learned rules not read yet; admitting without them until they are", "waited", rulesWait)
	case <-ctx.Done():
	}
	return rules, nil
}

// startWorker runs a dedup worker on b's connection, as the embedded mode
// does: serve admits through its filters, and it deduplicates the
// deployment's discovered stream like any other worker.
func (b *backend) startWorker(ctx context.Context, s settings, logger *slog.Logger, reg prometheus.Registerer) error {
	return b.runWorker(ctx, &pipeline.Worker{Config: s.Config, Logger: workerLogger(s, logger), Conn: b.nc, Registerer: reg})
}

// runWorker opens w and runs it until b.stopWorker (or b.close: stopped,
// then closed).
func (b *backend) runWorker(ctx context.Context, w *pipeline.Worker) error {
	if err := w.Open(ctx); err != nil {
		return err
	}
	b.worker = w
	b.dedup = w.StatsSnapshot
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	var once sync.Once
	var stopErr error
	b.stopWorker = func() error {
		once.Do(func() {
			stop()
			stopErr = <-done
		})
		return stopErr
	}
	b.closers = append(b.closers, w.Close, b.stopWorker) // stopped, then closed
	return nil
}

// startServeWatch serves the watch page, /metrics (with the URLFrontier
// calls by RPC and status, and their latency) and health on http.addr;
// queues is the readiness check of the queues' store (its catch-up).
func startServeWatch(s settings, b *backend, reg *prometheus.Registry, logger *slog.Logger, stderr io.Writer, queues func() error) (*watcher, error) {
	if s.HTTP.Addr == "" {
		return &watcher{}, nil
	}
	src := watch.Sources{
		Role:   "urlfrontier",
		Queues: watch.NewJetStreamQueues(b.js, s.Frontier.Topology()),
		Peers:  watch.NewJetStreamPeers(b.js, s.Frontier.Topology(), 0),
		Checks: map[string]func() error{"nats": func() error { return frontier.Connected(b.nc) },
			"urlfrontier": queues},
		Counters:   watch.CountersFunc(b.dedup),
		Filter:     watch.FilterFunc(b.worker.FilterStats),
		Worker:     b.worker,
		Membership: b.worker,
	}
	return listenWatch(s, src, reg, logger, stderr)
}

// newLeveledLogger is newLogger with its level in level, which the API's
// SetLogLevel changes.
func newLeveledLogger(s settings, w io.Writer, level *slog.LevelVar) *slog.Logger {
	o := &slog.HandlerOptions{Level: level}
	if s.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// validateServe checks what serve needs beyond the shared settings.
func (s settings) validateServe() error {
	if !s.Embedded && !s.Redis.Enabled() {
		return errors.New("serve needs redis.url, where every serve process finds the crawls' filters, or --embedded")
	}
	return s.URLFrontier.validate()
}
