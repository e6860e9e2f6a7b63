package crawl

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	dir := t.TempDir()
	_, _, js := archiveCrawlOn(t, site, dir, nil)
	topo := frontier.Topology{Partitions: 4}
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
		if !slices.Contains(served[u.Path], warctest.SHA1(payload)) {
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
	events := fetchedEvents(t, js, topo)
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

// archiveCrawl crawls site as crawl "t1" on a fresh pipeline (so every
// page is new to its filter, as after a revisit window), archiving to dir
// with the given captures, and returns the files it wrote.
func archiveCrawl(t *testing.T, site *testsite.Site, dir string, caps warc.Captures) ([]string, Stats) {
	t.Helper()
	files, st, _ := archiveCrawlOn(t, site, dir, caps)
	return files, st
}

// archiveCrawlOn is archiveCrawl, also returning the pipeline's JetStream.
func archiveCrawlOn(t *testing.T, site *testsite.Site, dir string, caps warc.Captures) ([]string, Stats, jetstream.JetStream) {
	t.Helper()
	before, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	topo := frontier.Topology{Partitions: 4}
	p := startPipeline(t, topo)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := seed(ctx, p.js, topo, "t1", []string{site.URL}); err != nil {
		t.Fatal(err)
	}
	w, err := warc.Open(warc.Options{Dir: dir, CrawlerID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	opts := fastOptions(topo, 8)
	opts.Logger = testLogger(t)
	opts.Archive = warc.NewRecorder(w, warc.RecorderOptions{Captures: caps})
	c := newCrawler(t, p.js, opts)
	if err := c.Run(ctx); !errors.Is(err, ErrIdle) {
		t.Fatalf("Run = %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	after, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	var added []string
	for _, f := range after {
		if !slices.Contains(before, f) {
			added = append(added, f)
		}
	}
	return added, c.Stats(), p.js
}

func filesBytes(t *testing.T, files []string) int64 {
	t.Helper()
	var n int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

// TestRevisitStoresOnlyChanges crawls a site of realistic pages (30 KB of
// HTML) twice with the same captures, as a revisit window does. The second
// crawl asks conditionally; a server that validates answers 304, one that
// does not sends the same bytes again: either way the pages are written as
// revisit records pointing at the first capture, the crawl still goes past
// them (the links come from the first capture), and the second crawl
// writes at most 10 % of the first's bytes.
func TestRevisitStoresOnlyChanges(t *testing.T) {
	for _, tc := range []struct {
		name       string
		validators bool
		profile    string
	}{
		{"server-not-modified", true, warc.ProfileServerNotModified},
		{"identical-payload", false, warc.ProfileIdenticalPayload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := startSite(t, testsite.Options{Pages: 100, PageBytes: 60_000, Validators: tc.validators})
			caps, dir := warc.NewMemCaptures(), t.TempDir()
			first, st1 := archiveCrawl(t, site, dir, caps)
			served1 := site.Fetches()
			second, st2 := archiveCrawl(t, site, dir, caps)
			for path, n := range site.Fetches() {
				if path != "/robots.txt" && n != 2*served1[path] && !strings.HasPrefix(path, "/broken/") && !strings.HasPrefix(path, "/flaky/") {
					t.Errorf("%s fetched %d times in two crawls, %d in the first", path, n, served1[path])
				}
			}
			if tc.validators && st2.Unchanged == 0 {
				t.Error("no 304 in the revisit crawl")
			}
			b1, b2 := filesBytes(t, first), filesBytes(t, second)
			t.Logf("first crawl %d bytes (%d fetched), revisit %d bytes (%d fetched): %.1f%%", b1, st1.Fetched, b2, st2.Fetched, 100*float64(b2)/float64(b1))
			if b2*10 > b1 {
				t.Errorf("revisit crawl wrote %d bytes, more than 10%% of the first crawl's %d", b2, b1)
			}
			payloads := map[string]string{} // URL → the first crawl's record date
			for _, r := range warctest.ReadFiles(t, first...) {
				if r.Get("WARC-Type") == "response" {
					payloads[r.Get("WARC-Target-URI")] = r.Get("WARC-Date")
				}
			}
			revisits := 0
			for _, r := range warctest.ReadFiles(t, second...) {
				if r.Get("WARC-Type") != "revisit" {
					continue
				}
				revisits++
				ref := r.Get("WARC-Refers-To-Target-URI")
				if r.Get("WARC-Profile") != tc.profile && r.Get("WARC-Profile") != warc.ProfileIdenticalPayload {
					t.Errorf("revisit of %s: profile %s", r.Get("WARC-Target-URI"), r.Get("WARC-Profile"))
				}
				if date, ok := payloads[ref]; !ok || date != r.Get("WARC-Refers-To-Date") {
					t.Errorf("revisit of %s refers to %s at %s, which the first crawl did not store", r.Get("WARC-Target-URI"), ref, r.Get("WARC-Refers-To-Date"))
				}
			}
			if int64(revisits) < st1.Pages {
				t.Errorf("%d revisit records for %d pages", revisits, st1.Pages)
			}
			warctest.Verify(t, second...)
		})
	}
}

// TestSitemaps crawls a site whose robots.txt names a sitemap index: the
// index, a gzipped XML sitemap and a text one are each fetched once and
// archived, the pages only they list are crawled, and the malformed
// sitemap and the bad line are counted by reason, not fatal.
func TestSitemaps(t *testing.T) {
	site := startSite(t, testsite.Options{Pages: 30, Sitemaps: true})
	dir := t.TempDir()
	_, st, _ := archiveCrawlOn(t, site, dir, nil)
	got := site.Fetches()
	for _, p := range []string{"/sitemap_index.xml", "/sitemap-1.xml.gz", "/sitemap-2.txt", "/sitemap-bad.xml"} {
		if got[p] != 1 {
			t.Errorf("%s fetched %d times, want 1", p, got[p])
		}
	}
	for i := range testsite.Orphans {
		if p := "/orphan/" + strconv.Itoa(i); got[p] != 1 {
			t.Errorf("%s (listed only in a sitemap) fetched %d times, want 1", p, got[p])
		}
	}
	// The index lists 3 sitemaps; they list the orphans, /p/0, and /p/1
	// before the malformed one breaks off.
	if want := int64(3 + testsite.Orphans + 1 + 1); st.Sitemaps != 4 || st.SitemapURLs != want {
		t.Errorf("sitemaps read %d listing %d URLs, want 4 listing %d", st.Sitemaps, st.SitemapURLs, want)
	}
	if st.SitemapInvalid["malformed_xml"] != 1 || st.SitemapInvalid["bad_url"] != 1 {
		t.Errorf("invalid sitemaps by reason: %v, want malformed_xml 1 and bad_url 1", st.SitemapInvalid)
	}
	archivedPaths := map[string]bool{}
	for _, r := range warctest.Records(t, dir) {
		if r.Get("WARC-Type") == "response" {
			u, _ := url.Parse(r.Get("WARC-Target-URI"))
			archivedPaths[u.Path] = true
		}
	}
	if !archivedPaths["/sitemap-1.xml.gz"] || !archivedPaths["/orphan/3"] {
		t.Error("sitemaps and the pages they list are not archived")
	}
}
