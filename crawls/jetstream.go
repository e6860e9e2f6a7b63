package crawls

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
)

var _ Queues = (*JetStreamQueues)(nil)

// JetStreamQueues are the crawls' messages on a topology's streams: a
// crawl's are those on its subjects (Topology.CrawlFrontierFilter,
// Topology.DiscoveredSubject). It is safe for concurrent use.
type JetStreamQueues struct {
	js   jetstream.JetStream
	topo frontier.Topology
}

// NewJetStreamQueues returns the queues of topo's streams on js.
func NewJetStreamQueues(js jetstream.JetStream, topo frontier.Topology) *JetStreamQueues {
	return &JetStreamQueues{js: js, topo: topo.WithDefaults()}
}

// Ensure creates the streams if missing (Topology.Ensure).
func (q *JetStreamQueues) Ensure(ctx context.Context) error { return q.topo.Ensure(ctx, q.js) }

// Publish publishes the seeds as a seed message
// (Topology.PublishDiscoveredIn).
func (q *JetStreamQueues) Publish(ctx context.Context, id, incarnation string, seeds []string) error {
	d := frontier.Discovered{Crawl: id, Kind: frontier.KindSeed, Links: seeds}
	return q.topo.PublishDiscoveredIn(ctx, q.js, d, incarnation)
}

// Count counts the crawl's messages; a stream that does not exist holds
// none.
func (q *JetStreamQueues) Count(ctx context.Context, id string) (Queued, error) {
	var (
		n   Queued
		err error
	)
	if n.Frontier, err = q.count(ctx, q.topo.FrontierStream(), q.topo.CrawlFrontierFilter(id)); err != nil {
		return n, err
	}
	n.Discovered, err = q.count(ctx, q.topo.DiscoveredStream(), q.topo.DiscoveredSubject(id))
	return n, err
}

// Purge removes the crawl's messages from both streams.
func (q *JetStreamQueues) Purge(ctx context.Context, id string) (Purged, error) {
	p := Purged{FrontierSubject: q.topo.CrawlFrontierFilter(id), DiscoveredSubject: q.topo.DiscoveredSubject(id)}
	var err error
	if p.Frontier, err = q.purge(ctx, q.topo.FrontierStream(), p.FrontierSubject); err != nil {
		return p, err
	}
	p.Discovered, err = q.purge(ctx, q.topo.DiscoveredStream(), p.DiscoveredSubject)
	return p, err
}

// count counts a stream's messages on subjects matching filter.
func (q *JetStreamQueues) count(ctx context.Context, stream, filter string) (uint64, error) {
	st, err := q.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("crawls: stream %s: %w", stream, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, fmt.Errorf("crawls: stream %s: %w", stream, err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, nil
}

// purge removes a stream's messages on subject, returning how many there
// were.
func (q *JetStreamQueues) purge(ctx context.Context, stream, subject string) (uint64, error) {
	n, err := q.count(ctx, stream, subject)
	if err != nil || n == 0 {
		return n, err
	}
	st, err := q.js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("crawls: stream %s: %w", stream, err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return 0, fmt.Errorf("crawls: purge %s from %s: %w", subject, stream, err)
	}
	return n, nil
}

// IDs returns the ids of the crawls recorded in topo's bucket on js,
// sorted, creating nothing (none before the first crawl is created): the
// cheap listing a status page polls with.
func IDs(ctx context.Context, js jetstream.JetStream, topo frontier.Topology) ([]string, error) {
	reg, err := frontier.LookupCrawls(ctx, js, topo)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("crawls: %w", err)
	}
	ids, err := reg.IDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("crawls: %w", err)
	}
	return ids, nil
}
