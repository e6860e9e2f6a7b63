package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/watch"
)

func statsFlags(fs *flag.FlagSet) {
	fs.Bool("json", false, "print JSON instead of tables")
	fs.Int("top", 20, "number of top hosts to show")
	fs.String("url", "", "read the /stats of the worker at this `URL` (default in memory mode: the /stats that http.addr serves, over https when http.web_config_file sets TLS, else the filter snapshot)")
	dataDirFlag(fs)
	crawlFlag(fs)
}

func flagValue(fs *flag.FlagSet, name string) string { return fs.Lookup(name).Value.String() }

// errNoSharedFilter: a command that reads the filter runs in memory mode
// without a snapshot file.
var errNoSharedFilter = errors.New("in memory mode the filter lives inside the running worker: set redis.url, or filter.snapshot to read its snapshot file")

// openExisting opens the configured filter, as stored, for a command that
// must not create one and writes nothing on open. It returns nil, nil if a
// Redis filter does not exist yet, unless it is a crawl's (crawl is not
// empty): then that is an error.
func openExisting(ctx context.Context, cfg *config.Config, rdb redis.UniversalClient, policy, crawl string) (seenFilter, error) {
	if rdb == nil && cfg.Filter.Snapshot == "" {
		return nil, errNoSharedFilter
	}
	f, err := pipeline.OpenExistingFilter(ctx, cfg.Filter, rdb, policy)
	switch {
	case errors.Is(err, dedup.ErrNotFound) && crawl != "":
		return nil, noCrawlFilter(cfg, crawl, rdb != nil)
	case errors.Is(err, dedup.ErrNotFound) && rdb != nil:
		return nil, nil
	case errors.Is(err, dedup.ErrNotFound):
		return nil, fmt.Errorf("filter snapshot %s does not exist (filter.snapshot)", cfg.Filter.Snapshot)
	case err != nil:
		return nil, err
	}
	return f, nil
}

// cliNATS connects to NATS for a short command: fail fast, no reconnects.
func cliNATS(cfg *config.Config) (*nats.Conn, error) {
	return cfg.NATS.ConnectOnce("dedup-worker cli " + hostname())
}

// cmdStats is "dedup-worker stats".
func cmdStats(ctx context.Context, e env, fs *flag.FlagSet, cfg *config.Config) int {
	asJSON := flagValue(fs, "json") == "true"
	var top int
	fmt.Sscan(flagValue(fs, "top"), &top)
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()

	var rep report
	url := flagValue(fs, "url")
	explicit := url != ""
	crawl := crawlOf(fs)
	if crawl != "" && explicit {
		fmt.Fprintln(e.stderr, "dedup-worker stats: --crawl reads that crawl's filter itself; it does not go with --url")
		return exitUsage
	}
	if url == "" && !cfg.Redis.Enabled() && crawl == "" && flagValue(fs, "data-dir") == "" {
		// The running worker's /stats (http or https, as it serves), else
		// its snapshot file.
		page, err := watch.LocalPageURL(cfg.HTTP)
		if err != nil && cfg.Filter.Snapshot == "" {
			fmt.Fprintf(e.stderr, "dedup-worker stats: in memory mode the stats live in the running worker: %v\n", err)
			return exitFail
		}
		if err == nil {
			url = page + "stats"
		}
	}
	var client watch.Client // a running process's surface: only with a data dir or a URL
	if dir := flagValue(fs, "data-dir"); dir != "" || url != "" {
		var err error
		if client, err = watchClient(cfg); err != nil {
			fmt.Fprintf(e.stderr, "dedup-worker stats: %v\n", err)
			return exitFail
		}
	}
	if dir := flagValue(fs, "data-dir"); dir != "" || (!cfg.Redis.Enabled() && (crawl != "" || url == "")) {
		// A crawl's filter in memory mode: its snapshot file.
		r, err := snapshotReport(ctx, cfg, client, dir, crawl)
		if err != nil {
			fmt.Fprintf(e.stderr, "dedup-worker stats: %v\n", err)
			return exitFail
		}
		rep = r
	} else if url != "" {
		r, err := fetchReport(ctx, client, url)
		if err != nil && !explicit && cfg.Filter.Snapshot != "" {
			// No worker running here: its snapshot file tells the rest.
			r, err = snapshotReport(ctx, cfg, client, "", "")
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "dedup-worker stats: %v\n", err)
			return exitFail
		}
		rep = r
	} else {
		forCrawl(cfg, crawl)
		rdb, err := cfg.Redis.Client()
		if err != nil {
			fmt.Fprintf(e.stderr, "dedup-worker stats: %v\n", err)
			return exitFail
		}
		defer rdb.Close()
		if err := cfg.Redis.Ping(ctx, rdb); err != nil {
			fmt.Fprintf(e.stderr, "dedup-worker stats: %v\n", err)
			return exitFail
		}
		canon, err := cfg.Normalize.Normalizer()
		if err != nil {
			fmt.Fprintf(e.stderr, "dedup-worker stats: %v\n", err)
			return exitFail
		}
		f, ferr := openExisting(ctx, cfg, rdb, canon.Version(), crawl)
		if f != nil {
			defer f.Close()
		}
		nc, nerr := cliNATS(cfg)
		if nc != nil {
			defer nc.Close()
		}
		var filterStats func(context.Context) (dedup.Stats, error)
		if f != nil {
			filterStats = f.Stats
		}
		rep = gather(ctx, stats.NewRedis(rdb, cfg.Frontier.Prefix).Snapshot, filterStats, nc, cfg.Frontier.Topology(), top)
		if crawl == "" {
			var cerr error
			rep.Crawls, cerr = describeCrawls(ctx, cfg, rdb, nc, canon.Version(), rep.Shared)
			if cerr != nil {
				rep.fail("crawls", cerr)
			}
		}
		switch {
		case ferr != nil:
			rep.fail("filter", ferr)
		case f == nil && len(rep.Crawls) == 0:
			rep.fail("filter", errNoCrawl)
		case f != nil:
			rep.addWindow(ctx, f)
		}
		if nerr != nil {
			rep.fail("streams", nerr)
		}
		if rep.Shared == nil {
			// Redis itself is unreachable: nothing to show.
			fmt.Fprintf(e.stderr, "dedup-worker stats: %s\n", rep.Errors["shared"])
			return exitFail
		}
	}
	rep.Crawl = crawl
	code := exitOK
	if _, bad := rep.Errors["filter"]; bad && crawl != "" {
		code = exitFail // the filter asked for is the report's point
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return exitFail
		}
		return code
	}
	printReport(e.stdout, rep, time.Now())
	return code
}

func fetchReport(ctx context.Context, c watch.Client, url string) (report, error) {
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	r, err := c.Fetch(ctx, url)
	if err != nil {
		return report{}, fmt.Errorf("read the worker's stats (is a worker running? in memory mode the stats live in it): %w", err)
	}
	return fromWatch(r), nil
}
