package pipeline

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/dedup"
)

// SnapshotStatus is the state of an in-memory filter's snapshot file.
type SnapshotStatus struct {
	// Path is the file.
	Path string `json:"path"`
	// Saved is when the last save succeeded (zero: none yet in this run).
	Saved time.Time `json:"saved,omitzero"`
	// Items is the number of URLs the file holds as of that save.
	Items uint64 `json:"items"`
	// Bytes is the file's size after that save.
	Bytes int64 `json:"bytes"`
	// Seconds is how long that save took.
	Seconds float64 `json:"seconds"`
	// Saves and Failures count the saves of this run.
	Saves    int64 `json:"saves"`
	Failures int64 `json:"failures"`
	// Error is why the last save failed; empty when it succeeded.
	Error string `json:"error,omitempty"`
}

// saveShare bounds the time spent saving: after a save that took d, the
// next starts no sooner than saveShare×d later, so a large filter is saved
// less often than the interval rather than all the time.
const saveShare = 9

// snapshotter saves an in-memory filter to its snapshot file when it holds
// URLs the file does not: every interval (filter.snapshot_interval), and
// at the end. A failed save is logged at once and kept for Readiness.
type snapshotter struct {
	cfg config.Filter
	f   dedup.Filter
	log *slog.Logger

	saveMu  sync.Mutex // one save at a time
	stopped bool       // under saveMu: the crawl was deleted, never write again

	mu      sync.Mutex
	st      SnapshotStatus
	clean   bool      // the file holds st.Items URLs: nothing to save at that count
	next    time.Time // no save before
	lastLog time.Time // of a failure
}

func newSnapshotter(cfg config.Filter, f dedup.Filter, log *slog.Logger) *snapshotter {
	s := &snapshotter{cfg: cfg, f: f, log: log, st: SnapshotStatus{Path: cfg.Snapshot}}
	// A filter loaded from the file is what the file holds.
	if fi, err := os.Stat(cfg.Snapshot); err == nil {
		if st, err := f.Stats(context.Background()); err == nil {
			s.st.Items, s.st.Bytes, s.clean = st.Items, fi.Size(), true
		}
	}
	return s
}

func (s *snapshotter) status() SnapshotStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// tick saves when the filter changed, unless the last save was too recent.
func (s *snapshotter) tick(ctx context.Context, now time.Time) {
	s.mu.Lock()
	wait := now.Before(s.next) || now.Sub(s.st.Saved) < s.cfg.SnapshotInterval
	s.mu.Unlock()
	if !wait {
		_ = s.save(ctx)
	}
}

// final saves at the end, unless the file already holds everything.
func (s *snapshotter) final(ctx context.Context) error { return s.save(ctx) }

// stop ends the saves for good, waiting for one under way: the crawl was
// deleted, and a save that finished after its file was removed would bring
// its URLs back to a crawl created again under its id.
func (s *snapshotter) stop() {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.stopped = true
}

// save writes the file if the filter holds URLs it does not, and records
// the outcome; once stopped, it writes nothing.
func (s *snapshotter) save(ctx context.Context) error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if s.stopped {
		return nil
	}
	st, err := s.f.Stats(ctx)
	if err != nil {
		return s.done(0, 0, err)
	}
	s.mu.Lock()
	unchanged := s.clean && st.Items == s.st.Items && s.st.Error == ""
	s.mu.Unlock()
	if unchanged {
		return nil
	}
	start := time.Now()
	err = SaveFilter(ctx, s.cfg, s.f)
	return s.done(st.Items, time.Since(start), err)
}

func (s *snapshotter) done(items uint64, took time.Duration, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if err != nil {
		s.st.Failures++
		first := s.st.Error == ""
		s.st.Error = err.Error()
		// At once, then once a minute while it keeps failing.
		if first || now.Sub(s.lastLog) >= time.Minute {
			s.log.Error("filter snapshot failed: a crash now would forget URLs admitted since the last save",
				"path", s.cfg.Snapshot, "error", err, "failures", s.st.Failures)
			s.lastLog = now
		}
		return err
	}
	if s.st.Error != "" {
		s.log.Info("filter snapshot saved again", "path", s.cfg.Snapshot)
	}
	s.st.Error = ""
	s.st.Saves++
	s.st.Saved, s.st.Items, s.st.Seconds, s.clean = now, items, took.Seconds(), true
	if fi, err := os.Stat(s.cfg.Snapshot); err == nil {
		s.st.Bytes = fi.Size()
	}
	s.next = now.Add(saveShare * took)
	return nil
}
