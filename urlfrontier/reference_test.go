package urlfrontier_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sievecrawl/sieve/urlfrontier"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// The tests of this file pin where Sieve answers as the reference service
// (crawler-commons/url-frontier 2.6) does, so that its clients and its own
// test suite (module tests/) work unchanged; docs/urlfrontier.md lists
// each behaviour.

// TestUnknownCrawlIsEmpty: a call that reads or deletes a crawl that does
// not exist (never used, or just deleted) answers as for an empty crawl,
// as the reference does; upstream's URLFrontierServiceTest deletes crawl
// BESPOKE before it exists, and reads its stats once it is deleted.
func TestUnknownCrawlIsEmpty(t *testing.T) {
	n := newEnv(t).start("n1")
	ctx := ctxT(t)
	n.put(t, disc("gone", "https://gone.example/1", ""), disc("gone", "https://gone.example/2", ""))
	if d, err := n.client.DeleteCrawl(ctx, &pb.DeleteCrawlMessage{Value: "gone"}); err != nil || d.GetValue() != 2 {
		t.Fatalf("DeleteCrawl(gone) = %v, %v, want 2", d, err)
	}
	for _, crawl := range []string{"never", "gone"} {
		cases := []struct {
			call string
			do   func() (uint64, error)
		}{
			{"DeleteCrawl", func() (uint64, error) {
				r, err := n.client.DeleteCrawl(ctx, &pb.DeleteCrawlMessage{Value: crawl})
				return r.GetValue(), err
			}},
			{"GetStats size", func() (uint64, error) {
				r, err := n.client.GetStats(ctx, &pb.QueueWithinCrawlParams{CrawlID: crawl})
				if err == nil && r.GetCrawlID() != crawl {
					t.Errorf("GetStats(%s).crawlID = %q", crawl, r.GetCrawlID())
				}
				return r.GetSize() + r.GetNumberOfQueues() + uint64(r.GetInProcess()) + r.GetCounts()["completed"], err
			}},
			{"GetStats of a queue", func() (uint64, error) {
				r, err := n.client.GetStats(ctx, &pb.QueueWithinCrawlParams{CrawlID: crawl, Key: "gone.example"})
				return r.GetSize() + r.GetNumberOfQueues(), err
			}},
			{"ListQueues", func() (uint64, error) {
				r, err := n.client.ListQueues(ctx, &pb.Pagination{CrawlID: crawl, IncludeInactive: true})
				return r.GetTotal() + uint64(len(r.GetValues())), err
			}},
			{"ListURLs", func() (uint64, error) {
				st, err := n.client.ListURLs(ctx, &pb.ListUrlParams{CrawlID: crawl})
				if err != nil {
					return 0, err
				}
				var got uint64
				for {
					_, err := st.Recv()
					if err == io.EOF {
						return got, nil
					}
					if err != nil {
						return got, err
					}
					got++
				}
			}},
			{"CountURLs", func() (uint64, error) {
				r, err := n.client.CountURLs(ctx, &pb.CountUrlParams{CrawlID: crawl})
				return r.GetValue(), err
			}},
			{"PurgeURLs", func() (uint64, error) {
				r, err := n.client.PurgeURLs(ctx, &pb.PurgeUrlParams{CrawlID: crawl})
				return r.GetValue(), err
			}},
			{"DeleteQueue", func() (uint64, error) {
				r, err := n.client.DeleteQueue(ctx, &pb.QueueWithinCrawlParams{CrawlID: crawl, Key: "gone.example"})
				return r.GetValue(), err
			}},
		}
		for _, c := range cases {
			if got, err := c.do(); err != nil || got != 0 {
				t.Errorf("%s of crawl %s = %d, %v, want 0 and no error", c.call, crawl, got, err)
			}
		}
		// A URL of a crawl that does not exist is unknown: NotFound, as
		// the reference answers a URL it does not hold.
		_, err := n.client.GetURLStatus(ctx, &pb.URLStatusRequest{CrawlID: crawl, Url: "https://gone.example/1"})
		if status.Code(err) != codes.NotFound {
			t.Errorf("GetURLStatus in crawl %s: %v, want NotFound", crawl, err)
		}
	}
	l, err := n.client.ListCrawls(ctx, &pb.Local{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range l.GetValues() {
		if id == "never" || id == "gone" {
			t.Errorf("ListCrawls = %v: the calls above created crawl %s", l.GetValues(), id)
		}
	}
	// Stricter on purpose: an id that is not one is still refused.
	if _, err := n.client.GetStats(ctx, &pb.QueueWithinCrawlParams{CrawlID: "no such id!"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("GetStats(invalid id): %v, want InvalidArgument", err)
	}
}

// listAll calls ListURLs for a crawl (a queue if key is set) with no
// limit, as the reference client's DumpURLs does, and returns the items.
func listAll(tb testing.TB, n *node, crawl, key string) []*pb.URLItem {
	tb.Helper()
	st, err := n.client.ListURLs(ctxT(tb), &pb.ListUrlParams{CrawlID: crawl, Key: key, Size: 1<<31 - 1})
	if err != nil {
		tb.Fatal(err)
	}
	var out []*pb.URLItem
	for {
		it, err := st.Recv()
		if err == io.EOF {
			return out
		}
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, it)
	}
}

// TestKnownItemsEverywhere: ListURLs and GetURLStatus answer every URL as
// a known item, as the reference does, its refetchable_from_date the time
// it is handed out next and its metadata kept, completed URLs included;
// CountURLs counts those too. Upstream's DumpURLsTest reads the metadata
// of the known item and expects a dump of known items only.
func TestKnownItemsEverywhere(t *testing.T) {
	e := newEnv(t)
	n := e.start("n1")
	ctx := ctxT(t)
	const crawl = "k"
	created := uint64(e.clk.Now().Unix())
	refetch := created + 3600
	meta := func(it *pb.URLItem, k, v string) *pb.URLItem {
		info := it.GetDiscovered().GetInfo()
		if info == nil {
			info = it.GetKnown().GetInfo()
		}
		info.Metadata = map[string]*pb.StringList{k: {Values: []string{v}}}
		return it
	}
	n.put(t, meta(disc(crawl, "https://fresh.example/", ""), "source", "seed"),
		disc(crawl, "https://leased.example/", ""),
		meta(known(crawl, "https://done.example/", 0), "status", "200"),
		known(crawl, "https://later.example/", refetch))
	if got := n.get(t, &pb.GetParams{Key: "leased.example", DelayRequestable: 600,
		Item: &pb.GetParams_CrawlID{CrawlID: crawl}}); len(got) != 1 {
		t.Fatalf("GetURLs = %v, want one URL", got)
	}
	cases := []struct {
		url       string
		date      uint64 // refetchable_from_date
		metaKey   string // "": none
		metaValue string
	}{
		{"https://fresh.example/", created, "source", "seed"}, // due since it was stored
		{"https://leased.example/", created + 600, "", ""},    // the lease's end
		{"https://done.example/", 0, "status", "200"},         // completed: never
		{"https://later.example/", refetch, "", ""},           // its refetch date
	}
	listed := map[string]*pb.URLItem{}
	for _, it := range listAll(t, n, crawl, "") {
		listed[it.GetKnown().GetInfo().GetUrl()] = it
	}
	if len(listed) != len(cases) {
		t.Errorf("ListURLs listed %d known items, want %d", len(listed), len(cases))
	}
	for _, c := range cases {
		st, err := n.client.GetURLStatus(ctx, &pb.URLStatusRequest{CrawlID: crawl, Url: c.url})
		if err != nil {
			t.Fatalf("GetURLStatus(%s): %v", c.url, err)
		}
		for call, it := range map[string]*pb.URLItem{"GetURLStatus": st, "ListURLs": listed[c.url]} {
			k := it.GetKnown()
			if k == nil {
				t.Errorf("%s(%s) = %v, want a known item", call, c.url, it)
				continue
			}
			if d := k.GetRefetchableFromDate(); d != c.date {
				t.Errorf("%s(%s) refetchable from %d, want %d", call, c.url, d, c.date)
			}
			if c.metaKey != "" {
				if got := k.GetInfo().GetMetadata()[c.metaKey].GetValues(); len(got) != 1 || got[0] != c.metaValue {
					t.Errorf("%s(%s) metadata = %v, want %s: %s", call, c.url, k.GetInfo().GetMetadata(), c.metaKey, c.metaValue)
				}
			}
			if it.GetCreationDate() != created {
				t.Errorf("%s(%s) created %d, want %d", call, c.url, it.GetCreationDate(), created)
			}
		}
	}
	for _, filter := range []*string{nil, ptr(".example/")} {
		if c, err := n.client.CountURLs(ctx, &pb.CountUrlParams{CrawlID: crawl, Filter: filter}); err != nil || c.GetValue() != uint64(len(cases)) {
			t.Errorf("CountURLs(filter %v) = %v, %v, want %d (the completed URL too)", filter, c, err, len(cases))
		}
	}
}

// TestDumpAndReload: a crawl listed whole (or queue by queue, as the
// reference client's DumpURLs -t N does), deleted, and put back with
// PutURLs gives back every URL with its status, date and metadata, in
// every crawl, completed URLs included.
func TestDumpAndReload(t *testing.T) {
	e := newEnv(t)
	n := e.start("n1")
	ctx := ctxT(t)
	now := uint64(e.clk.Now().Unix())
	var items []*pb.URLItem
	for i := range 20 {
		it := disc("", fmt.Sprintf("https://site%d.example/page%d", i%5, i), "")
		it.GetDiscovered().Info.Metadata = map[string]*pb.StringList{"depth": {Values: []string{strconv.Itoa(i)}}}
		items = append(items, it)
	}
	items = append(items, known("", "https://site0.example/done", 0), known("", "https://site1.example/later", now+3600),
		disc("BESPOKE", "https://bespoke.example/", ""))
	n.put(t, items...)
	n.get(t, &pb.GetParams{Key: "site2.example", MaxUrlsPerQueue: 1, DelayRequestable: 600})
	n.put(t, known("", "https://site3.example/page3", 0)) // completed after a fetch

	statuses := func(crawls ...string) map[string]string {
		out := map[string]string{}
		for _, c := range crawls {
			for _, it := range listAll(t, n, c, "") {
				out[c+" "+it.GetKnown().GetInfo().GetUrl()] = itemString(it)
			}
		}
		return out
	}
	before := statuses("DEFAULT", "BESPOKE")
	if len(before) != 23 {
		t.Fatalf("ListURLs listed %d URLs, want 23", len(before))
	}
	// Queue by queue, every queue (include_inactive) of every crawl.
	var dump []*pb.URLItem
	for _, c := range []string{"DEFAULT", "BESPOKE"} {
		qs, err := n.client.ListQueues(ctx, &pb.Pagination{CrawlID: c, IncludeInactive: true, Size: 10_000, Local: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs.GetValues() {
			dump = append(dump, listAll(t, n, c, q)...)
		}
	}
	if len(dump) != len(before) {
		t.Fatalf("listed queue by queue: %d URLs, want %d", len(dump), len(before))
	}
	for _, c := range []string{"DEFAULT", "BESPOKE"} {
		if _, err := n.client.DeleteCrawl(ctx, &pb.DeleteCrawlMessage{Value: c}); err != nil {
			t.Fatal(err)
		}
	}
	if l, err := n.client.ListCrawls(ctx, &pb.Local{Local: true}); err != nil || len(l.GetValues()) != 0 {
		t.Fatalf("ListCrawls after deleting every crawl = %v, %v", l.GetValues(), err)
	}
	for id, st := range n.put(t, dump...) {
		if st != OK {
			t.Errorf("reload of %s: %v", id, st)
		}
	}
	after := statuses("DEFAULT", "BESPOKE")
	for k, want := range before {
		if after[k] != want {
			t.Errorf("%s after the reload: %s, want %s", k, after[k], want)
		}
	}
	if len(after) != len(before) {
		t.Errorf("%d URLs after the reload, want %d", len(after), len(before))
	}
	for c, want := range map[string]uint64{"DEFAULT": 22, "BESPOKE": 1} {
		if got, err := n.client.CountURLs(ctx, &pb.CountUrlParams{CrawlID: c}); err != nil || got.GetValue() != want {
			t.Errorf("CountURLs(%s) after the reload = %v, %v, want %d", c, got, err, want)
		}
	}
	if st, err := n.client.GetStats(ctx, &pb.QueueWithinCrawlParams{}); err != nil || st.GetCounts()["completed"] != 2 {
		t.Errorf("GetStats after the reload = %v, %v, want 2 completed", st, err)
	}
}

// itemString is what a dump keeps of an item: its URL, key, crawl, date
// and metadata.
func itemString(it *pb.URLItem) string {
	k := it.GetKnown()
	info := k.GetInfo()
	var meta []string
	for name, v := range info.GetMetadata() {
		meta = append(meta, name+"="+strings.Join(v.GetValues(), ","))
	}
	slices.Sort(meta)
	return fmt.Sprintf("%s key=%s crawl=%s date=%d meta=%v", info.GetUrl(), info.GetKey(), info.GetCrawlID(), k.GetRefetchableFromDate(), meta)
}

// TestCompletedCounted: counts["completed"] is the number of completed
// URLs a queue holds, whatever updates they get (completed again,
// scheduled again), so that CountURLs, which adds it to the URLs not
// completed, agrees with ListURLs.
func TestCompletedCounted(t *testing.T) {
	e := newEnv(t)
	n := e.start("n1")
	ctx := ctxT(t)
	later := uint64(e.clk.Now().Add(time.Hour).Unix())
	steps := []struct {
		name           string
		item           *pb.URLItem
		completed, all uint64
	}{
		{"a new URL", disc("", "https://c.example/1", ""), 0, 1},
		{"completed", known("", "https://c.example/1", 0), 1, 1},
		{"completed again", known("", "https://c.example/1", 0), 1, 1},
		{"another completed, never queued", known("", "https://c.example/2", 0), 2, 2},
		{"a completed URL scheduled again", known("", "https://c.example/1", later), 1, 2},
		{"a completed URL discovered again", disc("", "https://c.example/2", ""), 1, 2},
	}
	for _, s := range steps {
		n.put(t, s.item)
		st, err := n.client.GetStats(ctx, &pb.QueueWithinCrawlParams{Key: "c.example"})
		if err != nil {
			t.Fatal(err)
		}
		c, err := n.client.CountURLs(ctx, &pb.CountUrlParams{Key: "c.example"})
		if err != nil {
			t.Fatal(err)
		}
		listed := uint64(len(listAll(t, n, "", "c.example")))
		if st.GetCounts()["completed"] != s.completed || c.GetValue() != s.all || listed != s.all {
			t.Errorf("after %s: completed %d, CountURLs %d, listed %d; want %d, %d, %d", s.name,
				st.GetCounts()["completed"], c.GetValue(), listed, s.completed, s.all, s.all)
		}
	}
}

// TestDeleteCrawlForgetsFirst: DeleteCrawl drops what the process keeps
// open of the crawl (its dedup filter) while the crawl still exists, so
// that nothing of it is saved once the delete removed its files, and again
// once deleted; a URL put again after the delete is new. Upstream's
// DumpURLsTest (delete, then put) lost such a URL when an in-memory
// filter's save landed after the delete had removed its snapshot file.
func TestDeleteCrawlForgetsFirst(t *testing.T) {
	var mu sync.Mutex
	var existed []bool // per Forget: whether the crawl's record was there
	n := newEnv(t).start("n1", func(o *urlfrontier.Options) {
		sc := o.Crawls.(urlfrontier.StoreCrawls)
		forget := sc.Forget
		sc.Forget = func(id string) {
			_, err := sc.Registry.Get(context.Background(), id)
			mu.Lock()
			existed = append(existed, err == nil)
			mu.Unlock()
			forget(id)
		}
		o.Crawls = sc
	})
	ctx := ctxT(t)
	const u = "https://bespoke.example/"
	if st := n.put(t, disc("BESPOKE", u, "")); st[u] != pb.AckMessage_OK {
		t.Fatalf("first put: %v", st)
	}
	if _, err := n.client.DeleteCrawl(ctx, &pb.DeleteCrawlMessage{Value: "BESPOKE"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := slices.Clone(existed)
	mu.Unlock()
	if !slices.Equal(got, []bool{true, false}) {
		t.Errorf("Forget called with the crawl existing: %v, want [true false] (before the delete, and after)", got)
	}
	if st := n.put(t, disc("BESPOKE", u, "")); st[u] != pb.AckMessage_OK {
		t.Errorf("the URL put again after the delete: %v, want OK", st)
	}
}
