package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/watch"
)

// crawlCreate is what a crawl is created with: the settings `crawler seed`
// (and run --seed) store with a new crawl. Zero means not given: a new
// crawl takes the filter section's value, an existing one keeps its own.
type crawlCreate struct {
	ExpectURLs         int64         `yaml:"expect_urls" help:"URLs a new crawl's filter is sized for (with a revisit window: URLs new within one window); 0: filter.capacity. Stored with the crawl"`
	FPP                float64       `yaml:"fpp" help:"false-positive bound of a new crawl's filter, in (0, 1); 0: filter.fpp. Stored with the crawl"`
	RevisitAfter       time.Duration `yaml:"revisit_after" help:"revisit window of a new crawl: a URL admitted at t is new again when rediscovered after t+D·(1+1/g), g the granularity; at least frontier.duplicate_window; 0: never. Stored with the crawl"`
	RevisitGranularity int           `yaml:"revisit_granularity" help:"granularity g of the revisit window (generations; 0: 4). Stored with the crawl"`
}

// validate checks the creation settings.
func (c crawlCreate) validate(dupWindow time.Duration) error {
	var errs []error
	bad := func(field, msg string) { errs = append(errs, &config.FieldError{Field: field, Err: errors.New(msg)}) }
	if c.ExpectURLs < 0 {
		bad("expect_urls", "must be ≥ 0")
	}
	if c.FPP != 0 && !(c.FPP > 0 && c.FPP < 1) {
		bad("fpp", "must be in (0, 1)")
	}
	switch {
	case c.RevisitAfter < 0:
		bad("revisit_after", "must be ≥ 0")
	case c.RevisitAfter > 0 && c.RevisitAfter < dupWindow:
		bad("revisit_after", fmt.Sprintf("%v is shorter than frontier.duplicate_window (%v): a URL admitted again would be dropped as the frontier's duplicate", c.RevisitAfter, dupWindow))
	}
	if c.RevisitGranularity < 0 {
		bad("revisit_granularity", "must be ≥ 0")
	} else if c.RevisitGranularity > 0 && c.RevisitAfter == 0 {
		bad("revisit_granularity", "needs revisit_after")
	}
	return errors.Join(errs...)
}

// crawlSettings returns the settings given and the defaults a new crawl
// takes from the rest of s.
func (s settings) crawlSettings() (given, def frontier.CrawlSettings) {
	c := s.Create
	given = frontier.CrawlSettings{ExpectURLs: c.ExpectURLs, FPP: c.FPP, RevisitAfter: c.RevisitAfter, Granularity: c.RevisitGranularity}
	def = frontier.CrawlSettings{ExpectURLs: s.Filter.Capacity, FPP: s.Filter.FPP, Kind: s.Filter.Kind, Scope: s.Crawl.Scope,
		Granularity: dedup.DefaultWindowGranularity}
	return given, def
}

// seed seeds the crawl, creating it with its settings if new.
func (s settings) seed(ctx context.Context, js jetstream.JetStream) (frontier.CrawlRecord, error) {
	given, def := s.crawlSettings()
	return crawl.SeedWith(ctx, js, s.Frontier.Topology(), s.Crawl.ID, s.Seed, given, def)
}

// printCrawlSettings prints a crawl's settings on one line.
func printCrawlSettings(w io.Writer, st frontier.CrawlSettings) {
	fmt.Fprintf(w, "  expect_urls %d, fpp %v, revisit_after %s, kind %s, scope %s\n",
		st.ExpectURLs, st.FPP, revisitString(st), st.Kind, st.Scope)
}

func revisitString(st frontier.CrawlSettings) string {
	if st.RevisitAfter <= 0 {
		return "never"
	}
	return fmt.Sprintf("%v (g=%d)", st.RevisitAfter, st.Granularity)
}

// createCrawl records the crawl with its settings if it is new, as seed
// does, so that a worker opening its filter sizes it as the crawl says.
func (s settings) createCrawl(ctx context.Context, js jetstream.JetStream) error {
	reg, err := frontier.OpenCrawls(ctx, js, s.Frontier.Topology())
	if err != nil {
		return err
	}
	given, def := s.crawlSettings()
	_, err = reg.Create(ctx, s.Crawl.ID, given, def)
	return err
}

// crawlRow is one crawl as `crawler crawls` lists it.
type crawlRow struct {
	frontier.Crawl
	// Queued counts its URLs on the frontier, Pending its discovered
	// messages not yet deduplicated.
	Queued  uint64 `json:"queued"`
	Pending uint64 `json:"pending"`
	// Counts are the dedup workers' counts for the crawl (with Redis
	// stats: redis.url set; embedded without, the last run's, from the
	// report it left in the data dir).
	Counts *stats.CrawlCounts `json:"counts,omitempty"`
	// Filter is the crawl's filter in Redis or, embedded, its snapshot
	// file, read without writing (none in a deployment's memory mode, or
	// before its first URL).
	Filter *dedup.Stats `json:"filter,omitempty"`
	// Window is the crawl's revisit window, if it has one: its period and
	// live generations.
	Window *config.WindowStats `json:"window,omitempty"`
	// FilterError says why a filter that exists could not be read.
	FilterError string `json:"filter_error,omitempty"`
}

// crawlsCommand lists the crawls on the pipeline with their settings and
// queues.
func crawlsCommand(ctx context.Context, s settings, jsonOut bool, stdout io.Writer) error {
	js, closeConn, err := connectJS(s, "sieve-crawler-crawls", false)
	if err != nil {
		return err
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	topo := s.Frontier.Topology().WithDefaults()
	reg, err := frontier.OpenCrawls(ctx, js, topo)
	if err != nil {
		return err
	}
	list, err := reg.List(ctx)
	if err != nil {
		return err
	}
	var (
		counts map[string]stats.CrawlCounts
		rdb    redis.UniversalClient
	)
	if s.Redis.Enabled() {
		if rdb, err = s.Redis.Client(); err != nil {
			return err
		}
		defer rdb.Close()
		snap, err := stats.NewRedis(rdb, topo.Prefix).Snapshot(ctx, 0)
		if err != nil {
			return err
		}
		counts = snap.Totals.Crawls
	} else if s.Embedded {
		counts, _, _ = savedCrawlCounts(ctx, s.DataDir)
	}
	rows := make([]crawlRow, 0, len(list))
	for _, c := range list {
		r := crawlRow{Crawl: c}
		if cc, ok := counts[c.ID]; ok {
			r.Counts = &cc
		}
		if rdb != nil || s.Embedded {
			if err := r.readFilter(ctx, s, rdb); err != nil {
				r.FilterError = err.Error()
			}
		}
		if r.Queued, err = countSubject(ctx, js, topo.FrontierStream(), topo.CrawlFrontierFilter(c.ID)); err != nil {
			return err
		}
		if r.Pending, err = countSubject(ctx, js, topo.DiscoveredStream(), topo.DiscoveredSubject(c.ID)); err != nil {
			return err
		}
		rows = append(rows, r)
	}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		if s.Embedded {
			fmt.Fprintf(stdout, "no crawls in %s: 'crawler run --embedded --data-dir %s --crawl-id ID --seed URL' creates one\n", s.DataDir, s.DataDir)
		} else {
			fmt.Fprintln(stdout, "no crawls: 'crawler seed --crawl-id ID URL…' creates one")
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CRAWL\tCREATED\tEXPECT URLS\tFPP\tREVISIT AFTER\tKIND\tSCOPE\tSEEDS\tQUEUED\tPENDING\tADMITTED\tDUPLICATES\tFILTER")
	for _, r := range rows {
		st, created := r.Settings, "-"
		if !r.Created.IsZero() {
			created = r.Created.Local().Format("2006-01-02 15:04")
		}
		revisit := revisitString(st)
		admitted, dups := "-", "-"
		if r.Counts != nil {
			admitted, dups = fmt.Sprint(r.Counts.Admitted), fmt.Sprint(r.Counts.Duplicates)
		}
		filter := "-"
		switch f, w := r.Filter, r.Window; {
		case r.FilterError != "":
			filter = "cannot be read: " + r.FilterError
		case w != nil && f != nil:
			filter = fmt.Sprintf("%d URLs, %d generation(s) of %v, %d bytes, est. FPP %.2g", f.Items, len(w.Generations), w.Period, f.MemoryBytes, f.EstimatedFPP)
		case f != nil:
			filter = fmt.Sprintf("%d URLs, %d layer(s), %d bytes, est. FPP %.2g", f.Items, len(f.Layers), f.MemoryBytes, f.EstimatedFPP)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", r.ID, created, orDash(st.ExpectURLs != 0, fmt.Sprint(st.ExpectURLs)),
			orDash(st.FPP != 0, fmt.Sprint(st.FPP)), revisit, orDash(st.Kind != "", st.Kind), orDash(st.Scope != "", st.Scope),
			len(r.Seeds), r.Queued, r.Pending, admitted, dups, filter)
	}
	return tw.Flush()
}

// readFilter reads the crawl's filter in Redis (rdb nil, embedded: its
// snapshot file in the data dir), or its revisit window, without writing,
// as it is stored (whatever filter.kind, capacity and fpp say:
// config.SizedByCrawl). A crawl without a filter yet has none; an
// error says why one that exists cannot be read.
func (r *crawlRow) readFilter(ctx context.Context, s settings, rdb redis.UniversalClient) error {
	canon, err := s.Normalize.Normalizer()
	if err != nil {
		return err
	}
	fc := pipeline.CrawlFilter(s.filterSection().SizedByCrawl(), r.ID, r.Settings)
	fc.Log = slog.New(slog.DiscardHandler) // its notes are for commands that write
	f, err := fc.OpenExisting(ctx, rdb, canon.Version())
	if errors.Is(err, dedup.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stats(ctx)
	if err != nil {
		return err
	}
	r.Filter = &st
	r.Window, err = config.ReadWindow(ctx, f)
	return err
}

func orDash(ok bool, s string) string {
	if !ok {
		return "-"
	}
	return s
}

// connectJS connects to the pipeline's NATS once (failing at once if it is
// down); in embedded mode it opens the data dir's (openDataDir), which
// create makes if no run has used it yet.
func connectJS(s settings, name string, create bool) (jetstream.JetStream, func(), error) {
	if s.Embedded {
		return openDataDir(s, name, create) // the data dir's own NATS
	}
	nc, err := s.NATS.ConnectOnce(name)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc.Close, nil
}

// countSubject counts a stream's messages on subjects matching filter.
func countSubject(ctx context.Context, js jetstream.JetStream, stream, filter string) (uint64, error) {
	st, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, nil
}

// deleteCrawlCommand removes crawls: their frontier and discovered
// messages, their filters and their records, saying what it removed.
func deleteCrawlCommand(ctx context.Context, s settings, ids []string, stdout io.Writer) error {
	for _, id := range ids {
		if !frontier.ValidCrawl(id) {
			return fmt.Errorf("crawl id %q: want 1-64 of [A-Za-z0-9_-]", id)
		}
	}
	js, closeConn, err := connectJS(s, "sieve-crawler-delete", false)
	if err != nil {
		return err
	}
	defer closeConn()
	var rdb redis.UniversalClient
	if s.Redis.Enabled() {
		if rdb, err = s.Redis.Client(); err != nil {
			return err
		}
		defer rdb.Close()
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	reg, err := frontier.OpenCrawls(ctx, js, s.Frontier.Topology())
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := deleteCrawl(ctx, s, js, rdb, reg, id, stdout); err != nil {
			return fmt.Errorf("delete crawl %s: %w", id, err)
		}
	}
	return nil
}

func deleteCrawl(ctx context.Context, s settings, js jetstream.JetStream, rdb redis.UniversalClient, reg *frontier.Crawls,
	id string, stdout io.Writer) error {
	topo := s.Frontier.Topology().WithDefaults()
	rec, err := reg.Get(ctx, id)
	known := err == nil
	if err != nil && !errors.Is(err, frontier.ErrNoCrawl) {
		return err
	}
	fmt.Fprintf(stdout, "crawl %s:\n", id)
	for _, q := range []struct{ what, stream, subject string }{
		{"frontier", topo.FrontierStream(), topo.CrawlFrontierFilter(id)},
		{"discovered", topo.DiscoveredStream(), topo.DiscoveredSubject(id)},
	} {
		n, err := purgeSubject(ctx, js, q.stream, q.subject)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  %s: %d messages purged (%s)\n", q.what, n, q.subject)
	}
	f := pipeline.CrawlFilter(s.Filter, id, rec.Settings)
	switch {
	case rdb != nil:
		n, err := dedup.DeleteRedis(ctx, rdb, f.Name)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  filter: %d Redis keys of %q deleted\n", n, f.Name)
		n, err = stats.NewRedis(rdb, topo.Prefix).DeleteCrawl(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  stats: %d per-crawl counts deleted (the totals keep them)\n", n)
	case s.Embedded || s.Filter.Snapshot != "":
		path := f.Snapshot
		if path == "" {
			path = pipeline.CrawlFilter(embeddedConfig(s).Filter, id, rec.Settings).Snapshot
		}
		switch err := os.Remove(path); {
		case err == nil:
			fmt.Fprintf(stdout, "  filter: %s removed\n", path)
		case errors.Is(err, fs.ErrNotExist):
			fmt.Fprintf(stdout, "  filter: no file %s\n", path)
		default:
			return err
		}
	default:
		fmt.Fprintln(stdout, "  filter: in the memory of the dedup workers (no redis.url): it goes with them")
	}
	if s.Embedded && rdb == nil {
		n, err := forgetSavedCounts(s.DataDir, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  stats: %d of the last run's per-crawl counts removed from %s (its totals keep them)\n", n, watch.ReportFile)
	}
	if known {
		if err := reg.Delete(ctx, id); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  record: removed (%d seeds, created %s)\n", len(rec.Seeds), rec.Created.Format(time.RFC3339))
	} else {
		fmt.Fprintln(stdout, "  record: none")
	}
	return nil
}

// purgeSubject removes a stream's messages on subject, returning how many
// there were.
func purgeSubject(ctx context.Context, js jetstream.JetStream, stream, subject string) (uint64, error) {
	n, err := countSubject(ctx, js, stream, subject)
	if err != nil || n == 0 {
		return n, err
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return 0, fmt.Errorf("purge %s from %s: %w", subject, stream, err)
	}
	return n, nil
}
