package main

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sievecrawl/sieve/crawl"
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
		got := progressLine(st, 56.7, "89", "1,011")
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
