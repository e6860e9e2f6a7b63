// Package lograte bounds how often a recurring cause is logged: an outage
// that fails an operation on every attempt (a NATS node away, a Redis
// without its replica) says so once, then once an interval while it lasts,
// with the number of occurrences it left out, instead of a line per
// attempt.
//
// A cause is a short string the caller chooses (a message, a dependency
// and a direction: "nats down"); occurrences of different causes never
// hold each other back. A cause's first occurrence is logged at once; the
// next ones are counted until Every has passed since the last line, and
// the first occurrence after that is logged with the count. A caller that
// learns a state lasts without a new occurrence (a dependency still down)
// asks Owed, so the count is said even when the occurrences stop.
package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// maxCauses bounds the causes remembered: beyond it, those logged more than
// an interval ago with nothing left out are forgotten (they would be logged
// at once anyway), then all of them if none was.
const maxCauses = 256

// Limiter decides which occurrences of each cause to log. Its zero value is
// not usable: make one with New. It is safe for concurrent use.
type Limiter struct {
	every time.Duration
	now   func() time.Time

	mu     sync.Mutex
	causes map[string]*cause
}

type cause struct {
	logged time.Time // when a line of the cause was last logged
	left   int       // occurrences since then not logged
}

// New returns a Limiter that logs each cause at most once every every
// (a minute when every ≤ 0), besides its first occurrence.
func New(every time.Duration) *Limiter {
	if every <= 0 {
		every = time.Minute
	}
	return &Limiter{every: every, now: time.Now, causes: map[string]*cause{}}
}

// Every returns the interval between two lines of one cause.
func (l *Limiter) Every() time.Duration { return l.every }

// Allow counts one occurrence of name and reports whether to log it: the
// first at once, then the first after Every has passed since the last line
// of name. left is how many occurrences were not logged before this one.
func (l *Limiter) Allow(name string) (left int, ok bool) {
	left, _, ok = l.take(name, true)
	return left, ok
}

// Owed reports whether a line of name is owed without a new occurrence:
// some were left out and Every has passed since its last line. It counts
// them as said.
func (l *Limiter) Owed(name string) (left int, ok bool) {
	left, _, ok = l.take(name, false)
	return left, ok
}

// take decides for name, counting an occurrence or not; over is the time
// since the last line when some were left out.
func (l *Limiter) take(name string, occurred bool) (left int, over time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	c := l.causes[name]
	switch {
	case c == nil && occurred:
		l.sweep(now)
		l.causes[name] = &cause{logged: now}
		return 0, 0, true
	case c == nil:
		return 0, 0, false
	case now.Sub(c.logged) < l.every:
		if occurred {
			c.left++
		}
		return 0, 0, false
	case !occurred && c.left == 0:
		return 0, 0, false
	}
	left, over = c.left, now.Sub(c.logged)
	c.left, c.logged = 0, now
	return left, over, true
}

// sweep forgets causes when too many are remembered. l.mu is held.
func (l *Limiter) sweep(now time.Time) {
	if len(l.causes) < maxCauses {
		return
	}
	for name, c := range l.causes {
		if c.left == 0 && now.Sub(c.logged) >= l.every {
			delete(l.causes, name)
		}
	}
	if len(l.causes) >= maxCauses {
		clear(l.causes)
	}
}

// Log logs msg with args at level on log if Allow(name) lets it, adding
// how many occurrences were left out before it ("repeated") and over what
// time ("over": since the cause's last line).
func (l *Limiter) Log(log *slog.Logger, level slog.Level, name, msg string, args ...any) {
	if left, over, ok := l.take(name, true); ok {
		log.Log(context.Background(), level, msg, counted(left, over, args)...)
	}
}

// LogOwed logs msg with args at level on log if Owed(name) says a line is
// owed, with the count as Log adds it.
func (l *Limiter) LogOwed(log *slog.Logger, level slog.Level, name, msg string, args ...any) {
	if left, over, ok := l.take(name, false); ok {
		log.Log(context.Background(), level, msg, counted(left, over, args)...)
	}
}

func counted(left int, over time.Duration, args []any) []any {
	if left == 0 {
		return args
	}
	return append(args[:len(args):len(args)], "repeated", left, "over", over.Round(time.Second))
}
