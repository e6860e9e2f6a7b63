package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/testsite"
)

// TestDemoIsImpoliteOnlyToItsOwnSite runs --demo with a second, real site
// seeded beside it (another loopback host): that site must keep the default
// politeness, a request a second, and the demo must leave the data dir
// alone (issue 10 item 4: --demo turned politeness off for every host, and
// shared ./sieve-data and crawl "default" with real crawls).
func TestDemoIsImpoliteOnlyToItsOwnSite(t *testing.T) {
	other := startSite(t, testsite.Options{Pages: 20, Addr: "127.0.0.2"})
	dataDir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	var stderr string
	go func() {
		defer close(done)
		_, _, stderr = runCLI(t, ctx, "run", "--demo", "--seed", other.URL, "--data-dir", dataDir, "--progress", "never")
	}()
	waitFor(t, 60*time.Second, "4 pages of the other site", func() bool { p, _ := siteRequests(other); return p >= 4 })
	cancel()
	<-done
	if gap := other.MinGap(); gap < 900*time.Millisecond {
		t.Errorf("requests to %s came %v apart during --demo, want the default 1s", other.Host(), gap)
	}
	if entries, _ := os.ReadDir(dataDir); len(entries) > 0 {
		t.Errorf("--demo wrote to the data dir: %v", entries)
	}
	if !strings.Contains(stderr, `crawl "demo"`) {
		t.Errorf("demo does not name its crawl:\n%s", stderr)
	}
}
