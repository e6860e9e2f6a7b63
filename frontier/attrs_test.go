package frontier_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/frontier"
)

// TestWorkerCarriesLinkAttrs checks that an admitted link's kind, queue key
// and metadata reach its frontier entry, on the subject of its queue key.
func TestWorkerCarriesLinkAttrs(t *testing.T) {
	p := newPipeline(t, frontier.Topology{Partitions: 4})
	d := frontier.Discovered{Crawl: "c", URL: "https://example.com/"}
	d.Add(frontier.Link{URL: "/plain"})
	d.Add(frontier.Link{URL: "/s", Kind: frontier.LinkSitemap, Key: "partners", Meta: frontier.Metadata{"a": {"b"}}})
	p.publish(t, d)
	stop := runWorker(t, newWorker(t, p, newMemoryFilter(t), nil, frontier.WorkerOptions{}))
	p.waitDrained(t, 20*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	want := map[string]frontier.Entry{
		"https://example.com/plain": {V: frontier.Version, Crawl: "c", URL: "https://example.com/plain", Depth: 1, From: "https://example.com/"},
		"https://example.com/s": {V: frontier.Version, Crawl: "c", URL: "https://example.com/s", Depth: 1, From: "https://example.com/",
			Kind: frontier.LinkSitemap, Key: "partners", Meta: frontier.Metadata{"a": {"b"}}},
	}
	got := p.take(t, 0)
	if len(got) != len(want) {
		t.Fatalf("frontier holds %d entries, want %d", len(got), len(want))
	}
	for _, m := range got {
		if w := want[m.entry.URL]; !reflect.DeepEqual(m.entry, w) || m.subject != p.topo.EntrySubject(w) {
			t.Errorf("entry %+v on %s, want %+v on %s", m.entry, m.subject, w, p.topo.EntrySubject(w))
		}
	}
}
