package crawl

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/testsite"
	"github.com/sievecrawl/sieve/warc"
	"github.com/sievecrawl/sieve/warc/warctest"
)

// TestCrawlArchives crawls the test site with an archive: every exchange
// (pages, files, redirects, errors, robots.txt) is in the WARC files, each
// payload byte for byte what the site served, the files valid for the
// Internet Archive's verifier, and one fetch event per fetch names where
// its record is.
func TestCrawlArchives(t *testing.T) {
	site := startSite(t, testsite.Options{Pages: 60})
	const maxDepth = 8
	topo := frontier.Topology{Partitions: 4}
	p := startPipeline(t, topo)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := seed(ctx, p.js, topo, "t1", []string{site.URL}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w, err := warc.Open(warc.Options{Dir: dir, CrawlerID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	opts := fastOptions(topo, maxDepth)
	opts.Logger = testLogger(t)
	opts.Archive = warc.NewRecorder(w, warc.RecorderOptions{})
	c := newCrawler(t, p.js, opts)
	if err := c.Run(ctx); !errors.Is(err, ErrIdle) {
		t.Fatalf("Run = %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkPlan(t, site, site.Plan(maxDepth), 2)

	served := site.Served()
	requests := 0
	for _, d := range served {
		requests += len(d)
	}
	recs := warctest.Records(t, dir)
	byPlace := map[string]warctest.Record{}
	responses := 0
	for _, r := range recs {
		byPlace[r.File+"@"+itoa(r.Offset)] = r
		if r.Get("WARC-Type") != "response" {
			continue
		}
		responses++
		u, _ := url.Parse(r.Get("WARC-Target-URI"))
		status, payload := warctest.Payload(t, r)
		if !contains(served[u.Path], warctest.SHA1(payload)) {
			t.Errorf("%s (%d): archived payload of %d bytes is none the site served", u, status, len(payload))
		}
	}
	if responses != requests {
		t.Errorf("%d response records, the site served %d responses", responses, requests)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	warctest.Verify(t, files...)

	// One event per fetch (robots.txt is not a fetch of the crawl's), each
	// naming its record.
	events := fetchedEvents(t, p.js, topo)
	if want := requests - len(served["/robots.txt"]); len(events) != want {
		t.Errorf("%d fetch events, want %d", len(events), want)
	}
	for _, ev := range events {
		if ev.Status == 0 {
			continue // no response: nothing archived
		}
		r, ok := byPlace[ev.File+"@"+itoa(ev.Offset)]
		if !ok || r.Get("WARC-Target-URI") != ev.URL || ev.Record != "response" {
			t.Errorf("event %+v does not point at its record", ev)
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// fetchedEvents reads every fetch event on the stream.
func fetchedEvents(t *testing.T, js jetstream.JetStream, topo frontier.Topology) []frontier.Fetched {
	t.Helper()
	ctx := t.Context()
	cons, err := js.OrderedConsumer(ctx, topo.FetchedStream(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []frontier.Fetched
	for n := info.NumPending; n > 0; {
		batch, err := cons.FetchNoWait(int(min(n, 500)))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			ev, err := frontier.DecodeFetched(m.Data())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ev)
			got++
		}
		if got == 0 {
			break
		}
		n -= uint64(got)
	}
	return out
}
