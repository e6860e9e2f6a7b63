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
	"github.com/sievecrawl/sieve/dust"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/politeness"
	"github.com/sievecrawl/sieve/urlfrontier"
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
	fs.String("node-memory", "", "memory of a node (e.g. 64GiB): prints how many Redis Cluster nodes the filter needs if it has all of it, and how many nodes the whole system takes")
	fs.String("node-disk", "", "disk of a node (e.g. 2TiB): prints how many nodes the whole system takes")
	fs.Int64("hosts", 0, "hosts (queues) the crawl reaches, for the RAM of the URLFrontier API's queues and of a crawler's scheduler; 0: one per 100 URLs, at most 1,000,000")
	fs.Int64("queues", 0, "the same as --hosts, its earlier name")
	fs.Int64("waiting", 0, "URLs waiting in the frontier stream at its fullest; 0: all of them, the worst case")
	fs.Int("replicas", 3, "replicas of each NATS stream (frontier.replicas: 1, 3 or 5)")
	fs.Bool("json", false, "print the filter plans as JSON (the whole system's figures are printed as text only)")
}

// cmdPlan is "dedup-worker plan": it sizes the filter for a crawl, and the
// same filter of the other kind, and prints both, then what the whole
// system costs for the crawl, process by process and store by store, and
// with a node size how many nodes it takes (as text only: --json keeps
// printing the filter plans alone). It creates nothing and connects to
// nothing.
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
	so, err := systemOptionsOf(fs, o)
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
	printSystem(e.stdout, planSystem(so, plans[0]))
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

// systemOptions size the rest of the system beside the filter.
type systemOptions struct {
	URLs       int64 // distinct URLs, N
	Hosts      int64 // hosts, one queue each in serve and in a crawler's scheduler (--hosts, --queues)
	Waiting    int64 // URLs in the frontier stream at its fullest (--waiting)
	Replicas   int   // of each NATS stream (--replicas)
	NodeMemory int64 // a node's memory; 0: nodes not counted (--node-memory)
	NodeDisk   int64 // a node's disk; 0: disk not bounded (--node-disk)
}

// maxSystemURLs bounds the URLs the whole system is sized for: below it no
// figure overflows 64 bits (N × about 500 bytes × 5 replicas).
const maxSystemURLs = 1_000_000_000_000_000

// systemOptionsOf reads the whole system's flags; o holds the filter's,
// already read.
func systemOptionsOf(fs *flag.FlagSet, o dedup.PlanOptions) (systemOptions, error) {
	so := systemOptions{URLs: o.URLs, NodeMemory: o.NodeMemory}
	if so.URLs > maxSystemURLs {
		return so, fmt.Errorf("--urls: the whole system is sized for at most %s URLs", num(maxSystemURLs))
	}
	var queues int64
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"hosts", &so.Hosts}, {"queues", &queues}, {"waiting", &so.Waiting}} {
		v, err := strconv.ParseInt(flagValue(fs, f.name), 10, 64)
		if err != nil || v < 0 {
			return so, fmt.Errorf("--%s: %q is not a count ≥ 0", f.name, flagValue(fs, f.name))
		}
		*f.dst = v
	}
	// --queues is --hosts' earlier name: serve and the crawler both keep
	// a queue per queue key, the host unless a crawl keys otherwise.
	switch {
	case queues > 0 && so.Hosts > 0 && queues != so.Hosts:
		return so, fmt.Errorf("--queues: %s, but --hosts says %s; --queues is --hosts' earlier name, give one", num(queues), num(so.Hosts))
	case so.Hosts == 0:
		so.Hosts = queues
	}
	if so.Hosts == 0 {
		so.Hosts = max(1, min(so.URLs/100, 1_000_000))
	}
	switch {
	case so.Waiting == 0:
		so.Waiting = so.URLs
	case so.Waiting > so.URLs:
		return so, fmt.Errorf("--waiting: %s URLs waiting, more than the crawl's %s (--urls)", num(so.Waiting), num(so.URLs))
	}
	r, err := strconv.Atoi(flagValue(fs, "replicas"))
	if err != nil || (r != 1 && r != 3 && r != 5) {
		return so, fmt.Errorf("--replicas: want 1, 3 or 5 (as frontier.replicas), got %q", flagValue(fs, "replicas"))
	}
	so.Replicas = r
	if v := flagValue(fs, "node-disk"); v != "" {
		b, err := config.ParseBytes(v)
		if err != nil || b <= 0 {
			return so, fmt.Errorf("--node-disk: %q is not a positive size (e.g. 2TiB)", v)
		}
		so.NodeDisk = int64(b)
	}
	return so, nil
}

// systemPlan is what the whole system costs for N URLs, process by process
// and store by store, from the figures the benchmarks measure (the
// packages' cost constants), and how many nodes it takes.
type systemPlan struct {
	systemOptions
	Filter dedup.FilterPlan // the kind asked for

	ServeRAM, ServeIndex uint64 // each crawler serve (URLFrontier API)
	SchedulerRAM         uint64 // a crawler's politeness scheduler holding every host
	QueuesLog            uint64 // the queues' log, a replica
	QueuesSnapshot       uint64 // the queues' index snapshot, a replica
	Stream               uint64 // the frontier stream, a replica
	CrawlerRAM           uint64 // each archiving crawler's captures store
	LearnRAM             uint64 // each crawler's Learner, per crawl (package dust)
	CapturesIndex        uint64 // each archiving crawler's captures index
	CapturesLog          uint64 // the captures' log, a replica
	CapturesSnapshot     uint64 // the captures' index snapshot, a replica

	// Nodes is how many nodes of NodeMemory and NodeDisk the deployment
	// takes, each running a serve, an archiving crawler and a NATS server,
	// with the filter's Redis shards spread over them: 0 without a node
	// size, −1 when not even one node's share fits (Why says what).
	Nodes int
	Why   string // what sets Nodes
	// Apart: the two streams' replicas must sit on different nodes.
	Apart bool
	// NodeRAM and NodeDiskUsed are the fullest node's, with Nodes nodes.
	NodeRAM, NodeDiskUsed uint64
}

// planSystem sizes every process and store for so.URLs URLs, p being the
// filter's plan.
func planSystem(so systemOptions, p dedup.FilterPlan) systemPlan {
	n := uint64(so.URLs)
	s := systemPlan{systemOptions: so, Filter: p,
		ServeRAM:         urlfrontier.RAMBytesFixed + urlfrontier.RAMBytesPerQueue*uint64(so.Hosts),
		SchedulerRAM:     politeness.RAMBytesPerQueue * uint64(so.Hosts),
		ServeIndex:       urlfrontier.DiskIndexBytesPerURL * n,
		QueuesLog:        urlfrontier.DiskLogBytesPerURL * n,
		QueuesSnapshot:   urlfrontier.DiskIndexBytesPerURL * n,
		Stream:           frontier.StreamBytesPerURL * uint64(so.Waiting),
		CrawlerRAM:       captures.DiskRAMBytesFixed,
		LearnRAM:         dust.BytesPerPage * min(n, dust.DefaultMaxPages),
		CapturesIndex:    captures.DiskIndexBytesPerURL * n,
		CapturesLog:      captures.DiskLogBytesPerURL * n,
		CapturesSnapshot: captures.DiskIndexBytesPerURL * n,
	}
	if so.NodeMemory == 0 && so.NodeDisk == 0 {
		return s
	}
	fixedRAM, fixedDisk := s.nodeFixed()
	store, front := s.stores(), s.Stream
	nodes := so.Replicas
	s.Why = fmt.Sprintf("the %d replicas of each stream need a node each", so.Replicas)
	if so.Replicas == 1 {
		s.Why = "everything fits one"
	}
	if d := uint64(so.NodeDisk); d > 0 {
		switch {
		case fixedDisk+store+front <= d:
		case fixedDisk+max(store, front) <= d:
			// A stream's replica is whole on one node: more nodes
			// do not split it, but they can keep the two apart.
			nodes, s.Apart = 2*so.Replicas, true
			s.Why = "a node's disk holds a replica of one stream beside its indexes, not of both"
		default:
			s.Nodes = -1
			s.Why = fmt.Sprintf("a node of %s cannot hold a serve's and a crawler's index (%s) and a replica of the larger stream (%s): raise --node-disk",
				bytesText(d), bytesText(fixedDisk), bytesText(max(store, front)))
			return s
		}
	}
	unit, units := p.Redis.ShardBytes, uint64(p.Redis.Shards*p.Generations)
	if m := uint64(so.NodeMemory); m > 0 {
		if fixedRAM+unit > m {
			s.Nodes = -1
			s.Why = fmt.Sprintf("a node of %s cannot hold a serve and a crawler (%s) and one Redis shard of the filter (%s): raise --node-memory or --shards",
				bytesText(m), bytesText(fixedRAM), bytesText(unit))
			return s
		}
		perNode := (m - fixedRAM) / unit
		if need := int((units + perNode - 1) / perNode); need > nodes {
			nodes = need
			s.Why = "the filter's Redis shards need their memory, beside each node's serve and crawler"
		}
	}
	s.Nodes = nodes
	s.NodeRAM = fixedRAM + (units+uint64(nodes)-1)/uint64(nodes)*unit
	s.NodeDiskUsed = fixedDisk + store + front
	if s.Apart {
		s.NodeDiskUsed = fixedDisk + max(store, front)
	}
	return s
}

// stores is a replica of the stores' stream and snapshots: the queues'
// and the captures' logs and snapshots.
func (s systemPlan) stores() uint64 {
	return s.QueuesLog + s.QueuesSnapshot + s.CapturesLog + s.CapturesSnapshot
}

// nodeFixed is what every node of a deployment holds whatever their
// number: a serve and an archiving crawler, in RAM and with their indexes.
// The crawler's scheduler is counted holding every host, as one crawler
// does; crawlers share the hosts by partition, so each holds its share.
func (s systemPlan) nodeFixed() (ram, disk uint64) {
	return s.ServeRAM + s.CrawlerRAM + s.LearnRAM + s.SchedulerRAM, s.ServeIndex + s.CapturesIndex
}

// printSystem writes the whole system's table, its totals and, with a node
// size, the nodes it takes.
func printSystem(w io.Writer, s systemPlan) {
	p, r := s.Filter, uint64(s.Replicas)
	waiting := "--waiting"
	if s.Waiting == s.URLs {
		waiting = "all of them, the worst case: --waiting"
	}
	replicas := fmt.Sprintf("%d replicas", s.Replicas)
	if s.Replicas == 1 {
		replicas = "1 replica"
	}
	fmt.Fprintf(w, "\nWhole system for %s URLs: %s hosts, a queue each (--hosts), %s waiting in the frontier stream (%s), %s of each NATS stream (--replicas):\n",
		num(s.URLs), num(s.Hosts), num(s.Waiting), waiting, replicas)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  process or store\tRAM each\tdisk each\tdisk a replica\tfrom\n")
	row := func(name string, ram, disk, replica uint64, from string) {
		cell := func(b uint64) string {
			if b == 0 {
				return "-"
			}
			return bytesText(b)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", name, cell(ram), cell(disk), cell(replica), from)
	}
	row(fmt.Sprintf("filter (%s), in Redis", p.Kind), p.Redis.Bytes, 0, 0,
		fmt.Sprintf("the plan above, a deployment's (%d shards); Redis persistence not counted", p.Redis.Shards))
	row(fmt.Sprintf("filter (%s), in memory", p.Kind), p.Memory.Bytes, p.Memory.Bytes, 0,
		"the plan above, embedded; on disk its snapshot")
	row("crawler serve (URLFrontier API)", s.ServeRAM, s.ServeIndex, 0,
		fmt.Sprintf("urlfrontier (TestServeScale, TestServeBroad): %s + %s a queue; index %d B a URL", bytesText(urlfrontier.RAMBytesFixed), bytesText(urlfrontier.RAMBytesPerQueue), urlfrontier.DiskIndexBytesPerURL))
	row("queues' log (stores' stream)", 0, 0, s.QueuesLog,
		fmt.Sprintf("urlfrontier (TestServeScale): %d B a URL put; compacted, two periods of work (urlfrontier.compact_every)", urlfrontier.DiskLogBytesPerURL))
	row("queues' snapshot (<PREFIX>_STORE_SNAP)", 0, 0, s.QueuesSnapshot,
		"a copy of a serve's index, what a new serve starts from")
	row("frontier stream (native path)", 0, 0, s.Stream,
		fmt.Sprintf("frontier (TestFrontierStreamBytes): %d B a waiting URL, S2", frontier.StreamBytesPerURL))
	row("archiving crawler's captures", s.CrawlerRAM, s.CapturesIndex, 0,
		fmt.Sprintf("captures (TestCaptureCost): RAM fixed; index %d B a URL", captures.DiskIndexBytesPerURL))
	row("crawler's scheduler (politeness)", s.SchedulerRAM, 0, 0,
		fmt.Sprintf("politeness (BenchmarkBroadMemory): %d B a host with a URL in hand, its name included; every host in one crawler, the worst case", politeness.RAMBytesPerQueue))
	row("crawler's learning (one page, one fetch)", s.LearnRAM, 0, 0,
		fmt.Sprintf("dust (TestLearnerCost): %d B a page fetched, at most %s pages a crawl; rules: a record per host with learned rules, nothing per URL", dust.BytesPerPage, num(dust.DefaultMaxPages)))
	row("captures' log (stores' stream)", 0, 0, s.CapturesLog,
		fmt.Sprintf("captures (TestCaptureCost): %d B a capture, one a URL (revisits add more, compacted to about two snapshots' worth)", captures.DiskLogBytesPerURL))
	row("captures' snapshot (<PREFIX>_STORE_SNAP)", 0, 0, s.CapturesSnapshot,
		"a copy of a crawler's captures index, what a new crawler starts from")
	tw.Flush()

	fixedRAM, fixedDisk := s.nodeFixed()
	logs := s.stores() + s.Stream
	fmt.Fprintf(w, "  Total, one serve and one archiving crawler, the filter in Redis, %s of each stream: %s RAM, %s disk\n",
		replicas, bytesText(p.Redis.Bytes+fixedRAM), bytesText(fixedDisk+r*logs))
	fmt.Fprintf(w, "  One node running everything embedded (the filter in memory, one replica): %s RAM, %s disk\n",
		bytesText(p.Memory.Bytes+fixedRAM), bytesText(p.Memory.Bytes+fixedDisk+logs))
	fmt.Fprintf(w, "  Not counted: the fetchers' own memory, Redis persistence, NATS's other streams and buckets.\n")

	if s.NodeMemory == 0 && s.NodeDisk == 0 {
		fmt.Fprintf(w, "  --node-memory and --node-disk: how many nodes of that size it takes.\n")
		return
	}
	size := []string{}
	if s.NodeMemory > 0 {
		size = append(size, bytesText(uint64(s.NodeMemory))+" RAM")
	}
	if s.NodeDisk > 0 {
		size = append(size, bytesText(uint64(s.NodeDisk))+" disk")
	}
	fmt.Fprintf(w, "\nNodes of %s, each running a serve, an archiving crawler and a NATS server, the filter's Redis shards spread over them:\n", strings.Join(size, " and "))
	if s.Nodes < 0 {
		fmt.Fprintf(w, "  none fits: %s\n", s.Why)
		return
	}
	n := uint64(s.Nodes)
	nodes := "nodes"
	if s.Nodes == 1 {
		nodes = "node"
	}
	fmt.Fprintf(w, "  %d %s: %s\n", s.Nodes, nodes, s.Why)
	fmt.Fprintf(w, "  the fullest node: %s RAM (%s of Redis shards), %s disk (%s of indexes, %s of stream replicas)\n",
		bytesText(s.NodeRAM), bytesText(s.NodeRAM-fixedRAM), bytesText(s.NodeDiskUsed), bytesText(fixedDisk), bytesText(s.NodeDiskUsed-fixedDisk))
	if s.Apart {
		fmt.Fprintf(w, "  the stores' stream and the frontier stream on different nodes: place them with NATS placement tags\n")
	}
	fmt.Fprintf(w, "  the deployment: %s RAM, %s disk\n", bytesText(n*fixedRAM+p.Redis.Bytes), bytesText(n*fixedDisk+r*logs))
}
