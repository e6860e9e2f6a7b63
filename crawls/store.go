package crawls

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/stats"
)

// Errors callers branch on.
var (
	// ErrNotFound is wrapped by the error Describe returns for a crawl
	// that has no record. It is frontier.ErrNoCrawl, which the registry
	// returns.
	ErrNotFound = frontier.ErrNoCrawl
	// ErrBadID is wrapped by the error for an id that cannot name a crawl
	// (frontier.ValidCrawl).
	ErrBadID = errors.New("crawls: bad crawl id")
	// ErrBadSeed is wrapped by the error for a seed that is not an
	// absolute http(s) URL with a host.
	ErrBadSeed = errors.New("crawls: bad seed")
)

// Registry keeps the crawls' records: frontier.Crawls (the <PREFIX>_CRAWLS
// bucket), or crawlstest.Registry in unit tests. Get and Update return an
// error wrapping frontier.ErrNoCrawl for a crawl without a record; Update
// applies change with compare-and-set (see frontier.Crawls.Update).
type Registry interface {
	Get(ctx context.Context, id string) (frontier.CrawlRecord, error)
	Update(ctx context.Context, id string, change func(*frontier.CrawlRecord) (bool, error)) (frontier.CrawlRecord, error)
	List(ctx context.Context) ([]frontier.Crawl, error)
	Delete(ctx context.Context, id string) error
}

// Queues holds the crawls' messages: the frontier stream's admitted URLs
// and the discovered stream's pages waiting for dedup (JetStreamQueues).
type Queues interface {
	// Ensure creates the streams if missing.
	Ensure(ctx context.Context) error
	// Publish publishes a crawl's seeds as one seed message (more if
	// there are too many for one) to the discovered stream, under IDs
	// that cover the crawl's incarnation (frontier.CrawlRecord.Incarnation).
	Publish(ctx context.Context, id, incarnation string, seeds []string) error
	// Count counts a crawl's messages on both streams.
	Count(ctx context.Context, id string) (Queued, error)
	// Purge removes a crawl's messages from both streams, returning what
	// it removed.
	Purge(ctx context.Context, id string) (Purged, error)
}

// Filters reaches the crawls' filters (DedupFilters). A crawl's settings
// name and size its filter.
type Filters interface {
	// Describe reads the crawl's filter without writing anything: nil
	// stats (and no error) if it has none yet, and its revisit window if
	// it has one.
	Describe(ctx context.Context, id string, st frontier.CrawlSettings) (*dedup.Stats, *dedup.WindowStats, error)
	// Delete removes the crawl's filter.
	Delete(ctx context.Context, id string, st frontier.CrawlSettings) (FilterDeleted, error)
}

// Counts holds the dedup workers' per-crawl counts (RedisCounts, Report).
type Counts interface {
	// Counts returns every crawl's counts (none: an empty map, or nil).
	Counts(ctx context.Context) (map[string]stats.CrawlCounts, error)
	// Forget removes a crawl's counts (the totals keep them).
	Forget(ctx context.Context, id string) (CountsDeleted, error)
}

// Captures holds the crawls' last captures, what an archiving crawler
// revisits against (captures.Redis, captures.KV).
type Captures interface {
	// Delete removes a crawl's captures, returning how many entries.
	Delete(ctx context.Context, id string) (int64, error)
}

// Options are a Store's parts besides its registry and queues. A nil part
// is not there: a deployment whose workers keep their filters in memory
// without snapshot files has no Filters the Store can reach.
type Options struct {
	// Filters reach the crawls' filters.
	Filters Filters
	// Counts are the dedup workers' per-crawl counts.
	Counts Counts
	// Captures are the archive's last captures of the crawls' URLs.
	Captures Captures
	// Rules are the crawls' learned rewrite rules (Open: the topology's
	// rules bucket).
	Rules Rules
	// Now stamps created crawls (default time.Now).
	Now func() time.Time
}

// Rules are the crawls' learned rewrite rules; *frontier.Rules implements
// it.
type Rules interface {
	// Delete removes every rule learned for crawl.
	Delete(ctx context.Context, crawl string) error
}

// Store creates, seeds, lists, describes and deletes crawls. It is safe
// for concurrent use if its parts are. Closing it is its creator's
// business: it owns none of its parts.
type Store struct {
	reg    Registry
	queues Queues
	opts   Options
}

// New returns a Store over the given parts.
func New(reg Registry, queues Queues, opts Options) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{reg: reg, queues: queues, opts: opts}
}

// Open returns a Store whose registry is the topology's crawl bucket
// (created if missing) and whose queues are its streams.
func Open(ctx context.Context, js jetstream.JetStream, topo frontier.Topology, opts Options) (*Store, error) {
	reg, err := frontier.OpenCrawls(ctx, js, topo)
	if err != nil {
		return nil, fmt.Errorf("crawls: %w", err)
	}
	if opts.Rules == nil {
		rules, err := frontier.OpenRules(ctx, js, topo)
		if err != nil {
			return nil, fmt.Errorf("crawls: %w", err)
		}
		opts.Rules = rules
	}
	return New(reg, NewJetStreamQueues(js, topo), opts), nil
}

// CheckID returns an error wrapping ErrBadID if id cannot name a crawl.
func CheckID(id string) error {
	if !frontier.ValidCrawl(id) {
		return fmt.Errorf("%w %q: want 1-64 of [A-Za-z0-9_-]", ErrBadID, id)
	}
	return nil
}

// CheckSeeds returns an error wrapping ErrBadSeed for the first seed that is
// not an absolute http(s) URL with a host, or if there is none.
func CheckSeeds(seeds []string) error {
	if len(seeds) == 0 {
		return fmt.Errorf("%w: no seed given", ErrBadSeed)
	}
	for _, s := range seeds {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: %q is not an absolute http(s) URL", ErrBadSeed, s)
		}
	}
	return nil
}

// Create records the crawl with the settings given (the non-zero fields a
// user gave) over def (the defaults), stamped now, unless it already has
// settings: then a given setting that differs from the stored one is an
// error naming both values, and nothing changes. Concurrent creators agree
// on one record, which Create returns.
func (s *Store) Create(ctx context.Context, id string, given, def frontier.CrawlSettings) (frontier.CrawlRecord, error) {
	if err := CheckID(id); err != nil {
		return frontier.CrawlRecord{}, err
	}
	incarnation := rand.Text() // drawn once: a retried update keeps it
	rec, err := s.reg.Update(ctx, id, func(rec *frontier.CrawlRecord) (bool, error) {
		if !rec.Created.IsZero() {
			return false, rec.Settings.Conflicts(given)
		}
		if len(rec.Seeds) == 0 && len(rec.Moved) == 0 && rec.Incarnation == "" {
			// A new crawl. One recorded before crawls had settings keeps
			// publishing under the IDs it has used.
			rec.Incarnation = incarnation
		}
		rec.Settings = given.Or(def)
		rec.Created = s.opts.Now().UTC().Truncate(time.Second)
		return true, nil
	})
	if err != nil {
		return rec, fmt.Errorf("crawl %s: %w", id, err)
	}
	return rec, nil
}

// Seed adds seeds to a crawl: it records them as the crawl's seeds (its
// scope), then publishes them to the discovered stream, so they reach the
// frontier through dedup like every other URL (a seed already crawled is
// not crawled again). The streams are created if missing. A crawl Seed
// creates has no settings of its own (workers use their configured filter
// settings for it); SeedWith gives it some. It returns the crawl's record.
func (s *Store) Seed(ctx context.Context, id string, seeds []string) (frontier.CrawlRecord, error) {
	return s.seed(ctx, id, seeds, nil)
}

// SeedWith seeds a crawl as Seed does, first creating it with settings
// given over def (Create) if it has none yet; settings given for a crawl
// that has other ones are an error naming both values, and nothing is
// seeded.
func (s *Store) SeedWith(ctx context.Context, id string, seeds []string, given, def frontier.CrawlSettings) (frontier.CrawlRecord, error) {
	return s.seed(ctx, id, seeds, &[2]frontier.CrawlSettings{given, def})
}

func (s *Store) seed(ctx context.Context, id string, seeds []string, settings *[2]frontier.CrawlSettings) (frontier.CrawlRecord, error) {
	var rec frontier.CrawlRecord
	if err := CheckID(id); err != nil {
		return rec, err
	}
	if err := CheckSeeds(seeds); err != nil {
		return rec, err
	}
	if err := s.queues.Ensure(ctx); err != nil {
		return rec, err
	}
	if settings != nil {
		if _, err := s.Create(ctx, id, settings[0], settings[1]); err != nil {
			return rec, err
		}
	}
	rec, err := s.reg.Update(ctx, id, func(rec *frontier.CrawlRecord) (bool, error) { return rec.AddSeeds(seeds), nil })
	if err != nil {
		return rec, fmt.Errorf("crawls: seed %s: %w", id, err)
	}
	return rec, s.queues.Publish(ctx, id, rec.Incarnation, seeds)
}

// Crawl is a crawl as List and Describe show it: its record, its queues,
// its counts and its filter.
type Crawl struct {
	frontier.Crawl
	// Queued counts its URLs on the frontier, Pending its discovered
	// messages not yet deduplicated.
	Queued  uint64 `json:"queued"`
	Pending uint64 `json:"pending"`
	// Counts are the dedup workers' counts for the crawl (nil: none, or
	// no Counts).
	Counts *stats.CrawlCounts `json:"counts,omitempty"`
	// Filter is the crawl's filter, read without writing (nil: none yet,
	// or no Filters).
	Filter *dedup.Stats `json:"filter,omitempty"`
	// Window is the crawl's revisit window, if it has one: its period and
	// live generations.
	Window *dedup.WindowStats `json:"window,omitempty"`
	// FilterError says why a filter that exists could not be read.
	FilterError string `json:"filter_error,omitempty"`
}

// List describes every recorded crawl, by id.
func (s *Store) List(ctx context.Context) ([]Crawl, error) {
	list, err := s.reg.List(ctx)
	if err != nil {
		return nil, err
	}
	counts, err := s.counts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Crawl, 0, len(list))
	for _, c := range list {
		d, err := s.describe(ctx, c, counts)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Describe describes one crawl; one without a record is an error wrapping
// ErrNotFound.
func (s *Store) Describe(ctx context.Context, id string) (Crawl, error) {
	if err := CheckID(id); err != nil {
		return Crawl{}, err
	}
	rec, err := s.reg.Get(ctx, id)
	if err != nil {
		return Crawl{}, err
	}
	counts, err := s.counts(ctx)
	if err != nil {
		return Crawl{}, err
	}
	return s.describe(ctx, frontier.Crawl{ID: id, CrawlRecord: rec}, counts)
}

func (s *Store) counts(ctx context.Context) (map[string]stats.CrawlCounts, error) {
	if s.opts.Counts == nil {
		return nil, nil
	}
	counts, err := s.opts.Counts.Counts(ctx)
	if err != nil {
		return nil, fmt.Errorf("crawls: counts: %w", err)
	}
	return counts, nil
}

func (s *Store) describe(ctx context.Context, c frontier.Crawl, counts map[string]stats.CrawlCounts) (Crawl, error) {
	d := Crawl{Crawl: c}
	if cc, ok := counts[c.ID]; ok {
		d.Counts = &cc
	}
	if s.opts.Filters != nil {
		var err error
		if d.Filter, d.Window, err = s.opts.Filters.Describe(ctx, c.ID, c.Settings); err != nil {
			d.FilterError = err.Error()
		}
	}
	q, err := s.queues.Count(ctx, c.ID)
	if err != nil {
		return d, err
	}
	d.Queued, d.Pending = q.Frontier, q.Discovered
	return d, nil
}

// Queued counts a crawl's messages.
type Queued struct {
	// Frontier counts its admitted URLs waiting for crawlers.
	Frontier uint64
	// Discovered counts its discovered messages waiting for dedup.
	Discovered uint64
}

// Purged is what Queues.Purge removed of a crawl: its messages on each
// stream, and the subjects they were found by.
type Purged struct {
	Frontier, Discovered               uint64
	FrontierSubject, DiscoveredSubject string
}

// FilterDeleted says what Filters.Delete removed.
type FilterDeleted struct {
	// Name is the filter's name in Redis (RedisKeys counts the keys
	// deleted), or File its snapshot file (Removed: it existed); both
	// empty when the filter lives in the workers' memory, where no command
	// reaches it.
	Name      string
	RedisKeys int64
	File      string
	Removed   bool
}

// CountsDeleted says what Counts.Forget removed.
type CountsDeleted struct {
	// Entries counts the per-crawl counts removed.
	Entries int64
	// Report is the report file they were removed from; empty for Redis.
	Report string
}

// Deleted is what Delete removed of a crawl.
type Deleted struct {
	ID string
	// Queues are its messages purged.
	Queues Purged
	// Filter is its filter deleted (zero without Filters).
	Filter FilterDeleted
	// Counts are its counts deleted (nil without Counts).
	Counts *CountsDeleted
	// Captures is how many of its last captures were deleted.
	Captures int64
	// Record is its record as it was; nil if it had none.
	Record *frontier.CrawlRecord
}

// URLs is the number of the crawl's admitted URLs removed from the
// frontier before any crawler fetched them.
func (d Deleted) URLs() uint64 { return d.Queues.Frontier }

// Delete removes a crawl: its frontier and discovered messages, its filter,
// its counts, its captures, its learned rules and its record, in that order, so that a Delete that fails
// part way can be run again. A crawl without a record is not an error: what
// else it left is removed, and Deleted.Record is nil. Once Delete returns,
// the id may name a new crawl.
func (s *Store) Delete(ctx context.Context, id string) (Deleted, error) {
	d := Deleted{ID: id}
	if err := CheckID(id); err != nil {
		return d, err
	}
	rec, err := s.reg.Get(ctx, id)
	if err != nil && !errors.Is(err, frontier.ErrNoCrawl) {
		return d, err
	}
	known := err == nil
	if d.Queues, err = s.queues.Purge(ctx, id); err != nil {
		return d, err
	}
	if s.opts.Filters != nil {
		if d.Filter, err = s.opts.Filters.Delete(ctx, id, rec.Settings); err != nil {
			return d, fmt.Errorf("crawls: delete %s filter: %w", id, err)
		}
	}
	if s.opts.Counts != nil {
		cd, err := s.opts.Counts.Forget(ctx, id)
		if err != nil {
			return d, fmt.Errorf("crawls: delete %s counts: %w", id, err)
		}
		d.Counts = &cd
	}
	if s.opts.Captures != nil {
		if d.Captures, err = s.opts.Captures.Delete(ctx, id); err != nil {
			return d, fmt.Errorf("crawls: delete %s captures: %w", id, err)
		}
	}
	if s.opts.Rules != nil {
		if err := s.opts.Rules.Delete(ctx, id); err != nil {
			return d, fmt.Errorf("crawls: delete %s rules: %w", id, err)
		}
	}
	if known {
		if err := s.reg.Delete(ctx, id); err != nil {
			return d, err
		}
		d.Record = &rec
	}
	return d, nil
}
