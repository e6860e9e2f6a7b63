package crawls

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/sievecrawl/sieve/stats"
)

var (
	_ Counts = RedisCounts{}
	_ Counts = Report{}
)

// RedisCounts are the per-crawl counts the dedup workers of a deployment
// share in Redis.
type RedisCounts struct{ Stats *stats.Redis }

// Counts returns every crawl's counts.
func (r RedisCounts) Counts(ctx context.Context) (map[string]stats.CrawlCounts, error) {
	snap, err := r.Stats.Snapshot(ctx, 0)
	if err != nil {
		return nil, err
	}
	return snap.Totals.Crawls, nil
}

// Forget deletes the crawl's counts (stats.Redis.DeleteCrawl); the totals
// keep them.
func (r RedisCounts) Forget(ctx context.Context, id string) (CountsDeleted, error) {
	n, err := r.Stats.DeleteCrawl(ctx, id)
	return CountsDeleted{Entries: n}, err
}

// Report is the report an embedded run leaves in its data directory when it
// ends (watch.ReportFile, JSON; see watch.Report): the embedded worker
// counts in memory, from zero at each run, so the last run's counts are
// the ones a stopped data directory has.
type Report struct {
	// Path is the report file.
	Path string
}

// report is what Report reads of the file: when it was written and the
// dedup workers' shared counts (watch.Report's fields of those names).
type report struct {
	At     time.Time       `json:"at"`
	Shared *stats.Snapshot `json:"shared"`
}

// Read returns the report's per-crawl counts and when the run that left it
// ended; ok is false without a report, or one that cannot be read.
func (r Report) Read() (counts map[string]stats.CrawlCounts, at time.Time, ok bool) {
	b, err := os.ReadFile(r.Path)
	if err != nil {
		return nil, at, false
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil || rep.Shared == nil {
		return nil, at, false
	}
	return rep.Shared.Totals.Crawls, rep.At, true
}

// Counts returns the per-crawl counts of the report (none without one, or
// with one that cannot be read: the listing goes on without them).
func (r Report) Counts(context.Context) (map[string]stats.CrawlCounts, error) {
	counts, _, _ := r.Read()
	return counts, nil
}

// Forget removes crawl id's entries ("crawls" objects keyed by crawl id:
// the dedup counts, the crawler's and the queues') from the report, as
// RedisCounts.Forget removes a crawl's counts from Redis; the totals keep
// them. Everything else in the report stays as it was, numbers exact; the
// file is replaced atomically.
func (r Report) Forget(_ context.Context, id string) (CountsDeleted, error) {
	d := CountsDeleted{Report: r.Path}
	b, err := os.ReadFile(r.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	} else if err != nil {
		return d, err
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // counts stay exact
	if err := dec.Decode(&doc); err != nil {
		return d, fmt.Errorf("%s: %w", r.Path, err)
	}
	if d.Entries = dropCrawl(doc, id); d.Entries == 0 {
		return d, nil
	}
	if b, err = json.MarshalIndent(doc, "", "  "); err != nil {
		return d, err
	}
	tmp := r.Path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return d, err
	}
	return d, os.Rename(tmp, r.Path)
}

// dropCrawl deletes key id from every object named "crawls" in v,
// returning how many it deleted.
func dropCrawl(v any, id string) int64 {
	var n int64
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			if m, ok := c.(map[string]any); ok && k == "crawls" {
				if _, ok := m[id]; ok {
					delete(m, id)
					n++
				}
			}
			n += dropCrawl(c, id)
		}
	case []any:
		for _, c := range v {
			n += dropCrawl(c, id)
		}
	}
	return n
}
