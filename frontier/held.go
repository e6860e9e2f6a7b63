package frontier

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sievecrawl/sieve/internal/lograte"
)

// DefaultHeldBound is WorkerOptions.HeldBound's default: longer than a
// batch takes while its dependencies answer (milliseconds, or a WAIT's
// redis.wait_timeout of 1 s and a retry), shorter than the AckWait (30 s)
// after which its messages would be redelivered.
const DefaultHeldBound = 10 * time.Second

// Held is a worker's batches that have been in hand longer than the bound:
// the worker waits for a dependency (Redis WAIT without enough replicas,
// NATS away) and acknowledges none of their pages meanwhile, so the
// frontier stays empty and the crawl looks done while it is not.
type Held struct {
	// Batches is how many batches have been in hand longer than the bound.
	Batches int `json:"batches"`
	// Since is when the oldest of them was taken.
	Since time.Time `json:"since"`
	// Reason is the last failure heard since then, in a few words ("redis
	// WAIT 0/1 replicas"), or "" when none was.
	Reason string `json:"reason,omitempty"`
}

// String says h on one line: "held 12 batches 35s: redis WAIT 0/1
// replicas", the age as of now.
func (h Held) String() string {
	s := fmt.Sprintf("held %d batch", h.Batches)
	if h.Batches != 1 {
		s += "es"
	}
	s += " " + time.Since(h.Since).Round(time.Second).String()
	if h.Reason != "" {
		s += ": " + h.Reason
	}
	return s
}

// causer is an error that says in a few words what holds a batch
// (dedup.ReplicaError: "redis WAIT 0/1 replicas").
type causer interface{ Cause() string }

// holding tracks the batches a worker has in hand and the failures that
// hold them. It is safe for concurrent use.
type holding struct {
	bound time.Duration
	log   *slog.Logger
	lines *lograte.Limiter
	now   func() time.Time

	mu      sync.Mutex
	next    uint64
	batches map[uint64]time.Time // in hand, since
	reason  string               // the last failure heard
	at      time.Time            // when
	logged  bool                 // a held line went out: say when it ends
}

func newHolding(bound time.Duration, log *slog.Logger) *holding {
	return &holding{bound: bound, log: log, lines: lograte.New(time.Minute), now: time.Now, batches: map[uint64]time.Time{}}
}

// begin records a batch taken in hand; end(id) when it is done.
func (h *holding) begin() (id uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	h.batches[h.next] = h.now()
	return h.next
}

func (h *holding) end(id uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.batches, id)
	if h.logged && h.heldLocked(h.now()) == nil {
		h.logged = false
		h.log.Info("batches no longer held")
	}
}

// failed records a failure that keeps batches in hand, and logs the held
// batches (at once, then once a minute while they are held).
func (h *holding) failed(op string, err error) {
	reason := op + ": " + err.Error()
	var c causer
	if errors.As(err, &c) {
		reason = c.Cause()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	h.reason, h.at = reason, now
	if held := h.heldLocked(now); held != nil {
		h.logged = true
		h.lines.Log(h.log, slog.LevelWarn, "held", "batches held: pages wait, unacknowledged, for a dependency",
			"batches", held.Batches, "for", now.Sub(held.Since).Round(time.Second), "reason", held.Reason, "error", err)
	}
}

// held returns the batches in hand past the bound, or nil.
func (h *holding) held() *Held {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.heldLocked(h.now())
}

func (h *holding) heldLocked(now time.Time) *Held {
	var out *Held
	for _, since := range h.batches {
		if now.Sub(since) < h.bound {
			continue
		}
		if out == nil {
			out = &Held{Since: since}
		}
		out.Batches++
		if since.Before(out.Since) {
			out.Since = since
		}
	}
	if out != nil && !h.at.Before(out.Since) {
		out.Reason = h.reason
	}
	return out
}
