package watch

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/watch/watchtest"
)

// readyz is /readyz's answer.
type readyz struct {
	code     int
	Ready    bool              `json:"ready"`
	Degraded map[string]string `json:"degraded"`
}

func getReadyz(t *testing.T, base string) readyz {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(base, "/") + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r readyz
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	r.code = resp.StatusCode
	return r
}

// TestPageShowsDegradedStreams: with a node of a 3-node cluster down past
// the bound, the live page says "degraded" (not "not ready") and names the
// streams and the node, /readyz answers 200 naming them too; with the node
// back, the page says "ready" again.
func TestPageShowsDegradedStreams(t *testing.T) {
	c := natstest.StartCluster(t, 3, natstest.Options{})
	topo := frontier.Topology{Partitions: 2, Replicas: 3}.WithDefaults()
	js := c.JetStream(0)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := topo.Ensure(ctx, js); err != nil {
		t.Fatal(err)
	}
	if _, err := frontier.OpenCrawls(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	h, err := frontier.NewStreamHealth(js, topo, frontier.StreamHealthOptions{Every: 200 * time.Millisecond, Bound: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	defer h.Close()

	bctx := watchtest.Browser(t, 90*time.Second)
	base := openPage(t, bctx, Sources{Role: "dedup-worker", Degraded: []Degradation{h}}, Options{Interval: 200 * time.Millisecond})
	page := func() (pill, list string) {
		t.Helper()
		got, err := watchtest.Text(bctx, "ready", "degraded")
		if err != nil {
			t.Fatal(err)
		}
		return got["ready"], got["degraded"]
	}
	waitPage := func(what string, ok func(pill, list string) bool) (string, string) {
		t.Helper()
		deadline := time.Now().Add(45 * time.Second)
		for {
			pill, list := page()
			if ok(pill, list) {
				return pill, list
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: page shows %q, %q", what, pill, list)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitPage("before", func(pill, list string) bool { return pill == "ready" && list == "" })

	down := 2
	name := c.Servers[down].Name()
	c.Servers[down].Shutdown()
	_, list := waitPage("a node down", func(pill, list string) bool {
		return pill == "degraded" && strings.Contains(list, topo.FrontierStream()) && strings.Contains(list, topo.DiscoveredStream())
	})
	if !strings.Contains(list, "replica "+name) {
		t.Errorf("page lists %q, want it to name the replica on %s", list, name)
	}
	if r := getReadyz(t, base); r.code != http.StatusOK || !r.Ready || !strings.Contains(r.Degraded[topo.FrontierStream()], name) {
		t.Errorf("/readyz = %d %+v, want 200, ready, degraded naming %s on %s", r.code, r, topo.FrontierStream(), name)
	}

	c.Servers[down].StartAgain()
	c.WaitReady()
	waitPage("the node back", func(pill, list string) bool { return pill == "ready" && list == "" })
	if r := getReadyz(t, base); r.code != http.StatusOK || len(r.Degraded) != 0 {
		t.Errorf("/readyz = %d %+v with the node back, want 200 and nothing degraded", r.code, r)
	}
}

// heldWorker is a worker source whose batches are held, as a worker's are
// while Redis WAIT finds no replica (frontier.TestHeldBatchesVisible runs
// the real one).
type heldWorker struct{ since time.Time }

func (heldWorker) Readiness() pipeline.Readiness {
	return pipeline.Readiness{Ready: true, State: "running"}
}

func (h heldWorker) Status() (frontier.Status, bool) {
	return frontier.Status{Ready: true, Started: h.since, InflightBatches: 12,
		Held: &frontier.Held{Batches: 12, Since: h.since, Reason: "redis WAIT 0/1 replicas"}}, true
}

// TestPageShowsHeldBatches: a worker holding its batches past the bound
// leaves the process ready but degraded: the page's pill says so, its
// list and the process's rows say how many batches, for how long and why,
// and /readyz answers 200 naming them.
func TestPageShowsHeldBatches(t *testing.T) {
	ctx := watchtest.Browser(t, 30*time.Second)
	base := openPage(t, ctx, Sources{Role: "dedup-worker", Worker: heldWorker{since: time.Now().Add(-35 * time.Second)}}, Options{})
	got, err := watchtest.Text(ctx, "ready", "degraded", "processes")
	if err != nil {
		t.Fatal(err)
	}
	if got["ready"] != "degraded" {
		t.Errorf("pill = %q, want degraded", got["ready"])
	}
	for id, want := range map[string]string{"degraded": "worker: held 12 batches 3",
		"processes": "redis WAIT 0/1 replicas"} {
		if !strings.Contains(got[id], want) {
			t.Errorf("#%s = %q, want it to contain %q", id, got[id], want)
		}
	}
	if !strings.HasSuffix(got["degraded"], "s: redis WAIT 0/1 replicas") {
		t.Errorf("#degraded = %q, want it to end with the age and the reason", got["degraded"])
	}
	if !strings.Contains(got["processes"], "batches held") {
		t.Errorf("#processes = %q, want a row of batches held", got["processes"])
	}
	if r := getReadyz(t, base); r.code != http.StatusOK || !r.Ready || !strings.Contains(r.Degraded["worker"], "held 12 batches") {
		t.Errorf("/readyz = %d %+v, want 200, ready, the worker degraded by 12 held batches", r.code, r)
	}
}
