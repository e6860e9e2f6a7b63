package config

import (
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
)

// Topology converts the frontier section into the shape of the pipeline's
// streams; every NATS name a process uses comes from its methods.
func (f Frontier) Topology() frontier.Topology {
	storage := jetstream.FileStorage
	if f.Storage == "memory" {
		storage = jetstream.MemoryStorage
	}
	return frontier.Topology{
		Prefix:             f.Prefix,
		Partitions:         f.Partitions,
		DuplicateWindow:    f.DuplicateWindow,
		Limits:             frontier.Limits{MaxBytes: int(f.MaxMessageBytes), MaxLinks: f.MaxLinks},
		FrontierMaxMsgs:    f.FrontierMaxMsgs,
		FrontierMaxBytes:   int64(f.FrontierMaxBytes),
		DiscoveredMaxBytes: int64(f.DiscoveredMaxBytes),
		Replicas:           f.Replicas,
		Storage:            storage,
		AckWait:            f.AckWait,
		MaxAckPending:      f.MaxAckPending,
		Routes:             f.Routes,
	}
}

// WorkerOptions converts the worker and frontier sections into a dedup
// worker's options. Logger and Registerer are left for the caller.
func (c Config) WorkerOptions() frontier.WorkerOptions {
	w := c.Worker
	return frontier.WorkerOptions{
		Topology:        c.Frontier.Topology(),
		Batch:           w.Batch,
		Concurrency:     w.Concurrency,
		FetchWait:       w.FetchWait,
		BackoffMin:      w.BackoffMin,
		BackoffMax:      w.BackoffMax,
		ShutdownTimeout: w.ShutdownTimeout,
		StatsInterval:   w.StatsInterval,
		SeenCache:       seenCache(w.SeenCache),
		ParkDelay:       w.ParkDelay,
	}
}

// seenCache converts the setting (0: none) to the worker option (0:
// default, negative: none).
func seenCache(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
