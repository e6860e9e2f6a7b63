package crawl

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/testsite"
)

// TestCrawlerCountsOutcomes crawls the test site with a Prometheus registry
// and checks that the outcomes add up to what the site served, that the
// crawl's own counts equal the totals (one crawl), and that the metrics say
// what Stats says.
func TestCrawlerCountsOutcomes(t *testing.T) {
	site := startSite(t, testsite.Options{Pages: 40})
	topo := frontier.Topology{Partitions: 2}
	p := startPipeline(t, topo)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := seed(ctx, p.js, topo, "m1", []string{site.URL}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	opts := fastOptions(topo, 6)
	opts.Registerer = reg
	c := newCrawler(t, p.js, opts)
	if err := c.Run(ctx); !errors.Is(err, ErrIdle) {
		t.Fatalf("Run = %v, want %v", err, ErrIdle)
	}
	st := c.Stats()
	plan := site.Plan(6)

	served := map[string]int64{}
	for path, n := range site.Fetches() {
		if path == "/robots.txt" {
			continue
		}
		served[""] += int64(n)
		for _, b := range plan.Broken {
			if b == path {
				served[Outcome5xx] += int64(n)
			}
		}
		for _, f := range plan.Flaky {
			if f == path {
				served[Outcome5xx]++ // the 503 before the page
			}
		}
	}
	responses := st.Outcomes[Outcome2xx] + st.Outcomes[Outcome3xx] + st.Outcomes[Outcome4xx] + st.Outcomes[Outcome5xx]
	for _, tc := range []struct {
		what      string
		got, want int64
	}{
		{"responses by status class", responses, st.Fetched},
		{"responses", st.Fetched, served[""]},
		{"5xx outcomes", st.Outcomes[Outcome5xx], served[Outcome5xx]},
		{"robots outcomes", st.Outcomes[OutcomeRobots], st.Failed[ReasonRobots]},
		{"retries", Sum(st.Retried), served[Outcome5xx] - int64(len(plan.Broken))},
		{"crawl m1 fetched", st.Crawls["m1"].Fetched, st.Fetched},
		{"crawl m1 retried", st.Crawls["m1"].Retried, Sum(st.Retried)},
		{"crawl m1 failed", st.Crawls["m1"].Failed, Sum(st.Failed)},
		{"crawl m1 links", st.Crawls["m1"].Links, st.Links},
		{"hosts", int64(st.HostCount), 1},
		{"top host fetched", st.TopHosts[0].Fetched, st.Fetched},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.what, tc.got, tc.want)
		}
	}
	if st.Outcomes[Outcome2xx] == 0 || st.Outcomes[Outcome3xx] == 0 || st.Outcomes[Outcome4xx] == 0 || st.Outcomes[OutcomeRobots] == 0 {
		t.Errorf("outcomes %v: the test site has pages, redirects, 404s and disallowed paths", st.Outcomes)
	}

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range families {
		byName[f.GetName()] = f
	}
	for _, o := range Outcomes() {
		if got := counterValue(byName["sieve_crawl_fetches_total"], map[string]string{"crawl": "m1", "outcome": o}); int64(got) != st.Outcomes[o] {
			t.Errorf("sieve_crawl_fetches_total{crawl=m1,outcome=%s} = %v, want %d", o, got, st.Outcomes[o])
		}
	}
	if got := counterValue(byName["sieve_crawl_links_published_total"], map[string]string{"crawl": "m1"}); int64(got) != st.Links {
		t.Errorf("sieve_crawl_links_published_total = %v, want %d", got, st.Links)
	}
	h := byName["sieve_crawl_fetch_seconds"]
	if h == nil || len(h.Metric) != 1 {
		t.Fatalf("sieve_crawl_fetch_seconds missing: %v", h)
	}
	// Every response was one HTTP exchange; failures without a response
	// may have been one too.
	if n := int64(h.Metric[0].GetHistogram().GetSampleCount()); n < st.Fetched || n > st.Fetched+st.Outcomes[OutcomeFailed] {
		t.Errorf("fetch_seconds observed %d exchanges, want %d responses (+ up to %d failures)", n, st.Fetched, st.Outcomes[OutcomeFailed])
	}
}

// counterValue returns the counter of f whose labels include want (0 if none).
func counterValue(f *dto.MetricFamily, want map[string]string) float64 {
	if f == nil {
		return 0
	}
next:
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		return m.GetCounter().GetValue()
	}
	return 0
}

func TestStatsBoundsHostsAndCrawls(t *testing.T) {
	c := newCounters(nil)
	for i := range maxHosts + 5 {
		c.fetched("c", "h"+string(rune('a'+i%26))+time.Duration(i).String(), &Page{Status: 200})
	}
	for i := range maxCrawls + 3 {
		c.retry(time.Duration(i).String(), ReasonTimeout)
	}
	st := c.snapshot()
	if st.HostCount != maxHosts+1 {
		t.Errorf("HostCount = %d, want %d (the rest under %q)", st.HostCount, maxHosts+1, otherKey)
	}
	if len(st.TopHosts) != TopHostsShown || st.TopHosts[0].Host != otherKey || st.TopHosts[0].Fetched != 5 {
		t.Errorf("TopHosts: %d shown, first %+v; want %d, %q with 5", len(st.TopHosts), st.TopHosts[0], TopHostsShown, otherKey)
	}
	if len(st.Crawls) != maxCrawls+1 || st.Crawls[otherKey].Retried != 4 {
		t.Errorf("Crawls: %d, other %+v; want %d, other with 4 retries", len(st.Crawls), st.Crawls[otherKey], maxCrawls+1)
	}
}
