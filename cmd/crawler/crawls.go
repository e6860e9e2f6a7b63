package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/captures"
	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/urlstore"
	"github.com/sievecrawl/sieve/warc"
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
	Learn              string        `yaml:"learn" help:"on: a new crawl learns from fetched pages which spellings of a URL name one page (a session or campaign parameter, letter case, extension, index-file and trailing-slash aliases, mirrors) and stops fetching them; off: it does not. Stored with the crawl"`
	RulesFrom          string        `yaml:"rules_from" help:"id of a crawl whose learned rules a new crawl starts from (the same hosts crawled again). Stored with the crawl"`
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
	switch c.Learn {
	case "", "on", "off":
	default:
		bad("learn", fmt.Sprintf("%q: want on or off", c.Learn))
	}
	if c.RulesFrom != "" && !frontier.ValidCrawl(c.RulesFrom) {
		bad("rules_from", fmt.Sprintf("%q is no crawl id", c.RulesFrom))
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
	given = frontier.CrawlSettings{ExpectURLs: c.ExpectURLs, FPP: c.FPP, RevisitAfter: c.RevisitAfter, Granularity: c.RevisitGranularity,
		Learn: c.Learn, RulesFrom: c.RulesFrom}
	def = frontier.CrawlSettings{ExpectURLs: s.Filter.Capacity, FPP: s.Filter.FPP, Kind: s.Filter.Kind, Scope: s.Crawl.Scope,
		Granularity: dedup.DefaultWindowGranularity}
	return given, def
}

// seed seeds the crawl, creating it with its settings if new.
func (s settings) seed(ctx context.Context, js jetstream.JetStream) (frontier.CrawlRecord, error) {
	store, err := crawls.Open(ctx, js, s.Frontier.Topology(), crawls.Options{})
	if err != nil {
		return frontier.CrawlRecord{}, err
	}
	given, def := s.crawlSettings()
	return store.SeedWith(ctx, s.Crawl.ID, s.Seed, given, def)
}

// printCrawlSettings prints a crawl's settings on one line.
func printCrawlSettings(w io.Writer, st frontier.CrawlSettings) {
	learn := "on"
	if st.Learn == "off" {
		learn = "off"
	}
	if st.RulesFrom != "" {
		learn += ", rules from " + st.RulesFrom
	}
	fmt.Fprintf(w, "  expect_urls %d, fpp %v, revisit_after %s, kind %s, scope %s, learn %s\n",
		st.ExpectURLs, st.FPP, revisitString(st), st.Kind, st.Scope, learn)
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
	store, err := crawls.Open(ctx, js, s.Frontier.Topology(), crawls.Options{})
	if err != nil {
		return err
	}
	given, def := s.crawlSettings()
	_, err = store.Create(ctx, s.Crawl.ID, given, def)
	return err
}

// crawlStore is the crawls of the pipeline s names (embedded: of its data
// dir) on js, with their filters and counts in rdb (nil without
// redis.url), else an embedded run's in its data dir. Listing a
// deployment without Redis reads no filter (its workers hold them).
func (s settings) crawlStore(ctx context.Context, js jetstream.JetStream, rdb redis.UniversalClient, listing bool) (*crawls.Store, error) {
	topo := s.Frontier.Topology().WithDefaults()
	canon, err := s.Normalize.Normalizer()
	if err != nil {
		return nil, err
	}
	var o crawls.Options
	if !listing || rdb != nil || s.Embedded {
		o.Filters = crawls.DedupFilters{Section: s.filterSection(), Redis: rdb, Policy: canon.Version()}
	}
	switch {
	case rdb != nil:
		o.Counts = crawls.RedisCounts{Stats: stats.NewRedis(rdb, topo.Prefix)}
	case s.Embedded:
		o.Counts = s.lastReport()
	}
	if !listing {
		caps, err := s.captureStore(ctx, js, rdb)
		if err != nil {
			return nil, err
		}
		o.Captures = caps
	}
	return crawls.Open(ctx, js, topo, o)
}

// captureStore is a crawl's captures as a command sees them, beside the
// crawlers that hold their stores (warc.captures): the log alone for disk,
// else Redis or the bucket.
func (s settings) captureStore(ctx context.Context, js jetstream.JetStream, rdb redis.UniversalClient) (captureStore, error) {
	topo := s.Frontier.Topology().WithDefaults()
	switch s.Warc.Captures {
	case "redis": // validate requires redis.url with it
		return captures.Redis{Client: rdb, Prefix: topo.Prefix}, nil
	case "bucket":
		return captures.OpenKV(ctx, js, topo)
	}
	log, err := frontier.OpenStoreLog(ctx, js, topo, captures.StoreName)
	if err != nil {
		return nil, err
	}
	return captures.Unindexed{Log: log}, nil
}

// crawlerCaptures is the capture store of a crawler that archives: for
// disk, its own store under data_dir, caught up with the log (or restored
// from the captures' snapshot) before the first revisit is decided, and
// compacting the log every warc.compact_every.
func (s settings) crawlerCaptures(ctx context.Context, js jetstream.JetStream, rdb redis.UniversalClient, logf func(string, ...any)) (warc.Captures, error) {
	if s.Warc.Captures != "disk" {
		return s.captureStore(ctx, js, rdb)
	}
	snaps, err := frontier.OpenStoreSnapshots(ctx, js, s.Frontier.Topology(), captures.StoreName)
	if err != nil {
		return nil, err
	}
	return s.diskCaptures(ctx, js, snaps, logf, s.Warc.CompactEvery > 0)
}

// diskCaptures opens a captures store of its own under data_dir (the
// first free of captures, captures.1, …) over the captures' log and
// snaps; with compact, it compacts the log.
func (s settings) diskCaptures(ctx context.Context, js jetstream.JetStream, snaps urlstore.Snapshots, logf func(string, ...any), compact bool) (*captures.Disk, error) {
	log, err := frontier.OpenStoreLog(ctx, js, s.Frontier.Topology(), captures.StoreName)
	if err != nil {
		return nil, err
	}
	o := urlstore.Options{Logf: logf, Snapshots: snaps, CompactEvery: s.Warc.CompactEvery}
	return captures.OpenDisk(ctx, filepath.Join(s.DataDir, "captures"), log, o, compact)
}

// captureStore is a crawl's captures, read and written by the archive,
// deleted with the crawl.
type captureStore interface {
	warc.Captures
	crawls.Captures
}

// lastReport is the report the last embedded run left in the data dir.
func (s settings) lastReport() crawls.Report {
	return crawls.Report{Path: filepath.Join(s.DataDir, watch.ReportFile)}
}

// redisClient returns the client of redis.url, nil if none is set, and
// its closer.
func (s settings) redisClient() (redis.UniversalClient, func(), error) {
	if !s.Redis.Enabled() {
		return nil, func() {}, nil
	}
	rdb, err := s.Redis.Client()
	if err != nil {
		return nil, nil, err
	}
	return rdb, func() { rdb.Close() }, nil
}

// crawlsCommand lists the crawls on the pipeline with their settings and
// queues.
func crawlsCommand(ctx context.Context, s settings, jsonOut bool, stdout io.Writer) error {
	js, rdb, closeAll, err := s.stores("sieve-crawler-crawls")
	if err != nil {
		return err
	}
	defer closeAll()
	// Streams without a quorum answer nothing: the listing is bounded, and
	// the streams' state said first (or with the error), so that the
	// command neither hangs nor fails without saying why.
	degraded := degradedStreams(ctx, js, s.Frontier.Topology())
	if !jsonOut {
		for _, name := range slices.Sorted(maps.Keys(degraded)) {
			fmt.Fprintf(stdout, "degraded: stream %s: %s\n", name, degraded[name])
		}
	}
	lctx, cancel := context.WithTimeout(ctx, crawlsTimeout)
	defer cancel()
	store, err := s.crawlStore(lctx, js, rdb, true)
	if err == nil {
		var rows []crawls.Crawl
		if rows, err = store.List(lctx); err == nil {
			return printCrawls(s, rows, jsonOut, stdout)
		}
	}
	if lctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("no answer within %v: %w", crawlsTimeout, err)
	}
	if len(degraded) > 0 {
		var why []string
		for _, name := range slices.Sorted(maps.Keys(degraded)) {
			why = append(why, name+": "+degraded[name])
		}
		err = fmt.Errorf("%w (streams degraded: %s)", err, strings.Join(why, "; "))
	}
	return err
}

// crawlsTimeout bounds `crawler crawls`'s listing.
var crawlsTimeout = 30 * time.Second

// degradedStreams reads the deployment's streams, within a few seconds,
// and returns what is wrong with each that is not healthy (a replica
// offline or behind, no leader, no answer) by name. A stream found wrong is
// read again a second later and reported only if it still is: a replica a
// write behind for a moment is how replication works, not a fault.
func degradedStreams(ctx context.Context, js jetstream.JetStream, topo frontier.Topology) map[string]string {
	h, err := frontier.NewStreamHealth(js, topo, frontier.StreamHealthOptions{Every: 3 * time.Second, Bound: -1})
	if err != nil {
		return nil
	}
	h.Check(ctx)
	first := h.Degraded()
	if len(first) == 0 {
		return first
	}
	select {
	case <-ctx.Done():
		return first
	case <-time.After(time.Second):
	}
	h.Check(ctx)
	still := h.Degraded()
	for name := range still {
		if _, ok := first[name]; !ok {
			delete(still, name)
		}
	}
	return still
}

// printCrawls prints the crawls' rows as a table or as JSON.
func printCrawls(s settings, rows []crawls.Crawl, jsonOut bool, stdout io.Writer) error {
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

func orDash(ok bool, s string) string {
	if !ok {
		return "-"
	}
	return s
}

// connectJS connects to the pipeline's NATS once (failing at once if it is
// down); in embedded mode it opens the data dir's (openDataDir), which
// create makes if no run has used it yet.
// stores connects to where the crawls are kept: NATS (or the data dir's)
// and Redis if configured (nil otherwise). close releases both.
func (s settings) stores(name string) (js jetstream.JetStream, rdb redis.UniversalClient, close func(), err error) {
	js, closeConn, err := connectJS(s, name, false)
	if err != nil {
		return nil, nil, nil, err
	}
	rdb, closeRedis, err := s.redisClient()
	if err != nil {
		closeConn()
		return nil, nil, nil, err
	}
	return js, rdb, func() { closeRedis(); closeConn() }, nil
}

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

// deleteCrawlCommand removes crawls: their frontier and discovered
// messages, their filters and their records, saying what it removed.
func deleteCrawlCommand(ctx context.Context, s settings, ids []string, stdout io.Writer) error {
	for _, id := range ids {
		if err := crawls.CheckID(id); err != nil {
			return err
		}
	}
	js, rdb, closeAll, err := s.stores("sieve-crawler-delete")
	if err != nil {
		return err
	}
	defer closeAll()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	store, err := s.crawlStore(ctx, js, rdb, false)
	if err != nil {
		return err
	}
	for _, id := range ids {
		d, err := store.Delete(ctx, id)
		if err != nil {
			return fmt.Errorf("delete crawl %s: %w", id, err)
		}
		printDeleted(stdout, d)
	}
	return nil
}

// printDeleted says what was removed of a crawl.
func printDeleted(w io.Writer, d crawls.Deleted) {
	fmt.Fprintf(w, "crawl %s:\n", d.ID)
	q := d.Queues
	fmt.Fprintf(w, "  frontier: %d messages purged (%s)\n", q.Frontier, q.FrontierSubject)
	fmt.Fprintf(w, "  discovered: %d messages purged (%s)\n", q.Discovered, q.DiscoveredSubject)
	switch f := d.Filter; {
	case f.Name != "":
		fmt.Fprintf(w, "  filter: %d Redis keys of %q deleted\n", f.RedisKeys, f.Name)
	case f.File != "" && f.Removed:
		fmt.Fprintf(w, "  filter: %s removed\n", f.File)
	case f.File != "":
		fmt.Fprintf(w, "  filter: no file %s\n", f.File)
	default:
		fmt.Fprintln(w, "  filter: in the memory of the dedup workers (no redis.url): it goes with them")
	}
	switch c := d.Counts; {
	case c == nil:
	case c.Report != "":
		fmt.Fprintf(w, "  stats: %d of the last run's per-crawl counts removed from %s (its totals keep them)\n", c.Entries, filepath.Base(c.Report))
	default:
		fmt.Fprintf(w, "  stats: %d per-crawl counts deleted (the totals keep them)\n", c.Entries)
	}
	fmt.Fprintf(w, "  captures: %d deleted (the archive's last captures, for revisits; WARC files stay)\n", d.Captures)
	if rec := d.Record; rec != nil && len(rec.Archive) > 0 {
		fmt.Fprintf(w, "  WARC directories (kept): %s\n", strings.Join(rec.Archive, ", "))
	}
	if rec := d.Record; rec != nil {
		fmt.Fprintf(w, "  record: removed (%d seeds, created %s)\n", len(rec.Seeds), rec.Created.Format(time.RFC3339))
	} else {
		fmt.Fprintln(w, "  record: none")
	}
}
