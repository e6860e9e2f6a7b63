package lograte

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// clock is a settable time for a Limiter.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestLimiter(every time.Duration) (*Limiter, *clock) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := New(every)
	l.now = c.now
	return l, c
}

func TestLimiter(t *testing.T) {
	type step struct {
		at    time.Duration // since the start
		cause string
		owed  bool // ask Owed, not Allow
		ok    bool
		left  int
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"first at once, then once a minute with the count", []step{
			{0, "a", false, true, 0},
			{time.Second, "a", false, false, 0},
			{30 * time.Second, "a", false, false, 0},
			{59 * time.Second, "a", false, false, 0},
			{60 * time.Second, "a", false, true, 3},
			{61 * time.Second, "a", false, false, 0},
			{3 * time.Minute, "a", false, true, 1},
			{5 * time.Minute, "a", false, true, 0}, // nothing left out: a plain line
		}},
		{"causes do not hold each other back", []step{
			{0, "a", false, true, 0},
			{time.Second, "b", false, true, 0},
			{2 * time.Second, "a", false, false, 0},
			{3 * time.Second, "b", false, false, 0},
			{61 * time.Second, "b", false, true, 1},
		}},
		{"owed: said once the interval passed, only if some were left out", []step{
			{0, "a", true, false, 0}, // never occurred
			{0, "a", false, true, 0},
			{10 * time.Second, "a", true, false, 0}, // nothing left out
			{20 * time.Second, "a", false, false, 0},
			{30 * time.Second, "a", true, false, 0}, // too early
			{60 * time.Second, "a", true, true, 1},
			{61 * time.Second, "a", true, false, 0}, // said
			{62 * time.Second, "a", false, false, 0},
			{2 * time.Minute, "a", false, true, 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, c := newTestLimiter(time.Minute)
			start := c.t
			for i, s := range tc.steps {
				c.t = start.Add(s.at)
				var left int
				var ok bool
				if s.owed {
					left, ok = l.Owed(s.cause)
				} else {
					left, ok = l.Allow(s.cause)
				}
				if ok != s.ok || left != s.left {
					t.Errorf("step %d at %v: cause %q (owed %v) = %d, %v; want %d, %v", i, s.at, s.cause, s.owed, left, ok, s.left, s.ok)
				}
			}
		})
	}
}

// TestLimiterForgets: a limiter that met many causes stays bounded, and a
// forgotten cause is logged at once, as a new one is.
func TestLimiterForgets(t *testing.T) {
	l, c := newTestLimiter(time.Minute)
	for i := 0; i < 10*maxCauses; i++ {
		if _, ok := l.Allow(fmt.Sprint(i)); !ok {
			t.Fatalf("Allow(%d), a new cause = false, want true", i)
		}
		c.t = c.t.Add(time.Second)
	}
	if n := len(l.causes); n > maxCauses {
		t.Errorf("%d causes remembered, want at most %d", n, maxCauses)
	}
}

func TestLimiterLog(t *testing.T) {
	l, c := newTestLimiter(time.Minute)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	for i := 0; i < 38; i++ {
		l.Log(log, slog.LevelWarn, "heartbeat", "route lease heartbeat failed", "error", "timeout")
		c.t = c.t.Add(2 * time.Second)
	}
	l.LogOwed(log, slog.LevelWarn, "heartbeat", "route lease heartbeat failed", "error", "timeout") // too early: nothing
	c.t = c.t.Add(44 * time.Second)                                                                 // a minute after the last line
	l.LogOwed(log, slog.LevelWarn, "heartbeat", "route lease heartbeat failed", "error", "timeout")
	l.LogOwed(log, slog.LevelWarn, "heartbeat", "route lease heartbeat failed", "error", "timeout")
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`level=WARN msg="route lease heartbeat failed" error=timeout`,
		`level=WARN msg="route lease heartbeat failed" error=timeout repeated=29 over=1m0s`,
		`level=WARN msg="route lease heartbeat failed" error=timeout repeated=7 over=1m0s`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
