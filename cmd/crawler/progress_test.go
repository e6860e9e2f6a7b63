package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/testsite"
)

// TestFit checks that the progress line is cut to the terminal (issue 10
// item 6: at 60 columns every update wrapped and scrolled).
func TestFit(t *testing.T) {
	line := "fetched 1,234 (56.7/s) · queue 89 · duplicates dropped 1,011 · failed 3 · in flight 12"
	tests := []struct {
		width int
		want  string
	}{
		{0, line},
		{200, line},
		{20, "fetched 1,234 (56.7…"},
		{29, "fetched 1,234 (56.7/s) · que…"},
	}
	for _, tt := range tests {
		if got := fit(line, tt.width); got != tt.want {
			t.Errorf("fit(line, %d) = %q, want %q", tt.width, got, tt.want)
		}
	}
}

// TestProgressLineCountsRobotsApart: the progress line's failed counter
// leaves out the URLs robots.txt refused, which it shows apart, as
// /metrics counts them apart (outcome robots); robots_unavailable, which
// /metrics counts as failed, stays failed (issue 39, item 18).
func TestProgressLineCountsRobotsApart(t *testing.T) {
	tests := []struct {
		name   string
		failed map[crawl.Reason]int64
		want   string
	}{
		{"nothing failed", nil, "failed 0 · robots refused 0"},
		{"failures only", map[crawl.Reason]int64{crawl.ReasonRobotsUnavailable: 2, "timeout": 1}, "failed 3 · robots refused 0"},
		{"refusals only", map[crawl.Reason]int64{crawl.ReasonRobots: 1500}, "failed 0 · robots refused 1,500"},
		{"both", map[crawl.Reason]int64{crawl.ReasonRobots: 5, crawl.ReasonRobotsUnavailable: 1, "timeout": 2}, "failed 3 · robots refused 5"},
	}
	for _, tt := range tests {
		st := crawl.Stats{Fetched: 1234, InFlight: 12, Failed: tt.failed}
		got := progressLine(st, 56.7, "89", "1,011", nil)
		want := "fetched 1,234 (56.7/s) · queue 89 · duplicates dropped 1,011 · " + tt.want + " · in flight 12"
		if got != want {
			t.Errorf("%s: progressLine(Failed %v) = %q, want %q", tt.name, tt.failed, got, want)
		}
	}
}

// TestTermWidth reads the width of a real pseudo-terminal.
func TestTermWidth(t *testing.T) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pts.Close()
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 60}); err != nil {
		t.Fatal(err)
	}
	if !isTerminal(pts) {
		t.Error("a pseudo-terminal is not seen as a terminal")
	}
	if w := termWidth(pts); w != 60 {
		t.Errorf("termWidth = %d, want 60", w)
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if w := termWidth(f); w != 0 {
		t.Errorf("termWidth of a file = %d, want 0", w)
	}
}

// TestProgressWithJSONLog pins issue 39 item 18: with log.format json,
// progress lines were plain text among JSON records. A crawl run with a
// JSON log writes its progress as records whose figures are fields.
func TestProgressWithJSONLog(t *testing.T) {
	every := progressEvery
	progressEvery = 100 * time.Millisecond
	t.Cleanup(func() { progressEvery = every })
	site := startSite(t, testsite.Options{Pages: 30, Latency: 30 * time.Millisecond})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	args := append([]string{"run", "--embedded", "--data-dir", t.TempDir(), "--seed", site.URL, "--idle-exit", "2s"}, testRunFlags(4)...)
	args = append(args, "--progress", "always", "--log-format", "json", "--log-level", "info")
	code, _, stderr := runCLI(t, ctx, args...)
	if code != 0 {
		t.Fatalf("crawler run: exit %d\n%s", code, stderr)
	}
	progress := 0
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if strings.HasPrefix(line, "fetched ") {
			t.Errorf("a plain-text progress line in a JSON log: %q", line)
		}
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "progress" {
			continue
		}
		progress++
		for _, field := range []string{"fetched", "per_second", "queue", "failed", "robots_refused", "in_flight", "same_page_again", "spellings_dropped"} {
			if _, ok := rec[field]; !ok {
				t.Errorf("progress record without %s: %s", field, line)
			}
		}
	}
	if progress == 0 {
		t.Errorf("no progress record in the JSON log:\n%s", stderr)
	}
}

// TestProgressLineShowsHeld: a pipeline that holds its batches (Redis
// WAIT without a replica) must not look done: the line says how many, for
// how long and why, summed over the workers (the oldest's age and
// reason); nothing when none is held (issue 39, item 3).
func TestProgressLineShowsHeld(t *testing.T) {
	now := time.Now()
	wait := &frontier.Held{Batches: 8, Since: now.Add(-35 * time.Second), Reason: "redis WAIT 0/1 replicas"}
	nats := &frontier.Held{Batches: 4, Since: now.Add(-12 * time.Second), Reason: "publish: nats: timeout"}
	st := crawl.Stats{}
	base := "fetched 0 (0.0/s) · queue 0 · duplicates dropped 0 · failed 0 · robots refused 0 · in flight 0"
	for _, tt := range []struct {
		name string
		held []*frontier.Held
		want string
	}{
		{"none held", []*frontier.Held{nil, nil}, base},
		{"one worker", []*frontier.Held{nil, wait}, base + " · held 8 batches 35s: redis WAIT 0/1 replicas"},
		{"two workers: the oldest's reason", []*frontier.Held{nats, wait}, base + " · held 12 batches 35s: redis WAIT 0/1 replicas"},
	} {
		if got := progressLine(st, 0, "0", "0", sumHeld(tt.held)); got != tt.want {
			t.Errorf("%s: progressLine = %q, want %q", tt.name, got, tt.want)
		}
	}
}
