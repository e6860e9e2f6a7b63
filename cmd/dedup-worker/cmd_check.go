package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/watch"
)

// cmdCheck is "dedup-worker check": for each URL, "seen" or "new" and its
// canonical form, tab-separated, or "rejected <reason>" and the input. It
// adds nothing to the filter. With --crawl it answers from that crawl's
// own filter, which must exist. It exits 1 if any URL was rejected, 2 if
// none was given.
func cmdCheck(ctx context.Context, e env, fs *flag.FlagSet, cfg *config.Config) int {
	fail := func(err error) int {
		fmt.Fprintf(e.stderr, "dedup-worker check: %v\n", err)
		return exitFail
	}
	n, err := cfg.Normalize.Normalizer()
	if err != nil {
		return fail(err)
	}
	urls, err := inputs(fs, e.stdin)
	if err != nil {
		return fail(err)
	}
	if len(urls) == 0 {
		fmt.Fprintln(e.stderr, "dedup-worker check: no URLs given (as arguments or on stdin)")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	crawl := crawlOf(fs)
	var client watch.Client // a running crawl's surface: only with a data dir
	if flagValue(fs, "data-dir") != "" {
		if client, err = watchClient(cfg); err != nil {
			return fail(err)
		}
	}
	var contains func(keys [][]byte) ([]bool, error)
	if crawl == "" {
		// A running embedded crawl answers from its filter; a crawl's
		// own is read from its snapshot file.
		contains = remoteContains(ctx, client, flagValue(fs, "data-dir"))
	}
	if contains == nil {
		useDataDir(ctx, cfg, client, flagValue(fs, "data-dir"), crawl, nil)
		t := tools{crawl: crawl}
		if err := t.open(ctx, cfg, n.Version(), false); err != nil {
			return fail(err)
		}
		defer t.close()
		contains = func(keys [][]byte) ([]bool, error) {
			if t.filter == nil {
				return make([]bool, len(keys)), nil
			}
			return t.filter.Contains(ctx, keys)
		}
	}
	lines, err := answerURLs(n, flagValue(fs, "base"), urls, "new", "seen", contains)
	if err != nil {
		return fail(err)
	}
	return printAnswers(e.stdout, lines)
}
