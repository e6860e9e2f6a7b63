package watch

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
)

// TestQueuesByCrawlAndPartition checks that Depths counts each frontier
// message under the crawl and partition its subject names, as Topology
// builds the subject, whatever the prefix.
func TestQueuesByCrawlAndPartition(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	js := srv.JetStream()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A prefix and a crawl named like the subject's "frontier" token.
	topo := frontier.Topology{Prefix: "frontier", Partitions: 5}.WithDefaults()
	if err := topo.Ensure(ctx, js); err != nil {
		t.Fatal(err)
	}
	entries := []frontier.Entry{
		{Crawl: "frontier", URL: "https://example.com/1"},
		{Crawl: "frontier", URL: "https://example.com/2"},
		{Crawl: "frontier", URL: "https://example.org/", Key: "partners"},
		{Crawl: "c2", URL: "https://example.net:8080/"},
	}
	wantPartitions := make([]uint64, topo.Partitions)
	wantCrawls := map[string]uint64{}
	for _, e := range entries {
		data, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, topo.EntrySubject(e), data); err != nil {
			t.Fatal(err)
		}
		wantPartitions[topo.EntryPartition(e)]++
		wantCrawls[e.Crawl]++
	}
	d, err := NewJetStreamQueues(js, topo).Depths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.FrontierQueued != uint64(len(entries)) || !slices.Equal(d.Partitions, wantPartitions) || !maps.Equal(d.Crawls, wantCrawls) {
		t.Errorf("Depths = queued %d, partitions %v, crawls %v; want %d, %v, %v",
			d.FrontierQueued, d.Partitions, d.Crawls, len(entries), wantPartitions, wantCrawls)
	}
}
