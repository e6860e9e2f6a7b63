package main

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sievecrawl/sieve/frontier"
)

// handler serves /metrics, /healthz, /readyz and /stats.
func (m *Main) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", m.serveReady)
	mux.HandleFunc("GET /stats", m.serveStats)
	return mux
}

// readiness is the /readyz body.
type readiness struct {
	Ready        bool                         `json:"ready"`
	State        string                       `json:"state"`
	Error        string                       `json:"error,omitempty"`
	Dependencies map[string]frontier.DepState `json:"dependencies,omitempty"`
}

// serveReady answers 200 while the worker runs with NATS and the filter
// available, 503 otherwise (starting, stopping, or a dependency down).
func (m *Main) serveReady(w http.ResponseWriter, _ *http.Request) {
	r := readiness{State: m.state.Load().(string)}
	wk := m.worker.Load()
	switch {
	case wk == nil:
		r.Error = "starting: opening the filter"
	case r.State != "running":
		r.Error = r.State
	default:
		if err := wk.Ready(); err != nil {
			r.Error = err.Error()
		} else {
			r.Ready = true
		}
	}
	if wk != nil {
		r.Dependencies = wk.Status().Dependencies
	}
	code := http.StatusOK
	if !r.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, r)
}

// serveStats answers the report: this worker, the shared statistics, the
// filter and the streams.
func (m *Main) serveStats(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	rep := gather(ctx, m.rec, m.filter, m.nc, topology(m.Config), 20)
	if wk := m.worker.Load(); wk != nil {
		st := wk.Status()
		rep.Worker = &st
	}
	writeJSON(w, http.StatusOK, rep)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// filterCollector exports the filter's health on each scrape.
type filterCollector struct{ f seenFilter }

var (
	filterItemsDesc  = prometheus.NewDesc("sieve_filter_items", "Keys the filter has admitted.", nil, nil)
	filterFPPDesc    = prometheus.NewDesc("sieve_filter_estimated_fpp", "The filter's current false-positive rate, estimated from its fill.", nil, nil)
	filterTargetDesc = prometheus.NewDesc("sieve_filter_target_fpp", "The configured bound on the filter's false-positive rate.", nil, nil)
	filterMemDesc    = prometheus.NewDesc("sieve_filter_memory_bytes", "Memory the filter's bits or slots occupy.", nil, nil)
	filterLayersDesc = prometheus.NewDesc("sieve_filter_layers", "Layers of the growing filter.", nil, nil)
)

func (c filterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{filterItemsDesc, filterFPPDesc, filterTargetDesc, filterMemDesc, filterLayersDesc} {
		ch <- d
	}
}

func (c filterCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	s, err := c.f.Stats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(filterItemsDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(filterItemsDesc, prometheus.GaugeValue, float64(s.Items))
	ch <- prometheus.MustNewConstMetric(filterFPPDesc, prometheus.GaugeValue, s.EstimatedFPP)
	ch <- prometheus.MustNewConstMetric(filterTargetDesc, prometheus.GaugeValue, s.TargetFPP)
	ch <- prometheus.MustNewConstMetric(filterMemDesc, prometheus.GaugeValue, float64(s.MemoryBytes))
	ch <- prometheus.MustNewConstMetric(filterLayersDesc, prometheus.GaugeValue, float64(len(s.Layers)))
}
