package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/watch"
)

// dataDirFlag adds --data-dir: the commands that read the filter or the
// statistics can be pointed at an embedded crawl (crawler run --embedded).
func dataDirFlag(fs *flag.FlagSet) {
	fs.String("data-dir", "", "read the embedded crawl whose data dir is `DIR`: its running process, else its filter snapshot (DIR/seen.<filter.kind>) and the statistics it saved")
}

// checkFlags are the flags of "dedup-worker check".
func checkFlags(fs *flag.FlagSet) {
	baseFlag(fs)
	dataDirFlag(fs)
	crawlFlag(fs)
}

// useDataDir points an in-memory filter at the embedded crawl's in dir: its
// snapshot file, of the kind the report the crawl serves or left says, else
// of the kind whose snapshot file is there, unless filter.kind was given
// (the snapshot's size is stored with it). Then, if crawl is not empty, it
// names the section for that crawl's own filter (forCrawl): in dir, the
// crawl's file seen.<crawl>.<kind>, of the kind whose file is there. read
// is the report already read from dir, if any (nil: it is read here when
// needed).
func useDataDir(ctx context.Context, cfg *config.Config, c watch.Client, dir, crawl string, read *watch.Report) {
	defer forCrawl(cfg, crawl)
	if dir == "" || cfg.Redis.Enabled() {
		return
	}
	has := func(kind string) bool { return hasSnapshot(dir, kind) }
	if crawl != "" {
		has = func(kind string) bool {
			_, err := os.Stat(pipeline.CrawlSnapshot(filepath.Join(dir, "seen."+kind), crawl))
			return err == nil
		}
	}
	if !slices.Contains(cfg.Filter.Given, "kind") {
		// The report's kind is the shared filter's: a crawl's own filter
		// has the kind of its file.
		if crawl == "" && read == nil {
			if r, _, err := c.ReadDir(ctx, dir); err == nil {
				read = &r
			}
		}
		if crawl == "" && read != nil && read.Filter != nil {
			cfg.Filter.Kind = read.Filter.Kind
		} else if !has(cfg.Filter.Kind) {
			// No report (or a crawl's filter, of its own kind): the kind
			// whose snapshot is there.
			for _, k := range []string{"bloom", "cuckoo"} {
				if has(k) {
					cfg.Filter.Kind = k
				}
			}
		}
	}
	if cfg.Filter.Snapshot == "" {
		cfg.Filter.Snapshot = filepath.Join(dir, "seen."+cfg.Filter.Kind)
		// Each crawl has its own file, seen.<crawl>.<kind>; without
		// --crawl, a data dir holding one crawl's means that one.
		if m, _ := filepath.Glob(filepath.Join(dir, "seen.*."+cfg.Filter.Kind)); len(m) == 1 && crawl == "" {
			cfg.Filter.Snapshot = m[0]
		}
	}
}

// hasSnapshot reports whether dir holds a filter snapshot of kind: a
// crawl's seen.<crawl>.<kind>, or seen.<kind>.
func hasSnapshot(dir, kind string) bool {
	if _, err := os.Stat(filepath.Join(dir, "seen."+kind)); err == nil {
		return true
	}
	m, _ := filepath.Glob(filepath.Join(dir, "seen.*."+kind))
	return len(m) > 0
}

// watchClient reads running processes' HTTP surfaces with cfg's client
// settings (client.ca_file, client.token_file, …).
func watchClient(cfg *config.Config) (watch.Client, error) {
	return watch.NewClient(cfg.Client.Options())
}

// remoteContains asks the running embedded crawl in dir, if there is one,
// which keys its filter holds; nil when none runs there.
func remoteContains(ctx context.Context, c watch.Client, dir string) func(keys [][]byte) ([]bool, error) {
	if dir == "" {
		return nil
	}
	url := c.RunningURL(ctx, dir)
	if url == "" {
		return nil
	}
	return func(keys [][]byte) ([]bool, error) { return c.Contains(ctx, url, keys) }
}

// fromWatch is a watch server's report as "dedup-worker stats" shows it.
func fromWatch(r watch.Report) report {
	return report{Worker: r.Worker, Shared: r.Shared, Filter: r.Filter, Streams: r.Streams, Errors: r.Errors}
}

// snapshotReport answers "dedup-worker stats" without a running worker: the
// embedded crawl in dir while it runs (from its watch server), else the
// statistics it saved there and the filter from its snapshot file. dir may
// be empty: the filter snapshot alone. With a crawl, the filter is that
// crawl's, from its snapshot file, even while the crawl in dir runs.
func snapshotReport(ctx context.Context, cfg *config.Config, c watch.Client, dir, crawl string) (report, error) {
	var rep report
	var read *watch.Report
	if dir != "" {
		r, live, err := c.ReadDir(ctx, dir)
		switch {
		case live && crawl == "":
			return fromWatch(r), nil
		case err == nil:
			// Queues and worker state were the process's: gone with it.
			rep.Shared, read = r.Shared, &r
		case !errors.Is(err, watch.ErrNothingInDir):
			return rep, err
		}
	}
	useDataDir(ctx, cfg, c, dir, crawl, read)
	canon, err := cfg.Normalize.Normalizer()
	if err != nil {
		return rep, err
	}
	f, err := openExisting(ctx, cfg, nil, canon.Version(), crawl)
	if err != nil {
		if rep.Shared == nil {
			return rep, err
		}
		rep.fail("filter", err)
		return rep, nil
	}
	defer f.Close()
	s, err := f.Stats(ctx)
	if err != nil {
		return rep, err
	}
	rep.Filter = &s
	rep.addWindow(ctx, f)
	return rep, nil
}
