package urlfrontier

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
)

// buckets are the servers' shared state that is not per URL: each node's
// active flag (<PREFIX>_UF_STATE) and the live nodes (<PREFIX>_UF_NODES,
// entries expiring nodeTTL after a node stops).
type buckets struct {
	topo  frontier.Topology
	state jetstream.KeyValue
	nodes jetstream.KeyValue
}

// nodeTTL is how long a node that stopped renewing stays listed.
const nodeTTL = 15 * time.Second

func openBuckets(ctx context.Context, js jetstream.JetStream, topo frontier.Topology) (*buckets, error) {
	topo = topo.WithDefaults()
	b := &buckets{topo: topo}
	for _, c := range []struct {
		kv   *jetstream.KeyValue
		name string
		desc string
		ttl  time.Duration
	}{
		{&b.state, topo.URLFrontierStateBucket(), "Sieve URLFrontier: nodes' active flags", 0},
		{&b.nodes, topo.URLFrontierNodesBucket(), "Sieve URLFrontier: live nodes", nodeTTL},
	} {
		kv, err := frontier.Provision(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
			return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket: c.name, Description: c.desc, History: 1, TTL: c.ttl,
				Storage: topo.Storage, Replicas: topo.Replicas,
			})
		})
		if err != nil {
			return nil, fmt.Errorf("urlfrontier: bucket %s: %w", c.name, err)
		}
		*c.kv = kv
	}
	return b, nil
}

// newInstance returns a token unique to this process: two servers may
// share an address.
func newInstance() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
