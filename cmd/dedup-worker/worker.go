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
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

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

// Main is one dedup worker process: configuration in, connections, filter,
// worker and status server out. Open, then Run until the context ends, then
// Close. Tests boot it in-process with HTTP.Addr "127.0.0.1:0".
type Main struct {
	Config config.Config
	Logger *slog.Logger

	reg    *prometheus.Registry
	ln     net.Listener
	srv    *http.Server
	nc     *nats.Conn
	rdb    redis.UniversalClient
	canon  *normalize.Normalizer
	filter seenFilter
	rec    statsStore
	worker atomic.Pointer[frontier.Worker]
	state  atomic.Value // string: "starting", "running", "stopping"

	closeOnce sync.Once
	closeErr  error
}

// topology converts the frontier settings.
func topology(c config.Config) frontier.Topology {
	storage := jetstream.FileStorage
	if c.Frontier.Storage == "memory" {
		storage = jetstream.MemoryStorage
	}
	return frontier.Topology{
		Prefix:             c.Frontier.Prefix,
		Partitions:         c.Frontier.Partitions,
		DuplicateWindow:    c.Frontier.DuplicateWindow,
		Limits:             frontier.Limits{MaxBytes: int(c.Frontier.MaxMessageBytes), MaxLinks: c.Frontier.MaxLinks},
		FrontierMaxMsgs:    c.Frontier.FrontierMaxMsgs,
		FrontierMaxBytes:   int64(c.Frontier.FrontierMaxBytes),
		DiscoveredMaxBytes: int64(c.Frontier.DiscoveredMaxBytes),
		Replicas:           c.Frontier.Replicas,
		Storage:            storage,
		AckWait:            c.Frontier.AckWait,
		MaxAckPending:      c.Frontier.MaxAckPending,
	}
}

// Open starts listening for HTTP and connects to NATS (which may still be
// down: the client keeps trying). The filter is opened by Run, which waits
// for Redis if needed.
func (m *Main) Open() error {
	m.state.Store("starting")
	canon, err := m.Config.Normalize.Normalizer()
	if err != nil {
		return fmt.Errorf("normalizer: %w", err)
	}
	m.canon = canon
	m.reg = prometheus.NewRegistry()
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if m.Config.HTTP.Addr != "" {
		ln, err := net.Listen("tcp", m.Config.HTTP.Addr)
		if err != nil {
			return fmt.Errorf("listen %s: %w", m.Config.HTTP.Addr, err)
		}
		m.ln = ln
		m.srv = &http.Server{Handler: m.handler(), ReadHeaderTimeout: 10 * time.Second}
	}
	log := m.Logger
	nc, err := m.Config.NATS.Connect("dedup-worker "+hostname(),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("nats disconnected", "error", err) }),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("nats reconnected", "url", c.ConnectedUrlRedacted()) }),
	)
	if err != nil {
		m.Close()
		return err
	}
	m.nc = nc
	if m.Config.Redis.Enabled() {
		rdb, err := m.Config.Redis.Client()
		if err != nil {
			m.Close()
			return err
		}
		m.rdb = rdb
		m.rec = stats.NewRedis(rdb, m.Config.Frontier.Prefix)
	} else {
		m.rec = stats.NewMemory()
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

// Run serves HTTP, opens the filter (retrying while Redis is down) and runs
// the worker until ctx ends; then it lets the worker finish its batches and
// stops the HTTP server. It returns the worker's error, if any.
func (m *Main) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	workerDone := make(chan struct{})
	if m.srv != nil {
		g.Go(func() error {
			if err := m.srv.Serve(m.ln); !errors.Is(err, http.ErrServerClosed) {
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
			return m.srv.Shutdown(sctx)
		})
	}
	g.Go(func() error {
		defer close(workerDone)
		// Mark stopping as soon as the signal comes, so /readyz turns 503
		// while the batches in hand are finished.
		stopMark := context.AfterFunc(ctx, func() { m.state.Store("stopping") })
		defer stopMark()
		if err := m.openFilter(gctx); err != nil {
			if gctx.Err() != nil {
				return nil
			}
			return err
		}
		w, err := frontier.NewWorker(m.nc, m.filter, m.canon, m.rec, frontier.WorkerOptions{
			Topology:        topology(m.Config),
			Batch:           m.Config.Worker.Batch,
			Concurrency:     m.Config.Worker.Concurrency,
			FetchWait:       m.Config.Worker.FetchWait,
			BackoffMin:      m.Config.Worker.BackoffMin,
			BackoffMax:      m.Config.Worker.BackoffMax,
			ShutdownTimeout: m.Config.Worker.ShutdownTimeout,
			StatsInterval:   m.Config.Worker.StatsInterval,
			SeenCache:       seenCache(m.Config.Worker.SeenCache),
			Logger:          m.Logger,
			Registerer:      m.reg,
		})
		if err != nil {
			return err
		}
		m.reg.MustRegister(filterCollector{m.filter})
		m.worker.Store(w)
		if ctx.Err() == nil {
			m.state.Store("running")
		}
		var sg sync.WaitGroup
		snapCtx, stopSnap := context.WithCancel(context.Background())
		if m.rdb == nil && m.Config.Filter.Snapshot != "" {
			sg.Go(func() { m.snapshotLoop(snapCtx) })
		}
		err = w.Run(gctx)
		stopSnap()
		sg.Wait()
		return err
	})
	return g.Wait()
}

// seenCache converts the setting (0: none) to the worker option (0:
// default, negative: none).
func seenCache(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// openFilter opens the filter, waiting for Redis while it is unreachable.
// A parameter mismatch is final.
func (m *Main) openFilter(ctx context.Context) error {
	wait := m.Config.Worker.BackoffMin
	logged := false
	for {
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		f, err := m.Config.Filter.Open(octx, m.rdb, m.canon.Version())
		cancel()
		if err == nil {
			if logged {
				m.Logger.Info("filter opened")
			}
			m.filter = f
			return nil
		}
		if m.rdb == nil || isPermanent(err) || ctx.Err() != nil {
			return fmt.Errorf("open filter: %w", err)
		}
		if !logged {
			m.Logger.Error("cannot open the filter yet: retrying", "error", err)
			logged = true
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, m.Config.Worker.BackoffMax)
	}
}

// isPermanent reports whether an error opening the filter will not go away
// by waiting: a parameter mismatch or invalid parameters.
func isPermanent(err error) bool {
	return errors.Is(err, dedup.ErrMismatch) || errors.Is(err, dedup.ErrInvalidParams)
}

func (m *Main) snapshotLoop(ctx context.Context) {
	t := time.NewTicker(m.Config.Filter.SnapshotInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := m.Config.Filter.Save(ctx, m.filter); err != nil {
				m.Logger.Error("filter snapshot failed", "path", m.Config.Filter.Snapshot, "error", err)
			}
		}
	}
}

// Close releases everything Open and Run acquired, in reverse order, saving
// an in-memory filter to its snapshot file. It is idempotent.
func (m *Main) Close() error {
	m.closeOnce.Do(func() {
		var errs []error
		if w := m.worker.Load(); w != nil {
			errs = append(errs, w.Close())
		}
		if m.srv != nil {
			errs = append(errs, m.srv.Close())
		} else if m.ln != nil {
			errs = append(errs, m.ln.Close())
		}
		if m.filter != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := m.Config.Filter.Save(ctx, m.filter); err != nil {
				errs = append(errs, fmt.Errorf("save filter snapshot: %w", err))
			}
			cancel()
			errs = append(errs, m.filter.Close())
		}
		if m.rec != nil {
			errs = append(errs, m.rec.Close())
		}
		if m.rdb != nil {
			errs = append(errs, m.rdb.Close())
		}
		if m.nc != nil {
			if m.nc.IsConnected() {
				_ = m.nc.Drain() // flushes acks; closes the connection
				deadline := time.Now().Add(5 * time.Second)
				for !m.nc.IsClosed() && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
			}
			m.nc.Close()
		}
		m.closeErr = errors.Join(errs...)
	})
	return m.closeErr
}

// cmdRun is "dedup-worker run".
func cmdRun(ctx context.Context, e env, _ *flag.FlagSet, cfg *config.Config) int {
	log := newLogger(e.stderr, cfg.Log)
	// go-redis logs every failed dial; the worker logs state changes once.
	redis.SetLogger(redisLog{log})
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

// redisLog sends go-redis's internal log lines to the debug level.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}
