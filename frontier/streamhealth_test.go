package frontier_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
)

// TestStreamHealthNodeDown shuts down one node of a 3-node cluster (not a
// leader of the discovered stream, so that nothing but its replicas is
// missing) and checks that every required stream turns degraded, naming
// the node, no sooner than the bound; that the gauges say so; and that
// restarted, the node's replicas come back current and the streams
// healthy.
func TestStreamHealthNodeDown(t *testing.T) {
	c := natstest.StartCluster(t, 3, natstest.Options{})
	topo := frontier.Topology{Partitions: 4, Replicas: 3}.WithDefaults()
	js := c.JetStream(0)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := topo.Ensure(ctx, js); err != nil {
		t.Fatal(err)
	}
	if _, err := frontier.OpenCrawls(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	leader, err := c.Leader(ctx, js, topo.DiscoveredStream())
	if err != nil {
		t.Fatal(err)
	}
	down := (leader + 1) % 3
	hjs := c.JetStream((leader + 2) % 3) // the watcher's node stays up
	reg := prometheus.NewRegistry()
	const bound = 2 * time.Second
	h, err := frontier.NewStreamHealth(hjs, topo, frontier.StreamHealthOptions{Every: 200 * time.Millisecond, Bound: bound, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	defer h.Close()
	required := []string{topo.DiscoveredStream(), topo.FrontierStream(), "KV_" + topo.CrawlsBucket()}
	waitHealthy := func(what string) {
		t.Helper()
		deadline := time.Now().Add(45 * time.Second)
		for {
			d := h.Degraded()
			n := 0
			for _, st := range h.Streams() {
				if len(st.Problems) == 0 {
					n++
				}
			}
			if d == nil && n >= len(required) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: degraded %v, streams %+v; want every stream healthy", what, d, h.Streams())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitHealthy("before the node goes down")

	name := c.Servers[down].Name()
	c.Servers[down].Shutdown()
	stopped := time.Now()
	var seen time.Duration
	deadline := time.Now().Add(45 * time.Second)
	for {
		d := h.Degraded()
		all := true
		for _, s := range required {
			if !strings.Contains(d[s], "replica "+name) {
				all = false
			}
		}
		if all {
			seen = time.Since(stopped)
			break
		}
		if len(d) > 0 && time.Since(stopped) < bound {
			t.Fatalf("degraded %v %v after the node went down, before the bound %v", d, time.Since(stopped), bound)
		}
		if time.Now().After(deadline) {
			t.Fatalf("degraded %v 45 s after %s went down; want every required stream degraded naming it", d, name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s down: degraded after %v (bound %v): %v", name, seen.Round(time.Millisecond), bound, h.Degraded())
	for _, s := range required {
		if got := gauge(t, reg, "sieve_stream_degraded", s); got != 1 {
			t.Errorf("sieve_stream_degraded{stream=%q} = %v, want 1", s, got)
		}
		if got := gauge(t, reg, "sieve_stream_replicas_lagging", s); got != 1 {
			t.Errorf("sieve_stream_replicas_lagging{stream=%q} = %v, want 1", s, got)
		}
	}

	c.Servers[down].StartAgain()
	c.WaitReady()
	back := time.Now()
	waitHealthy("after the node came back")
	t.Logf("%s back: every stream healthy after %v", name, time.Since(back).Round(time.Millisecond))
	for _, s := range required {
		if got := gauge(t, reg, "sieve_stream_degraded", s); got != 0 {
			t.Errorf("sieve_stream_degraded{stream=%q} = %v after the node came back, want 0", s, got)
		}
	}
}

// gauge returns the value of the gauge name{stream=stream} in reg (-1:
// absent).
func gauge(tb testing.TB, reg prometheus.Gatherer, name, stream string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stream" && l.GetValue() == stream {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// TestStreamHealthMissing: a required stream that does not exist is
// degraded ("not found"), since workers then fail with "stream not
// found"; a stream of another prefix is not watched.
func TestStreamHealthMissing(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	js := srv.JetStream()
	topo := frontier.Topology{Partitions: 2}.WithDefaults()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := topo.Ensure(ctx, js); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER_THING", Subjects: []string{"other.>"}}); err != nil {
		t.Fatal(err)
	}
	h, err := frontier.NewStreamHealth(js, topo, frontier.StreamHealthOptions{Bound: -1})
	if err != nil {
		t.Fatal(err)
	}
	h.Check(ctx)
	d := h.Degraded()
	crawls := "KV_" + topo.CrawlsBucket()
	if !strings.Contains(d[crawls], "not found") || len(d) != 1 {
		t.Errorf("Degraded() = %v, want only %s, not found", d, crawls)
	}
	for _, st := range h.Streams() {
		if st.Stream == "OTHER_THING" {
			t.Errorf("Streams() lists %s, another deployment's stream", st.Stream)
		}
	}
	if _, err := frontier.OpenCrawls(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	h.Check(ctx)
	if d := h.Degraded(); d != nil {
		t.Errorf("Degraded() = %v once the bucket exists, want none", d)
	}
}
