package config

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestWorkerOptions pins the conversion of the worker section: the seen
// cache setting 0 means none, which the worker option spells negative (its
// 0 means the default); issue 10 item 12 found the embedded mode ignoring it.
func TestWorkerOptions(t *testing.T) {
	tests := []struct {
		setting, want int
	}{
		{0, -1},
		{1, 1},
		{5000, 5000},
	}
	for _, tt := range tests {
		c := Default()
		c.Worker.SeenCache = tt.setting
		if got := c.WorkerOptions().SeenCache; got != tt.want {
			t.Errorf("worker.seen_cache %d: WorkerOptions().SeenCache = %d, want %d", tt.setting, got, tt.want)
		}
	}
	c := Default()
	c.Worker.Batch, c.Worker.Concurrency, c.Worker.FetchWait = 7, 3, time.Second
	c.Frontier.Prefix, c.Frontier.Partitions, c.Frontier.Storage = "x-y", 5, "memory"
	o := c.WorkerOptions()
	if o.Batch != 7 || o.Concurrency != 3 || o.FetchWait != time.Second {
		t.Errorf("WorkerOptions() = %+v, want batch 7, concurrency 3, fetch wait 1s", o)
	}
	if o.Topology != c.Frontier.Topology() {
		t.Errorf("WorkerOptions().Topology = %+v, want Frontier.Topology() %+v", o.Topology, c.Frontier.Topology())
	}
	topo := c.Frontier.Topology()
	if topo.Storage != jetstream.MemoryStorage || topo.FrontierStream() != "X_Y_FRONTIER" || topo.Partitions != 5 {
		t.Errorf("Frontier.Topology() = %+v", topo)
	}
}
