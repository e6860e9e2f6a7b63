package frontier_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
)

// TestNamesPinned pins subjects, stream names and partitioning: crawlers and
// workers of different builds must agree on them. Partition values were
// computed with an independent FNV-1a implementation (Python).
func TestNamesPinned(t *testing.T) {
	var zero frontier.Topology
	custom := frontier.Topology{Prefix: "my-crawl", Partitions: 7}
	tests := []struct{ got, want any }{
		{zero.DiscoveredStream(), "SIEVE_DISCOVERED"},
		{zero.FrontierStream(), "SIEVE_FRONTIER"},
		{zero.Consumer(), "sieve-dedup"},
		{zero.DiscoveredSubject("default"), "sieve.discovered.default"},
		{zero.FrontierSubject("default", 3), "sieve.frontier.default.3"},
		{zero.PartitionFilter(3), "sieve.frontier.*.3"},
		{zero.PartitionConsumer(3), "sieve-crawl-3"},
		{zero.LeaseBucket(), "SIEVE_CRAWLERS"},
		{zero.CrawlsBucket(), "SIEVE_CRAWLS"},
		{zero.RedirectsBucket(), "SIEVE_REDIRECTS"},
		{zero.DiscoveredFilter(), "sieve.discovered.>"},
		{zero.FrontierFilter(), "sieve.frontier.>"},
		{zero.CrawlFrontierFilter("default"), "sieve.frontier.default.>"},
		{custom.DiscoveredStream(), "MY_CRAWL_DISCOVERED"},
		{custom.Consumer(), "my-crawl-dedup"},
		{custom.PartitionConsumer(0), "my-crawl-crawl-0"},
		{custom.LeaseBucket(), "MY_CRAWL_CRAWLERS"},
		{custom.CrawlsBucket(), "MY_CRAWL_CRAWLS"},
		{custom.RedirectsBucket(), "MY_CRAWL_REDIRECTS"},
		{custom.FrontierSubject("x", 0), "my-crawl.frontier.x.0"},
		{zero.Partition("example.com"), 6},
		{zero.Partition("EXAMPLE.com"), 6},
		{zero.Partition("www.example.org"), 8},
		{zero.Partition("a"), 12},
		{custom.Partition("example.com"), 2},
		{custom.Partition("a"), 5},
		// An entry without a queue key is partitioned by its host name, as
		// in version 1: ports and case do not move it.
		{zero.EntryPartition(frontier.Entry{URL: "https://example.com/a"}), 6},
		{zero.EntryPartition(frontier.Entry{URL: "https://EXAMPLE.com:8443/a"}), 6},
		{zero.EntrySubject(frontier.Entry{Crawl: "c", URL: "https://www.example.org/"}), "sieve.frontier.c.8"},
		{zero.EntryPartition(frontier.Entry{URL: "http://[::1]:8080/"}), zero.Partition("::1")},
		// An entry with a key is partitioned by the key.
		{zero.EntryPartition(frontier.Entry{URL: "https://example.com/", Key: "a"}), 12},
		{custom.EntrySubject(frontier.Entry{Crawl: "x", URL: "https://example.com/", Key: "a"}), "my-crawl.frontier.x.5"},
		// One owner per URL: the routed stream, its subjects, consumers
		// and leases, and the route of a canonical URL.
		{zero.RoutedStream(), "SIEVE_ROUTED"},
		{zero.WorkersBucket(), "SIEVE_WORKERS"},
		{zero.RoutedSubject("default", 3), "sieve.routed.default.3"},
		{zero.RoutedFilter(), "sieve.routed.>"},
		{zero.RouteFilter(3), "sieve.routed.*.3"},
		{zero.RouteConsumer(3), "sieve-route-3"},
		{zero.RouteKey(3), "route.3"},
		{custom.RoutedStream(), "MY_CRAWL_ROUTED"},
		{custom.RouteConsumer(0), "my-crawl-route-0"},
		{frontier.Topology{Routes: 16}.Route("default", "https://example.com/"), 9},
		{frontier.Topology{Routes: 16}.Route("c", "https://example.com/a"), 12},
		{frontier.Topology{Routes: 5}.Route("default", "https://example.com/"), 4},
		// The URLFrontier server's buckets and keys.
		{zero.URLFrontierQueuesBucket(), "SIEVE_UF_QUEUES"},
		{custom.URLFrontierNodesBucket(), "MY_CRAWL_UF_NODES"},
		{zero.URLFrontierQueueKey("c", "example.com"), "c.a379a6f6eeafb9a5"},
		{zero.URLFrontierDefaultKey("c"), "c._default"},
		{zero.URLFrontierServerKey("0a1b"), "server.0a1b"},
		{zero.IsURLFrontierNodeKey(zero.URLFrontierNodeKey("127.0.0.1:7071")), true},
		{zero.IsURLFrontierNodeKey(zero.URLFrontierServerKey("0a1b")), false},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("case %d: got %v, want %v", i, tt.got, tt.want)
		}
	}
}

func TestEnsure(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	js := srv.JetStream()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topo := frontier.Topology{Partitions: 4, DuplicateWindow: time.Minute, FrontierMaxMsgs: 100}
	for i := 0; i < 2; i++ { // idempotent
		if err := topo.Ensure(ctx, js); err != nil {
			t.Fatalf("Ensure #%d: %v", i+1, err)
		}
	}
	s, err := js.Stream(ctx, topo.FrontierStream())
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if cfg.Retention != jetstream.WorkQueuePolicy || cfg.Discard != jetstream.DiscardNew || cfg.MaxMsgs != 100 || cfg.Duplicates != time.Minute {
		t.Errorf("frontier stream config %+v", cfg)
	}
	if _, err := js.Consumer(ctx, topo.DiscoveredStream(), topo.Consumer()); err != nil {
		t.Errorf("consumer: %v", err)
	}

	// Settings may change; the partition count may not.
	topo.DuplicateWindow = 2 * time.Minute
	if err := topo.Ensure(ctx, js); err != nil {
		t.Fatalf("Ensure with a longer window: %v", err)
	}
	topo.Partitions = 8
	if err := topo.Ensure(ctx, js); !errors.Is(err, frontier.ErrTopologyMismatch) {
		t.Fatalf("Ensure with other partitions = %v, want ErrTopologyMismatch", err)
	}
}

func TestPublishDiscovered(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	js := srv.JetStream()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topo := frontier.Topology{Limits: frontier.Limits{MaxLinks: 2}}
	if err := topo.Ensure(ctx, js); err != nil {
		t.Fatal(err)
	}
	d := frontier.Discovered{Crawl: "c1", URL: "https://example.com/", Links: []string{"/a", "/b", "/c"}}
	for i := 0; i < 2; i++ { // the second publish is a retry: stored once
		if err := topo.PublishDiscovered(ctx, js, d); err != nil {
			t.Fatalf("PublishDiscovered: %v", err)
		}
	}
	s, err := js.Stream(ctx, topo.DiscoveredStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Errorf("stream holds %d messages, want 2 (3 links split by 2, retry deduplicated)", info.State.Msgs)
	}
	msg, err := s.GetLastMsgForSubject(ctx, topo.DiscoveredSubject("c1"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := frontier.DecodeDiscovered(msg.Data, frontier.Limits{})
	if err != nil || len(got.Links) != 1 || got.Links[0] != "/c" {
		t.Errorf("last part = %+v, %v", got, err)
	}

	var pe *frontier.PoisonError
	if err := topo.PublishDiscovered(ctx, js, frontier.Discovered{Crawl: "bad.crawl", URL: "https://e/"}); !errors.As(err, &pe) {
		t.Errorf("publishing a bad crawl id = %v, want a *PoisonError", err)
	}
}

// TestNamesRoundTrip pins that every name Topology builds, it parses back
// to what built it, for several topologies: a name built one way and parsed
// another fails here.
func TestNamesRoundTrip(t *testing.T) {
	topologies := []frontier.Topology{
		{},                                    // the defaults
		{Prefix: "my-crawl", Partitions: 7},   // a prefix containing "-crawl"
		{Prefix: "frontier", Partitions: 100}, // a prefix named like a token
	}
	crawls := []string{"default", "c", "x-1_Y", "frontier", "discovered", "crawl"}
	for _, topo := range topologies {
		n := topo.WithDefaults().Partitions
		for _, p := range []int{0, 1, n / 2, n - 1} {
			if got, ok := topo.ParsePartitionConsumer(topo.PartitionConsumer(p)); !ok || got != p {
				t.Errorf("%+v: ParsePartitionConsumer(%q) = %d, %v, want %d", topo, topo.PartitionConsumer(p), got, ok, p)
			}
			for _, c := range crawls {
				s := topo.FrontierSubject(c, p)
				if gc, gp, ok := topo.ParseFrontierSubject(s); !ok || gc != c || gp != p {
					t.Errorf("%+v: ParseFrontierSubject(%q) = %q, %d, %v, want %q, %d", topo, s, gc, gp, ok, c, p)
				}
				if _, ok := topo.ParseDiscoveredSubject(s); ok {
					t.Errorf("%+v: ParseDiscoveredSubject(%q) accepted a frontier subject", topo, s)
				}
			}
		}
		for _, c := range crawls {
			s := topo.DiscoveredSubject(c)
			if got, ok := topo.ParseDiscoveredSubject(s); !ok || got != c {
				t.Errorf("%+v: ParseDiscoveredSubject(%q) = %q, %v, want %q", topo, s, got, ok, c)
			}
			if _, _, ok := topo.ParseFrontierSubject(s); ok {
				t.Errorf("%+v: ParseFrontierSubject(%q) accepted a discovered subject", topo, s)
			}
		}
		// An entry's subject parses to its crawl and partition.
		e := frontier.Entry{Crawl: "c", URL: "https://example.com:8080/", Key: "example.com:8080"}
		if c, p, ok := topo.ParseFrontierSubject(topo.EntrySubject(e)); !ok || c != "c" || p != topo.EntryPartition(e) {
			t.Errorf("%+v: ParseFrontierSubject(EntrySubject) = %q, %d, %v", topo, c, p, ok)
		}
	}
}

// TestParseMalformed pins that names Topology did not build are refused.
func TestParseMalformed(t *testing.T) {
	topo := frontier.Topology{Partitions: 16}
	frontierSubjects := []string{
		"",
		"sieve.frontier.c",                      // no partition
		"sieve.frontier.c.",                     // empty partition
		"sieve.frontier..3",                     // empty crawl
		"sieve.frontier.c.16",                   // partition out of range
		"sieve.frontier.c.-1",                   // negative partition
		"sieve.frontier.c.03",                   // not as FrontierSubject writes 3
		"sieve.frontier.c.+3",                   // not as FrontierSubject writes 3
		"sieve.frontier.c.3.4",                  // a token too many
		"sieve.frontier.*.3",                    // a wildcard (PartitionFilter)
		"sieve.frontier.c.>",                    // a wildcard (CrawlFrontierFilter)
		"other.frontier.c.3",                    // another prefix
		"sieve.discovered.c",                    // another kind
		"sieve.frontier.c.99999999999999999999", // overflows int
		"xsieve.frontier.c.3",                   // the prefix is not a token
	}
	for _, s := range frontierSubjects {
		if c, p, ok := topo.ParseFrontierSubject(s); ok {
			t.Errorf("ParseFrontierSubject(%q) = %q, %d, true, want false", s, c, p)
		}
	}
	discoveredSubjects := []string{
		"",
		"sieve.discovered.",    // empty crawl
		"sieve.discovered.a.b", // a token too many
		"sieve.discovered.*",   // a wildcard
		"sieve.discovered.>",   // a wildcard (DiscoveredFilter)
		"other.discovered.c",   // another prefix
		"sieve.frontier.c.3",   // another kind
		"sieve.discovered.c ",  // not a crawl id
	}
	for _, s := range discoveredSubjects {
		if c, ok := topo.ParseDiscoveredSubject(s); ok {
			t.Errorf("ParseDiscoveredSubject(%q) = %q, true, want false", s, c)
		}
	}
	consumers := []string{"", "sieve-dedup", "sieve-crawl-", "sieve-crawl-16", "sieve-crawl-x", "sieve-crawl-01", "other-crawl-1"}
	for _, s := range consumers {
		if p, ok := topo.ParsePartitionConsumer(s); ok {
			t.Errorf("ParsePartitionConsumer(%q) = %d, true, want false", s, p)
		}
	}
}

// TestEntryPartitionFollowsQueueKey pins that all entries of one queue key
// land in one partition, whether the key was given or defaulted.
func TestEntryPartitionFollowsQueueKey(t *testing.T) {
	topo := frontier.Topology{Partitions: 64}
	urls := []string{"https://example.com/", "http://example.com:8080/a", "https://Sub.Example.org:8443/", "http://[2001:db8::1]:81/", "http://[::1]/"}
	for _, u := range urls {
		byHost := frontier.Entry{URL: u}
		byKey := frontier.Entry{URL: "https://elsewhere.example/", Key: byHost.QueueKey()}
		if p, q := topo.EntryPartition(byHost), topo.EntryPartition(byKey); p != q {
			t.Errorf("%s: partition %d by its host, %d with Key %q", u, p, q, byKey.Key)
		}
	}
}

// TestEnsureUpgradesFormat pins that a deployment whose streams an older
// build made (format 1) keeps working: Ensure marks them with the current
// format, and their messages still read. A newer or unknown format is
// refused.
func TestEnsureUpgradesFormat(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	js := srv.JetStream()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topo := frontier.Topology{Partitions: 4}
	for _, cfg := range []jetstream.StreamConfig{topo.DiscoveredConfig(), topo.FrontierConfig()} {
		cfg.Metadata["sieve_format"] = "1" // as a version 1 build made it
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	v1Entry := `{"v":1,"crawl":"c","url":"https://example.com/","depth":0}`
	if _, err := js.Publish(ctx, topo.FrontierSubject("c", 0), []byte(v1Entry)); err != nil {
		t.Fatal(err)
	}
	if err := topo.Ensure(ctx, js); err != nil {
		t.Fatalf("Ensure on format 1 streams: %v", err)
	}
	for _, name := range []string{topo.DiscoveredStream(), topo.FrontierStream()} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Metadata["sieve_format"]; got != strconv.Itoa(frontier.Version) {
			t.Errorf("stream %s: format %q after Ensure, want %d", name, got, frontier.Version)
		}
	}
	s, err := js.Stream(ctx, topo.FrontierStream())
	if err != nil {
		t.Fatal(err)
	}
	msg, err := s.GetLastMsgForSubject(ctx, topo.FrontierSubject("c", 0))
	if err != nil {
		t.Fatal(err)
	}
	if e, err := frontier.DecodeEntry(msg.Data); err != nil || e.URL != "https://example.com/" {
		t.Errorf("format 1 entry after Ensure = %+v, %v", e, err)
	}

	for _, format := range []string{strconv.Itoa(frontier.Version + 1), "0", "two"} {
		cfg := topo.FrontierConfig()
		cfg.Metadata["sieve_format"] = format
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if err := topo.Ensure(ctx, js); !errors.Is(err, frontier.ErrTopologyMismatch) {
			t.Errorf("Ensure on format %s streams = %v, want ErrTopologyMismatch", format, err)
		}
	}
}
