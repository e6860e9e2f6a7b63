package main

import (
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/captures"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/dust"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/politeness"
	"github.com/sievecrawl/sieve/redistest"
	"github.com/sievecrawl/sieve/urlfrontier"
)

// TestPlanCommand runs "dedup-worker plan" with a real Redis configured and
// checks that it prints dedup.Plan's figures for the options its flags
// describe (as text and as JSON), refuses bad input with exit 2 and a
// message naming the flag, and creates nothing in Redis.
func TestPlanCommand(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	env := map[string]string{"SIEVE_REDIS_URL": srv.URL(), "SIEVE_FILTER_FPP": "0.001"}
	tests := []struct {
		name     string
		args     []string
		want     *dedup.PlanOptions // the options the flags mean; nil: refused
		wantText string             // in stdout (ok) or stderr (refused)
	}{
		{name: "defaults from the filter settings", args: []string{"--urls", "10000000"},
			want: &dedup.PlanOptions{URLs: 10_000_000, TargetFPP: 0.001, Kind: "bloom", Factor: 2, Tightening: 0.8}, wantText: "cuckoo filter (the other kind"},
		{name: "cuckoo with a layer schedule and nodes",
			args:     []string{"--urls", "50000000", "--fpp", "0.01", "--kind", "cuckoo", "--capacity", "1000000", "--growth", "4", "--shards", "32", "--node-memory", "16MiB"},
			want:     &dedup.PlanOptions{URLs: 50_000_000, TargetFPP: 0.01, Kind: "cuckoo", InitialCapacity: 1_000_000, Factor: 4, Tightening: 0.8, Shards: 32, NodeMemory: 16 << 20},
			wantText: "Redis Cluster: "},
		{name: "revisit window", args: []string{"--urls", "1000000000", "--revisit-after", "24h", "--rate", "30000/min"},
			want:     &dedup.PlanOptions{URLs: 1_000_000_000, TargetFPP: 0.001, Kind: "bloom", Factor: 2, Tightening: 0.8, Window: 24 * time.Hour, Rate: 500},
			wantText: "5 generations live, each of 10,800,000 URLs"},
		{name: "no urls", args: []string{"--fpp", "0.01"}, wantText: "--urls N is required"},
		{name: "window without rate", args: []string{"--urls", "10", "--revisit-after", "1h"}, wantText: "--revisit-after and --rate go together"},
		{name: "bad rate", args: []string{"--urls", "10", "--revisit-after", "1h", "--rate", "fast"}, wantText: `--rate: "fast" is not a rate`},
		{name: "bad node memory", args: []string{"--urls", "10", "--node-memory", "lots"}, wantText: "--node-memory"},
		{name: "bad kind", args: []string{"--urls", "10", "--kind", "trie"}, wantText: `unknown filter kind "trie"`},
		{name: "argument", args: []string{"--urls", "10", "extra"}, wantText: `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "", env, append([]string{"plan"}, tt.args...)...)
			if tt.want == nil {
				if code != exitUsage || !strings.Contains(errOut, tt.wantText) {
					t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, exitUsage, tt.wantText)
				}
				return
			}
			if code != exitOK {
				t.Fatalf("exit %d, stderr %s", code, errOut)
			}
			plans, err := dedup.Plan(*tt.want)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range plans {
				for _, figure := range []string{num(int64(p.Memory.Bytes)) + " bytes", num(int64(p.Redis.Bytes)) + " bytes"} {
					if !strings.Contains(out, figure) {
						t.Errorf("%s plan: output lacks %q:\n%s", p.Kind, figure, out)
					}
				}
			}
			if !strings.Contains(out, tt.wantText) {
				t.Errorf("output lacks %q:\n%s", tt.wantText, out)
			}
			// The captures' disk store, from its measured figures.
			idx := bytesText(uint64(plans[0].URLs) * captures.DiskIndexBytesPerURL)
			if !strings.Contains(out, "disk (the default)") || !strings.Contains(out, "crawler's index ("+idx+")") {
				t.Errorf("output lacks the disk captures' cost (%s for the index):\n%s", idx, out)
			}
			code, out, errOut = runCLI(t, "", env, append([]string{"plan", "--json"}, tt.args...)...)
			var got []dedup.FilterPlan
			if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil {
				t.Fatalf("--json: exit %d, %v, stderr %s", code, err, errOut)
			}
			if !reflect.DeepEqual(got, plans) {
				t.Errorf("--json printed %+v, want %+v", got, plans)
			}
		})
	}
	if n := srv.Client().DBSize(context.Background()).Val(); n != 0 {
		t.Errorf("plan left %d keys in Redis, want none", n)
	}
}

// systemCosts are the whole system's figures for a crawl, computed here
// from the packages' cost constants as the table must print them.
type systemCosts struct {
	serveRAM, serveIndex, queuesLog, queuesSnap, stream  uint64
	crawlerRAM, capturesIndex, capturesLog, capturesSnap uint64
	learnRAM                                             uint64 // a crawler's Learner
	schedulerRAM                                         uint64 // a crawler's scheduler, every host in it
	fixedRAM, fixedDisk, stores, replicas                uint64 // a node's serve and crawler; a replica of the stores' stream
	shard, shards, redisBytes, memoryBytes               uint64 // the filter's, from its plan
}

func newSystemCosts(tb testing.TB, urls, hosts, waiting, replicas int64) systemCosts {
	tb.Helper()
	plans, err := dedup.Plan(dedup.PlanOptions{URLs: urls, TargetFPP: 0.001, Kind: "bloom", Factor: 2, Tightening: 0.8})
	if err != nil {
		tb.Fatal(err)
	}
	p, n := plans[0], uint64(urls)
	c := systemCosts{
		serveRAM:      urlfrontier.RAMBytesFixed + urlfrontier.RAMBytesPerQueue*uint64(hosts),
		schedulerRAM:  politeness.RAMBytesPerQueue * uint64(hosts),
		serveIndex:    urlfrontier.DiskIndexBytesPerURL * n,
		queuesLog:     urlfrontier.DiskLogBytesPerURL * n,
		queuesSnap:    urlfrontier.DiskIndexBytesPerURL * n,
		stream:        frontier.StreamBytesPerURL * uint64(waiting),
		crawlerRAM:    captures.DiskRAMBytesFixed,
		learnRAM:      dust.BytesPerPage * min(n, dust.DefaultMaxPages),
		capturesIndex: captures.DiskIndexBytesPerURL * n,
		capturesLog:   captures.DiskLogBytesPerURL * n,
		capturesSnap:  captures.DiskIndexBytesPerURL * n,
		replicas:      uint64(replicas),
		shard:         p.Redis.ShardBytes,
		shards:        uint64(p.Redis.Shards * p.Generations),
		redisBytes:    p.Redis.Bytes,
		memoryBytes:   p.Memory.Bytes,
	}
	c.fixedRAM, c.fixedDisk = c.serveRAM+c.crawlerRAM+c.learnRAM+c.schedulerRAM, c.serveIndex+c.capturesIndex
	c.stores = c.queuesLog + c.queuesSnap + c.capturesLog + c.capturesSnap
	return c
}

// nodeRAM is the fullest node's RAM with n nodes: its serve and crawler,
// and its share of the filter's Redis shards.
func (c systemCosts) nodeRAM(n uint64) uint64 { return c.fixedRAM + (c.shards+n-1)/n*c.shard }

// cells are the table's columns after a row's name: RAM each, disk each,
// disk a replica ("-": none).
func cells(b ...uint64) []string {
	s := make([]string, len(b))
	for i, v := range b {
		s[i] = "-"
		if v > 0 {
			s[i] = bytesText(v)
		}
	}
	return s
}

// TestPlanWholeSystem checks the whole system's table of "dedup-worker
// plan" (issue 26, requirement 6): every process's and store's row carries
// the figures of the packages' cost constants for N URLs, the totals add
// them up with the replicas, and the nodes follow from --node-memory and
// --node-disk (a stream's replica whole on one node, the filter's Redis
// shards spread over the nodes). The hosts (issue 40) size both serve's
// queues and a crawler's scheduler; --queues is their earlier name.
func TestPlanWholeSystem(t *testing.T) {
	env := map[string]string{"SIEVE_FILTER_FPP": "0.001"}
	size := func(b uint64) string { return strconv.FormatUint(b, 10) }
	tests := []struct {
		name string
		urls int64
		// hosts, waiting and replicas the table must assume: the
		// defaults (N/100 hosts up to 1,000,000; all N waiting; 3) or
		// the flags'.
		hosts, waiting, replicas int64
		args                     func(c systemCosts) []string // beyond --urls
		wantNodes                func(c systemCosts) []string // in the nodes' paragraph
	}{
		{name: "1e6 URLs, defaults", urls: 1e6, hosts: 10_000, waiting: 1e6, replicas: 3},
		{name: "1e9 URLs, defaults", urls: 1e9, hosts: 1_000_000, waiting: 1e9, replicas: 3},
		{name: "1e6 URLs, hosts, waiting and replicas asked", urls: 1e6, hosts: 5, waiting: 1000, replicas: 5,
			args: func(systemCosts) []string { return []string{"--hosts", "5", "--waiting", "1000", "--replicas", "5"} }},
		// --queues, the earlier name, still says the same; with --hosts
		// it must agree.
		{name: "1e6 URLs, --queues", urls: 1e6, hosts: 5, waiting: 1e6, replicas: 3,
			args: func(systemCosts) []string { return []string{"--queues", "5"} }},
		{name: "1e6 URLs, --queues and --hosts agreeing", urls: 1e6, hosts: 5, waiting: 1e6, replicas: 3,
			args: func(systemCosts) []string { return []string{"--queues", "5", "--hosts", "5"} }},
		// Issue 40's broad crawl: 20 URLs a host.
		{name: "2e7 URLs over 1e6 hosts", urls: 2e7, hosts: 1_000_000, waiting: 2e7, replicas: 3,
			args: func(systemCosts) []string { return []string{"--hosts", "1000000"} }},
		// The example: disk is ample, the replicas set the count.
		{name: "1e9 URLs on nodes of 64GiB and 2TiB", urls: 1e9, hosts: 1_000_000, waiting: 1e9, replicas: 3,
			args: func(systemCosts) []string { return []string{"--node-memory", "64GiB", "--node-disk", "2TiB"} },
			wantNodes: func(c systemCosts) []string {
				return []string{"  3 nodes: the 3 replicas of each stream need a node each",
					"the fullest node: " + bytesText(c.nodeRAM(3)) + " RAM",
					bytesText(c.fixedDisk+c.stores+c.stream) + " disk"}
			}},
		{name: "1e9 URLs, disk for both streams exactly", urls: 1e9, hosts: 1_000_000, waiting: 1e9, replicas: 3,
			args: func(c systemCosts) []string {
				return []string{"--node-disk", size(c.fixedDisk + c.stores + c.stream)}
			},
			wantNodes: func(c systemCosts) []string { return []string{"  3 nodes: "} }},
		// A byte less: each node holds one stream's replica, so twice
		// the replicas.
		{name: "1e9 URLs, disk for one stream", urls: 1e9, hosts: 1_000_000, waiting: 1e9, replicas: 3,
			args: func(c systemCosts) []string {
				return []string{"--node-disk", size(c.fixedDisk + c.stores + c.stream - 1)}
			},
			wantNodes: func(c systemCosts) []string {
				return []string{"  6 nodes: a node's disk holds a replica of one stream", "placement tags",
					bytesText(c.fixedDisk+max(c.stores, c.stream)) + " disk"}
			}},
		{name: "1e9 URLs, disk short of the larger stream", urls: 1e9, hosts: 1_000_000, waiting: 1e9, replicas: 3,
			args: func(c systemCosts) []string {
				return []string{"--node-disk", size(c.fixedDisk + max(c.stores, c.stream) - 1)}
			},
			wantNodes: func(systemCosts) []string { return []string{"  none fits: ", "raise --node-disk"} }},
		// Room for two Redis shards beside a serve and a crawler.
		{name: "1e6 URLs, memory for two shards a node", urls: 1e6, hosts: 10_000, waiting: 1e6, replicas: 3,
			args: func(c systemCosts) []string { return []string{"--node-memory", size(c.fixedRAM + 2*c.shard)} },
			wantNodes: func(c systemCosts) []string {
				n := (c.shards + 1) / 2
				return []string{"  " + strconv.FormatUint(n, 10) + " nodes: the filter's Redis shards need their memory",
					"the fullest node: " + bytesText(c.nodeRAM(n)) + " RAM"}
			}},
		{name: "1e9 URLs, memory short of a shard", urls: 1e9, hosts: 1_000_000, waiting: 1e9, replicas: 3,
			args:      func(c systemCosts) []string { return []string{"--node-memory", size(c.fixedRAM + c.shard - 1)} },
			wantNodes: func(systemCosts) []string { return []string{"  none fits: ", "raise --node-memory or --shards"} }},
		{name: "1e6 URLs, one replica", urls: 1e6, hosts: 10_000, waiting: 1e6, replicas: 1,
			args:      func(systemCosts) []string { return []string{"--replicas", "1", "--node-disk", "1TiB"} },
			wantNodes: func(systemCosts) []string { return []string{"  1 node: everything fits one"} }},
	}
	cellSep := regexp.MustCompile(`\s{2,}`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newSystemCosts(t, tt.urls, tt.hosts, tt.waiting, tt.replicas)
			args := []string{"plan", "--urls", strconv.FormatInt(tt.urls, 10)}
			if tt.args != nil {
				args = append(args, tt.args(c)...)
			}
			code, out, errOut := runCLI(t, "", env, args...)
			if code != exitOK {
				t.Fatalf("%v: exit %d, stderr %s", args, code, errOut)
			}
			_, system, ok := strings.Cut(out, "\nWhole system for "+num(tt.urls)+" URLs: "+num(tt.hosts)+" hosts, a queue each (--hosts), "+num(tt.waiting)+" waiting")
			if !ok {
				t.Fatalf("%v: no whole system's table for %s URLs, %s hosts, %s waiting:\n%s", args, num(tt.urls), num(tt.hosts), num(tt.waiting), out)
			}
			rows := map[string][]string{
				"filter (bloom), in Redis":                 cells(c.redisBytes, 0, 0),
				"filter (bloom), in memory":                cells(c.memoryBytes, c.memoryBytes, 0),
				"crawler serve (URLFrontier API)":          cells(c.serveRAM, c.serveIndex, 0),
				"queues' log (stores' stream)":             cells(0, 0, c.queuesLog),
				"queues' snapshot (<PREFIX>_STORE_SNAP)":   cells(0, 0, c.queuesSnap),
				"frontier stream (native path)":            cells(0, 0, c.stream),
				"archiving crawler's captures":             cells(c.crawlerRAM, c.capturesIndex, 0),
				"crawler's scheduler (politeness)":         cells(c.schedulerRAM, 0, 0),
				"crawler's learning (one page, one fetch)": cells(c.learnRAM, 0, 0),
				"captures' log (stores' stream)":           cells(0, 0, c.capturesLog),
				"captures' snapshot (<PREFIX>_STORE_SNAP)": cells(0, 0, c.capturesSnap),
			}
			for name, want := range rows {
				var got []string
				for _, line := range strings.Split(system, "\n") {
					if f := cellSep.Split(strings.TrimSpace(line), -1); f[0] == name && len(f) == 5 {
						got = f[1:4]
					}
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%v: row %q = %q, want %q:\n%s", args, name, got, want, system)
				}
			}
			logs := c.stores + c.stream
			wantText := []string{
				"Total, one serve and one archiving crawler, the filter in Redis, " + strconv.FormatInt(tt.replicas, 10) + " replica",
				" of each stream: " + bytesText(c.redisBytes+c.fixedRAM) + " RAM, " + bytesText(c.fixedDisk+c.replicas*logs) + " disk\n",
				"One node running everything embedded (the filter in memory, one replica): " +
					bytesText(c.memoryBytes+c.fixedRAM) + " RAM, " + bytesText(c.memoryBytes+c.fixedDisk+logs) + " disk\n",
			}
			if tt.wantNodes == nil {
				wantText = append(wantText, "--node-memory and --node-disk: how many nodes")
			} else {
				wantText = append(wantText, tt.wantNodes(c)...)
			}
			for _, w := range wantText {
				if !strings.Contains(system, w) {
					t.Errorf("%v: output lacks %q:\n%s", args, w, system)
				}
			}
		})
	}
}

// TestPlanSystemFlagsRefused: the whole system's flags refuse what cannot
// be sized, with exit 2 and a message naming the flag.
func TestPlanSystemFlagsRefused(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--node-disk", "lots"}, `--node-disk: "lots" is not a positive size`},
		{[]string{"--node-disk", "0"}, `--node-disk: "0" is not a positive size`},
		{[]string{"--node-disk", "-1"}, `--node-disk: "-1" is not a positive size`},
		{[]string{"--node-memory", "0B"}, `--node-memory: "0B" is not a positive size`},
		{[]string{"--replicas", "2"}, `--replicas: want 1, 3 or 5`}, // frontier.replicas' values
		{[]string{"--replicas", "0"}, `--replicas: want 1, 3 or 5`},
		{[]string{"--queues", "-1"}, `--queues: "-1" is not a count`},
		{[]string{"--queues", "many"}, `invalid value "many" for flag -queues`},
		{[]string{"--hosts", "-1"}, `--hosts: "-1" is not a count`},
		{[]string{"--hosts", "10", "--queues", "20"}, `--queues: 20, but --hosts says 10`},
		{[]string{"--waiting", "-5"}, `--waiting: "-5" is not a count`},
		{[]string{"--waiting", "1000001"}, `--waiting: 1,000,001 URLs waiting, more than the crawl's 1,000,000`},
	}
	for _, tt := range tests {
		args := append([]string{"plan", "--urls", "1000000"}, tt.args...)
		code, out, errOut := runCLI(t, "", nil, args...)
		if code != exitUsage || !strings.Contains(errOut, tt.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", args, code, out, errOut, exitUsage, tt.want)
		}
	}
}
