package watch

import (
	"context"
	"time"

	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/warc"
)

// Counters reads the seen-URL statistics shared by the dedup workers
// (stats.Memory, stats.Redis).
type Counters interface {
	Snapshot(ctx context.Context, topHosts int) (stats.Snapshot, error)
}

// Filter reads a filter's health (every dedup filter).
type Filter interface {
	Stats(ctx context.Context) (dedup.Stats, error)
}

// Membership answers which canonical URLs the filter holds, adding nothing
// (pipeline.Worker): /contains, which "dedup-worker check --data-dir" asks.
type Membership interface {
	Contains(ctx context.Context, keys [][]byte) ([]bool, error)
}

// Queues reads the pipeline's queue depths (JetStreamQueues).
type Queues interface {
	Depths(ctx context.Context) (Depths, error)
}

// Worker is a dedup worker running in this process (pipeline.Worker).
type Worker interface {
	Readiness() pipeline.Readiness
	Status() (frontier.Status, bool)
}

// CountersFunc adapts a function to Counters (pipeline.Worker.StatsSnapshot).
type CountersFunc func(ctx context.Context, topHosts int) (stats.Snapshot, error)

// Snapshot calls f.
func (f CountersFunc) Snapshot(ctx context.Context, topHosts int) (stats.Snapshot, error) {
	return f(ctx, topHosts)
}

// FilterFunc adapts a function to Filter (pipeline.Worker.FilterStats).
type FilterFunc func(ctx context.Context) (dedup.Stats, error)

// Stats calls f.
func (f FilterFunc) Stats(ctx context.Context) (dedup.Stats, error) { return f(ctx) }

// Crawler is a crawler running in this process (crawl.Crawler).
type Crawler interface {
	ID() string
	Stats() crawl.Stats
}

// Degradation says which parts work, but not as they should, and why, by
// part (frontier.StreamHealth: a stream whose replica is behind).
type Degradation interface {
	Degraded() map[string]string
}

var _ Degradation = (*frontier.StreamHealth)(nil)

// Sources are what a process has to show. Nil fields are parts it does not
// have.
type Sources struct {
	// Role names the process on the page: "dedup-worker", "crawler",
	// "embedded".
	Role     string
	Counters Counters
	Filter   Filter
	// Membership serves POST /contains; nil: 404.
	Membership Membership
	Queues     Queues
	Worker     Worker
	Crawler    Crawler
	// Peers is where the deployment's processes announce themselves: this
	// one every Options.AnnounceEvery, and the page lists them all.
	Peers Peers
	// ID names this process among its peers: the crawler's ID, else
	// role-host-pid.
	ID string
	// Checks are extra readiness checks by name (a dependency the process
	// needs, or a state such as "starting"): /readyz answers 503 while one
	// returns an error. A Worker's Readiness is checked as "worker".
	Checks map[string]func() error
	// Degraded are parts that work, but not as they should (a stream's
	// replica offline past a bound; a Worker's batches held past a bound
	// is added by itself): /readyz still answers 200 and names them, as
	// the page and the announcements to Peers do.
	Degraded []Degradation
	// Archive reports the crawler's WARC output; nil when it keeps none.
	Archive func() warc.Stats
	// Rules are the crawls' learned rewrite rules (*frontier.Rules), read
	// every Options.RulesEvery for the crawls the report names; nil: the
	// page lists none.
	Rules Rules
}

// Report is the process's state at one moment: what /stats serves, and what
// "dedup-worker stats" and "crawler stats" print. The field names of the
// dedup side (worker, shared, filter, streams, errors) are those the
// dedup-worker's report has always had.
type Report struct {
	Role    string    `json:"role"`
	Started time.Time `json:"started"`
	At      time.Time `json:"at"`
	// Ready says whether /readyz answers 200; NotReady says why not.
	Ready    bool              `json:"ready"`
	NotReady map[string]string `json:"not_ready,omitempty"`
	// Degraded names the parts that work, but not as they should, and
	// why (the process stays ready).
	Degraded map[string]string `json:"degraded,omitempty"`
	// Worker is this process's dedup worker, Readiness its readiness
	// (state, dependencies, snapshot file).
	Worker    *frontier.Status    `json:"worker,omitempty"`
	Readiness *pipeline.Readiness `json:"readiness,omitempty"`
	// Crawler is this process's crawler.
	Crawler *CrawlerState `json:"crawler,omitempty"`
	// Archive is the crawler's WARC output: files, bytes, records by type.
	Archive *warc.Stats `json:"archive,omitempty"`
	// Shared is the statistics all dedup workers share.
	Shared *stats.Snapshot `json:"shared,omitempty"`
	// Filter is the filter's health, as of FilterAt.
	Filter   *dedup.Stats `json:"filter,omitempty"`
	FilterAt time.Time    `json:"filter_at,omitzero"`
	// Growth is how many more items the newest layer takes before the
	// filter opens its next one (0 for a filter that does not grow).
	Growth uint64 `json:"growth_remaining,omitempty"`
	// Streams is the queues' state.
	Streams *Depths `json:"streams,omitempty"`
	// Rules are the learned rewrite rules of each crawl that has some (as
	// of their At, read every Options.RulesEvery).
	Rules map[string]*CrawlRules `json:"rules,omitempty"`
	// Rates are recent per-second rates, from the time series.
	Rates Rates `json:"rates"`
	// ID names this process among Peers, the live processes of the
	// deployment (as of their last announcements).
	ID    string `json:"id"`
	Peers []Peer `json:"peers,omitempty"`
	// Errors says why a part is missing.
	Errors map[string]string `json:"errors,omitempty"`
}

// CrawlerState is a crawler's identity and counts.
type CrawlerState struct {
	ID string `json:"id"`
	crawl.Stats
}

// Rates are per-second rates over the last RateWindow of samples.
type Rates struct {
	Window     float64 `json:"window_seconds"`
	Links      float64 `json:"links"`
	Admitted   float64 `json:"admitted"`
	Duplicates float64 `json:"duplicates"`
	Rejected   float64 `json:"rejected"`
	Fetched    float64 `json:"fetched"`
}

func (r *Report) fail(part string, err error) {
	if r.Errors == nil {
		r.Errors = map[string]string{}
	}
	r.Errors[part] = err.Error()
}

// growthRemaining is how many items the newest layer of a growing filter
// takes before the next layer opens.
func growthRemaining(s *dedup.Stats) uint64 {
	if s == nil || s.NextLayerCapacity == 0 || len(s.Layers) == 0 {
		return 0
	}
	l := s.Layers[len(s.Layers)-1]
	if l.Items >= l.Capacity {
		return 0
	}
	return l.Capacity - l.Items
}
