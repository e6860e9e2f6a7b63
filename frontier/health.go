package frontier

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/sievecrawl/sieve/admit"
	"github.com/sievecrawl/sieve/internal/lograte"
)

// Dependencies a Worker tracks.
const (
	// DepNATS is the NATS connection and JetStream API.
	DepNATS = "nats"
	// DepFilter is the seen-URL filter (Redis, for a shared filter).
	DepFilter = "filter"
	// DepStats is the shared statistics store.
	DepStats = "stats"
	// DepFrontier is the frontier stream's room: down while it is at its
	// limits and the worker waits (backpressure). It does not make the
	// worker unready.
	DepFrontier = "frontier"
)

// DepState is the state of one dependency.
type DepState struct {
	// Up is false from the first failure until the next success.
	Up bool `json:"up"`
	// Since is when the state began.
	Since time.Time `json:"since"`
	// Error is the failure that made it down.
	Error string `json:"error,omitempty"`
}

// health tracks dependencies and logs their changes of state: each
// dependency's going down and coming back at once, then, while it flaps
// (a NATS node away: one publish fails, the next succeeds), once a minute
// each with the changes left out, and once more a minute after the last
// line if its state then is one whose line was left out. It is safe for
// concurrent use.
type health struct {
	mu    sync.Mutex
	deps  map[string]*DepState
	log   *slog.Logger
	lines *lograte.Limiter
	onSet func(dep string, up bool)
	now   func() time.Time
}

func newHealth(log *slog.Logger, onSet func(string, bool)) *health {
	h := &health{deps: map[string]*DepState{}, log: log, lines: lograte.New(time.Minute), onSet: onSet, now: time.Now}
	for _, d := range []string{DepNATS, DepFilter, DepStats, DepFrontier} {
		h.deps[d] = &DepState{Up: true, Since: h.now()}
		onSet(d, true)
	}
	return h
}

// set records the outcome of an operation on dep: err == nil means up.
func (h *health) set(dep string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.deps[dep]
	up := err == nil
	if s.Up == up {
		if !up {
			s.Error = err.Error()
		}
		h.logState(dep, up, 0, true)
		return
	}
	now := h.now()
	was := now.Sub(s.Since).Round(time.Millisecond)
	*s = DepState{Up: up, Since: now}
	if !up {
		s.Error = err.Error()
	}
	h.logState(dep, up, was, false)
	h.onSet(dep, up)
}

// logState logs dep's state: a change (at most once a minute for each
// dependency and direction), or, with owed, the state it stays in if
// changes into it were left out. h.mu is held.
func (h *health) logState(dep string, up bool, was time.Duration, owed bool) {
	logf := h.lines.Log
	if owed {
		logf = h.lines.LogOwed
	}
	s := h.deps[dep]
	switch {
	case up && owed:
		logf(h.log, slog.LevelInfo, dep+" up", "dependency recovered", "dependency", dep)
	case up:
		logf(h.log, slog.LevelInfo, dep+" up", "dependency recovered", "dependency", dep, "down_for", was)
	case dep == DepFrontier:
		logf(h.log, slog.LevelWarn, dep+" down", "frontier stream full: waiting (backpressure)", "error", s.Error)
	default:
		logf(h.log, slog.LevelError, dep+" down", "dependency unavailable: holding batches and retrying", "dependency", dep, "error", s.Error)
	}
}

func (h *health) states() map[string]DepState {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]DepState, len(h.deps))
	for k, v := range h.deps {
		out[k] = *v
	}
	return out
}

// notReady lists the dependencies that make the worker unready, sorted.
func (h *health) notReady() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, d := range []string{DepNATS, DepFilter} {
		if !h.deps[d].Up {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// observer turns what a Worker's admit.Core reports into the worker's
// health and metrics: every failure may hold batches (Status.Held); a
// mark not on enough replicas holds them without marking anything down; a
// failing filter operation marks the filter down, a
// publish refused because the frontier stream is at its limits marks the
// frontier full (backpressure, NATS itself up), any other failed publish
// marks NATS down; each failure counts as a retry of its operation.
type observer struct{ w *Worker }

var _ admit.Observer = observer{}

func (o observer) Failed(op string, n int, err error) {
	o.w.m.retries.WithLabelValues(op).Add(float64(n))
	o.w.held.failed(op, err)
	var c causer
	switch {
	case errors.As(err, &c):
		// The filter answers, but its writes are not where they must be
		// (Redis WAIT without enough replicas): the batches are held,
		// which Status.Held says; the worker is degraded, not down.
	case op != admit.OpPublish:
		o.w.health.set(DepFilter, fmt.Errorf("%s: %w", op, err))
	case isFull(err):
		o.w.health.set(DepFrontier, err)
		o.w.health.set(DepNATS, nil)
	default:
		o.w.health.set(DepNATS, fmt.Errorf("publish: %w", err))
	}
}

func (o observer) Succeeded(op string) {
	if op != admit.OpPublish {
		o.w.health.set(DepFilter, nil)
		return
	}
	o.w.health.set(DepFrontier, nil)
	o.w.health.set(DepNATS, nil)
}

func (o observer) Parked(_ string, n int) { o.w.m.parked.Add(float64(n)) }
