package frontier_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
)

// TestEnsureConcurrentOnCluster: workers starting together on a fresh
// 3-node cluster each create the replicated streams; every one's first
// Ensure must succeed within the 10 s a worker gives it. JetStream leaves
// concurrent creators' requests unanswered (nats-server#3677), so each
// waited out its timeout, failed, and tried again: 20 s before all were
// ready.
func TestEnsureConcurrentOnCluster(t *testing.T) {
	c := natstest.StartCluster(t, 3, natstest.Options{})
	topo := frontier.Topology{Replicas: 3, Routes: 2}
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 3 {
		js := c.JetStream(i)
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if err := topo.Ensure(ctx, js); err != nil {
				t.Errorf("worker %d: Ensure: %v", i, err)
			}
			if _, err := frontier.OpenStoreLog(ctx, js, topo, "test"); err != nil {
				t.Errorf("worker %d: OpenStoreLog: %v", i, err)
			}
		})
	}
	wg.Wait()
	t.Logf("3 creators ready after %v", time.Since(start).Round(time.Millisecond))
}
