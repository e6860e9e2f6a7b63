package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/dedup"
)

// SeenFilter is a dedup filter opened from a Filter section: any of
// dedup's (Bloom or cuckoo, in memory or in Redis, or a revisit window).
type SeenFilter = dedup.Filter

// Spec maps the section to what dedup.Open takes, for a filter in Redis
// when rdb is not nil (else in memory, with the section's snapshot file)
// stored under policy. The section's values are taken as they are (zero:
// the stored value, or the default); Open's adoption of stored values and
// its checks are not applied.
func (f Filter) Spec(rdb redis.UniversalClient, policy string) dedup.Spec {
	return dedup.Spec{
		Kind: f.Kind, Redis: rdb, Name: f.Name, Snapshot: f.Snapshot,
		Growth: dedup.Growth{InitialCapacity: f.Capacity, TargetFPP: f.FPP, Factor: f.Growth, Tightening: f.Tightening},
		Shards: f.Shards, Policy: policy, Force: f.Force,
	}
}

// Open opens the filter the section describes, storing policy (the
// normalize policy version) with it: in Redis when rdb is not nil (the
// filter does not close rdb), else in memory, loaded from the Snapshot file
// when one is set and exists, and created from the section when it does not.
//
// An existing filter describes itself: its kind (where the stored filter
// tells it), capacity, fpp, growth, tightening and shards are those stored
// with it unless the section gives them explicitly (Given). One given that
// differs from the stored value is an error naming both (a *FieldError
// wrapping dedup.ErrMismatch); one given equal to it is logged as applying
// only when a filter is created. A filter stored under another policy is an
// error unless Force is set, which replaces the stored policy (logged).
func (f Filter) Open(ctx context.Context, rdb redis.UniversalClient, policy string) (SeenFilter, error) {
	return f.open(ctx, rdb, policy, false, true)
}

// OpenExisting opens the filter as Open does, but only if it exists, and
// writes nothing: nothing is created, nothing stored is changed (not even
// a revisit window's expired generations), and Force is refused. A missing
// filter is an error matching dedup.ErrNotFound. Read-only commands use it.
//
// A revisit window stored under the name (a crawl created with
// --revisit-after: in Redis the hash "<name>:window" and its generations,
// in memory a window snapshot) is opened as a *dedup.Window, adopting its
// stored window, granularity and rate; ReadWindow describes it. Open
// refuses one: a window is written only by its crawl's workers and
// commands, from the crawl's settings (pipeline.OpenCrawlFilter).
func (f Filter) OpenExisting(ctx context.Context, rdb redis.UniversalClient, policy string) (SeenFilter, error) {
	return f.open(ctx, rdb, policy, true, true)
}

// Exists reports whether a filter (or a revisit window) is stored where
// the section says. It writes nothing.
func (f Filter) Exists(ctx context.Context, rdb redis.UniversalClient) (bool, error) {
	kind, _, err := f.storedKind(ctx, rdb)
	return kind != "", err
}

// SizedByCrawl returns the section with filter.kind, filter.capacity and
// filter.fpp no longer given explicitly, for a crawl's own filter: the
// crawl's settings replace them when its filter is created
// (pipeline.CrawlFilter), and an existing one adopts its stored values
// whatever the section says, so a setting meant for every filter (such as
// SIEVE_FILTER_CAPACITY in compose.yaml) cannot make a crawl's filter a
// mismatch.
func (f Filter) SizedByCrawl() Filter {
	f.Given = slices.DeleteFunc(slices.Clone(f.Given), func(k string) bool { return k == "kind" || k == "capacity" || k == "fpp" })
	return f
}

// creationOnly maps the section's keys that size a filter, which only apply
// when it is created, to the names its stored parameters have in dedup.
var creationOnly = []struct{ key, stored string }{
	{"kind", "kind"}, {"capacity", "initial_capacity"}, {"fpp", "target_fpp"},
	{"growth", "growth_factor"}, {"tightening", "tightening"}, {"shards", "shards"},
}

func (f Filter) open(ctx context.Context, rdb redis.UniversalClient, policy string, existing, retry bool) (SeenFilter, error) {
	where := "in memory"
	if rdb != nil {
		where = "in redis"
	} else if f.Snapshot != "" {
		where = f.Snapshot
	}
	fail := func(err error) (SeenFilter, error) {
		return nil, fmt.Errorf("%s filter %q (%s): %w", f.Kind, f.Name, where, err)
	}
	if existing && f.Force {
		return fail(&FieldError{Field: "filter.force", Err: errors.New("only applies to commands that write the filter (run, import)")})
	}
	given := map[string]bool{}
	for _, k := range f.Given {
		given[k] = true
	}
	stored, window, err := f.storedKind(ctx, rdb)
	if err != nil {
		return fail(err)
	}
	if window && !existing {
		return fail(fmt.Errorf("%w: %q is a revisit window, opened for writing only with its crawl's settings", errWindow, f.Name))
	}
	switch {
	case stored == "" && existing:
		return fail(fmt.Errorf("%w: no filter named %q %s", dedup.ErrNotFound, f.Name, where))
	case stored == "bloom" || stored == "cuckoo":
		if stored != f.Kind && given["kind"] {
			return fail(&kindError{stored: stored, given: f.Kind, snapshot: rdb == nil})
		}
		f.Kind = stored
	}
	o := f // what the filter is opened with: zero adopts the stored value
	if stored != "" {
		for _, c := range creationOnly {
			if !given[c.key] {
				switch c.key {
				case "capacity":
					o.Capacity = 0
				case "fpp":
					o.FPP = 0
				case "growth":
					o.Growth = 0
				case "tightening":
					o.Tightening = 0
				case "shards":
					o.Shards = 0
				}
			}
		}
	}
	spec := o.Spec(rdb, policy)
	spec.Force, spec.Existing = f.Force && !existing, existing
	if window {
		spec.Window = &dedup.WindowOptions{} // the stored window's
	}
	sf, err := dedup.Open(ctx, spec)
	var me *dedup.MismatchError
	if stored == "" && retry && errors.As(err, &me) {
		// Created by another process since it was looked for: adopt its
		// parameters.
		return f.open(ctx, rdb, policy, existing, false)
	}
	if err != nil {
		if errors.Is(err, dedup.ErrUnknownKind) {
			err = &FieldError{Field: "filter.kind", Err: err}
		}
		if errors.As(err, &me) {
			for _, c := range creationOnly {
				if c.stored == me.Field {
					err = &FieldError{Field: "filter." + c.key, Err: err}
				}
			}
		}
		return fail(err)
	}
	log := f.Log
	if log == nil {
		log = slog.Default()
	}
	if stored != "" {
		for _, c := range creationOnly {
			if given[c.key] {
				log.Info("setting only applies when a filter is created; the existing filter keeps its stored value",
					"setting", "filter."+c.key, "filter", f.Name, "where", where)
			}
		}
	}
	if f.Force {
		log.Warn("filter.force: a filter stored under another normalization policy is opened anyway, and the stored policy replaced by this one",
			"filter", f.Name, "where", where, "policy", policy)
	}
	return sf, nil
}

// errWindow is a revisit window opened for writing without its crawl's
// settings.
var errWindow = fmt.Errorf("%w: revisit window", dedup.ErrMismatch)

// storedKind returns the kind of the filter stored where the section says,
// "unknown" if it exists but its kind cannot be told, or "" if there is
// none, and whether it is a revisit window (of filters of that kind). It
// writes nothing.
func (f Filter) storedKind(ctx context.Context, rdb redis.UniversalClient) (kind string, window bool, err error) {
	if rdb != nil {
		kind, err := dedup.StoredRedisKind(ctx, rdb, f.Name)
		if kind != "" || err != nil {
			return kind, false, err
		}
		kind, err = dedup.StoredRedisWindowKind(ctx, rdb, f.Name)
		return kind, kind != "", err
	}
	if f.Snapshot == "" {
		return "", false, nil
	}
	if _, err := os.Stat(f.Snapshot); errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	} else if err != nil {
		return "", false, err
	}
	if k, window := snapshotKind(f.Snapshot); k != "" {
		return k, window, nil
	}
	return "unknown", false, nil
}

// ReadWindow describes sf's revisit window if it is one (a *dedup.Window,
// as OpenExisting opens a stored window), else it returns nil.
func ReadWindow(ctx context.Context, sf SeenFilter) (*WindowStats, error) {
	w, ok := sf.(*dedup.Window)
	if !ok {
		return nil, nil
	}
	gens, err := w.Generations(ctx)
	if err != nil {
		return nil, err
	}
	o := w.Options()
	g := time.Duration(o.Granularity)
	return &WindowStats{After: o.After, Granularity: o.Granularity, Period: (o.After + g - 1) / g, Generations: gens}, nil
}

// Save writes an in-memory filter to the section's Snapshot file. It does
// nothing for a Redis filter or without a snapshot file.
func (f Filter) Save(ctx context.Context, sf SeenFilter) error {
	s, ok := sf.(interface {
		Save(ctx context.Context, path string) error
	})
	if f.Snapshot == "" || !ok {
		return nil
	}
	if err := s.Save(ctx, f.Snapshot); err != nil {
		return fmt.Errorf("save %s filter %q to %s: %w", f.Kind, f.Name, f.Snapshot, err)
	}
	return nil
}

// kindError is a stored filter of another kind than filter.kind.
type kindError struct {
	stored, given string
	snapshot      bool
}

func (e *kindError) Error() string {
	what := "filter"
	if e.snapshot {
		what = "snapshot"
	}
	return fmt.Sprintf("%s %s, filter.kind is %s", e.stored, what, e.given)
}

// Unwrap returns dedup.ErrMismatch: waiting will not help.
func (e *kindError) Unwrap() error { return dedup.ErrMismatch }

// snapshotKind names the filter kind a snapshot file holds, from its magic
// bytes (see dedup's snapshot formats), or "" if it is neither, and whether
// it is a revisit window's (whose header's kind byte names its
// generations': 1 Bloom, 2 cuckoo).
func snapshotKind(path string) (kind string, window bool) {
	file, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer file.Close()
	var head [11]byte
	if _, err := io.ReadFull(file, head[:8]); err != nil {
		return "", false
	}
	switch string(head[:8]) {
	case "SIEVEBF\n":
		return "bloom", false
	case "SIEVECKO":
		return "cuckoo", false
	case "SIEVEWIN":
		if _, err := io.ReadFull(file, head[8:]); err != nil {
			return "", true
		}
		return map[byte]string{1: "bloom", 2: "cuckoo"}[head[10]], true
	}
	return "", false
}

// WindowStats describes a revisit window (dedup.Window): its parameters and
// its live generations, oldest first.
type WindowStats struct {
	// After is the window D: a key is seen for at least D after it was
	// admitted.
	After time.Duration `json:"after_ns"`
	// Granularity is g: a key is new again by D·(1+1/g).
	Granularity int `json:"granularity"`
	// Period is how long each generation takes keys: L = ceil(D/g).
	Period time.Duration `json:"period_ns"`
	// Generations are the live generations that exist.
	Generations []dedup.GenerationStats `json:"generations"`
}
