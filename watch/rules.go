package watch

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/sievecrawl/sieve/dust"
)

// Rules reads a crawl's learned rewrite rules, one record per host
// (*frontier.Rules).
type Rules interface {
	List(ctx context.Context, crawl string) ([]dust.HostRules, error)
}

// CrawlRules is what the page shows of one crawl's learned rules: how many
// there are by state, and the rules that matter most (most fetches saved,
// then wasted, then support), at most MaxRulesShown.
type CrawlRules struct {
	// Hosts is the number of hosts with a record, Count the rules in them,
	// States the rules by state (candidate, active, retired, pinned,
	// vetoed).
	Hosts  int            `json:"hosts"`
	Count  int            `json:"count"`
	States map[string]int `json:"states,omitempty"`
	// Saved and Wasted are the fetches every rule of the crawl saved, and
	// cost before it was active.
	Saved  int64      `json:"saved"`
	Wasted int64      `json:"wasted"`
	Top    []RuleView `json:"top"`
	// At is when the rules were read.
	At time.Time `json:"at"`
}

// RuleView is one learned rule of one host, as the page lists it.
type RuleView struct {
	Host    string `json:"host"`
	Rule    string `json:"rule"`
	State   string `json:"state"`
	Support int    `json:"support"`
	Counter int    `json:"counter,omitempty"`
	Saved   int    `json:"saved"`
	Wasted  int    `json:"wasted"`
	// Since is when it took its state.
	Since time.Time `json:"since,omitzero"`
	// Example is the first pair of spellings it merged; CounterExample
	// the first pair it would merge whose pages differ.
	Example        [2]string `json:"example,omitzero"`
	CounterExample [2]string `json:"counter_example,omitzero"`
}

// MaxRulesShown bounds the rules a Report lists per crawl, and
// MaxRuleCrawls the crawls whose rules it reads: a crawl of many hosts
// keeps /stats small.
const (
	MaxRulesShown = 50
	MaxRuleCrawls = 20
)

// summarizeRules turns a crawl's records into what the page shows.
func summarizeRules(recs []dust.HostRules, at time.Time) *CrawlRules {
	cr := &CrawlRules{Hosts: len(recs), States: map[string]int{}, Top: []RuleView{}, At: at}
	for _, h := range recs {
		for _, l := range h.Rules {
			cr.Count++
			cr.States[string(l.State)]++
			cr.Saved += int64(l.Saved)
			cr.Wasted += int64(l.Wasted)
			v := RuleView{Host: h.Host, Rule: l.Rule.String(), State: string(l.State), Support: l.Support, Counter: l.Counter,
				Saved: l.Saved, Wasted: l.Wasted, Since: l.Since, CounterExample: l.CounterExample}
			if len(l.Examples) > 0 {
				v.Example = l.Examples[0]
			}
			cr.Top = append(cr.Top, v)
		}
	}
	slices.SortFunc(cr.Top, func(a, b RuleView) int {
		return cmp.Or(cmp.Compare(b.Saved, a.Saved), cmp.Compare(b.Wasted, a.Wasted), cmp.Compare(b.Support, a.Support),
			cmp.Compare(a.Host, b.Host), cmp.Compare(a.Rule, b.Rule))
	})
	cr.Top = slices.Clip(cr.Top[:min(len(cr.Top), MaxRulesShown)])
	return cr
}

// readRules reads the learned rules of the crawls in r (the crawler's,
// the queues' and the counters' crawls, at most MaxRuleCrawls), or keeps
// prev's when they were read less than Options.RulesEvery ago: the page's
// polls never reach the store, and the store is asked at most once per
// RulesEvery, whoever watches. A crawl whose rules cannot be read keeps
// what was read before, and the failure is reported under "rules".
func (s *Server) readRules(ctx context.Context, r *Report, prev Report, now time.Time) {
	if s.src.Rules == nil {
		return
	}
	s.mu.Lock()
	due := now.Sub(s.rulesAt) >= s.opts.RulesEvery
	s.mu.Unlock()
	if !due {
		r.Rules = prev.Rules
		if err := prev.Errors["rules"]; err != "" {
			r.fail("rules", errors.New(err))
		}
		return
	}
	ids := map[string]bool{}
	if r.Crawler != nil {
		for id := range r.Crawler.Crawls {
			ids[id] = true
		}
	}
	if r.Streams != nil {
		for id := range r.Streams.Crawls {
			ids[id] = true
		}
	}
	if r.Shared != nil {
		for id := range r.Shared.Totals.Crawls {
			ids[id] = true
		}
	}
	sorted := slices.Sorted(maps.Keys(ids))
	r.Rules = map[string]*CrawlRules{}
	var failed error
	for _, id := range sorted[:min(len(sorted), MaxRuleCrawls)] {
		recs, err := s.src.Rules.List(ctx, id)
		if err != nil {
			failed = err
			if old := prev.Rules[id]; old != nil {
				r.Rules[id] = old
			}
			continue
		}
		if len(recs) > 0 {
			r.Rules[id] = summarizeRules(recs, now)
		}
	}
	if failed != nil {
		r.fail("rules", failed)
	}
	s.mu.Lock()
	s.rulesAt = now
	s.mu.Unlock()
}
