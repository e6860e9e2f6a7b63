package watch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/frontier"
)

// Depths are the pipeline's queues at one moment.
type Depths struct {
	// DiscoveredQueued is the number of discovered messages waiting for a
	// dedup worker.
	DiscoveredQueued uint64 `json:"discovered_queued"`
	// DiscoveredInFlight is the number fetched by workers, unacknowledged.
	DiscoveredInFlight int `json:"discovered_in_flight"`
	// DiscoveredRedelivered is the number redelivered and not yet
	// acknowledged.
	DiscoveredRedelivered int `json:"discovered_redelivered"`
	// FrontierQueued is the number of admitted URLs waiting for crawlers.
	FrontierQueued uint64 `json:"frontier_queued"`
	// FrontierBytes is their size.
	FrontierBytes uint64 `json:"frontier_bytes"`
	// FrontierStored is the number of URLs ever stored on the frontier
	// (its last sequence): the exact count of admitted URLs.
	FrontierStored uint64 `json:"frontier_stored"`
	// FrontierRedelivered is the frontier messages redelivered to crawlers
	// and not yet acknowledged (retries waiting included).
	FrontierRedelivered int `json:"frontier_redelivered"`
	// Partitions holds each partition's waiting URLs, in partition order.
	Partitions []uint64 `json:"partitions"`
	// Crawls holds each crawl's waiting URLs.
	Crawls map[string]uint64 `json:"crawls,omitempty"`
}

// JetStreamQueues reads the queue depths from JetStream. It is safe for
// concurrent use.
type JetStreamQueues struct {
	js   jetstream.JetStream
	topo frontier.Topology

	mu       sync.Mutex
	crawls   map[string]bool // crawls seen on the frontier or seeded (at most maxCrawls)
	listedAt time.Time       // when the crawls bucket was last listed
}

// listEvery is how often Depths lists the seeded crawls.
const listEvery = 10 * time.Second

// maxCrawls bounds the crawls whose empty frontier is still reported as 0.
const maxCrawls = 256

// NewJetStreamQueues returns the queues of topo on js.
func NewJetStreamQueues(js jetstream.JetStream, topo frontier.Topology) *JetStreamQueues {
	return &JetStreamQueues{js: js, topo: topo.WithDefaults(), crawls: map[string]bool{}}
}

var _ Queues = (*JetStreamQueues)(nil)

// Depths reads both streams, the dedup workers' consumer and the
// partitions' consumers: 4 + Partitions requests.
func (q *JetStreamQueues) Depths(ctx context.Context) (Depths, error) {
	t := q.topo
	var d Depths
	// Disconnected, every request would wait for the timeout: say why now.
	if err := frontier.Connected(q.js.Conn()); err != nil {
		return d, fmt.Errorf("watch: streams: %w", err)
	}
	ds, err := q.js.Stream(ctx, t.DiscoveredStream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return d, nil // no worker has created the streams yet: nothing is queued
	} else if err != nil {
		return d, fmt.Errorf("watch: stream %s: %w", t.DiscoveredStream(), err)
	}
	d.DiscoveredQueued = ds.CachedInfo().State.Msgs
	if c, err := ds.Consumer(ctx, t.Consumer()); err == nil {
		ci := c.CachedInfo()
		d.DiscoveredInFlight, d.DiscoveredRedelivered = ci.NumAckPending, ci.NumRedelivered
	}
	fs, err := q.js.Stream(ctx, t.FrontierStream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return d, nil
	} else if err != nil {
		return d, fmt.Errorf("watch: stream %s: %w", t.FrontierStream(), err)
	}
	finfo, err := fs.Info(ctx, jetstream.WithSubjectFilter(t.FrontierFilter()))
	if err != nil {
		return d, fmt.Errorf("watch: stream %s: %w", t.FrontierStream(), err)
	}
	d.FrontierQueued, d.FrontierBytes, d.FrontierStored = finfo.State.Msgs, finfo.State.Bytes, finfo.State.LastSeq
	d.Partitions = make([]uint64, t.Partitions)
	for subject, n := range finfo.State.Subjects {
		crawl, p, ok := t.ParseFrontierSubject(subject)
		if !ok {
			continue // not a subject of this topology: no crawl or partition to count it under
		}
		d.Partitions[p] += n
		if d.Crawls == nil {
			d.Crawls = map[string]uint64{}
		}
		d.Crawls[crawl] += n
	}
	q.listCrawls(ctx)
	// A crawl whose frontier emptied, or not yet filled, reads 0 rather
	// than being absent.
	q.mu.Lock()
	for id := range d.Crawls {
		if len(q.crawls) < maxCrawls {
			q.crawls[id] = true
		}
	}
	for id := range q.crawls {
		if _, ok := d.Crawls[id]; !ok {
			if d.Crawls == nil {
				d.Crawls = map[string]uint64{}
			}
			d.Crawls[id] = 0
		}
	}
	q.mu.Unlock()
	for p := range t.Partitions {
		c, err := fs.Consumer(ctx, t.PartitionConsumer(p))
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue // no crawler has owned it yet
		} else if err != nil {
			return d, fmt.Errorf("watch: partition %d consumer: %w", p, err)
		}
		d.FrontierRedelivered += c.CachedInfo().NumRedelivered
	}
	return d, nil
}

// listCrawls adds the recorded crawls (crawls.IDs) to the known ones,
// every listEvery.
func (q *JetStreamQueues) listCrawls(ctx context.Context) {
	q.mu.Lock()
	due := time.Since(q.listedAt) >= listEvery
	if due {
		q.listedAt = time.Now()
	}
	q.mu.Unlock()
	if !due {
		return
	}
	ids, err := crawls.IDs(ctx, q.js, q.topo)
	if err != nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range ids {
		if len(q.crawls) < maxCrawls {
			q.crawls[id] = true
		}
	}
}
