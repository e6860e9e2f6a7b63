package frontier

import (
	"slices"

	"github.com/sievecrawl/sieve/dust"
)

// An operator's say over a crawl's learned rules is kept in its record as
// "host rule" strings (PinRules, VetoRules), which crawlers read when they
// start the crawl. The methods below change them as `crawler rules veto|pin`
// does, under Crawls.Update's compare-and-set: each reports whether it
// changed the record, so an Update that changes nothing writes nothing.
// Entries are compared as dust.ParseHostRule reads them (the host's case
// and "*" for every host do not matter) and stored as dust.HostRule.String
// writes them; an entry that does not parse is kept as it is.

// Veto forbids rule: it is added to VetoRules, and taken out of PinRules
// (a rule cannot be both).
func (r *CrawlRecord) Veto(rule dust.HostRule) bool {
	removed := removeHostRule(&r.PinRules, rule)
	return addHostRule(&r.VetoRules, rule) || removed
}

// Pin makes rule active whatever is seen: it is added to PinRules, and
// taken out of VetoRules.
func (r *CrawlRecord) Pin(rule dust.HostRule) bool {
	removed := removeHostRule(&r.VetoRules, rule)
	return addHostRule(&r.PinRules, rule) || removed
}

// Unveto takes rule out of VetoRules.
func (r *CrawlRecord) Unveto(rule dust.HostRule) bool { return removeHostRule(&r.VetoRules, rule) }

// Unpin takes rule out of PinRules.
func (r *CrawlRecord) Unpin(rule dust.HostRule) bool { return removeHostRule(&r.PinRules, rule) }

func sameHostRule(s string, rule dust.HostRule) bool {
	hr, err := dust.ParseHostRule(s)
	return err == nil && hr == rule
}

func addHostRule(list *[]string, rule dust.HostRule) bool {
	if slices.ContainsFunc(*list, func(s string) bool { return sameHostRule(s, rule) }) {
		return false
	}
	*list = append(*list, rule.String())
	return true
}

func removeHostRule(list *[]string, rule dust.HostRule) bool {
	n := len(*list)
	*list = slices.DeleteFunc(*list, func(s string) bool { return sameHostRule(s, rule) })
	if len(*list) == 0 {
		*list = nil
	}
	return len(*list) != n
}
