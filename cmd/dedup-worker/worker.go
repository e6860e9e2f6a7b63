package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/sievecrawl/sieve/auth"
	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/watch"
)

// statsStore is the shared statistics: stats.Redis or stats.Memory.
type statsStore interface {
	frontier.Recorder
	Snapshot(ctx context.Context, topN int) (stats.Snapshot, error)
	Close() error
}

// Main is one dedup worker process: a pipeline.Worker and its watch server
// (the live page, /stats, /metrics, /healthz, /readyz: package watch). Open, then Run until the context
// ends, then Close. Tests boot it in-process with HTTP.Addr "127.0.0.1:0".
type Main struct {
	Config config.Config
	Logger *slog.Logger

	reg   *prometheus.Registry
	ln    net.Listener
	srv   *http.Server
	watch *watch.Server // the page, /stats, /metrics, /healthz, /readyz
	w     *pipeline.Worker
	// streams says which of the deployment's streams have a replica
	// offline or behind (the page, /readyz, /metrics).
	streams *frontier.StreamHealth
	// closeAuth stops reading http.tokens_file.
	closeAuth func() error
	web       *watch.Web // how srv is secured: TLS, users, tokens

	closeOnce sync.Once
	closeErr  error
}

// Open starts listening for HTTP and opens the worker (see
// pipeline.Worker.Open).
func (m *Main) Open() error {
	m.reg = prometheus.NewRegistry()
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if m.Config.HTTP.Addr != "" {
		ln, err := net.Listen("tcp", m.Config.HTTP.Addr)
		if err != nil {
			return fmt.Errorf("listen %s: %w", m.Config.HTTP.Addr, err)
		}
		m.ln = ln
		if warning, _ := m.Config.HTTP.Exposure(); warning != "" && m.Logger != nil {
			m.Logger.Warn(warning)
		}
	}
	m.w = &pipeline.Worker{Config: m.Config, Logger: m.Logger, Registerer: m.reg, Name: "dedup-worker " + hostname()}
	if err := m.w.Open(context.Background()); err != nil {
		m.Close()
		return err
	}
	if m.ln != nil {
		js, err := jetstream.New(m.w.NATS())
		if err == nil {
			m.streams, err = frontier.NewStreamHealth(js, m.w.Topology(), frontier.StreamHealthOptions{Logger: m.Logger, Registerer: m.reg})
		}
		if err == nil {
			m.streams.Start()
			m.watch, err = watch.New(watch.Sources{
				Role:       "dedup-worker",
				Counters:   watch.CountersFunc(m.w.StatsSnapshot),
				Filter:     watch.FilterFunc(m.w.FilterStats),
				Membership: m.w,
				Queues:     watch.NewJetStreamQueues(js, m.w.Topology()),
				Worker:     m.w,
				Peers:      watch.NewJetStreamPeers(js, m.w.Topology(), 0),
				// Named at once, with the address and the cause, while
				// the worker waits for NATS.
				Checks:   map[string]func() error{"nats": func() error { return frontier.Connected(m.w.NATS()) }},
				Degraded: []watch.Degradation{m.streams},
			}, watch.Options{Registry: m.reg, Logger: m.Logger})
		}
		if err != nil {
			m.Close()
			return err
		}
		var guard *auth.Authenticator
		if h := m.Config.HTTP; h.Authenticates() {
			if guard, m.closeAuth, err = auth.Open(auth.Options{Server: "http", Registerer: m.reg, Logger: m.Logger},
				h.TokensFile, h.ClientRoles, auth.FileOptions{Logger: m.Logger, Failed: auth.ReloadFailures(m.reg, "http.tokens_file")}); err != nil {
				m.Close()
				return &config.FieldError{Field: "http.tokens_file", Err: err}
			}
		}
		if m.web, err = watch.OpenWeb(watch.WebOptions{ConfigFile: m.Config.HTTP.WebConfigFile, Auth: guard,
			HealthOpen: m.Config.HTTP.HealthOpen, Registerer: m.reg, Logger: m.Logger}); err != nil {
			m.Close()
			return err
		}
		m.srv = watch.NewHTTPServer(m.web.Handler(m.watch.Handler()))
	}
	return nil
}

// Addr is the status server's address (useful with port 0), or "".
func (m *Main) Addr() string {
	if m.ln == nil {
		return ""
	}
	return m.ln.Addr().String()
}

// Run serves HTTP and runs the worker until ctx ends; then it lets the
// worker finish its batches and stops the HTTP server. It returns the
// worker's error, if any.
func (m *Main) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	workerDone := make(chan struct{})
	if m.srv != nil {
		g.Go(func() error {
			if err := m.web.Serve(m.ln, m.srv); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("http: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			select {
			case <-workerDone:
			case <-gctx.Done():
				<-workerDone
			}
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := m.srv.Shutdown(sctx); errors.Is(err, context.DeadlineExceeded) {
				return m.srv.Close() // clients that never sent a request: not waited for
			} else {
				return err
			}
		})
	}
	g.Go(func() error {
		defer close(workerDone)
		return m.w.Run(gctx)
	})
	return g.Wait()
}

// Close stops the worker and the status server; an in-memory filter is
// saved to its snapshot file. It is idempotent.
func (m *Main) Close() error {
	m.closeOnce.Do(func() {
		var errs []error
		if m.srv != nil {
			errs = append(errs, m.srv.Close())
		} else if m.ln != nil {
			errs = append(errs, m.ln.Close())
		}
		if m.watch != nil {
			errs = append(errs, m.watch.Close())
		}
		if m.streams != nil {
			m.streams.Close()
		}
		if m.closeAuth != nil {
			errs = append(errs, m.closeAuth())
		}
		if m.web != nil {
			errs = append(errs, m.web.Close())
		}
		if m.w != nil {
			errs = append(errs, m.w.Close())
		}
		m.closeErr = errors.Join(errs...)
	})
	return m.closeErr
}

// cmdRun is "dedup-worker run".
func cmdRun(ctx context.Context, e env, _ *flag.FlagSet, cfg *config.Config) int {
	log := newLogger(e.stderr, cfg.Log)
	// go-redis logs every failed dial; the worker logs state changes once.
	config.RedisLogTo(log)
	m := &Main{Config: *cfg, Logger: log}
	log.Info("dedup worker starting", "config", cfg.String(), "pid", os.Getpid())
	if err := m.Open(); err != nil {
		log.Error("start failed", "error", err)
		return exitFail
	}
	err := m.Run(ctx)
	if cerr := m.Close(); cerr != nil {
		log.Error("close", "error", cerr)
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		log.Error("dedup worker failed", "error", err)
		return exitFail
	}
	log.Info("dedup worker stopped")
	return exitOK
}
