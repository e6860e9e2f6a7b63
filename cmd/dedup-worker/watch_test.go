package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/watch"
)

// TestMainServesWatch checks that `dedup-worker run` serves the watch
// surface: the live page and its files, the report with the worker's role,
// and the time series, which fills as the worker samples.
func TestMainServesWatch(t *testing.T) {
	h := newHarness(t)
	m, stop := startMain(t, testConfig(h.nats.URL(), h.redis.URL()))
	defer stop()
	base := "http://" + m.Addr()
	for _, tc := range []struct{ path, contains string }{
		{"/", "uplot/uPlot.iife.min.js"},
		{"/uplot/uPlot.iife.min.js", "uPlot"},
		{"/healthz", "ok"},
	} {
		if code, body := get(t, base+tc.path); code != http.StatusOK || !strings.Contains(body, tc.contains) {
			t.Errorf("GET %s = %d, want 200 containing %q", tc.path, code, tc.contains)
		}
	}
	waitFor(t, 10*time.Second, "/readyz 200", func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK })
	h.publish(t, page(1, "/a", "/b"))
	waitFor(t, 10*time.Second, "the admitted URLs in the time series", func() bool {
		_, body := get(t, base+"/series")
		var s watch.Samples
		if json.Unmarshal([]byte(body), &s) != nil || len(s.At) == 0 {
			return false
		}
		v := s.Values["admitted"]
		return len(v) == len(s.At) && v[len(v)-1] == 2
	})
	_, body := get(t, base+"/stats")
	var r watch.Report
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("/stats: %v", err)
	}
	if r.Role != "dedup-worker" || !r.Ready || r.Worker == nil || r.Streams == nil || r.Filter == nil || r.Crawler != nil {
		t.Errorf("/stats: role %q ready %v worker %v streams %v filter %v crawler %v", r.Role, r.Ready, r.Worker != nil, r.Streams != nil, r.Filter != nil, r.Crawler != nil)
	}
}
