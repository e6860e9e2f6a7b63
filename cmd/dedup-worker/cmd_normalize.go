package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/normalize"
)

func baseFlag(fs *flag.FlagSet) {
	fs.String("base", "", "resolve each URL against this absolute `URL` (the page it was found on)")
}

// canonical resolves one input as the check and normalize commands do.
func canonical(n *normalize.Normalizer, base, raw string) (string, error) {
	if base != "" {
		return n.Resolve(base, raw)
	}
	return n.URL(raw)
}

// reasonOf returns a rejection's reason label.
func reasonOf(err error) string {
	var ne *normalize.Error
	if errors.As(err, &ne) {
		return string(ne.Reason)
	}
	return "invalid"
}

// cmdNormalize is "dedup-worker normalize": one line out per URL in, the
// canonical form or "rejected <reason>: <error>". It exits 1 if any URL
// was rejected.
func cmdNormalize(_ context.Context, e env, fs *flag.FlagSet, cfg *config.Config) int {
	n, err := cfg.Normalize.Normalizer()
	if err != nil {
		fmt.Fprintf(e.stderr, "dedup-worker normalize: %v\n", err)
		return exitUsage
	}
	urls, err := inputs(fs, e.stdin)
	if err != nil {
		fmt.Fprintf(e.stderr, "dedup-worker normalize: %v\n", err)
		return exitFail
	}
	base := flagValue(fs, "base")
	code := exitOK
	for _, u := range urls {
		c, err := canonical(n, base, u)
		if err != nil {
			fmt.Fprintf(e.stdout, "rejected %s: %v\n", reasonOf(err), err)
			code = exitFail
			continue
		}
		fmt.Fprintln(e.stdout, c)
	}
	return code
}
