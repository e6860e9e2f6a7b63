package main

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
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

// serveReady answers 200 while the worker runs with NATS and the filter
// available and its snapshot saved, 503 otherwise (starting, stopping, a
// dependency down, a failing snapshot), with pipeline.Readiness as body.
func (m *Main) serveReady(w http.ResponseWriter, _ *http.Request) {
	r := m.w.Readiness()
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
	rep := gather(ctx, m.w.StatsSnapshot, m.w.FilterStats, m.w.NATS(), m.w.Topology(), 20)
	if st, ok := m.w.Status(); ok {
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
