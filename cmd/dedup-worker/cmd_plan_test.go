package main

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/captures"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/redistest"
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
