package crawl

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a Crawler's Prometheus collectors, registered on
// Options.Registerer (never the global registry). The crawl label holds crawl
// ids, never hosts, so its cardinality is the number of crawls. A nil
// *metrics counts nothing.
type metrics struct {
	fetches      *prometheus.CounterVec // crawl, outcome
	retries      *prometheus.CounterVec // crawl, reason
	failures     *prometheus.CounterVec // crawl, reason
	refetches    *prometheus.CounterVec // crawl, reason
	published    *prometheus.CounterVec // crawl
	duplicates   *prometheus.CounterVec // crawl, kind
	dupBytes     *prometheus.CounterVec // crawl, kind
	spellings    *prometheus.CounterVec // crawl
	fetchSeconds prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, c *Crawler) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	vec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sieve", Subsystem: "crawl", Name: name, Help: help}, labels)
	}
	m := &metrics{
		fetches:    vec("fetches_total", "Fetch attempts by crawl and outcome (2xx, 3xx, 4xx, 5xx, robots, failed).", "crawl", "outcome"),
		retries:    vec("retries_total", "Fetch attempts handed back for a later try, by crawl and reason.", "crawl", "reason"),
		failures:   vec("failures_total", "URLs given up on, by crawl and reason.", "crawl", "reason"),
		refetches:  vec("refetches_total", "Pages fetched again in full because the archive record of their last capture could not be read, by crawl and reason (missing, corrupt, io_error).", "crawl", "reason"),
		published:  vec("links_published_total", "Links published to the discovered stream, by crawl.", "crawl"),
		duplicates: vec("duplicate_pages_total", "Fetched pages that were an earlier URL's page, by crawl and kind (exact: the same bytes; near: the same page but for its render-to-render noise).", "crawl", "kind"),
		dupBytes:   vec("duplicate_bytes_total", "Bytes of the fetched pages that were an earlier URL's page, by crawl and kind.", "crawl", "kind"),
		spellings:  vec("spellings_dropped_total", "Frontier entries dropped unfetched as spellings of a page fetched already, by the crawl's learned rules.", "crawl"),
		fetchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "sieve", Subsystem: "crawl", Name: "fetch_seconds",
			Help:    "Duration of HTTP exchanges, from sending the request to reading the body (waiting for the host's turn not included).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
	}
	inflight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sieve", Subsystem: "crawl", Name: "inflight_messages",
		Help: "Frontier messages in hand (waiting for their host's turn or being fetched)."}, func() float64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		return float64(len(c.inflight))
	})
	partitions := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sieve", Subsystem: "crawl", Name: "partitions_owned",
		Help: "Frontier partitions this crawler owns."}, func() float64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		return float64(len(c.owned))
	})
	for _, col := range []prometheus.Collector{m.fetches, m.retries, m.failures, m.refetches, m.published, m.duplicates, m.dupBytes, m.spellings, m.fetchSeconds, inflight, partitions} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) fetch(crawl, outcome string) {
	if m != nil {
		m.fetches.WithLabelValues(crawl, outcome).Inc()
	}
}

func (m *metrics) retry(crawl string, r Reason) {
	if m != nil {
		m.retries.WithLabelValues(crawl, string(r)).Inc()
	}
}

func (m *metrics) fail(crawl string, r Reason) {
	if m != nil {
		m.failures.WithLabelValues(crawl, string(r)).Inc()
	}
}

func (m *metrics) refetch(crawl, reason string) {
	if m != nil {
		m.refetches.WithLabelValues(crawl, reason).Inc()
	}
}

func (m *metrics) links(crawl string, n int) {
	if m != nil {
		m.published.WithLabelValues(crawl).Add(float64(n))
	}
}

func (m *metrics) duplicate(crawl, kind string, size int) {
	if m != nil {
		m.duplicates.WithLabelValues(crawl, kind).Inc()
		m.dupBytes.WithLabelValues(crawl, kind).Add(float64(size))
	}
}

func (m *metrics) spelling(crawl string) {
	if m != nil {
		m.spellings.WithLabelValues(crawl).Inc()
	}
}

// observe records one HTTP exchange's duration.
func (m *metrics) observe(d time.Duration) {
	if m != nil {
		m.fetchSeconds.Observe(d.Seconds())
	}
}
