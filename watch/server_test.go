package watch

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/internal/leaktest"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/stats"
)

func get(tb testing.TB, url string) (int, string) {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestServerSurface crawls the test site through a real pipeline and checks
// each endpoint against the sources it reads.
func TestServerSurface(t *testing.T) {
	p := startPipeline(t, 60)
	r := p.wait(t)

	for _, tc := range []struct {
		path, contains string
	}{
		{"/", `<script src="uplot/uPlot.iife.min.js">`},
		{"/app.js", "sieveWatch"},
		{"/uplot/uPlot.iife.min.js", "uPlot"},
		{"/uplot/LICENSE", "MIT"},
		{"/healthz", "ok"},
		{"/readyz", `"ready": true`},
	} {
		code, body := get(t, p.url+strings.TrimPrefix(tc.path, "/"))
		if code != http.StatusOK || !strings.Contains(body, tc.contains) {
			t.Errorf("GET %s = %d, want 200 containing %q; body %.200q", tc.path, code, tc.contains, body)
		}
	}

	code, body := get(t, p.url+"stats")
	var got Report
	if err := json.Unmarshal([]byte(body), &got); code != http.StatusOK || err != nil {
		t.Fatalf("GET /stats = %d, %v", code, err)
	}
	st := p.crawler.Stats()
	ws, _ := p.worker.Status()
	want := ws.Totals
	for _, tc := range []struct {
		what      string
		got, want int64
	}{
		{"shared admitted", got.Shared.Totals.Admitted, want.Admitted},
		{"shared duplicates", got.Shared.Totals.Duplicates, want.Duplicates},
		{"shared links", got.Shared.Totals.Links, st.Links + 1}, // and the seed
		{"crawl's links", got.Shared.Totals.Crawls[testCrawl].Links, got.Shared.Totals.Links},
		{"crawl's admitted", got.Shared.Totals.Crawls[testCrawl].Admitted, want.Admitted},
		{"crawl's duplicates", got.Shared.Totals.Crawls[testCrawl].Duplicates, want.Duplicates},
		{"top host's duplicates", got.Shared.TopHosts[0].Duplicates, want.Duplicates},
		{"crawler fetched", got.Crawler.Fetched, st.Fetched},
		{"crawl fetched", got.Crawler.Crawls[testCrawl].Fetched, st.Fetched},
		{"filter items", int64(got.Filter.Items), want.Admitted},
		{"frontier stored", int64(got.Streams.FrontierStored), want.Admitted},
		{"frontier queued", int64(got.Streams.FrontierQueued), 0},
		{"partitions", int64(len(got.Streams.Partitions)), int64(p.topo.Partitions)},
	} {
		if tc.got != tc.want {
			t.Errorf("/stats %s = %d, want %d", tc.what, tc.got, tc.want)
		}
	}
	if len(got.Peers) != 1 || got.Peers[0].ID != p.crawler.ID() || got.Peers[0].Role != "embedded" || got.Peers[0].URL != p.url || !got.Peers[0].Ready {
		t.Errorf("/stats peers %+v, want this process (%s at %s), ready", got.Peers, p.crawler.ID(), p.url)
	}
	if len(got.Filter.Layers) < 2 {
		t.Errorf("filter has %d layers; the test's small first layer should have grown", len(got.Filter.Layers))
	}
	if got.Role != "embedded" || !got.Ready || got.Worker == nil || len(got.Errors) != 0 {
		t.Errorf("/stats role %q ready %v worker %v errors %v", got.Role, got.Ready, got.Worker != nil, got.Errors)
	}

	// The series: every sample has every key; counters never go back and
	// end at the report's totals.
	code, body = get(t, p.url+"series")
	var s Samples
	if err := json.Unmarshal([]byte(body), &s); code != http.StatusOK || err != nil {
		t.Fatalf("GET /series = %d, %v", code, err)
	}
	if len(s.At) < 2 || s.IntervalMS != 200 {
		t.Fatalf("series: %d samples every %d ms, want ≥ 2 every 200", len(s.At), s.IntervalMS)
	}
	for _, k := range []string{"admitted", "duplicates", "rejected", "crawl:" + testCrawl + ":admitted", "fetched", "outcome:2xx", "crawl:" + testCrawl + ":fetched", "queue:frontier", "filter:items"} {
		v := s.Values[k]
		if len(v) != len(s.At) {
			t.Errorf("series %q has %d values for %d samples", k, len(v), len(s.At))
			continue
		}
		if !strings.HasPrefix(k, "queue:") {
			for i := 1; i < len(v); i++ {
				if v[i] < v[i-1] {
					t.Errorf("series %q goes back at %d: %v → %v", k, i, v[i-1], v[i])
				}
			}
		}
	}
	if last := s.Values["admitted"][len(s.At)-1]; int64(last) != r.Shared.Totals.Admitted {
		t.Errorf("series admitted ends at %v, want %d", last, r.Shared.Totals.Admitted)
	}
	if last := s.Values["crawl:"+testCrawl+":outcome:4xx"][len(s.At)-1]; int64(last) != st.Outcomes[crawl.Outcome4xx] {
		t.Errorf("series 4xx ends at %v, want %d", last, st.Outcomes[crawl.Outcome4xx])
	}
	code, body = get(t, p.url+"series?after="+jsonInt(s.At[len(s.At)-1]))
	var tail Samples
	if err := json.Unmarshal([]byte(body), &tail); code != http.StatusOK || err != nil {
		t.Fatalf("GET /series?after = %d, %v", code, err)
	}
	for _, at := range tail.At {
		if at <= s.At[len(s.At)-1] {
			t.Errorf("series?after=%d returned sample at %d", s.At[len(s.At)-1], at)
		}
	}

	// Metrics: the worker's, the crawler's and the watch's own, with the
	// values /stats shows.
	mf := scrape(t, p.url+"metrics")
	f := got.Filter
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"sieve_filter_items", nil, float64(f.Items)},
		{"sieve_filter_layers", nil, float64(len(f.Layers))},
		{"sieve_filter_layer_fill", map[string]string{"layer": "0"}, f.Layers[0].Fill},
		{"sieve_filter_layer_estimated_fpp", map[string]string{"layer": "1"}, f.Layers[1].EstimatedFPP},
		{"sieve_filter_next_layer_capacity", nil, float64(f.NextLayerCapacity)},
		{"sieve_filter_growth_remaining_items", nil, float64(got.Growth)},
		{"sieve_queue_frontier_messages", nil, 0},
		{"sieve_queue_frontier_partition_messages", map[string]string{"partition": "3"}, 0},
		{"sieve_queue_discovered_messages", nil, 0},
		{"sieve_dedup_admitted_total", nil, float64(want.Admitted)},
		{"sieve_crawl_fetches_total", map[string]string{"crawl": testCrawl, "outcome": "2xx"}, float64(st.Outcomes[crawl.Outcome2xx])},
		{"sieve_watch_source_up", map[string]string{"part": "filter"}, 1},
	} {
		v, ok := metricValue(mf, tc.name, tc.labels)
		if !ok || v != tc.want {
			t.Errorf("/metrics %s%v = %v (found %v), want %v", tc.name, tc.labels, v, ok, tc.want)
		}
	}
	checkDashboard(t, mf)

	// /contains answers from the running filter.
	seen, err := Contains(t.Context(), p.url, [][]byte{[]byte(p.site.URL), []byte(p.site.URL + "never-linked")})
	if err != nil || len(seen) != 2 || !seen[0] || seen[1] {
		t.Errorf("Contains(seed, unlinked) = %v, %v; want [true false]", seen, err)
	}
	if resp, err := http.Post(p.url+"contains", "application/json", strings.NewReader("[1,2]")); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("POST /contains with a bad body: %v %v, want 400", resp.Status, err)
	} else {
		resp.Body.Close()
	}
	if got.Growth == 0 || got.Growth != f.Layers[len(f.Layers)-1].Capacity-f.Layers[len(f.Layers)-1].Items {
		t.Errorf("growth remaining %d, newest layer %+v", got.Growth, f.Layers[len(f.Layers)-1])
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// scrape reads a /metrics page.
func scrape(tb testing.TB, url string) map[string]*dto.MetricFamily {
	tb.Helper()
	_, body := get(tb, url)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		tb.Fatalf("parse %s: %v", url, err)
	}
	return mf
}

// metricValue returns the value of the sample of name whose labels include
// labels.
func metricValue(mf map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f, ok := mf[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		for k, v := range labels {
			found := false
			for _, l := range m.Label {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func TestSeriesRing(t *testing.T) {
	s := newSeries(3)
	t0 := time.UnixMilli(1_000_000)
	s.add(t0, map[string]float64{"a": 1})
	s.add(t0.Add(time.Second), map[string]float64{"a": 2, "b": 5}) // b appears: 0 before
	for _, tc := range []struct {
		name  string
		after int64
		at    []int64
		a, b  []float64
	}{
		{"all", 0, []int64{1_000_000, 1_001_000}, []float64{1, 2}, []float64{0, 5}},
		{"after the first", 1_000_000, []int64{1_001_000}, []float64{2}, []float64{5}},
		{"after the last", 1_001_000, []int64{}, []float64{}, []float64{}},
	} {
		got := s.after(tc.after)
		if !equal(got.At, tc.at) || !equal(got.Values["a"], tc.a) || !equal(got.Values["b"], tc.b) {
			t.Errorf("%s: after(%d) = %v %v, want %v a=%v b=%v", tc.name, tc.after, got.At, got.Values, tc.at, tc.a, tc.b)
		}
	}
	// Two more samples wrap the ring: the oldest is gone, b absent reads 0.
	s.add(t0.Add(2*time.Second), map[string]float64{"a": 4})
	s.add(t0.Add(3*time.Second), map[string]float64{"a": 8, "b": 6})
	got := s.after(0)
	if !equal(got.At, []int64{1_001_000, 1_002_000, 1_003_000}) || !equal(got.Values["a"], []float64{2, 4, 8}) || !equal(got.Values["b"], []float64{5, 0, 6}) {
		t.Errorf("after wrapping: %v %v", got.At, got.Values)
	}
	if r := s.rate("a", time.Minute); r != 3 {
		t.Errorf("rate(a) = %v, want (8-2)/2s = 3", r)
	}
	if r := s.rate("a", time.Second); r != 4 {
		t.Errorf("rate(a, 1s) = %v, want (8-4)/1s = 4", r)
	}
	if r := s.rate("none", time.Minute); r != 0 {
		t.Errorf("rate(none) = %v, want 0", r)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSeriesBoundsKeys(t *testing.T) {
	s := newSeries(2)
	v := map[string]float64{}
	for i := range maxKeys + 10 {
		v[jsonInt(int64(i))] = 1
	}
	s.add(time.Now(), v)
	if n := len(s.after(0).Values); n != maxKeys {
		t.Errorf("%d keys kept, want %d", n, maxKeys)
	}
}

// TestServerDir checks that a Server with Dir announces itself there while it
// runs and leaves its last report when it closes, and what ReadDir makes of
// each state.
func TestServerDir(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := ReadDir(t.Context(), dir); !errors.Is(err, ErrNothingInDir) {
		t.Fatalf("ReadDir of an unused dir = %v, want ErrNothingInDir", err)
	}
	counts := stats.NewMemory()
	if err := counts.Add(t.Context(), stats.Delta{Links: 3, Admitted: 2, Duplicates: 1}); err != nil {
		t.Fatal(err)
	}
	s, err := New(Sources{Role: "embedded", Counters: counts}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	r, live, err := ReadDir(t.Context(), dir)
	if err != nil || !live || r.Shared.Totals.Admitted != 2 {
		t.Fatalf("ReadDir while running = live %v, %v, %+v", live, err, r.Shared)
	}
	// Counts added after the last periodic sample are in the saved report.
	if err := counts.Add(t.Context(), stats.Delta{Links: 1, Admitted: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, URLFile)); !os.IsNotExist(err) {
		t.Errorf("%s after Close: %v", URLFile, err)
	}
	r, live, err = ReadDir(t.Context(), dir)
	if err != nil || live || r.Shared.Totals.Admitted != 3 {
		t.Fatalf("ReadDir after Close = live %v, %v, %+v", live, err, r.Shared)
	}
	// A URL file left by a killed process is passed over.
	if err := os.WriteFile(filepath.Join(dir, URLFile), []byte(s.URL()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, live, err = ReadDir(t.Context(), dir); err != nil || live || r.Shared.Totals.Admitted != 3 {
		t.Errorf("ReadDir with a stale URL file = live %v, %v", live, err)
	}
}

// TestServerCloseLeaksNothing checks that Close ends the sampler and the HTTP
// server's goroutines, with a page being served.
func TestServerCloseLeaksNothing(t *testing.T) {
	noLeak := leaktest.Check(t)
	s, err := New(Sources{Role: "dedup-worker", Counters: stats.NewMemory()}, Options{Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, PageURL(addr.String())+"stats"); code != http.StatusOK {
		t.Fatalf("/stats = %d", code)
	}
	http.DefaultClient.CloseIdleConnections()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	noLeak()
}

// TestPeers runs two servers on one NATS: each lists both, with their roles;
// one that closes leaves the list at once.
func TestPeers(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	topo := frontier.Topology{Prefix: "peers"}
	start := func(role string) *Server {
		s, err := New(Sources{Role: role, ID: role + "-1", Counters: stats.NewMemory(), Peers: NewJetStreamPeers(srv.JetStream(), topo, 0)},
			Options{Interval: 20 * time.Millisecond, AnnounceEvery: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	worker, crawler := start("dedup-worker"), start("crawler")
	ids := func(s *Server) string {
		var out []string
		for _, p := range s.Report().Peers {
			out = append(out, p.Role+":"+p.ID)
		}
		return strings.Join(out, " ")
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: worker sees %q, crawler sees %q", what, ids(worker), ids(crawler))
			}
		}
	}
	const both = "crawler:crawler-1 dedup-worker:dedup-worker-1"
	waitUntil("both see both", func() bool { return ids(worker) == both && ids(crawler) == both })
	if err := crawler.Close(); err != nil {
		t.Fatal(err)
	}
	waitUntil("the crawler left", func() bool { return ids(worker) == "dedup-worker:dedup-worker-1" })
}
