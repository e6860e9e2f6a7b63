package frontier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A crawl is recorded in the key-value bucket <PREFIX>_CRAWLS under its id,
// as a JSON CrawlRecord: its seeds (which decide its scope), the targets
// they redirected to, and the settings it was created with. Package crawls
// creates, seeds, lists and deletes crawls through Crawls (compare-and-set,
// so concurrent seeders agree); workers size each crawl's filter from its
// record, crawlers read its scope from it, so no process needs those
// settings as flags.

// ErrNoCrawl is wrapped by the error Crawls.Get returns for a crawl that
// has no record.
var ErrNoCrawl = errors.New("frontier: no such crawl")

// CrawlSettings are a crawl's own settings, fixed when it is created.
type CrawlSettings struct {
	// ExpectURLs is the number of URLs the crawl's filter is sized for:
	// its first layer (its generations' first layer with a revisit
	// window).
	ExpectURLs int64 `json:"expect_urls,omitempty"`
	// FPP bounds the crawl's filter's false-positive rate.
	FPP float64 `json:"fpp,omitempty"`
	// RevisitAfter is the revisit window: a URL admitted at t is new again
	// when rediscovered after t+RevisitAfter·(1+1/Granularity) (see
	// dedup.Window); 0: never.
	RevisitAfter time.Duration `json:"revisit_after_ns,omitempty"`
	// Granularity is the revisit window's granularity g (0: dedup's
	// default).
	Granularity int `json:"granularity,omitempty"`
	// Kind is the filter kind: bloom or cuckoo.
	Kind string `json:"kind,omitempty"`
	// Scope is the scope mode of the crawl's links: host, domain or any.
	Scope string `json:"scope,omitempty"`
	// Learn is "off" for a crawl that learns no rewrite rules from what
	// it fetches (package dust); "" learns.
	Learn string `json:"learn,omitempty"`
	// RulesFrom names a crawl whose learned rules this one starts from
	// (the same hosts, crawled again).
	RulesFrom string `json:"rules_from,omitempty"`
}

// CrawlRecord is what the bucket holds for a crawl.
type CrawlRecord struct {
	// Seeds are the URLs given as seeds: they set the scope, and a seed on
	// a loopback or private host allows that host.
	Seeds []string `json:"seeds"`
	// Moved are the targets seeds redirected to (http://example.com/ →
	// https://www.example.com/): they widen the scope like seeds, but
	// allow no forbidden address, since a site chose them, not a person.
	Moved []string `json:"moved,omitempty"`
	// Settings are the crawl's settings (zero in a record written before
	// crawls had settings: the worker's filter settings apply).
	Settings CrawlSettings `json:"settings,omitzero"`
	// Created is when the crawl was first seeded with settings.
	Created time.Time `json:"created,omitzero"`
	// Incarnation tells this crawl apart from any earlier crawl deleted
	// under its id: a random token its creator draws (empty in a record
	// written before crawls had one). The IDs its seed messages and
	// frontier entries are published under include it (EntryIDIn), since
	// JetStream remembers IDs for its duplicate window even after a crawl's
	// messages are purged.
	Incarnation string `json:"incarnation,omitempty"`
	// Archive lists the directories archiving crawlers have written the
	// crawl's WARC files to (absolute paths, in the order they were
	// first written): where its captures' files are looked for, since a
	// crawl may write each run into a new directory.
	Archive []string `json:"archive,omitempty"`
	// PinRules and VetoRules are rewrite rules an operator made active
	// whatever is seen, or forbade, as "host rule" ("shop.example
	// param:sid"; a vetoed rule's host may be "*"): package dust's
	// HostRule. Unlike Settings they may change during the crawl.
	PinRules  []string `json:"pin_rules,omitempty"`
	VetoRules []string `json:"veto_rules,omitempty"`
}

// AddSeeds adds to the record's seeds those it lacks, reporting whether it
// added any.
func (r *CrawlRecord) AddSeeds(seeds []string) bool { return merge(&r.Seeds, seeds) }

// AddMoved adds to the record's redirect targets those it lacks, reporting
// whether it added any.
func (r *CrawlRecord) AddMoved(targets []string) bool { return merge(&r.Moved, targets) }

// AddArchive adds a WARC directory to the record's, reporting whether it
// lacked it.
func (r *CrawlRecord) AddArchive(dir string) bool { return merge(&r.Archive, []string{dir}) }

func merge(list *[]string, add []string) bool {
	changed := false
	for _, s := range add {
		if !slices.Contains(*list, s) {
			*list = append(*list, s)
			changed = true
		}
	}
	return changed
}

// Crawl is a crawl's id with its record.
type Crawl struct {
	ID string `json:"id"`
	CrawlRecord
}

// Conflicts returns an error naming both values for the first setting of
// given (its non-zero fields: those a user gave) that differs from s.
func (s CrawlSettings) Conflicts(given CrawlSettings) error {
	type field struct {
		name        string
		set         bool
		stored, new string
	}
	fields := []field{
		{"expect-urls", given.ExpectURLs != 0, strconv.FormatInt(s.ExpectURLs, 10), strconv.FormatInt(given.ExpectURLs, 10)},
		{"fpp", given.FPP != 0, strconv.FormatFloat(s.FPP, 'g', -1, 64), strconv.FormatFloat(given.FPP, 'g', -1, 64)},
		{"revisit-after", given.RevisitAfter != 0, durationOrNever(s.RevisitAfter), durationOrNever(given.RevisitAfter)},
		{"revisit-granularity", given.Granularity != 0, strconv.Itoa(s.Granularity), strconv.Itoa(given.Granularity)},
		{"kind", given.Kind != "", s.Kind, given.Kind},
		{"scope", given.Scope != "", s.Scope, given.Scope},
		{"learn", given.Learn != "", s.Learn, given.Learn},
		{"rules-from", given.RulesFrom != "", s.RulesFrom, given.RulesFrom},
	}
	for _, f := range fields {
		if f.set && f.stored != f.new {
			return fmt.Errorf("%s %s given, but the crawl was created with %s %s (a crawl's settings are fixed: delete it or use another crawl id)",
				f.name, f.new, f.name, f.stored)
		}
	}
	return nil
}

func durationOrNever(d time.Duration) string {
	if d == 0 {
		return "never"
	}
	return d.String()
}

// Or returns s with each zero field taken from def.
func (s CrawlSettings) Or(def CrawlSettings) CrawlSettings {
	if s.ExpectURLs == 0 {
		s.ExpectURLs = def.ExpectURLs
	}
	if s.FPP == 0 {
		s.FPP = def.FPP
	}
	if s.RevisitAfter == 0 {
		s.RevisitAfter = def.RevisitAfter
	}
	if s.Granularity == 0 && s.RevisitAfter != 0 {
		s.Granularity = def.Granularity
	}
	if s.Kind == "" {
		s.Kind = def.Kind
	}
	if s.Scope == "" {
		s.Scope = def.Scope
	}
	return s
}

// Crawls is the crawl registry: the <PREFIX>_CRAWLS bucket. It is safe for
// concurrent use.
type Crawls struct {
	kv jetstream.KeyValue
}

// OpenCrawls opens the crawl registry, creating its bucket if missing.
func OpenCrawls(ctx context.Context, js jetstream.JetStream, topo Topology) (*Crawls, error) {
	topo = topo.WithDefaults()
	kv, err := Provision(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      topo.CrawlsBucket(),
			Description: "Sieve: each crawl's seeds and settings",
			History:     1,
			Storage:     topo.Storage,
			Replicas:    topo.Replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("frontier: crawls bucket: %w", err)
	}
	return &Crawls{kv: kv}, nil
}

// KV returns the registry's bucket.
func (c *Crawls) KV() jetstream.KeyValue { return c.kv }

// Get returns the crawl's record, or an error wrapping ErrNoCrawl.
func (c *Crawls) Get(ctx context.Context, id string) (CrawlRecord, error) {
	rec, _, err := c.get(ctx, id)
	return rec, err
}

func (c *Crawls) get(ctx context.Context, id string) (CrawlRecord, uint64, error) {
	var rec CrawlRecord
	e, err := c.kv.Get(ctx, id)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return rec, 0, fmt.Errorf("%w: %s", ErrNoCrawl, id)
	case err != nil:
		return rec, 0, fmt.Errorf("frontier: read crawl %s: %w", id, err)
	}
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return rec, 0, fmt.Errorf("frontier: crawl %s record: %w", id, err)
	}
	return rec, e.Revision(), nil
}

// Update applies change to the crawl's record (a zero record if it has
// none) with compare-and-set, retrying when another process changed it
// meanwhile, and returns the record stored. change reports whether it
// changed anything; its error ends Update.
func (c *Crawls) Update(ctx context.Context, id string, change func(*CrawlRecord) (bool, error)) (CrawlRecord, error) {
	if !ValidCrawl(id) {
		return CrawlRecord{}, fmt.Errorf("frontier: crawl id %q: want 1-64 of [A-Za-z0-9_-]", id)
	}
	for {
		rec, rev, err := c.get(ctx, id)
		if err != nil && !errors.Is(err, ErrNoCrawl) {
			return rec, err
		}
		changed, err := change(&rec)
		if err != nil || !changed {
			return rec, err
		}
		data, _ := json.Marshal(rec) // strings, numbers and a time: cannot fail
		if rev == 0 {
			_, err = c.kv.Create(ctx, id, data)
		} else {
			_, err = c.kv.Update(ctx, id, data, rev)
		}
		if err == nil {
			return rec, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !IsWrongSequence(err) {
			return rec, fmt.Errorf("frontier: record crawl %s: %w", id, err)
		}
	}
}

// LookupCrawls opens the crawl registry if its bucket exists, creating
// nothing: for readers that poll, such as a status page. A missing bucket
// is an error wrapping jetstream.ErrBucketNotFound.
func LookupCrawls(ctx context.Context, js jetstream.JetStream, topo Topology) (*Crawls, error) {
	kv, err := js.KeyValue(ctx, topo.WithDefaults().CrawlsBucket())
	if err != nil {
		return nil, fmt.Errorf("frontier: crawls bucket: %w", err)
	}
	return &Crawls{kv: kv}, nil
}

// IDs returns the ids of every recorded crawl, sorted.
func (c *Crawls) IDs(ctx context.Context) ([]string, error) {
	lister, err := c.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("frontier: list crawls: %w", err)
	}
	var ids []string
	for k := range lister.Keys() {
		ids = append(ids, k)
	}
	slices.Sort(ids)
	return ids, nil
}

// List returns every recorded crawl, by id.
func (c *Crawls) List(ctx context.Context) ([]Crawl, error) {
	ids, err := c.IDs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Crawl, 0, len(ids))
	for _, id := range ids {
		rec, err := c.Get(ctx, id)
		if errors.Is(err, ErrNoCrawl) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, Crawl{ID: id, CrawlRecord: rec})
	}
	return out, nil
}

// Delete removes the crawl's record (its seeds and settings).
func (c *Crawls) Delete(ctx context.Context, id string) error {
	if err := c.kv.Purge(ctx, id); err != nil {
		return fmt.Errorf("frontier: delete crawl %s: %w", id, err)
	}
	return nil
}

// WatchDeletes calls deleted with the id of every crawl deleted from now
// on, until ctx ends (then it returns nil) or the watch fails. Workers use
// it to drop a deleted crawl's open filter at once.
func (c *Crawls) WatchDeletes(ctx context.Context, deleted func(id string)) error {
	w, err := c.kv.WatchAll(ctx, jetstream.UpdatesOnly(), jetstream.MetaOnly())
	if err != nil {
		return fmt.Errorf("frontier: watch crawls: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("frontier: watch crawls: stopped")
			}
			if e != nil && (e.Operation() == jetstream.KeyValueDelete || e.Operation() == jetstream.KeyValuePurge) {
				deleted(e.Key())
			}
		}
	}
}

// IsWrongSequence reports a compare-and-set JetStream refused: a publish
// (or a key-value update) whose expected last sequence was not the
// subject's.
func IsWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// EntryID is the Nats-Msg-Id under which a worker publishes a crawl's
// canonical URL to the frontier: MsgID of the crawl id and the URL joined
// by a newline (which neither holds), so that the same URL is admitted once
// in each crawl. It is part of the wire format, as MsgID is.
func EntryID(crawl, canonicalURL string) string { return MsgID(crawl + "\n" + canonicalURL) }

// EntryIDIn is the Nats-Msg-Id of a crawl's canonical URL for the crawl's
// incarnation (CrawlRecord.Incarnation): MsgID of the crawl id, "@" (which
// no crawl id holds), the incarnation, a newline and the URL, so that a
// crawl created again under a deleted crawl's id shares no ID with it;
// without an incarnation, EntryID. It is part of the wire format.
func EntryIDIn(crawl, incarnation, canonicalURL string) string {
	if incarnation == "" {
		return EntryID(crawl, canonicalURL)
	}
	return MsgID(crawl + "@" + incarnation + "\n" + canonicalURL)
}
