package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/pipeline"
)

// forgetter is a filter that can remove keys: the cuckoo kinds.
type forgetter interface {
	Forget(ctx context.Context, keys [][]byte) ([]bool, error)
}

// forgetFlags are the flags of "dedup-worker forget".
func forgetFlags(fs *flag.FlagSet) {
	baseFlag(fs)
	crawlFlag(fs)
}

// cannotForget explains why a Bloom filter cannot forget and what to use.
const cannotForget = "a Bloom filter cannot forget a URL: its bits are shared with other URLs, so clearing one URL's bits " +
	"would make others read as new too. To have URLs admitted again, use the cuckoo kind for the crawl's filter " +
	"(filter.kind: cuckoo, --filter-kind cuckoo), which can forget, or a revisit window (--revisit-after), " +
	"after which every URL is admitted again"

// cmdForget is "dedup-worker forget URL…": it removes each URL's canonical
// form from a cuckoo filter so that it is admitted again, printing
// "forgotten" or "absent" (the filter did not hold it) and the canonical
// form, tab-separated, or "rejected <reason>" and the input. A Bloom filter
// is refused with why and what to use instead. In memory mode it rewrites
// the snapshot file (stop the process that writes it first). It exits 1 if
// any URL was rejected.
func cmdForget(ctx context.Context, e env, fs *flag.FlagSet, cfg *config.Config) int {
	fail := func(err error) int {
		fmt.Fprintf(e.stderr, "dedup-worker forget: %v\n", err)
		return exitFail
	}
	crawl := crawlOf(fs)
	// A crawl's filter is of the crawl's kind, whatever filter.kind says.
	if crawl == "" && cfg.Filter.Kind != "cuckoo" && slices.Contains(cfg.Filter.Given, "kind") {
		fmt.Fprintf(e.stderr, "dedup-worker forget: filter %q is of kind %s; %s.\n", cfg.Filter.Name, cfg.Filter.Kind, cannotForget)
		return exitUsage
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
		fmt.Fprintln(e.stderr, "dedup-worker forget: no URLs given (as arguments or on stdin)")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	t := tools{crawl: crawl, writes: true}
	if err := t.open(ctx, cfg, n.Version(), false); err != nil {
		return fail(err)
	}
	defer t.close()
	if t.filter == nil {
		return fail(fmt.Errorf("filter %q does not exist: it holds nothing to forget", cfg.Filter.Name))
	}
	f, ok := t.filter.(forgetter)
	if !ok {
		fmt.Fprintf(e.stderr, "dedup-worker forget: filter %q: %s.\n", cfg.Filter.Name, cannotForget)
		return exitUsage
	}

	lines, err := answerURLs(n, flagValue(fs, "base"), urls, "absent", "forgotten", func(keys [][]byte) ([]bool, error) {
		held, err := f.Forget(ctx, keys)
		if err == nil {
			err = pipeline.SaveFilter(ctx, cfg.Filter, t.filter)
		}
		return held, err
	})
	if errors.Is(err, dedup.ErrCannotForget) { // a revisit window of Bloom filters
		fmt.Fprintf(e.stderr, "dedup-worker forget: filter %q: %s.\n", cfg.Filter.Name, cannotForget)
		return exitUsage
	}
	if err != nil {
		return fail(err)
	}
	return printAnswers(e.stdout, lines)
}

// answer is one output line of a command that answers per URL: a state and
// the canonical form, or "rejected <reason>" and the input.
type answer struct{ state, text string }

// answerURLs canonicalizes each input and asks ask about the canonical
// forms (once, if any is valid): each is answered yes or no by ask's
// result; a rejected input is answered with its reason.
func answerURLs(n *normalize.Normalizer, base string, urls []string, no, yes string, ask func(keys [][]byte) ([]bool, error)) ([]answer, error) {
	out := make([]answer, len(urls))
	var keys [][]byte
	var at []int
	for i, u := range urls {
		c, err := canonical(n, base, u)
		if err != nil {
			out[i] = answer{"rejected " + reasonOf(err), u}
			continue
		}
		out[i] = answer{no, c}
		keys, at = append(keys, []byte(c)), append(at, i)
	}
	if len(keys) == 0 {
		return out, nil
	}
	got, err := ask(keys)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		if got[j] {
			out[i].state = yes
		}
	}
	return out, nil
}

// printAnswers prints the lines, tab-separated, and returns exitFail if any
// input was rejected.
func printAnswers(w io.Writer, lines []answer) int {
	code := exitOK
	for _, l := range lines {
		fmt.Fprintf(w, "%s\t%s\n", l.state, l.text)
		if strings.HasPrefix(l.state, "rejected") {
			code = exitFail
		}
	}
	return code
}
