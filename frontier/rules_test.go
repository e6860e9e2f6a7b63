package frontier_test

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/dust"
	"github.com/sievecrawl/sieve/frontier"
)

// TestRulesBucket stores, lists, follows and deletes a crawl's learned
// rules on a real NATS server: what one process writes, another follows.
func TestRulesBucket(t *testing.T) {
	p := newPipeline(t, frontier.Topology{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	writer, err := frontier.OpenRules(ctx, p.js, p.topo)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := frontier.OpenRules(ctx, p.js, p.topo)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if err := reader.Follow(ctx, nil); err != nil {
		t.Fatal(err)
	}
	<-reader.Ready()
	shop := dust.HostRules{Host: "shop.test:8080", Revision: 1, Rules: []dust.Learned{
		{Rule: dust.Rule{Kind: dust.KindParam, Arg: "zsid"}, State: dust.Active, Support: 3}}}
	mirror := dust.HostRules{Host: "mirror.test", Revision: 1, Rules: []dust.Learned{
		{Rule: dust.Rule{Kind: dust.KindMirror, Arg: "shop.test:8080"}, State: dust.Active, Support: 3}}}
	for _, h := range []dust.HostRules{shop, mirror} {
		if err := writer.Put(ctx, "c1", h); err != nil {
			t.Fatal(err)
		}
	}
	if err := writer.Put(ctx, "c2", dust.HostRules{Host: "other.test", Rules: []dust.Learned{
		{Rule: dust.Rule{Kind: dust.KindCase}, State: dust.Active}}}); err != nil {
		t.Fatal(err)
	}
	got, err := writer.List(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, h := range got {
		hosts = append(hosts, h.Host)
	}
	sort.Strings(hosts)
	if len(hosts) != 2 || hosts[0] != "mirror.test" || hosts[1] != "shop.test:8080" {
		t.Errorf("List(c1) hosts = %v", hosts)
	}
	want := "http://shop.test:8080/p?id=1"
	deadline := time.Now().Add(10 * time.Second)
	for reader.Set("c1").Key("http://mirror.test/p?id=1&zsid=ab") != want {
		if time.Now().After(deadline) {
			t.Fatalf("follower: Key = %q, want %q", reader.Set("c1").Key("http://mirror.test/p?id=1&zsid=ab"), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if k := reader.Set("c2").Key("http://shop.test:8080/A?zsid=1"); k != "http://shop.test:8080/A?zsid=1" {
		t.Errorf("crawl c2 takes c1's rules: %q", k)
	}
	// A record of a newer format is refused by List, not skipped.
	if _, err := p.js.KeyValue(ctx, p.topo.RulesBucket()); err != nil {
		t.Fatal(err)
	}
	kv, _ := p.js.KeyValue(ctx, p.topo.RulesBucket())
	if _, err := kv.Put(ctx, frontier.RulesKey("c3", "new.test"), []byte(`{"v":99,"host":"new.test","rules":[]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.List(ctx, "c3"); !errors.Is(err, dust.ErrNewerRecord) {
		t.Errorf("List of a newer record: %v, want ErrNewerRecord", err)
	}
	// Deleting the crawl's rules reaches the follower.
	if err := writer.Delete(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if got, err := writer.List(ctx, "c1"); err != nil || len(got) != 0 {
		t.Errorf("List after Delete = %v, %v", got, err)
	}
	for reader.Set("c1").Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("follower kept a deleted crawl's rules")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWorkerAdmitsByRules runs a worker on a real NATS server with a
// crawl's learned rules: spellings of one page under the rules are admitted
// once, published as first found; other crawls and hosts are untouched.
func TestWorkerAdmitsByRules(t *testing.T) {
	p := newPipeline(t, frontier.Topology{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rules, err := frontier.OpenRules(ctx, p.js, p.topo)
	if err != nil {
		t.Fatal(err)
	}
	if err := rules.Put(ctx, "c1", dust.HostRules{Host: "shop.test", Revision: 1, Rules: []dust.Learned{
		{Rule: dust.Rule{Kind: dust.KindParam, Arg: "zsid"}, State: dust.Active}}}); err != nil {
		t.Fatal(err)
	}
	w := newWorker(t, p, newMemoryFilter(t), nil, frontier.WorkerOptions{Rules: rules})
	runWorker(t, w)
	links := []string{"http://shop.test/p?id=1&zsid=a", "http://shop.test/p?id=1&zsid=b", "http://shop.test/p?zsid=c&id=1",
		"http://shop.test/p?id=2&zsid=a", "http://other.test/p?id=1&zsid=a", "http://other.test/p?id=1&zsid=b"}
	p.publish(t, frontier.Discovered{Crawl: "c1", URL: "http://shop.test/", Links: links},
		frontier.Discovered{Crawl: "c2", URL: "http://shop.test/", Links: links[:2]})
	p.waitDrained(t, 20*time.Second)
	got := map[string][]string{}
	for _, m := range p.take(t, 0) {
		got[m.entry.Crawl] = append(got[m.entry.Crawl], m.entry.URL)
	}
	sort.Strings(got["c1"])
	want := []string{"http://other.test/p?id=1&zsid=a", "http://other.test/p?id=1&zsid=b", "http://shop.test/p?id=1&zsid=a", "http://shop.test/p?id=2&zsid=a"}
	if len(got["c1"]) != len(want) {
		t.Fatalf("c1 admitted %v, want %v", got["c1"], want)
	}
	for i := range want {
		if got["c1"][i] != want[i] {
			t.Errorf("c1 admitted %v, want %v", got["c1"], want)
			break
		}
	}
	if len(got["c2"]) != 2 {
		t.Errorf("c2 (no rules) admitted %v, want both spellings", got["c2"])
	}
}
