package stats

import (
	"context"
	"sync"
	"time"
)

// Memory keeps the statistics of one process, for the single-machine mode.
// It is safe for concurrent use. The zero value is not usable; call
// NewMemory.
type Memory struct {
	mu      sync.Mutex
	now     func() time.Time
	totals  Delta
	buckets map[int64][2]int64 // rate bucket → links, admitted
	since   time.Time
	updated time.Time
}

// NewMemory returns empty in-memory statistics.
func NewMemory() *Memory {
	return &Memory{now: time.Now, buckets: map[int64][2]int64{}}
}

// Add adds d. It never fails.
func (m *Memory) Add(_ context.Context, d Delta) error {
	if d.IsZero() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if m.since.IsZero() {
		m.since = now
	}
	m.updated = now
	m.totals.Merge(d)
	b := bucketOf(now)
	c := m.buckets[b]
	m.buckets[b] = [2]int64{c[0] + d.Links, c[1] + d.Admitted}
	for old := range m.buckets { // keep six minutes of buckets
		if old < b-2*300/bucketSeconds {
			delete(m.buckets, old)
		}
	}
	return nil
}

// Snapshot returns the statistics with the n hosts of most admitted URLs.
func (m *Memory) Snapshot(_ context.Context, n int) (Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Snapshot{
		Totals:    m.totals.Clone(),
		TopHosts:  topHosts(m.totals.Hosts, m.totals.DuplicateHosts, n),
		HostCount: int64(len(m.totals.Hosts)),
		Since:     m.since,
		Updated:   m.updated,
	}
	s.Totals.Hosts, s.Totals.DuplicateHosts = nil, nil
	s.Rates = rates(m.now(), m.since, func(b int64) (int64, int64) { c := m.buckets[b]; return c[0], c[1] })
	return s, nil
}

// Close does nothing; Memory holds no resources.
func (m *Memory) Close() error { return nil }
