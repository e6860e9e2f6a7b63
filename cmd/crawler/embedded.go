package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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
// filter is an in-memory scalable Bloom filter loaded from and saved to
// <data_dir>/seen.bloom (or the filter in Redis when redis.url is set).
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

// memoryFilter is the in-memory filter of the embedded mode.
type memoryFilter interface {
	frontier.Filter
	filterStats
	Save(ctx context.Context, path string) error
	Close() error
}

// openFilter opens the embedded worker's filter and stats: in memory with a
// snapshot in the data directory, or in Redis when redis.url is set.
func openFilter(ctx context.Context, s settings, policy string) (frontier.Filter, statsStore, func() error, error) {
	if s.Redis.Enabled() {
		return openRedisFilter(ctx, s, policy)
	}
	path := s.Filter.Snapshot
	if path == "" {
		path = filepath.Join(s.DataDir, "seen.bloom")
	}
	opts := dedup.ScalableOptions{
		Growth: dedup.Growth{
			InitialCapacity: s.Filter.Capacity,
			TargetFPP:       s.Filter.FPP,
			Factor:          s.Filter.Growth,
			Tightening:      s.Filter.Tightening,
		},
		Policy: policy,
		Force:  s.Filter.Force,
	}
	var f memoryFilter
	var err error
	f, err = dedup.LoadScalableBloom(ctx, path, opts)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = dedup.NewScalableBloom(opts)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("filter %s: %w", path, err)
	}
	// Saved every snapshot_interval, and at the end: a run that dies
	// loses at most an interval of marks (URLs then admitted again, so
	// fetched twice; none is lost).
	saveCtx, stopSaving := context.WithCancel(context.WithoutCancel(ctx))
	saved := make(chan struct{})
	go func() {
		defer close(saved)
		every := s.Filter.SnapshotInterval
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
				_ = f.Save(saveCtx, path)
			}
		}
	}()
	closeFn := func() error {
		stopSaving()
		<-saved
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := f.Save(sctx, path)
		return errors.Join(err, f.Close())
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
