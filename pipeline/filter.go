package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/dedup"
)

// A filter section (config.Filter) names and sizes one filter; the
// functions here open it as dedup.Open does, with what a stored filter
// adds: it describes itself, so a section's sizing settings apply only when
// it is created, and a setting given explicitly that conflicts with the
// stored one is an error naming the setting.

// OpenFilter opens the filter the section f describes, storing policy (the
// normalize policy version) with it: in Redis when rdb is not nil (the
// filter does not close rdb), else in memory, loaded from the Snapshot file
// when one is set and exists, and created from the section when it does not.
//
// An existing filter describes itself: its kind (where the stored filter
// tells it), capacity, fpp, growth, tightening and shards are those stored
// with it unless the section gives them explicitly (Given). One given that
// differs from the stored value is an error naming both (a *config.FieldError
// wrapping dedup.ErrMismatch); one given equal to it is logged as applying
// only when a filter is created. A filter stored under another policy is an
// error unless Force is set, which replaces the stored policy (logged).
func OpenFilter(ctx context.Context, f config.Filter, rdb redis.UniversalClient, policy string) (dedup.Filter, error) {
	return openFilter(ctx, f, rdb, policy, false, true)
}

// OpenExistingFilter opens the filter as OpenFilter does, but only if it exists, and
// writes nothing: nothing is created, nothing stored is changed (not even
// a revisit window's expired generations), and Force is refused. A missing
// filter is an error matching dedup.ErrNotFound. Read-only commands use it.
//
// A revisit window stored under the name (a crawl created with
// --revisit-after: in Redis the hash "<name>:window" and its generations,
// in memory a window snapshot) is opened as a *dedup.Window, adopting its
// stored window, granularity and rate; dedup.ReadWindow describes it.
// OpenFilter refuses one: a window is written only by its crawl's workers and
// commands, from the crawl's settings (OpenCrawlFilter).
func OpenExistingFilter(ctx context.Context, f config.Filter, rdb redis.UniversalClient, policy string) (dedup.Filter, error) {
	return openFilter(ctx, f, rdb, policy, true, true)
}

// FilterExists reports whether a filter (or a revisit window) is stored where
// the section f says. It writes nothing.
func FilterExists(ctx context.Context, f config.Filter, rdb redis.UniversalClient) (bool, error) {
	kind, _, err := storedKind(ctx, f, rdb)
	return kind != "", err
}

// creationOnly maps the section's keys that size a filter, which only apply
// when it is created, to the names its stored parameters have in dedup.
var creationOnly = []struct{ key, stored string }{
	{"kind", "kind"}, {"capacity", "initial_capacity"}, {"fpp", "target_fpp"},
	{"growth", "growth_factor"}, {"tightening", "tightening"}, {"shards", "shards"},
}

func openFilter(ctx context.Context, f config.Filter, rdb redis.UniversalClient, policy string, existing, retry bool) (dedup.Filter, error) {
	where := "in memory"
	if rdb != nil {
		where = "in redis"
	} else if f.Snapshot != "" {
		where = f.Snapshot
	}
	fail := func(err error) (dedup.Filter, error) {
		return nil, fmt.Errorf("%s filter %q (%s): %w", f.Kind, f.Name, where, err)
	}
	if existing && f.Force {
		return fail(&config.FieldError{Field: "filter.force", Err: errors.New("only applies to commands that write the filter (run, import)")})
	}
	given := map[string]bool{}
	for _, k := range f.Given {
		given[k] = true
	}
	stored, window, err := storedKind(ctx, f, rdb)
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
		return openFilter(ctx, f, rdb, policy, existing, false)
	}
	if err != nil {
		if errors.Is(err, dedup.ErrUnknownKind) {
			err = &config.FieldError{Field: "filter.kind", Err: err}
		}
		if errors.As(err, &me) {
			for _, c := range creationOnly {
				if c.stored == me.Field {
					err = &config.FieldError{Field: "filter." + c.key, Err: err}
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
func storedKind(ctx context.Context, f config.Filter, rdb redis.UniversalClient) (kind string, window bool, err error) {
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
	return dedup.StoredSnapshotKind(f.Snapshot)
}

// SaveFilter writes an in-memory filter to the section f's Snapshot file. It does
// nothing for a Redis filter or without a snapshot file.
func SaveFilter(ctx context.Context, f config.Filter, sf dedup.Filter) error {
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
