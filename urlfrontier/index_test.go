package urlfrontier

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/internal/heaptest"
)

func entry(url string, due int64) *Entry {
	return &Entry{V: formatVersion, Crawl: "c", URL: url, Key: "k", Due: due}
}

// TestIndexRevisions pins how the index orders what the watch delivers
// and what a server applies of its own writes.
func TestIndexRevisions(t *testing.T) {
	type step struct {
		op  string // put, del: from the watch; own-put, own-del: a server's own write
		key string
		rev uint64
		url string
	}
	tests := []struct {
		name  string
		steps []step
		want  []string // URLs held, sorted
	}{
		{"put then delete", []step{{"put", "c.q.1", 1, "a"}, {"del", "c.q.1", 2, ""}}, nil},
		{"an older value is ignored", []step{{"put", "c.q.1", 5, "new"}, {"put", "c.q.1", 3, "old"}}, []string{"new"}},
		{"an older delete is ignored", []step{{"put", "c.q.1", 5, "a"}, {"del", "c.q.1", 4, ""}}, []string{"a"}},
		// A server's write acknowledged after the watch delivered a later
		// delete must not bring the URL back.
		{"own write behind the watch", []step{{"put", "c.q.1", 1, "a"}, {"del", "c.q.1", 3, ""}, {"own-put", "c.q.1", 2, "a"}}, nil},
		{"own write ahead of the watch", []step{{"put", "c.q.1", 1, "a"}, {"own-put", "c.q.1", 7, "b"}, {"put", "c.q.1", 7, "b"}}, []string{"b"}},
		{"own delete ahead of the watch", []step{{"put", "c.q.1", 1, "a"}, {"own-del", "c.q.1", 2, ""}}, nil},
	}
	for _, tt := range tests {
		x := newIndex()
		for _, s := range tt.steps {
			switch s.op {
			case "put", "own-put":
				x.putEntry(s.key, s.rev, entry(s.url, 0), s.op == "own-put")
			case "del", "own-del":
				x.deleteEntry(s.key, s.rev, s.op == "own-del")
			}
		}
		var got []string
		for _, it := range x.entries("c", "", 0) {
			got = append(got, it.e.URL)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: index holds %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestIndexView checks a queue's view at a time: in-process and queued
// counts from its leases, ready URLs earliest first (then by URL), and
// that a view leaves the queue as it was.
func TestIndexView(t *testing.T) {
	x := newIndex()
	x.putEntry("c.q.1", 1, entry("leased", 0), false)   // in process until 100
	x.putEntry("c.q.2", 2, entry("expired", 0), false)  // lease ended at 40: ready
	x.putEntry("c.q.3", 3, entry("new", 0), false)      // ready
	x.putEntry("c.q.4", 4, entry("refetch", 80), false) // scheduled at 80
	x.putQueue("c.q", 5, &QueueState{V: formatVersion, Crawl: "c", Key: "k", Blocked: 60,
		Leases: map[string]int64{"1": 100, "2": 40, "gone": 200}}, false) // a lease of a URL no longer stored counts for nothing
	for _, tc := range []struct {
		now       int64
		max       int
		ready     []string
		inProcess int
		blocked   bool
	}{
		{50, -1, []string{"expired", "new"}, 1, true},
		{50, 1, []string{"expired"}, 1, true},
		{90, -1, []string{"expired", "new", "refetch"}, 1, false},
		{100, -1, []string{"expired", "leased", "new", "refetch"}, 0, false},
	} {
		views := x.queues(tc.now, []string{"c"}, "", tc.max)
		if len(views) != 1 {
			t.Fatalf("queues(%d) = %d views, want 1", tc.now, len(views))
		}
		v := views[0]
		var ready []string
		for _, r := range v.ready {
			ready = append(ready, r.e.URL)
		}
		if !slices.Equal(ready, tc.ready) || v.inProcess != tc.inProcess || v.queued != 4-tc.inProcess || v.blocked(tc.now) != tc.blocked {
			t.Errorf("view at %d (max %d): ready %v, in process %d, queued %d, blocked %v; want %v, %d, %d, %v",
				tc.now, tc.max, ready, v.inProcess, v.queued, v.blocked(tc.now), tc.ready, tc.inProcess, 4-tc.inProcess, tc.blocked)
		}
	}
	// Purged, as DeleteQueue does: the URLs, then the queue's state.
	for i, k := range []string{"c.q.1", "c.q.2", "c.q.3", "c.q.4"} {
		x.deleteEntry(k, uint64(6+i), false)
	}
	x.deleteQueueKey("c.q", 10, false)
	if ids := x.crawlIDs(); len(ids) != 0 {
		t.Errorf("crawls after forgetting the only queue: %v", ids)
	}
}

// BenchmarkIndexMemory measures what the index keeps per queued URL: 100,000
// URLs over 1,000 queues, as a server loads them from the bucket at start
// (each key and value its own copy, as the watch delivers them), against
// the least any index of them holds (a map from each URL's key to its URL)
// measured in the same run.
func BenchmarkIndexMemory(b *testing.B) {
	const urls, queues = 100_000, 1_000
	topo := frontier.Topology{}
	keys := make([]string, urls)
	values := make([][]byte, urls)
	for i := range urls {
		host := fmt.Sprintf("www.site%d.example", i%queues)
		u := fmt.Sprintf("https://%s/articles/%d.html", host, i)
		keys[i] = topo.URLFrontierURLKey("bench", host, u)
		values[i] = encode(&Entry{V: formatVersion, Crawl: "bench", URL: u, Key: host, Created: 1_764_000_000})
	}
	var perURL, baseline float64
	for range b.N {
		base := heaptest.Live(func() any {
			m := make(map[string]string)
			for i, v := range values {
				e, err := decodeEntry(v)
				if err != nil {
					b.Fatal(err)
				}
				m[strings.Clone(keys[i])] = e.URL
			}
			return m
		})
		used := heaptest.Live(func() any {
			x := newIndex()
			for i, v := range values {
				e, err := decodeEntry(v)
				if err != nil {
					b.Fatal(err)
				}
				x.putEntry(strings.Clone(keys[i]), uint64(i+1), e, false)
			}
			return x
		})
		perURL, baseline = float64(used)/urls, float64(base)/urls
	}
	b.ReportMetric(perURL, "B/URL")
	b.ReportMetric(baseline, "B/URL-baseline")
	b.ReportMetric(perURL/baseline, "ratio")
}
