package frontier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sievecrawl/sieve/internal/lograte"
)

// Defaults of StreamHealthOptions.
const (
	// DefaultStreamCheckEvery is how often StreamHealth asks for the
	// streams' state.
	DefaultStreamCheckEvery = 10 * time.Second
	// DefaultStreamBound is how long a stream's problem lasts before the
	// stream counts as degraded: longer than a leader election (a few
	// seconds) and a restarted node's catch-up after a short absence (its
	// replicas current again within seconds), shorter than the ~45 s after
	// which a restarted nats-server 2.11 node dropped its copies as
	// orphaned (nats-server#5382), so that an operator sees the node behind
	// before the streams are lost.
	DefaultStreamBound = 30 * time.Second
)

// StreamHealthOptions configures a StreamHealth; zero values mean the
// defaults.
type StreamHealthOptions struct {
	// Every is how often the streams are read (default
	// DefaultStreamCheckEvery).
	Every time.Duration
	// Bound is how long a problem lasts before its stream is degraded
	// (default DefaultStreamBound; negative: at once, as a one-shot
	// command asks).
	Bound time.Duration
	// Logger hears streams becoming degraded and healthy again (each at
	// once, then at most once a minute a stream; default: discard).
	Logger *slog.Logger
	// Registerer receives the gauges sieve_stream_degraded and
	// sieve_stream_replicas_lagging, by stream (default: none).
	Registerer prometheus.Registerer
}

// StreamState is what StreamHealth knows of one stream.
type StreamState struct {
	// Stream is the stream's name (a key-value bucket's is KV_<bucket>).
	Stream string `json:"stream"`
	// Replicas is how many the stream is configured with (0: unknown).
	Replicas int `json:"replicas,omitempty"`
	// Leader is the server leading it ("" when none is known).
	Leader string `json:"leader,omitempty"`
	// Lagging is how many replicas have been offline or not current for
	// longer than the bound.
	Lagging int `json:"lagging,omitempty"`
	// Degraded says why the stream is degraded ("" while it is not): each
	// problem that lasted longer than the bound, with how long.
	Degraded string `json:"degraded,omitempty"`
	// Problems are what the last check found, however short-lived.
	Problems []string `json:"problems,omitempty"`
}

// StreamHealth reads the replicas of Sieve's streams (those of its
// topology: the discovered and frontier streams, the crawls' bucket, which
// must exist, and every other stream or bucket named with its prefix)
// every Every, and calls a stream degraded when for longer than Bound a
// replica is offline or not current, the stream has fewer replicas than
// configured or no leader, or it cannot be read or is missing. A degraded
// stream does not stop the process (writes may still reach a quorum): it
// is said in readiness, the live page, the metrics and the log, so that a
// node that came back without its copies is noticed before a second loss
// stalls the streams. It is safe for concurrent use.
type StreamHealth struct {
	js    jetstream.JetStream
	topo  Topology
	o     StreamHealthOptions
	lines *lograte.Limiter
	now   func() time.Time

	degradedG, laggingG *prometheus.GaugeVec

	mu      sync.Mutex
	since   map[string]time.Time // stream + "\x00" + problem key → first seen
	streams map[string]StreamState

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// NewStreamHealth returns a StreamHealth of topo's streams on js; Start
// starts its checks. It fails if its gauges cannot be registered.
func NewStreamHealth(js jetstream.JetStream, topo Topology, o StreamHealthOptions) (*StreamHealth, error) {
	if o.Every <= 0 {
		o.Every = DefaultStreamCheckEvery
	}
	if o.Bound == 0 {
		o.Bound = DefaultStreamBound
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	h := &StreamHealth{js: js, topo: topo.WithDefaults(), o: o, lines: lograte.New(time.Minute), now: time.Now,
		since: map[string]time.Time{}, streams: map[string]StreamState{}}
	if o.Registerer != nil {
		h.degradedG = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "sieve", Subsystem: "stream", Name: "degraded",
			Help: "1 while a stream has had a replica offline or behind, too few replicas, no leader, or no answer for longer than the bound."}, []string{"stream"})
		h.laggingG = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "sieve", Subsystem: "stream", Name: "replicas_lagging",
			Help: "Replicas of a stream offline or not current for longer than the bound."}, []string{"stream"})
		for _, c := range []prometheus.Collector{h.degradedG, h.laggingG} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("frontier: stream health metrics: %w", err)
			}
		}
	}
	return h, nil
}

// Start checks the streams at once and then every Every, in the
// background, until Close.
func (h *StreamHealth) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan struct{})
	go func() {
		defer close(h.done)
		t := time.NewTicker(h.o.Every)
		defer t.Stop()
		for {
			h.Check(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Close stops the checks and waits for the one under way. It is
// idempotent.
func (h *StreamHealth) Close() {
	h.once.Do(func() {
		if h.cancel != nil {
			h.cancel()
			<-h.done
		}
	})
}

// required are the streams every deployment has once a worker started.
func (h *StreamHealth) required() []string {
	return []string{h.topo.DiscoveredStream(), h.topo.FrontierStream(), "KV_" + h.topo.CrawlsBucket()}
}

// ours reports whether a stream's name is one of the topology's.
func (h *StreamHealth) ours(name string) bool {
	p := h.topo.upperPrefix() + "_"
	return strings.HasPrefix(name, p) || strings.HasPrefix(name, "KV_"+p) || strings.HasPrefix(name, "OBJ_"+p)
}

// problem is one thing wrong with a stream at a check: key names it across
// checks (its figures left out), text says it.
type problem struct{ key, text string }

// Check reads every stream once (each within Every, at most 5 s) and
// updates what Streams, Degraded and the gauges say. Disconnected from
// NATS, it changes nothing.
func (h *StreamHealth) Check(ctx context.Context) {
	if Connected(h.js.Conn()) != nil {
		return // readiness says so; the streams' state is unknown, not changed
	}
	timeout := min(h.o.Every, 5*time.Second)
	found := map[string][]problem{}
	info := map[string]*jetstream.StreamInfo{}
	names := slices.Clone(h.required())
	lctx, cancel := context.WithTimeout(ctx, timeout)
	list := h.js.StreamNames(lctx)
	for name := range list.Name() {
		if h.ours(name) && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	listErr := list.Err()
	cancel()
	if ctx.Err() != nil {
		return
	}
	h.mu.Lock()
	for name := range h.streams { // known before: still checked when the list fails
		if !slices.Contains(names, name) && listErr != nil {
			names = append(names, name)
		}
	}
	h.mu.Unlock()
	// The streams are read in parallel: without a quorum each read waits
	// its whole timeout.
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, 8)
	)
	for _, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ictx, cancel := context.WithTimeout(ctx, timeout)
			in, err := h.streamInfo(ictx, name)
			cancel()
			var probs []problem
			switch {
			case errors.Is(err, jetstream.ErrStreamNotFound) && slices.Contains(h.required(), name):
				probs = []problem{{"missing", "not found"}}
			case errors.Is(err, jetstream.ErrStreamNotFound):
				return // not made yet by this deployment (routes off, no archive)
			case err != nil:
				probs = []problem{{"unread", "cannot be read: " + err.Error()}}
			default:
				probs = replicaProblems(in)
			}
			mu.Lock()
			defer mu.Unlock()
			found[name] = probs
			if in != nil {
				info[name] = in
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	h.update(found, info)
}

// streamInfo reads name's state; in a cluster, the replicas' state is its
// leader's answer.
func (h *StreamHealth) streamInfo(ctx context.Context, name string) (*jetstream.StreamInfo, error) {
	s, err := h.js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.Info(ctx)
}

// replicaProblems lists what is wrong with a stream's replicas.
func replicaProblems(in *jetstream.StreamInfo) []problem {
	want := in.Config.Replicas
	if want <= 1 {
		return nil // a single copy: its node answering is all there is
	}
	c := in.Cluster
	if c == nil || c.Leader == "" {
		return []problem{{"leader", "no leader"}}
	}
	var out []problem
	if got := len(c.Replicas) + 1; got < want {
		out = append(out, problem{"count", fmt.Sprintf("%d of %d replicas", got, want)})
	}
	current := 1 // the leader
	for _, p := range c.Replicas {
		switch {
		case p.Offline:
			out = append(out, problem{"replica " + p.Name, "replica " + p.Name + " offline"})
		case !p.Current:
			out = append(out, problem{"replica " + p.Name, fmt.Sprintf("replica %s not current (%d behind)", p.Name, p.Lag)})
		default:
			current++
		}
	}
	if current < want/2+1 {
		// Writes stall: what nats-server logs as "has NO quorum, stalled".
		out = append([]problem{{"quorum", fmt.Sprintf("no quorum: %d of %d replicas current", current, want)}}, out...)
	}
	return out
}

// update records a check's findings: how long each problem has lasted,
// which streams are degraded, their gauges and the log.
func (h *StreamHealth) update(found map[string][]problem, info map[string]*jetstream.StreamInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	seen := map[string]bool{}
	next := map[string]StreamState{}
	for name, probs := range found {
		st := StreamState{Stream: name}
		if in := info[name]; in != nil {
			st.Replicas = in.Config.Replicas
			if in.Cluster != nil {
				st.Leader = in.Cluster.Leader
			}
		}
		var why []string
		for _, p := range probs {
			k := name + "\x00" + p.key
			seen[k] = true
			first, ok := h.since[k]
			if !ok {
				first, h.since[k] = now, now
			}
			st.Problems = append(st.Problems, p.text)
			if lasted := now.Sub(first); lasted >= h.o.Bound {
				if h.o.Bound < 0 {
					why = append(why, p.text) // a one-shot check: no duration to say
				} else {
					why = append(why, fmt.Sprintf("%s for %v", p.text, lasted.Round(time.Second)))
				}
				if strings.HasPrefix(p.key, "replica ") {
					st.Lagging++
				}
			}
		}
		st.Degraded = strings.Join(why, "; ")
		next[name] = st
	}
	for k := range h.since {
		if !seen[k] {
			delete(h.since, k)
		}
	}
	for name, st := range next {
		was := h.streams[name]
		switch {
		case st.Degraded != "" && was.Degraded == "":
			h.lines.Log(h.o.Logger, slog.LevelWarn, name+" degraded", "stream degraded", "stream", name, "reason", st.Degraded)
		case st.Degraded == "" && was.Degraded != "":
			h.lines.Log(h.o.Logger, slog.LevelInfo, name+" healthy", "stream healthy again", "stream", name)
		}
		if h.degradedG != nil {
			h.degradedG.WithLabelValues(name).Set(b2f(st.Degraded != ""))
			h.laggingG.WithLabelValues(name).Set(float64(st.Lagging))
		}
	}
	for name := range h.streams {
		if _, ok := next[name]; !ok && h.degradedG != nil {
			h.degradedG.DeleteLabelValues(name)
			h.laggingG.DeleteLabelValues(name)
		}
	}
	h.streams = next
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Streams returns the state of every stream of the last check, by name.
func (h *StreamHealth) Streams() []StreamState {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]StreamState, 0, len(h.streams))
	for _, name := range slices.Sorted(maps.Keys(h.streams)) {
		out = append(out, h.streams[name])
	}
	return out
}

// Degraded returns why each degraded stream is, by name; nil when none
// is.
func (h *StreamHealth) Degraded() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out map[string]string
	for name, st := range h.streams {
		if st.Degraded != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[name] = st.Degraded
		}
	}
	return out
}
