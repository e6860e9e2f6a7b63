package urlfrontier

import (
	"context"
	"path"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// metrics are the server's Prometheus metrics:
//
//	sieve_urlfrontier_calls_total{rpc,code}   calls by RPC and status
//	sieve_urlfrontier_call_seconds{rpc}       their latency
//	sieve_urlfrontier_urls_total{rpc,status}  items answered OK, SKIPPED, FAIL
//	sieve_urlfrontier_rejected_total{reason}  items SKIPPED, by reason
//	sieve_urlfrontier_handed_out_total        URLs handed out by GetURLs
//	sieve_urlfrontier_queues_examined_total   queue states GetURLs read to choose
//	sieve_urlfrontier_snapshots_total         snapshots of the queues' index taken here
//	sieve_urlfrontier_snapshot_bytes          the last one's size
type metrics struct {
	// work counts the URLs put and handed out, as a process's measure of
	// its own activity (Server.Work).
	work          atomic.Uint64
	calls         *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	urls          *prometheus.CounterVec
	rejected      *prometheus.CounterVec
	handed        prometheus.Counter
	examined      prometheus.Counter
	snapshots     prometheus.Counter
	snapshotBytes prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sieve_urlfrontier_calls_total",
			Help: "URLFrontier calls by RPC and gRPC status code."}, []string{"rpc", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sieve_urlfrontier_call_seconds",
			Help: "URLFrontier call latency (streams: their whole life).", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)},
			[]string{"rpc"}),
		urls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sieve_urlfrontier_urls_total",
			Help: "URLs put, by RPC and the status acknowledged."}, []string{"rpc", "status"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sieve_urlfrontier_rejected_total",
			Help: "URLs put and answered SKIPPED, by reason."}, []string{"reason"}),
		handed: prometheus.NewCounter(prometheus.CounterOpts{Name: "sieve_urlfrontier_handed_out_total",
			Help: "URLs handed out by GetURLs."}),
		examined: prometheus.NewCounter(prometheus.CounterOpts{Name: "sieve_urlfrontier_queues_examined_total",
			Help: "Queue states GetURLs read to choose the queues it serves (those due in the ready queues' index): beside handed_out_total, what a hand-out costs."}),
		snapshots: prometheus.NewCounter(prometheus.CounterOpts{Name: "sieve_urlfrontier_snapshots_total",
			Help: "Snapshots of the queues' index this server took (urlfrontier.compact_every), each followed by a trim of the queues' log."}),
		snapshotBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sieve_urlfrontier_snapshot_bytes",
			Help: "Size of the last snapshot of the queues' index this server took."}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.calls, m.latency, m.urls, m.rejected, m.handed, m.examined, m.snapshots, m.snapshotBytes} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) observe(method string, start time.Time, err error) {
	rpc := path.Base(method)
	m.calls.WithLabelValues(rpc, status.Code(err).String()).Inc()
	m.latency.WithLabelValues(rpc).Observe(time.Since(start).Seconds())
}

func (m *metrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	m.observe(info.FullMethod, start, err)
	return resp, err
}

func (m *metrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	err := h(srv, ss)
	m.observe(info.FullMethod, start, err)
	return err
}
