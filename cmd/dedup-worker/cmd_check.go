package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/sievecrawl/sieve/config"
)

// cmdCheck is "dedup-worker check": for each URL, "seen" or "new" and its
// canonical form, tab-separated, or "rejected <reason>" and the input. It
// adds nothing to the filter. It exits 1 if any URL was rejected.
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
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var t tools
	if err := t.open(ctx, cfg, n.Version(), false); err != nil {
		return fail(err)
	}
	defer t.close()

	base := flagValue(fs, "base")
	type line struct{ state, text string }
	out := make([]line, len(urls))
	var keys [][]byte
	var at []int
	for i, u := range urls {
		c, err := canonical(n, base, u)
		if err != nil {
			out[i] = line{"rejected " + reasonOf(err), u}
			continue
		}
		out[i] = line{"new", c}
		keys, at = append(keys, []byte(c)), append(at, i)
	}
	if t.filter != nil && len(keys) > 0 {
		seen, err := t.filter.Contains(ctx, keys)
		if err != nil {
			return fail(err)
		}
		for j, i := range at {
			if seen[j] {
				out[i].state = "seen"
			}
		}
	}
	code := exitOK
	for _, l := range out {
		fmt.Fprintf(e.stdout, "%s\t%s\n", l.state, l.text)
		if l.state != "new" && l.state != "seen" {
			code = exitFail
		}
	}
	return code
}
