package watch

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sievecrawl/sieve/stats"
)

// failing is a collector whose source cannot be read, as the filter's is
// while its Redis fails over (CLUSTERDOWN).
type failing struct{ desc *prometheus.Desc }

func (f failing) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }
func (f failing) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(f.desc, errors.New("CLUSTERDOWN The cluster is down"))
}

// TestScrapeNeverFailsWhole pins issue 39 item 2: during a Redis master's
// failover the workers' /metrics answered 500, and Prometheus marked every
// worker down. A part that cannot be read is left out; the rest answers
// 200.
func TestScrapeNeverFailsWhole(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(failing{prometheus.NewDesc("sieve_filter_items", "Keys the filter has admitted.", nil, nil)}); err != nil {
		t.Fatal(err)
	}
	s, err := New(Sources{Role: "dedup-worker", Counters: stats.NewMemory()}, Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(s.URL() + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics with a part unreadable = %s, want 200:\n%s", resp.Status, body)
	}
	if strings.Contains(string(body), "sieve_filter_items ") {
		t.Errorf("the unreadable part is in the scrape:\n%s", body)
	}
	if !strings.Contains(string(body), "sieve_watch_") {
		t.Errorf("the rest of the scrape is missing:\n%s", body)
	}
}
