package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/frontier"
)

// TestStatsDescribesCrawls runs a real worker on real Redis and NATS and
// asks "dedup-worker stats" without --crawl, as the compose README does,
// at each stage of a crawl's life (issue 30: after 78 URLs were admitted
// to crawl default it said "no filter yet (no worker has run)", reading
// <filter.name> while workers keep <filter.name>:<crawl>). Each crawl
// there is is described: one recorded by `crawler seed` (sized by its own
// settings, not the section's) and one known only by the workers' counts.
func TestStatsDescribesCrawls(t *testing.T) {
	h := newHarness(t)
	m, stop := startMain(t, testConfig(h.nats.URL(), h.redis.URL()))
	waitFor(t, 10*time.Second, "/readyz 200", func() bool { code, _ := get(t, "http://"+m.Addr()+"/readyz"); return code == 200 })
	// The command sees only what compose gives it: where Redis and NATS
	// are, and the section's sizes, which differ from crawl default's.
	vars := map[string]string{"SIEVE_REDIS_URL": h.redis.URL(), "SIEVE_NATS_URL": h.nats.URL(),
		"SIEVE_FILTER_KIND": "bloom", "SIEVE_FILTER_CAPACITY": "100000"}
	def := frontier.CrawlSettings{ExpectURLs: 3000, FPP: 0.001, Kind: "cuckoo", Scope: "host"}

	// publish sends n pages of crawl with distinct links, returning the
	// distinct URLs admitted.
	publish := func(crawl string, n int) int {
		for i := range n {
			h.publish(t, frontier.Discovered{Crawl: crawl, URL: fmt.Sprintf("https://%s.example/p/%d", crawl, i), Depth: 1,
				Links: []string{fmt.Sprintf("/a/%d", i), fmt.Sprintf("/b/%d", i), fmt.Sprintf("/a/%d#dup", i)}})
		}
		waitFor(t, 20*time.Second, "the discovered stream to drain", func() bool { return h.drained(t) })
		return 2 * n
	}
	admitted := map[string]int{}
	for _, tt := range []struct {
		name  string
		setup func()
		// crawls are the crawls described, by id: true if it has a filter.
		crawls map[string]bool
		table  []string // the table contains
	}{
		{"no crawl yet", func() {}, map[string]bool{},
			[]string{"no crawl yet", "crawler seed", "--crawl ID"}},
		{"crawl default seeded, nothing admitted", func() { registerCrawl(t, h.nats, "default", def) }, map[string]bool{"default": false},
			[]string{"none yet", "crawl default"}},
		{"78 URLs admitted to default", func() { admitted["default"] += publish("default", 39) }, map[string]bool{"default": true},
			[]string{"crawl default", "items", "78"}},
		{"a crawl without a record, known by its counts", func() { admitted["t"] += publish("t", 5) }, map[string]bool{"default": true, "t": true},
			[]string{"crawl default", "crawl t"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.setup()
			// The workers' counts reach Redis within a stats interval.
			var rep report
			waitFor(t, 10*time.Second, "stats --json", func() bool {
				code, out, _ := runCLI(t, "", vars, "stats", "--json")
				rep = report{}
				if code != exitOK || json.Unmarshal([]byte(out), &rep) != nil || rep.Shared == nil {
					return false
				}
				for id, n := range admitted {
					if rep.Shared.Totals.Crawls[id].Admitted != int64(n) {
						return false
					}
				}
				return true
			})
			if len(rep.Crawls) != len(tt.crawls) {
				t.Errorf("stats --json crawls %+v, want %v", rep.Crawls, tt.crawls)
			}
			for _, c := range rep.Crawls {
				hasFilter, ok := tt.crawls[c.Crawl]
				switch {
				case !ok || c.Error != "" || (c.Filter != nil) != hasFilter:
					t.Errorf("stats --json crawl %+v, want filter %v (%v)", c, hasFilter, ok)
				case c.Filter != nil && c.Filter.Items != uint64(admitted[c.Crawl]):
					t.Errorf("crawl %s filter holds %d items, %d admitted", c.Crawl, c.Filter.Items, admitted[c.Crawl])
				case c.Crawl == "default" && c.Filter != nil && (c.Filter.Kind != def.Kind || c.Filter.TargetFPP != def.FPP):
					t.Errorf("crawl default filter %s at fpp %g, want the crawl's own %s at %g", c.Filter.Kind, c.Filter.TargetFPP, def.Kind, def.FPP)
				}
			}
			if _, bad := rep.Errors["filter"]; bad != (len(tt.crawls) == 0) {
				t.Errorf("stats --json errors %q: a filter error only while there is no crawl", rep.Errors)
			}
			code, out, errOut := runCLI(t, "", vars, "stats")
			if code != exitOK || strings.Contains(out, "no worker has run") {
				t.Errorf("stats: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
			}
			for _, want := range tt.table {
				if !strings.Contains(out, want) {
					t.Errorf("stats table lacks %q:\n%s", want, out)
				}
			}
		})
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
