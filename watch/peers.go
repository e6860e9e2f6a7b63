package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
)

// Peer is one process of the deployment as its watch server announces it.
type Peer struct {
	ID      string    `json:"id"`
	Role    string    `json:"role"`
	URL     string    `json:"url,omitempty"` // its page, as it listens (maybe loopback)
	Ready   bool      `json:"ready"`
	Started time.Time `json:"started"`
	At      time.Time `json:"at"` // when it announced this
	Rates   Rates     `json:"rates"`
	// Degraded names what works, but not as it should (Report.Degraded).
	Degraded map[string]string `json:"degraded,omitempty"`
	// Held is a dedup worker's batches held past its bound, and why.
	Held *frontier.Held `json:"held,omitempty"`
}

// Peers is where the processes of a deployment announce themselves and find
// each other (JetStreamPeers). An announcement lives a few announcement
// periods: a process that stops announcing (killed) drops out by itself.
type Peers interface {
	Announce(ctx context.Context, p Peer) error
	Leave(ctx context.Context, id string) error
	List(ctx context.Context) ([]Peer, error)
}

// JetStreamPeers keeps the announcements in a JetStream key-value bucket
// (frontier.Topology.WatchBucket) whose entries expire after TTL. It is safe
// for concurrent use.
type JetStreamPeers struct {
	js   jetstream.JetStream
	topo frontier.Topology
	ttl  time.Duration

	mu sync.Mutex
	kv jetstream.KeyValue
}

// NewJetStreamPeers returns the peers of topo's deployment on js; an
// announcement expires after ttl (30s when 0).
func NewJetStreamPeers(js jetstream.JetStream, topo frontier.Topology, ttl time.Duration) *JetStreamPeers {
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	return &JetStreamPeers{js: js, topo: topo.WithDefaults(), ttl: ttl}
}

var _ Peers = (*JetStreamPeers)(nil)

// bucket opens (or creates) the bucket once. Disconnected, it fails at once
// (saying what the connection waits for) rather than after the timeout.
func (p *JetStreamPeers) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	if err := frontier.Connected(p.js.Conn()); err != nil {
		return nil, fmt.Errorf("watch: peers: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kv != nil {
		return p.kv, nil
	}
	kv, err := frontier.Provision(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return p.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      p.topo.WatchBucket(),
			Description: "Sieve processes' watch announcements",
			TTL:         p.ttl,
			History:     1,
			Storage:     jetstream.MemoryStorage,
			Replicas:    p.topo.Replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("watch: bucket %s: %w", p.topo.WatchBucket(), err)
	}
	p.kv = kv
	return kv, nil
}

// peerKey makes an id a valid key.
func peerKey(id string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '=' {
			return r
		}
		return '_'
	}, id)
}

// Announce records p until it expires.
func (p *JetStreamPeers) Announce(ctx context.Context, peer Peer) error {
	kv, err := p.bucket(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(peer)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, peerKey(peer.ID), b); err != nil {
		return fmt.Errorf("watch: announce: %w", err)
	}
	return nil
}

// Leave removes the announcement of id.
func (p *JetStreamPeers) Leave(ctx context.Context, id string) error {
	kv, err := p.bucket(ctx)
	if err != nil {
		return err
	}
	if err := kv.Purge(ctx, peerKey(id)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("watch: leave: %w", err)
	}
	return nil
}

// List returns the live announcements, by role and id.
func (p *JetStreamPeers) List(ctx context.Context) ([]Peer, error) {
	kv, err := p.bucket(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch: peers: %w", err)
	}
	var out []Peer
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // expired or left meanwhile
		} else if err != nil {
			_ = keys.Stop()
			return nil, fmt.Errorf("watch: peers: %w", err)
		}
		var peer Peer
		if json.Unmarshal(e.Value(), &peer) == nil {
			out = append(out, peer)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Role != out[j].Role {
			return out[i].Role < out[j].Role
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// defaultID names a process: role-host-pid.
func defaultID(role string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%s-%d", role, host, os.Getpid())
}
