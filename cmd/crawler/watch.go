package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sievecrawl/sieve/auth"
	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/dust"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/warc"
	"github.com/sievecrawl/sieve/watch"
)

// newRegistry is the process's metrics registry: the crawler's, the
// embedded worker's, the watch page's and the Go runtime's.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// watcher is a run's watch server (package watch) on http.addr, and the
// tokens file guarding it.
type watcher struct {
	srv       *watch.Server
	closeAuth func() error
	streams   *frontier.StreamHealth // the deployment's streams' replicas
}

// startWatch serves the live page, /stats, /metrics, /healthz and /readyz of
// the run on s.HTTP.Addr (none when empty) and says where. In embedded mode
// the server announces itself in the data directory and leaves its last
// report there, for `crawler stats` and `dedup-worker stats --data-dir`.
// The page lists the learned rules of the crawls it shows.
func startWatch(s settings, b *backend, c *crawl.Crawler, arch *warc.Recorder, reg *prometheus.Registry, logger *slog.Logger, stderr io.Writer) (*watcher, error) {
	w := &watcher{}
	if s.HTTP.Addr == "" {
		return w, nil
	}
	src := watch.Sources{
		Role:    "crawler",
		Crawler: c,
		Queues:  watch.NewJetStreamQueues(b.js, s.Frontier.Topology()),
		Peers:   watch.NewJetStreamPeers(b.js, s.Frontier.Topology(), 0),
		Checks:  map[string]func() error{"nats": func() error { return frontier.Connected(b.nc) }},
	}
	if b.dedup != nil {
		src.Counters = watch.CountersFunc(b.dedup)
	}
	// The page lists the crawls' learned rules, read every few seconds
	// (watch.Options.RulesEvery); the bucket is opened on the first read,
	// so that a crawler waiting for NATS serves its page meanwhile.
	src.Rules = &lazyRules{open: func(ctx context.Context) (*frontier.Rules, error) {
		return frontier.OpenRules(ctx, b.js, s.Frontier.Topology())
	}}
	if arch != nil {
		src.Checks["warc"] = arch.Err
		src.Archive = arch.Writer().Stats
	}
	if b.worker != nil {
		src.Role = "embedded"
		src.Filter = watch.FilterFunc(b.worker.FilterStats)
		src.Worker = b.worker
		src.Membership = b.worker
	}
	// A stream whose replica is offline or behind past a bound: degraded
	// on the page, in /readyz and /metrics.
	streams, err := frontier.NewStreamHealth(b.js, s.Frontier.Topology(), frontier.StreamHealthOptions{Logger: logger, Registerer: reg})
	if err != nil {
		return nil, err
	}
	src.Degraded = []watch.Degradation{streams}
	streams.Start()
	if w, err = listenWatch(s, src, reg, logger, stderr); err != nil {
		streams.Close()
		return nil, err
	}
	w.streams = streams
	return w, nil
}

// listenWatch serves src's watch page on s.HTTP.Addr and says where; in
// embedded mode the page keeps its report in the data directory.
func listenWatch(s settings, src watch.Sources, reg *prometheus.Registry, logger *slog.Logger, stderr io.Writer) (*watcher, error) {
	opts := watch.Options{Registry: reg, Logger: logger, WebConfigFile: s.HTTP.WebConfigFile, HealthOpen: s.HTTP.HealthOpen}
	var err error
	if opts.TLS, _, err = s.HTTP.Web(); err != nil {
		return nil, err
	}
	closeAuth := func() error { return nil }
	if s.HTTP.Authenticates() {
		if opts.Auth, closeAuth, err = auth.Open(auth.Options{Server: "http", Registerer: reg, Logger: logger},
			s.HTTP.TokensFile, s.HTTP.ClientRoles, auth.FileOptions{Logger: logger, Failed: auth.ReloadFailures(reg, "http.tokens_file")}); err != nil {
			return nil, &config.FieldError{Field: "http.tokens_file", Err: err}
		}
	}
	if s.Embedded {
		opts.Dir = s.DataDir
	}
	srv, err := watch.New(src, opts)
	if err != nil {
		closeAuth()
		return nil, err
	}
	if _, err := srv.Listen(s.HTTP.Addr); err != nil {
		srv.Close()
		closeAuth()
		return nil, fmt.Errorf("http.addr: %w", err)
	}
	fmt.Fprintln(stderr, pageNotice(s.HTTP, srv.URL()))
	if warning, _ := s.HTTP.Exposure(); warning != "" {
		logger.Warn(warning)
	}
	return &watcher{srv: srv, closeAuth: closeAuth}, nil
}

// close stops the watch server; it may be called more than once.
func (w *watcher) close(logger *slog.Logger) {
	if w.srv != nil {
		if err := w.srv.Close(); err != nil {
			logger.Warn("watch", "err", err)
		}
	}
	if w.streams != nil {
		w.streams.Close()
	}
	if w.closeAuth != nil {
		w.closeAuth()
		w.closeAuth = nil
	}
}

// statsCommand is `crawler stats`: the embedded crawl in the data directory,
// from its running process, or after it ended from the report it left.
func statsCommand(ctx context.Context, s settings, jsonOut bool, stdout io.Writer) error {
	c, err := watch.NewClient(s.Client.Options())
	if err != nil {
		return err
	}
	r, live, err := c.ReadDir(ctx, s.DataDir)
	if errors.Is(err, watch.ErrNothingInDir) {
		return fmt.Errorf("no embedded crawl has run in %s (data_dir) since it keeps its statistics there", s.DataDir)
	} else if err != nil {
		return err
	}
	if jsonOut {
		return json.NewEncoder(stdout).Encode(r)
	}
	sum := reportSummary(r)
	if !live {
		sum.End = "ended " + r.At.Format(time.RFC3339)
	}
	sum.print(stdout, s.DataDir)
	return nil
}

// reportSummary shows a running process's report as a run summary.
func reportSummary(r watch.Report) runSummary {
	sum := runSummary{End: "running", Seconds: r.At.Sub(r.Started).Seconds(), Dedup: r.Shared, Filter: r.Filter, Archive: r.Archive}
	if r.Crawler != nil {
		sum.Crawler = r.Crawler.Stats
	}
	if q := r.Streams; q != nil {
		sum.Left = &crawl.Depth{Frontier: q.FrontierQueued, Discovered: q.DiscoveredQueued}
	}
	return sum
}

// healthCommand is "crawler health": an orchestrator's probe (compose's
// healthcheck) as a command. It asks the process http.addr names, or,
// when that port is 0 (an embedded crawl's default), the one running in
// data_dir, with the client settings: the server's certificate is verified
// against client.ca_file like any client's.
func healthCommand(ctx context.Context, s settings, live bool, stdout io.Writer) error {
	c, err := watch.NewClient(s.Client.Options())
	if err != nil {
		return err
	}
	page, err := watch.LocalPageURL(s.HTTP)
	if err != nil {
		return err
	}
	if _, port, _ := net.SplitHostPort(s.HTTP.Addr); port == "0" {
		if page = c.RunningURL(ctx, s.DataDir); page == "" {
			return fmt.Errorf("http.addr %s picks a port at start, and no crawl runs in %s (data_dir) to say which", s.HTTP.Addr, s.DataDir)
		}
	}
	if err := c.Health(ctx, page, live); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "ok")
	return nil
}

// lazyRules opens the rules' bucket when first read, and again after a
// failure, for the live page.
type lazyRules struct {
	open func(context.Context) (*frontier.Rules, error)

	mu    sync.Mutex
	rules *frontier.Rules
}

func (l *lazyRules) List(ctx context.Context, crawl string) ([]dust.HostRules, error) {
	l.mu.Lock()
	r := l.rules
	if r == nil {
		var err error
		if r, err = l.open(ctx); err != nil {
			l.mu.Unlock()
			return nil, err
		}
		l.rules = r
	}
	l.mu.Unlock()
	return r.List(ctx, crawl)
}
