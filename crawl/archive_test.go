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
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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
	return revisitCrawl(t, site, dir, caps, nil, nil)
}

// revisitCrawl is archiveCrawlOn for a crawl whose record lists the WARC
// directories of its earlier runs (earlier), as a crawl's record does
// after those runs, counting into reg if not nil.
func revisitCrawl(t *testing.T, site *testsite.Site, dir string, caps warc.Captures, earlier []string, reg prometheus.Registerer) ([]string, Stats, jetstream.JetStream) {
	t.Helper()
	before, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	topo := frontier.Topology{Partitions: 4}
	p := startPipeline(t, topo)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := seed(ctx, p.js, topo, "t1", []string{site.URL}); err != nil {
		t.Fatal(err)
	}
	if len(earlier) > 0 {
		reg, err := frontier.OpenCrawls(ctx, p.js, topo)
		if err != nil {
			t.Fatal(err)
		}
		_, err = reg.Update(ctx, "t1", func(rec *frontier.CrawlRecord) (bool, error) {
			changed := false
			for _, d := range earlier {
				changed = rec.AddArchive(d) || changed
			}
			return changed, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	w, err := warc.Open(warc.Options{Dir: dir, CrawlerID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	opts := fastOptions(topo, 8)
	opts.Logger = testLogger(t)
	opts.Registerer = reg
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

// fetchedAsOften checks that every page of site was fetched as often in the
// second crawl as in the first (first: the site's fetches after it): no
// page's links were lost.
func fetchedAsOften(t *testing.T, site *testsite.Site, first map[string]int) {
	t.Helper()
	for path, n := range site.Fetches() {
		if path != "/robots.txt" && n != 2*first[path] && !strings.HasPrefix(path, "/broken/") && !strings.HasPrefix(path, "/flaky/") {
			t.Errorf("%s fetched %d times in two crawls, %d in the first", path, n, first[path])
		}
	}
}

// responses returns the response records of files by URL and date, as
// revisit records refer to them, and checks that webrecorder's warcio
// lists each at the same offset.
func responses(t *testing.T, files []string) map[string]warctest.Record {
	t.Helper()
	byWarcio := map[string]bool{}
	for _, f := range files {
		for _, l := range warctest.Index(t, f) {
			byWarcio[l.Type+" "+l.URI+" "+filepath.Base(f)+"@"+itoa(l.Offset)] = true
		}
	}
	out := map[string]warctest.Record{}
	for _, r := range warctest.ReadFiles(t, files...) {
		if r.Get("WARC-Type") != "response" {
			continue
		}
		out[r.Get("WARC-Target-URI")+" "+r.Get("WARC-Date")] = r
		if !byWarcio["response "+r.Get("WARC-Target-URI")+" "+filepath.Base(r.File)+"@"+itoa(r.Offset)] {
			t.Errorf("warcio does not list the response record of %s at %d of %s", r.Get("WARC-Target-URI"), r.Offset, r.File)
		}
	}
	return out
}

// TestRevisitAcrossDirectories crawls a site into one WARC directory,
// then, as after the revisit window, into another (one directory per run,
// as archives are kept): every page is revisited, each revisit record
// points at a response record that exists in the first directory (read
// by warctest and listed by warcio; both directories valid for the
// Internet Archive's verifier), the second crawl goes past unchanged
// pages with the links read from the first directory, and nothing is
// fetched in full for want of a readable capture.
func TestRevisitAcrossDirectories(t *testing.T) {
	for _, tc := range []struct {
		name       string
		validators bool
	}{
		{"server-not-modified", true},
		{"identical-payload", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := startSite(t, testsite.Options{Pages: 100, Validators: tc.validators})
			caps, dir1, dir2 := warc.NewMemCaptures(), t.TempDir(), t.TempDir()
			first, st1 := archiveCrawl(t, site, dir1, caps)
			served1 := site.Fetches()
			second, st2, _ := revisitCrawl(t, site, dir2, caps, []string{dir1}, nil)
			fetchedAsOften(t, site, served1)
			if tc.validators && st2.Unchanged < st1.Pages {
				t.Errorf("%d 304s in the revisit crawl, for %d pages", st2.Unchanged, st1.Pages)
			}
			if len(st2.Refetched) > 0 {
				t.Errorf("fetched in full for want of a readable capture: %v", st2.Refetched)
			}
			payloads := responses(t, first)
			revisits := 0
			for _, r := range warctest.ReadFiles(t, second...) {
				if r.Get("WARC-Type") != "revisit" {
					continue
				}
				revisits++
				ref := r.Get("WARC-Refers-To-Target-URI") + " " + r.Get("WARC-Refers-To-Date")
				if _, ok := payloads[ref]; !ok {
					t.Errorf("revisit of %s refers to %s, no response record of the first directory", r.Get("WARC-Target-URI"), ref)
				}
			}
			if int64(revisits) < st1.Pages {
				t.Errorf("%d revisit records for %d pages", revisits, st1.Pages)
			}
			t.Logf("first crawl: %d pages into %s; second: %d revisit records into %s, %d 304s", st1.Pages, dir1, revisits, dir2, st2.Unchanged)
			warctest.Verify(t, first...)
			warctest.Verify(t, second...)
		})
	}
}

// TestRevisitUnreadableCapture crawls a site into one directory, makes its
// file unreadable (deleted; every response record corrupted), and crawls
// it again into another: every page whose last capture cannot be read is
// fetched again in full (an unconditional request, a response record),
// counted by reason in Stats and the metrics, and no page's links are
// lost.
func TestRevisitUnreadableCapture(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, files []string)
		reason string
	}{
		{"deleted", func(t *testing.T, files []string) {
			for _, f := range files {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
		}, warc.UnreadableMissing},
		{"corrupt", func(t *testing.T, files []string) {
			recs := warctest.ReadFiles(t, files...)
			for _, r := range recs {
				if r.Get("WARC-Type") != "response" {
					continue
				}
				f, err := os.OpenFile(filepath.Join(filepath.Dir(files[0]), r.File), os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				// Bytes inside the record's compressed block.
				_, err = f.WriteAt([]byte{0xde, 0xad, 0xbe, 0xef}, r.Offset+60)
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
		}, warc.UnreadableCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := startSite(t, testsite.Options{Pages: 60, Validators: true})
			caps, dir1, dir2 := warc.NewMemCaptures(), t.TempDir(), t.TempDir()
			first, _ := archiveCrawl(t, site, dir1, caps)
			served1 := site.Fetches()
			// The pages the first crawl captured (a 2xx response).
			captured := map[string]bool{}
			for _, r := range warctest.ReadFiles(t, first...) {
				if r.Get("WARC-Type") == "response" && !strings.HasSuffix(r.Get("WARC-Target-URI"), "/robots.txt") {
					if status, _ := warctest.Payload(t, r); status/100 == 2 {
						captured[r.Get("WARC-Target-URI")] = true
					}
				}
			}
			tc.damage(t, first)

			reg := prometheus.NewRegistry()
			second, st2, _ := revisitCrawl(t, site, dir2, caps, []string{dir1}, reg)
			fetchedAsOften(t, site, served1)
			t.Logf("%d pages captured in the first directory; the second crawl fetched %d, refetched in full %v", len(captured), st2.Fetched, st2.Refetched)
			if st2.Unchanged != 0 {
				t.Errorf("%d 304s: a conditional request against an unreadable capture", st2.Unchanged)
			}
			if got := st2.Refetched[tc.reason]; got < int64(len(captured)) || len(st2.Refetched) != 1 {
				t.Errorf("refetched %v, want at least %d %s", st2.Refetched, len(captured), tc.reason)
			}
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var refetches *dto.MetricFamily
			for _, f := range families {
				if f.GetName() == "sieve_crawl_refetches_total" {
					refetches = f
				}
			}
			if got := counterValue(refetches, map[string]string{"crawl": "t1", "reason": tc.reason}); got != float64(st2.Refetched[tc.reason]) {
				t.Errorf("sieve_crawl_refetches_total{reason=%q} = %v, Stats say %d", tc.reason, got, st2.Refetched[tc.reason])
			}
			// Each captured page is in the second directory whole, and no
			// revisit points into the first.
			kept := responses(t, second)
			whole := map[string]bool{}
			for _, r := range kept {
				whole[r.Get("WARC-Target-URI")] = true
			}
			for u := range captured {
				if !whole[u] {
					t.Errorf("%s: no response record in the second directory", u)
				}
			}
			for _, r := range warctest.ReadFiles(t, second...) {
				if r.Get("WARC-Type") != "revisit" {
					continue
				}
				if _, ok := kept[r.Get("WARC-Refers-To-Target-URI")+" "+r.Get("WARC-Refers-To-Date")]; !ok {
					t.Errorf("revisit of %s refers to %s, not a record of the second directory", r.Get("WARC-Target-URI"), r.Get("WARC-Refers-To-Target-URI"))
				}
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
