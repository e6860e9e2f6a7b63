package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
)

// TestCrawlsWithoutQuorum: `crawler crawls` on a 3-node cluster lists the
// crawls and says nothing of the streams while they are healthy; with two
// nodes of three down (every stream without a quorum) it returns within
// its bound, with an error that names the streams and why, instead of
// hanging.
func TestCrawlsWithoutQuorum(t *testing.T) {
	c := natstest.StartCluster(t, 3, natstest.Options{})
	topo := frontier.Topology{Replicas: 3}.WithDefaults()
	js := c.JetStream(0)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := topo.Ensure(ctx, js); err != nil {
		t.Fatal(err)
	}
	store, err := crawls.Open(ctx, js, topo, crawls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(ctx, "quorum", frontier.CrawlSettings{ExpectURLs: 1000, FPP: 0.01, Kind: "bloom", Scope: "host"}, frontier.CrawlSettings{}); err != nil {
		t.Fatal(err)
	}
	s := loadSettings(t, "--nats-url", c.URL(0), "--frontier-replicas", "3")
	var out strings.Builder
	if err := crawlsCommand(ctx, s, false, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "quorum") || strings.Contains(out.String(), "degraded") {
		t.Errorf("crawler crawls on a healthy cluster:\n%s\nwant the crawl listed and no stream degraded", out.String())
	}

	old := crawlsTimeout
	crawlsTimeout = 3 * time.Second
	defer func() { crawlsTimeout = old }()
	c.Servers[1].Shutdown()
	c.Servers[2].Shutdown()
	out.Reset()
	start := time.Now()
	err = crawlsCommand(ctx, s, false, &out)
	took := time.Since(start)
	t.Logf("crawler crawls without a quorum: %v after %v\n%s", err, took.Round(time.Millisecond), out.String())
	if err == nil {
		t.Fatalf("crawler crawls without a quorum succeeded:\n%s", out.String())
	}
	// The streams' check takes at most its 3 s reads, the listing its bound.
	if took > 3*time.Second+crawlsTimeout+5*time.Second {
		t.Errorf("crawler crawls took %v without a quorum, want it bounded by about %v", took, 3*time.Second+crawlsTimeout)
	}
	for _, want := range []string{"streams degraded", topo.FrontierStream(), "KV_" + topo.CrawlsBucket()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q, want it to name %q", err, want)
		}
	}
	if !strings.Contains(out.String(), "degraded: stream "+topo.DiscoveredStream()) {
		t.Errorf("output:\n%s\nwant a line saying stream %s is degraded", out.String(), topo.DiscoveredStream())
	}
}
