// Package crawlstest has in-memory fakes of a crawls.Store's registry and
// queues, for unit tests of the lifecycle (and of what is built on it)
// without NATS. The real parts are tested against a real server in package
// crawls.
package crawlstest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/frontier"
)

var (
	_ crawls.Registry = (*Registry)(nil)
	_ crawls.Queues   = (*Queues)(nil)
)

// Registry is an in-memory crawls.Registry. Its records are copied in and
// out, as a bucket's would be. The zero value is empty and ready; it is
// safe for concurrent use.
type Registry struct {
	mu   sync.Mutex
	recs map[string][]byte
}

// Get returns the crawl's record, or an error wrapping frontier.ErrNoCrawl.
func (r *Registry) Get(_ context.Context, id string) (frontier.CrawlRecord, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.get(id)
}

func (r *Registry) get(id string) (frontier.CrawlRecord, error) {
	var rec frontier.CrawlRecord
	b, ok := r.recs[id]
	if !ok {
		return rec, fmt.Errorf("%w: %s", frontier.ErrNoCrawl, id)
	}
	err := json.Unmarshal(b, &rec)
	return rec, err
}

// Update applies change to the crawl's record (a zero one if it has none)
// atomically.
func (r *Registry) Update(_ context.Context, id string, change func(*frontier.CrawlRecord) (bool, error)) (frontier.CrawlRecord, error) {
	if !frontier.ValidCrawl(id) {
		return frontier.CrawlRecord{}, fmt.Errorf("crawlstest: crawl id %q", id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, _ := r.get(id)
	changed, err := change(&rec)
	if err != nil || !changed {
		return rec, err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return rec, err
	}
	if r.recs == nil {
		r.recs = map[string][]byte{}
	}
	r.recs[id] = b
	return rec, nil
}

// List returns every crawl, by id.
func (r *Registry) List(context.Context) ([]frontier.Crawl, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []frontier.Crawl
	for _, id := range slices.Sorted(maps.Keys(r.recs)) {
		rec, err := r.get(id)
		if err != nil {
			return nil, err
		}
		out = append(out, frontier.Crawl{ID: id, CrawlRecord: rec})
	}
	return out, nil
}

// Delete removes the crawl's record.
func (r *Registry) Delete(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.recs, id)
	return nil
}

// Queues are in-memory crawls.Queues: each crawl's frontier URLs and its
// discovered messages' links. The zero value is empty and ready; it is safe
// for concurrent use.
type Queues struct {
	mu sync.Mutex
	// Ensured counts Ensure calls.
	Ensured int
	// Frontier and Discovered hold each crawl's messages: a URL per
	// frontier message, the links of each discovered one.
	Frontier   map[string][]string
	Discovered map[string][][]string
}

// Ensure counts the call.
func (q *Queues) Ensure(context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.Ensured++
	return nil
}

// Publish adds one discovered message holding the seeds.
func (q *Queues) Publish(_ context.Context, id, _ string, seeds []string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.Discovered == nil {
		q.Discovered = map[string][][]string{}
	}
	q.Discovered[id] = append(q.Discovered[id], slices.Clone(seeds))
	return nil
}

// Admit moves the crawl's discovered messages' links to its frontier, as
// a dedup worker would (without dedup).
func (q *Queues) Admit(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.Frontier == nil {
		q.Frontier = map[string][]string{}
	}
	for _, links := range q.Discovered[id] {
		q.Frontier[id] = append(q.Frontier[id], links...)
	}
	delete(q.Discovered, id)
}

// Count counts the crawl's messages.
func (q *Queues) Count(_ context.Context, id string) (crawls.Queued, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return crawls.Queued{Frontier: uint64(len(q.Frontier[id])), Discovered: uint64(len(q.Discovered[id]))}, nil
}

// Purge removes the crawl's messages.
func (q *Queues) Purge(ctx context.Context, id string) (crawls.Purged, error) {
	n, _ := q.Count(ctx, id)
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.Frontier, id)
	delete(q.Discovered, id)
	return crawls.Purged{Frontier: n.Frontier, Discovered: n.Discovered,
		FrontierSubject: "frontier." + id, DiscoveredSubject: "discovered." + id}, nil
}
