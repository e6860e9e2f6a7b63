package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/stats"
)

// dedupStats reads the dedup side's counts for progress and the summary.
type dedupStats interface {
	Snapshot(ctx context.Context, topHosts int) (stats.Snapshot, error)
}

// statsStore receives the embedded worker's counts and gives them back.
type statsStore interface {
	frontier.Recorder
	dedupStats
}

// filterStats reads the filter's health for the summary.
type filterStats interface {
	Stats(ctx context.Context) (dedup.Stats, error)
}

// startEmbedded starts the whole pipeline in this process: a NATS server
// with JetStream storing under <data_dir>/nats, and a dedup worker whose
// filter is in memory (filter.kind, a scalable Bloom filter by default),
// loaded from and saved to <data_dir>/seen.<kind>, or the filter in Redis
// when redis.url is set.
func startEmbedded(ctx context.Context, s settings, logger *slog.Logger) (p *pipeline, err error) {
	if err := os.MkdirAll(s.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	p = &pipeline{}
	defer func() {
		if err != nil {
			p.close()
		}
	}()

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
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	srv.Start()
	p.closers = append(p.closers, func() error { srv.Shutdown(); srv.WaitForShutdown(); return nil })
	if !srv.ReadyForConnections(30 * time.Second) {
		return nil, errors.New("embedded nats: not ready after 30s")
	}
	p.nc, err = nats.Connect("", nats.InProcessServer(srv), nats.Name("sieve-crawler"))
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	nc := p.nc
	p.closers = append(p.closers, func() error { nc.Close(); return nil })
	if p.js, err = jetstream.New(p.nc); err != nil {
		return nil, err
	}

	canon, err := s.Normalize.Normalizer()
	if err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	filter, rec, closeFilter, err := openFilter(ctx, s, canon.Version())
	if err != nil {
		return nil, err
	}
	p.dedup = rec
	p.filter = filter
	p.closers = append(p.closers, closeFilter)

	w, err := frontier.NewWorker(p.nc, filter, canon, rec, frontier.WorkerOptions{
		Topology:        topology(s.Frontier),
		Batch:           s.Worker.Batch,
		Concurrency:     s.Worker.Concurrency,
		FetchWait:       s.Worker.FetchWait,
		BackoffMin:      s.Worker.BackoffMin,
		BackoffMax:      s.Worker.BackoffMax,
		ShutdownTimeout: s.Worker.ShutdownTimeout,
		StatsInterval:   min(s.Worker.StatsInterval, 250*time.Millisecond),
		Logger:          workerLogger(s, logger),
	})
	if err != nil {
		return nil, err
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	var once sync.Once
	var stopErr error
	p.stopWorker = func() error {
		once.Do(func() {
			stop()
			stopErr = errors.Join(<-done, w.Close())
		})
		return stopErr
	}
	p.closers = append(p.closers, p.stopWorker)
	return p, nil
}

// openFilter opens the embedded worker's filter and stats: in memory, loaded
// from and saved to a snapshot in the data directory, or in Redis (filter
// and stats shared with a deployment) when redis.url is set.
func openFilter(ctx context.Context, s settings, policy string) (frontier.Filter, statsStore, func() error, error) {
	if s.Redis.Enabled() {
		client, err := s.Redis.Client()
		if err != nil {
			return nil, nil, nil, err
		}
		f, err := s.Filter.Open(ctx, client, policy)
		if err != nil {
			client.Close()
			return nil, nil, nil, err
		}
		closeFn := func() error { return errors.Join(f.Close(), client.Close()) }
		return f, stats.NewRedis(client, s.Frontier.Prefix), closeFn, nil
	}
	fc := s.Filter
	if fc.Snapshot == "" {
		fc.Snapshot = filepath.Join(s.DataDir, "seen."+fc.Kind)
	}
	f, err := fc.Open(ctx, nil, policy)
	if err != nil {
		return nil, nil, nil, err
	}
	// Saved every snapshot_interval, and at the end: a run that dies
	// loses at most an interval of marks (URLs then admitted again, so
	// fetched twice; none is lost).
	saveCtx, stopSaving := context.WithCancel(context.WithoutCancel(ctx))
	saved := make(chan struct{})
	go func() {
		defer close(saved)
		every := fc.SnapshotInterval
		if every <= 0 {
			every = time.Minute
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-saveCtx.Done():
				return
			case <-t.C:
				_ = fc.Save(saveCtx, f)
			}
		}
	}()
	closeFn := func() error {
		stopSaving()
		<-saved
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return errors.Join(fc.Save(sctx, f), f.Close())
	}
	return f, stats.NewMemory(), closeFn, nil
}

// workerLogger is the embedded worker's logger: its start and stop notices
// are noise beside the crawler's progress, so below debug level it logs
// warnings and errors only.
func workerLogger(s settings, logger *slog.Logger) *slog.Logger {
	if s.Log.Level == "debug" {
		return logger.With("component", "dedup-worker")
	}
	o := &slog.HandlerOptions{Level: slog.LevelWarn}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, o)
	if s.Log.Format == "json" {
		h = slog.NewJSONHandler(os.Stderr, o)
	}
	return slog.New(h).With("component", "dedup-worker")
}
