package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/testsite"
)

// TestDataDirLock checks that a second embedded run over a data directory
// in use refuses at once, naming the directory and the process holding it,
// and that the lock of a killed process blocks nothing (issue 10 item 2:
// both runs fetched every page, and the second never exited).
func TestDataDirLock(t *testing.T) {
	bin := crawlerBinary(t)
	site := startSite(t, testsite.Options{Pages: 50})
	dir := t.TempDir()
	// The holder is polite (a request a second): it is still crawling
	// when the others start.
	holder := startProc(t, "holder", bin, []string{"run", "--embedded", "--data-dir", dir, "--seed", site.URL,
		"--progress", "never", "--idle-exit", "1m", "--filter-capacity", "1000"}, nil)
	pid := strconv.Itoa(holder.cmd.Process.Pid)
	waitFor(t, 30*time.Second, "the holder's pid in LOCK", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "LOCK"))
		return strings.TrimSpace(string(b)) == pid && site.Fetches()["/"] > 0
	})

	args := []string{"run", "--embedded", "--data-dir", dir, "--seed", site.URL, "--progress", "never",
		"--idle-exit", "1s", "--filter-capacity", "1000", "--crawl-host-delay", "0", "--crawl-max-pages", "3"}
	start := time.Now()
	code, _, stderr := runCLI(t, t.Context(), args...)
	if code != 1 || !strings.Contains(stderr, dir) || !strings.Contains(stderr, "process "+pid) {
		t.Errorf("second run: exit %d, stderr:\n%s\nwant exit 1 naming %s and process %s", code, stderr, dir, pid)
	}
	t.Logf("refused after %v: %s", time.Since(start), strings.TrimSpace(stderr))

	if err := holder.cmd.Process.Kill(); err != nil { // SIGKILL: no clean-up
		t.Fatal(err)
	}
	<-holder.done
	code, _, stderr = runCLI(t, t.Context(), args...)
	if code != 0 {
		t.Errorf("run after the holder was killed: exit %d, stderr:\n%s", code, stderr)
	}
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
