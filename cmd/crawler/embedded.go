package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/pipeline"
)

// startEmbedded starts the whole pipeline in this process: a NATS server
// with JetStream storing under <data_dir>/nats, and a dedup worker
// (pipeline.Worker, as `dedup-worker run` runs it) whose filter is in
// memory (filter.kind, a scalable Bloom filter by default), loaded from and
// saved to <data_dir>/seen.<kind>, or the filter in Redis when redis.url is
// set.
func startEmbedded(ctx context.Context, s settings, logger *slog.Logger, reg prometheus.Registerer) (*backend, error) {
	if err := os.MkdirAll(s.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	unlock, err := lockDir(s.DataDir)
	if err != nil {
		return nil, err
	}
	b := &backend{closers: []func() error{unlock}} // released last
	if err := b.startEmbedded(ctx, s, logger, reg); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func (b *backend) startEmbedded(ctx context.Context, s settings, logger *slog.Logger, reg prometheus.Registerer) error {
	if err := b.startNATS(s, "sieve-crawler"); err != nil {
		return err
	}
	if len(s.Seed) > 0 {
		// The crawl's settings first: its filter is opened from them.
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := s.createCrawl(cctx, b.js)
		cancel()
		if err != nil {
			return err
		}
	}
	w := &pipeline.Worker{Config: embeddedConfig(s), Logger: workerLogger(s, logger), Conn: b.nc, Registerer: reg, Crawls: []string{s.Crawl.ID}}
	return b.runWorker(ctx, w)
}

// startNATS starts the embedded NATS server with JetStream storing under
// <data_dir>/nats, reachable only from this process, and connects to it
// as name (b.nc, b.js); closing b shuts it down. The data directory must
// be b's: locked (lockDir) by the caller.
func (b *backend) startNATS(s settings, name string) error {
	srv, err := server.NewServer(&server.Options{
		ServerName: "sieve-embedded",
		DontListen: true, // in-process connections only
		JetStream:  true,
		StoreDir:   filepath.Join(s.DataDir, "nats"),
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: int32(max(int64(s.Frontier.MaxMessageBytes)+4096, 1<<20)),
	})
	if err != nil {
		return fmt.Errorf("embedded nats: %w", err)
	}
	srv.Start()
	b.closers = append(b.closers, func() error { srv.Shutdown(); srv.WaitForShutdown(); return nil })
	if !srv.ReadyForConnections(30 * time.Second) {
		return errors.New("embedded nats: not ready after 30s")
	}
	nc, err := nats.Connect("", nats.InProcessServer(srv), nats.Name(name))
	if err != nil {
		return fmt.Errorf("embedded nats: %w", err)
	}
	b.nc = nc
	b.closers = append(b.closers, func() error { nc.Close(); return nil })
	if b.js, err = jetstream.New(nc); err != nil {
		return err
	}
	return nil
}

// embeddedConfig is the embedded worker's settings: the in-memory filter's
// snapshot in the data directory unless filter.snapshot names one, and
// statistics flushed often enough for the progress line.
func embeddedConfig(s settings) config.Config {
	cfg := s.Config
	if !cfg.Redis.Enabled() && cfg.Filter.Snapshot == "" {
		cfg.Filter.Snapshot = filepath.Join(s.DataDir, "seen."+cfg.Filter.Kind)
	}
	cfg.Worker.StatsInterval = min(cfg.Worker.StatsInterval, 250*time.Millisecond)
	return cfg
}

// workerLogger is the embedded worker's logger: its start and stop notices
// are noise beside the crawler's progress, so below debug level it logs
// warnings and errors only.
func workerLogger(s settings, logger *slog.Logger) *slog.Logger {
	logger = logger.With("component", "dedup-worker")
	if s.Log.Level == "debug" {
		return logger
	}
	return slog.New(minLevel{logger.Handler(), slog.LevelWarn})
}

// minLevel passes on the records of at least its level.
type minLevel struct {
	slog.Handler
	level slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.level}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.level}
}
