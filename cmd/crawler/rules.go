package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/dust"
	"github.com/sievecrawl/sieve/frontier"
)

// The rules command shows what a crawl has learned about which spellings
// of a URL name one page (package dust: the rules in <PREFIX>_RULES) and
// records an operator's veto or pin of a rule in the crawl's record
// (CrawlRecord.VetoRules, PinRules), where crawlers read them.

// rulesEdit is a change `crawler rules veto|pin|unveto|unpin` asks for.
type rulesEdit struct {
	verb string // veto, pin, unveto, unpin
	rule dust.HostRule
}

// rulesVerbs are the changes the rules command makes.
var rulesVerbs = []string{"veto", "pin", "unveto", "unpin"}

// parseRulesArgs reads the rules command's arguments: none (list), or a
// verb and a host rule, as two words ("shop.example param:zsid") or one.
func parseRulesArgs(args []string) (*rulesEdit, error) {
	if len(args) == 0 {
		return nil, nil
	}
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			return nil, fmt.Errorf("%q: flags go before the rules command (crawler rules --crawl ID veto HOST RULE)", a)
		}
	}
	verb := args[0]
	if !slices.Contains(rulesVerbs, verb) {
		return nil, fmt.Errorf("unknown rules command %q: want %s, or no argument to list", verb, strings.Join(rulesVerbs, ", "))
	}
	if len(args) < 2 {
		return nil, fmt.Errorf("rules %s: give HOST RULE (\"shop.example param:zsid\")", verb)
	}
	hr, err := dust.ParseHostRule(strings.Join(args[1:], " "))
	if err != nil {
		return nil, fmt.Errorf("rules %s: %w", verb, err)
	}
	if hr.Host == "" && (verb == "pin" || verb == "unpin") {
		return nil, fmt.Errorf("rules %s: a pinned rule names its host (\"*\", every host, is for vetoes)", verb)
	}
	return &rulesEdit{verb: verb, rule: hr}, nil
}

// ruleRow is one learned rule of one host, as the command prints it.
type ruleRow struct {
	Host string `json:"host"`
	// Rule is the rule as `crawler rules veto HOST RULE` takes it.
	Rule string `json:"rule"`
	dust.Learned
}

// crawlRules is what the rules command shows of a crawl.
type crawlRules struct {
	Crawl string    `json:"crawl"`
	Rules []ruleRow `json:"rules"`
	// Pin and Veto are the crawl record's pinned and vetoed rules.
	Pin  []string `json:"pin,omitempty"`
	Veto []string `json:"veto,omitempty"`
	// Learn is the crawl's setting ("off": it learns nothing); RulesFrom
	// the crawl its rules start from.
	Learn     string `json:"learn,omitempty"`
	RulesFrom string `json:"rules_from,omitempty"`
}

// rulesCommand is `crawler rules`: the learned rules of crawl id, or with
// edit a veto or pin recorded in its record (compare-and-set).
func rulesCommand(ctx context.Context, s settings, id string, edit *rulesEdit, jsonOut bool, stdout io.Writer) error {
	if !frontier.ValidCrawl(id) {
		return fmt.Errorf("crawl id %q: want 1-64 of [A-Za-z0-9_-]", id)
	}
	js, closeConn, err := connectJS(s, "sieve-crawler-rules", false)
	if err != nil {
		return err
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	topo := s.Frontier.Topology()
	reg, err := frontier.LookupCrawls(ctx, js, topo)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if edit != nil {
			return fmt.Errorf("%w: %s (no crawl is recorded)", frontier.ErrNoCrawl, id)
		}
		reg = nil
	} else if err != nil {
		return err
	}
	if edit != nil {
		return editRules(ctx, reg, id, *edit, stdout)
	}
	var rec frontier.CrawlRecord
	if reg != nil {
		if rec, err = reg.Get(ctx, id); err != nil && !errors.Is(err, frontier.ErrNoCrawl) {
			return err
		}
	}
	rules, err := frontier.OpenRules(ctx, js, topo)
	if err != nil {
		return err
	}
	hosts, err := rules.List(ctx, id)
	if err != nil {
		return err
	}
	out := crawlRules{Crawl: id, Rules: ruleRows(hosts), Pin: rec.PinRules, Veto: rec.VetoRules,
		Learn: rec.Settings.Learn, RulesFrom: rec.Settings.RulesFrom}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	printRules(stdout, out)
	return nil
}

// ruleRows flattens hosts' records into one row per host and rule, by
// host and then in the order the record keeps.
func ruleRows(hosts []dust.HostRules) []ruleRow {
	slices.SortFunc(hosts, func(a, b dust.HostRules) int { return cmp.Compare(a.Host, b.Host) })
	rows := []ruleRow{}
	for _, h := range hosts {
		for _, l := range h.Rules {
			rows = append(rows, ruleRow{Host: h.Host, Rule: l.Rule.String(), Learned: l})
		}
	}
	return rows
}

// editRules records edit in the crawl's record with compare-and-set; a
// crawl with no record is an error, and nothing is created.
func editRules(ctx context.Context, reg *frontier.Crawls, id string, edit rulesEdit, stdout io.Writer) error {
	changed := false
	rec, err := reg.Update(ctx, id, func(r *frontier.CrawlRecord) (bool, error) {
		if r.Created.IsZero() && len(r.Seeds) == 0 && r.Incarnation == "" {
			return false, fmt.Errorf("%w: %s", frontier.ErrNoCrawl, id)
		}
		switch edit.verb {
		case "veto":
			changed = r.Veto(edit.rule)
		case "pin":
			changed = r.Pin(edit.rule)
		case "unveto":
			changed = r.Unveto(edit.rule)
		case "unpin":
			changed = r.Unpin(edit.rule)
		}
		return changed, nil
	})
	if err != nil {
		return err
	}
	what := map[string]string{"veto": "vetoed", "pin": "pinned", "unveto": "no longer vetoed", "unpin": "no longer pinned"}[edit.verb]
	if !changed {
		what = "already " + what
		if edit.verb == "unveto" || edit.verb == "unpin" {
			what = map[string]string{"unveto": "was not vetoed", "unpin": "was not pinned"}[edit.verb]
		}
	}
	fmt.Fprintf(stdout, "crawl %s: %s %s\n", id, edit.rule, what)
	fmt.Fprintf(stdout, "  pinned: %s\n  vetoed: %s\n", listOrNone(rec.PinRules), listOrNone(rec.VetoRules))
	if changed {
		fmt.Fprintln(stdout, "Crawlers apply it when they next read the crawl's record.")
	}
	return nil
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// printRules prints a crawl's rules as a table: one line per host and
// rule, with its first example.
func printRules(w io.Writer, cr crawlRules) {
	note := ""
	switch {
	case cr.Learn == "off":
		note = " (it learns no rules: learn off)"
	case cr.RulesFrom != "":
		note = " (it started from crawl " + cr.RulesFrom + "'s rules)"
	}
	if len(cr.Rules) == 0 {
		fmt.Fprintf(w, "crawl %s has learned no rules%s\n", cr.Crawl, note)
	} else {
		fmt.Fprintf(w, "crawl %s: %d rules learned%s\n", cr.Crawl, len(cr.Rules), note)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "HOST\tRULE\tSTATE\tSUPPORT\tWASTED\tSAVED\tSINCE\tEXAMPLE")
		for _, r := range cr.Rules {
			since := "-"
			if !r.Since.IsZero() {
				since = r.Since.Local().Format(time.DateTime)
			}
			example := "-"
			if len(r.Examples) > 0 {
				example = r.Examples[0][0] + " = " + r.Examples[0][1]
			}
			if r.CounterExample != [2]string{} {
				example += "; differ: " + r.CounterExample[0] + " ≠ " + r.CounterExample[1]
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", r.Host, r.Rule, r.State, r.Support, r.Wasted, r.Saved, since, example)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "pinned in the crawl's settings: %s\nvetoed: %s\n", listOrNone(cr.Pin), listOrNone(cr.Veto))
}
