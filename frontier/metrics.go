package frontier

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/stats"
)

// metrics are a Worker's Prometheus collectors, registered on the
// Registerer given in WorkerOptions (never the global one).
type metrics struct {
	pages, links, admitted, duplicates, republished prometheus.Counter
	rejected, poison                                *prometheus.CounterVec
	batches                                         prometheus.Counter
	batchSeconds                                    prometheus.Histogram
	retries                                         *prometheus.CounterVec
	up                                              *prometheus.GaugeVec
	inflight                                        prometheus.Gauge
	cacheHits                                       prometheus.Counter
	parked                                          prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "sieve", Subsystem: "dedup", Name: name, Help: help})
	}
	m := &metrics{
		pages:       counter("pages_total", "Discovered messages (crawled pages) processed."),
		links:       counter("links_total", "Links in processed discovered messages."),
		admitted:    counter("admitted_total", "URLs published to the frontier (first seen)."),
		duplicates:  counter("duplicates_total", "Links dropped as already seen."),
		republished: counter("republished_total", "Publishes absorbed by the frontier's duplicate window (races, crash recovery)."),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sieve", Subsystem: "dedup", Name: "rejected_total",
			Help: "Links that are not crawlable URLs, by reason."}, []string{"reason"}),
		poison: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sieve", Subsystem: "dedup", Name: "poison_total",
			Help: "Discovered messages rejected whole (acknowledged, never retried), by reason."}, []string{"reason"}),
		batches: counter("batches_total", "Batches processed."),
		batchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "sieve", Subsystem: "dedup", Name: "batch_seconds",
			Help: "Time from fetching a batch to acknowledging it.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sieve", Subsystem: "dedup", Name: "retries_total",
			Help: "Retried operations, by operation (contains, publish, mark, fetch)."}, []string{"op"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "sieve", Subsystem: "dedup", Name: "dependency_up",
			Help: "1 while a dependency works (nats, filter, stats; frontier is 0 while the stream is full)."}, []string{"dependency"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "sieve", Subsystem: "dedup", Name: "inflight_batches",
			Help: "Batches being processed."}),
		cacheHits: counter("seen_cache_hits_total", "Links found in the worker's cache of URLs the filter holds (no filter call)."),
		parked:    counter("parked_total", "Discovered messages handed back for later because their crawl's filter cannot be opened."),
	}
	for _, c := range []prometheus.Collector{m.pages, m.links, m.admitted, m.duplicates, m.republished, m.rejected,
		m.poison, m.batches, m.batchSeconds, m.retries, m.up, m.inflight, m.cacheHits, m.parked} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every label value exists from the start, so rates are defined.
	for _, r := range normalize.Reasons() {
		m.rejected.WithLabelValues(string(r))
	}
	for _, r := range PoisonReasons() {
		m.poison.WithLabelValues(r)
	}
	for _, op := range []string{"contains", "publish", "mark", "fetch", "open"} {
		m.retries.WithLabelValues(op)
	}
	return m, nil
}

// count adds a batch's delta to the counters.
func (m *metrics) count(d stats.Delta) {
	m.pages.Add(float64(d.Pages))
	m.links.Add(float64(d.Links))
	m.admitted.Add(float64(d.Admitted))
	m.duplicates.Add(float64(d.Duplicates))
	m.republished.Add(float64(d.Republished))
	for r, n := range d.Rejected {
		m.rejected.WithLabelValues(r).Add(float64(n))
	}
	for r, n := range d.Poison {
		m.poison.WithLabelValues(r).Add(float64(n))
	}
}
