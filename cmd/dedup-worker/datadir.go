package main

import (
	"context"
	"errors"
	"flag"
	"path/filepath"

	"github.com/sievecrawl/sieve/config"
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
}

// useDataDir points an in-memory filter's snapshot at the embedded crawl's in
// dir, unless filter.snapshot names one.
func useDataDir(cfg *config.Config, dir string) {
	if dir != "" && cfg.Filter.Snapshot == "" && !cfg.Redis.Enabled() {
		cfg.Filter.Snapshot = filepath.Join(dir, "seen."+cfg.Filter.Kind)
	}
}

// fromWatch is a watch server's report as "dedup-worker stats" shows it.
func fromWatch(r watch.Report) report {
	return report{Worker: r.Worker, Shared: r.Shared, Filter: r.Filter, Streams: r.Streams, Errors: r.Errors}
}

// snapshotReport answers "dedup-worker stats" without a running worker: the
// embedded crawl in dir while it runs (from its watch server), else the
// statistics it saved there and the filter from its snapshot file. dir may
// be empty: the filter snapshot alone.
func snapshotReport(ctx context.Context, cfg *config.Config, dir string) (report, error) {
	var rep report
	if dir != "" {
		r, live, err := watch.ReadDir(ctx, dir)
		switch {
		case live:
			return fromWatch(r), nil
		case err == nil:
			// Queues and worker state were the process's: gone with it.
			rep.Shared = r.Shared
		case !errors.Is(err, watch.ErrNothingInDir):
			return rep, err
		}
		useDataDir(cfg, dir)
	}
	canon, err := cfg.Normalize.Normalizer()
	if err != nil {
		return rep, err
	}
	f, err := openExisting(ctx, cfg, nil, canon.Version())
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
	return rep, nil
}
