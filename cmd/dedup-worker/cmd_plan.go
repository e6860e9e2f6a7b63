package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sievecrawl/sieve/captures"
	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/dedup"
)

func planFlags(fs *flag.FlagSet) {
	fs.Int64("urls", 0, "distinct URLs the crawl will admit (required)")
	fs.Float64("fpp", 0, "bound on the false-positive rate; 0: filter.fpp")
	fs.Duration("revisit-after", 0, "revisit window: a URL is new again this long after it was admitted (0: never); needs --rate")
	fs.Int("granularity", 0, "generations a revisit window is cut into (a URL is new again between D and D·(1+1/g)); 0: the default, 4")
	fs.String("rate", "", "new URLs per second with a revisit window, e.g. 500, 500/s, 30000/min, 1.8M/h")
	fs.String("kind", "", "filter kind to plan, bloom or cuckoo (the other is planned too); empty: filter.kind")
	fs.Int64("capacity", 0, "first layer's capacity; 0: one layer for the crawl (N, or a generation's R·D/g)")
	fs.Float64("growth", 0, "capacity factor of each new layer; 0: filter.growth")
	fs.Int("shards", 0, "Redis shards; 0: filter.shards, else the kind's default")
	fs.String("node-memory", "", "memory each Redis Cluster node can give the filter (e.g. 4GiB): prints how many nodes it needs")
	fs.Bool("json", false, "print the plans as JSON")
}

// cmdPlan is "dedup-worker plan": it sizes the filter for a crawl, and the
// same filter of the other kind, and prints both. It creates nothing and
// connects to nothing.
func cmdPlan(_ context.Context, e env, fs *flag.FlagSet, cfg *config.Config) int {
	usageErr := func(err error) int {
		fmt.Fprintf(e.stderr, "dedup-worker plan: %v\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		return usageErr(fmt.Errorf("unexpected argument %q (every input is a flag)", fs.Arg(0)))
	}
	o, err := planOptions(fs, cfg.Filter)
	if err != nil {
		return usageErr(err)
	}
	plans, err := dedup.Plan(o)
	if err != nil {
		return usageErr(err)
	}
	if flagValue(fs, "json") == "true" {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(plans); err != nil {
			fmt.Fprintf(e.stderr, "dedup-worker plan: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	printPlans(e.stdout, plans)
	printCaptures(e.stdout, plans[0].URLs)
	return exitOK
}

// printCaptures adds what archiving crawlers keep beside the filter: each
// URL's last capture, for revisit records (package captures).
func printCaptures(w io.Writer, urls int64) {
	n := uint64(urls)
	fmt.Fprintf(w, "\nArchiving crawlers (warc.dir) also keep each URL's last capture, for revisits (warc.captures):\n")
	fmt.Fprintf(w, "  disk (the default): on disk %d bytes per URL in each archiving crawler's index (%s) and %d in the NATS log per replica (%s); in RAM about %s per crawler, whatever the number of URLs\n",
		captures.DiskIndexBytesPerURL, bytesText(n*captures.DiskIndexBytesPerURL), captures.DiskLogBytesPerURL, bytesText(n*captures.DiskLogBytesPerURL), bytesText(captures.DiskRAMBytesFixed))
	fmt.Fprintf(w, "  redis (earlier versions): about %d bytes of RAM per URL, %s for %s URLs, spread over %d keys per crawl\n", captures.BytesPerURL, bytesText(n*captures.BytesPerURL), num(urls), 2*captures.Shards)
}

// planOptions reads the command's flags, defaulting to the filter section.
func planOptions(fs *flag.FlagSet, f config.Filter) (dedup.PlanOptions, error) {
	o := dedup.PlanOptions{Kind: f.Kind, TargetFPP: f.FPP, Factor: f.Growth, Tightening: f.Tightening, Shards: f.Shards}
	var err error
	parse := func(name string, dst any) {
		v := flagValue(fs, name)
		if err != nil || v == "" || v == "0" || v == "0s" {
			return
		}
		switch d := dst.(type) {
		case *int64:
			*d, err = strconv.ParseInt(v, 10, 64)
		case *int:
			*d, err = strconv.Atoi(v)
		case *float64:
			*d, err = strconv.ParseFloat(v, 64)
		case *time.Duration:
			*d, err = time.ParseDuration(v)
		case *string:
			*d = v
		}
		if err != nil {
			err = fmt.Errorf("--%s: %w", name, err)
		}
	}
	parse("urls", &o.URLs)
	parse("fpp", &o.TargetFPP)
	parse("revisit-after", &o.Window)
	parse("granularity", &o.Granularity)
	parse("kind", &o.Kind)
	parse("capacity", &o.InitialCapacity)
	parse("growth", &o.Factor)
	parse("shards", &o.Shards)
	if err != nil {
		return o, err
	}
	if o.URLs <= 0 {
		return o, fmt.Errorf("--urls N is required: how many distinct URLs the crawl will admit")
	}
	if v := flagValue(fs, "rate"); v != "" {
		if o.Rate, err = parseRate(v); err != nil {
			return o, fmt.Errorf("--rate: %w", err)
		}
	}
	if (o.Window == 0) != (o.Rate == 0) {
		return o, fmt.Errorf("--revisit-after and --rate go together: a window's size is the URLs found new during it")
	}
	if v := flagValue(fs, "node-memory"); v != "" {
		b, err := config.ParseBytes(v)
		if err != nil || b <= 0 {
			return o, fmt.Errorf("--node-memory: %q is not a positive size (e.g. 4GiB)", v)
		}
		o.NodeMemory = int64(b)
	}
	return o, nil
}

// parseRate parses "500", "500/s", "30000/min", "1.8M/h", "2k/s".
func parseRate(s string) (float64, error) {
	num, unit, _ := strings.Cut(strings.TrimSpace(s), "/")
	per := map[string]float64{"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hour": 3600, "d": 86400, "day": 86400}[unit]
	mult := 1.0
	if n := len(num); n > 0 {
		if m, ok := map[byte]float64{'k': 1e3, 'K': 1e3, 'M': 1e6, 'G': 1e9}[num[n-1]]; ok {
			num, mult = num[:n-1], m
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || per == 0 || !(v > 0) {
		return 0, fmt.Errorf("%q is not a rate (e.g. 500/s, 30000/min, 1.8M/h)", s)
	}
	return v * mult / per, nil
}

// printPlans writes the plans as text: the kind asked for, then the other.
func printPlans(w io.Writer, plans []dedup.FilterPlan) {
	p := plans[0]
	fmt.Fprintf(w, "Plan for %s URLs at a false-positive rate of at most %v", num(p.URLs), p.TargetFPP)
	if p.Window > 0 {
		hi := p.Window + p.Window/time.Duration(p.Granularity)
		fmt.Fprintf(w, ", revisited after %v (new again between %v and %v after admission), %.4g new URLs/s", p.Window, p.Window, hi, p.Rate)
	}
	fmt.Fprintln(w, ".")
	for i, p := range plans {
		role := "as asked"
		if i > 0 {
			role = "the other kind, to compare"
		}
		fmt.Fprintf(w, "\n%s filter (%s)\n", p.Kind, role)
		if p.Window > 0 {
			fmt.Fprintf(w, "  %d generations live, each of %s URLs (its period's), each sized for rate %.3g\n", p.Generations, num(p.KeysPerGeneration), p.Growth.TargetFPP)
		}
		fmt.Fprintf(w, "  layers: first %s URLs, capacity ×%v and rate ×%v per new layer\n", num(p.Growth.InitialCapacity), p.Growth.Factor, p.Growth.Tightening)
		printPlace(w, "in memory (embedded mode)", p.Memory, p)
		printPlace(w, fmt.Sprintf("in Redis (%d shards)", p.Redis.Shards), p.Redis, p)
		switch {
		case p.NodeMemory == 0:
		case p.Nodes < 0:
			fmt.Fprintf(w, "  Redis Cluster: one shard (%s) does not fit a node of %s; raise --shards\n", bytesText(p.Redis.ShardBytes), bytesText(uint64(p.NodeMemory)))
		case p.Nodes == 1:
			fmt.Fprintf(w, "  Redis: fits one server of %s\n", bytesText(uint64(p.NodeMemory)))
		default:
			fmt.Fprintf(w, "  Redis Cluster: %d nodes of %s (shards spread evenly over them)\n", p.Nodes, bytesText(uint64(p.NodeMemory)))
		}
	}
}

func printPlace(w io.Writer, where string, pl dedup.PlanPlace, p dedup.FilterPlan) {
	gen := ""
	if p.Window > 0 {
		gen = ", per generation"
	}
	shard := ""
	if pl.Shards > 1 {
		shard = " per shard"
	}
	fmt.Fprintf(w, "  %s:\n", where)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hashes := "hashes"
	if p.Kind == "cuckoo" {
		hashes = "fp bits"
	}
	fmt.Fprintf(tw, "    layer\tcapacity%s\tfpp\t%s\tbits%s\tbytes%s\tURLs at N%s%s\t\n", shard, hashes, shard, shard, shard, gen)
	for i, l := range pl.Layers {
		fmt.Fprintf(tw, "    %d\t%s\t%.3g\t%d\t%s\t%s\t%s\t\n", i, num(l.Capacity), l.FPP, l.Hashes, num(int64(l.Bits)), num(int64(l.Bytes)), num(l.Keys))
	}
	tw.Flush()
	fmt.Fprintf(w, "    total %s (%s bytes)", bytesText(pl.Bytes), num(int64(pl.Bytes)))
	if pl.Shards > 1 {
		fmt.Fprintf(w, ", %s a shard", bytesText(pl.ShardBytes))
	}
	at := "at N"
	if p.Window > 0 {
		at = "with the window full"
	}
	fmt.Fprintf(w, "; false-positive rate %s %.3g\n", at, pl.FPP)
}
