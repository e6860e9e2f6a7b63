package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/dust"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
)

// putRules records crawl id (seeds, created) and stores two hosts' learned
// rules for it, as a crawler does, on js.
func putRules(tb testing.TB, js jetstream.JetStream, id string) []dust.HostRules {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topo := frontier.Topology{}
	reg, err := frontier.OpenCrawls(ctx, js, topo)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := reg.Update(ctx, id, func(r *frontier.CrawlRecord) (bool, error) {
		r.Seeds, r.Created, r.Incarnation = []string{"http://shop.example:8080/"}, time.Now(), "inc1"
		return true, nil
	}); err != nil {
		tb.Fatal(err)
	}
	rules, err := frontier.OpenRules(ctx, js, topo)
	if err != nil {
		tb.Fatal(err)
	}
	since := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	recs := []dust.HostRules{
		{Host: "shop.example:8080", Incarnation: "inc1", Revision: 2, Rules: []dust.Learned{
			{Rule: dust.Rule{Kind: dust.KindParam, Arg: "zsid"}, State: dust.Active, Support: 7, Wasted: 3, Saved: 41,
				Examples: [][2]string{{"http://shop.example:8080/p/1?zsid=a1", "http://shop.example:8080/p/1?zsid=b2"}},
				Proposed: since.Add(-time.Minute), Since: since},
			{Rule: dust.Rule{Kind: dust.KindParam, Arg: "color"}, State: dust.Retired, Support: 2, Counter: 1,
				CounterExample: [2]string{"http://shop.example:8080/p/2?color=red", "http://shop.example:8080/p/2?color=blue"}, Since: since},
		}},
		{Host: "docs.example", Incarnation: "inc1", Revision: 1, Rules: []dust.Learned{
			{Rule: dust.Rule{Kind: dust.KindCase}, State: dust.Candidate, Support: 1,
				Examples: [][2]string{{"http://docs.example/Intro.html", "http://docs.example/intro.html"}}, Proposed: since},
		}},
	}
	for _, h := range recs {
		if err := rules.Put(ctx, id, h); err != nil {
			tb.Fatal(err)
		}
	}
	return recs
}

// crawlRecord reads crawl id's record.
func crawlRecord(tb testing.TB, js jetstream.JetStream, id string) frontier.CrawlRecord {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg, err := frontier.OpenCrawls(ctx, js, frontier.Topology{})
	if err != nil {
		tb.Fatal(err)
	}
	rec, err := reg.Get(ctx, id)
	if err != nil {
		tb.Fatal(err)
	}
	return rec
}

// TestRulesCommand runs `crawler rules` against a real NATS server holding
// a crawl's record and learned rules put as a crawler puts them: the
// listing shows every host's rules (state, support, wasted, saved, since,
// first example), --json carries them whole, veto and pin change the
// crawl's record (a veto of a pinned rule unpins it), and a bad rule or an
// unknown crawl is a clear error that changes nothing.
func TestRulesCommand(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	recs := putRules(t, srv.JetStream(), "shop")
	nats := []string{"--nats-url", srv.URL()}
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, t.Context(), append(append([]string{"rules"}, nats...), args...)...)
	}

	code, out, errOut := cli("--crawl", "shop")
	if code != 0 {
		t.Fatalf("rules: exit %d\n%s%s", code, out, errOut)
	}
	since := recs[0].Rules[0].Since.Local().Format(time.DateTime)
	for _, want := range []string{
		"crawl shop: 3 rules learned",
		"HOST", "RULE", "STATE", "SUPPORT", "WASTED", "SAVED", "SINCE", "EXAMPLE",
		"docs.example", "case", "candidate",
		"param:zsid", "active", since, "http://shop.example:8080/p/1?zsid=a1 = http://shop.example:8080/p/1?zsid=b2",
		"param:color", "retired", "differ: http://shop.example:8080/p/2?color=red ≠ http://shop.example:8080/p/2?color=blue",
		"pinned in the crawl's settings: none",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rules output lacks %q:\n%s", want, out)
		}
	}
	// One line per host and rule, hosts sorted: docs.example first.
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 7 || !strings.HasPrefix(lines[2], "docs.example") || !strings.Contains(lines[3], "param:zsid") ||
		!strings.Contains(lines[3], "  7  ") || !strings.Contains(lines[3], "  3  ") || !strings.Contains(lines[3], "  41  ") {
		t.Errorf("rules table:\n%s", out)
	}

	// The configured crawl id is the default; --json has every field.
	code, out, errOut = runCLI(t, t.Context(), append([]string{"rules", "--json", "--crawl-id", "shop"}, nats...)...)
	var got crawlRules
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("rules --json: exit %d\n%s%s", code, out, errOut)
	}
	if got.Crawl != "shop" || len(got.Rules) != 3 || got.Rules[1].Host != "shop.example:8080" || got.Rules[1].Rule != "param:zsid" ||
		got.Rules[1].State != dust.Active || got.Rules[1].Support != 7 || got.Rules[1].Wasted != 3 || got.Rules[1].Saved != 41 ||
		!got.Rules[1].Since.Equal(recs[0].Rules[0].Since) || got.Rules[1].Examples[0] != recs[0].Rules[0].Examples[0] ||
		got.Rules[2].Counter != 1 {
		t.Errorf("rules --json = %+v", got)
	}

	// Veto and pin change the crawl's record, with compare-and-set.
	for _, step := range []struct {
		args       []string
		say        string
		pin, vetos []string
	}{
		{[]string{"pin", "shop.example:8080", "param:zsid"}, "shop.example:8080 param:zsid pinned", []string{"shop.example:8080 param:zsid"}, nil},
		{[]string{"veto", "shop.example:8080 param:zsid"}, "vetoed", nil, []string{"shop.example:8080 param:zsid"}},
		{[]string{"veto", "Shop.Example:8080", "param:zsid"}, "already vetoed", nil, []string{"shop.example:8080 param:zsid"}},
		{[]string{"veto", "*", "param:sessionid"}, "* param:sessionid vetoed", nil, []string{"shop.example:8080 param:zsid", "* param:sessionid"}},
		{[]string{"unveto", "shop.example:8080", "param:zsid"}, "no longer vetoed", nil, []string{"* param:sessionid"}},
		{[]string{"unpin", "docs.example", "case"}, "was not pinned", nil, []string{"* param:sessionid"}},
	} {
		code, out, errOut := cli(append([]string{"--crawl", "shop"}, step.args...)...)
		if code != 0 || !strings.Contains(out, step.say) {
			t.Errorf("rules %q: exit %d, want 0 and %q:\n%s%s", step.args, code, step.say, out, errOut)
		}
		rec := crawlRecord(t, srv.JetStream(), "shop")
		if !slices.Equal(rec.PinRules, step.pin) || !slices.Equal(rec.VetoRules, step.vetos) {
			t.Errorf("after rules %q: pins %q, vetoes %q; want %q, %q", step.args, rec.PinRules, rec.VetoRules, step.pin, step.vetos)
		}
		if len(rec.Seeds) != 1 || rec.Incarnation != "inc1" {
			t.Errorf("after rules %q the record lost its seeds or incarnation: %+v", step.args, rec)
		}
	}
	if _, out, _ := cli("--crawl", "shop"); !strings.Contains(out, "vetoed: * param:sessionid") {
		t.Errorf("the listing does not show the crawl's vetoes:\n%s", out)
	}

	// Bad input: a clear error, usage status 2, nothing changed.
	for _, bad := range []struct {
		args []string
		err  string
	}{
		{[]string{"veto", "shop.example", "param:"}, `dust: bad rule: "param:" needs an argument`},
		{[]string{"veto", "shop.example", "color"}, "unknown kind (param, case, ext, index, slash, dupseg, mirror)"},
		{[]string{"veto", "shop.example"}, `want "host rule"`},
		{[]string{"pin", "*", "case"}, `a pinned rule names its host`},
		{[]string{"forbid", "shop.example", "case"}, `unknown rules command "forbid"`},
		{[]string{"veto", "shop.example", "case", "--json"}, `"--json": flags go before the rules command`},
	} {
		code, out, errOut := cli(append([]string{"--crawl", "shop"}, bad.args...)...)
		if code != 2 || !strings.Contains(errOut, bad.err) {
			t.Errorf("rules %q: exit %d, want 2 and %q:\n%s%s", bad.args, code, bad.err, out, errOut)
		}
	}
	code, out, errOut = cli("--crawl", "nosuch", "veto", "shop.example", "case")
	if code != 1 || !strings.Contains(errOut, "no such crawl: nosuch") {
		t.Errorf("veto in an unknown crawl: exit %d, want 1 and no such crawl:\n%s%s", code, out, errOut)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if reg, err := frontier.OpenCrawls(ctx, srv.JetStream(), frontier.Topology{}); err != nil {
		t.Fatal(err)
	} else if ids, err := reg.IDs(ctx); err != nil || !slices.Equal(ids, []string{"shop"}) {
		t.Errorf("crawls after a veto in an unknown one: %q, %v; want only shop", ids, err)
	}
	if rec := crawlRecord(t, srv.JetStream(), "shop"); !slices.Equal(rec.VetoRules, []string{"* param:sessionid"}) {
		t.Errorf("bad input changed the vetoes: %q", rec.VetoRules)
	}
	if code, out, _ := cli("--crawl", "empty"); code != 0 || !strings.Contains(out, "crawl empty has learned no rules") {
		t.Errorf("rules of a crawl with none: exit %d\n%s", code, out)
	}
}

// TestRulesCommandDataDir runs `crawler rules` on an embedded data dir:
// it opens the dir's own NATS (taking its LOCK) to list and to veto, and
// while another process holds the dir it refuses, naming the holder.
func TestRulesCommandDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := loadSettings(t, "--data-dir", dir, "--embedded")
	js, closeDir, err := openDataDir(s, "test", true)
	if err != nil {
		t.Fatal(err)
	}
	putRules(t, js, "shop")

	// The directory is held (here by the test): the command says so.
	code, out, errOut := runCLI(t, t.Context(), "rules", "--data-dir", dir, "--crawl", "shop", "veto", "shop.example:8080", "param:zsid")
	if code != 1 || !strings.Contains(errOut, "data dir "+dir+" is in use") {
		t.Errorf("rules veto on a held data dir: exit %d, want 1 and in use:\n%s%s", code, out, errOut)
	}
	closeDir()

	code, out, errOut = runCLI(t, t.Context(), "rules", "--data-dir", dir, "--crawl", "shop", "veto", "shop.example:8080", "param:zsid")
	if code != 0 || !strings.Contains(out, "vetoed") {
		t.Fatalf("rules veto --data-dir: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, t.Context(), "rules", "--data-dir", dir, "--crawl", "shop")
	if code != 0 || !strings.Contains(out, "param:zsid") || !strings.Contains(out, "vetoed: shop.example:8080 param:zsid") {
		t.Errorf("rules --data-dir: exit %d\n%s%s", code, out, errOut)
	}
	js, closeDir, err = openDataDir(s, "test", false)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDir()
	if rec := crawlRecord(t, js, "shop"); !slices.Equal(rec.VetoRules, []string{"shop.example:8080 param:zsid"}) {
		t.Errorf("the data dir's record has vetoes %q", rec.VetoRules)
	}
}
