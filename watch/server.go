package watch

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sievecrawl/sieve/auth"
	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/internal/lograte"
	"github.com/sievecrawl/sieve/pipeline"
)

//go:embed ui
var ui embed.FS

// Registry is where the Server registers its collectors and what /metrics
// serves (a *prometheus.Registry).
type Registry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// Options configures a Server. Zero values mean the defaults beside them.
type Options struct {
	// Interval is the time between samples: 1s.
	Interval time.Duration
	// History is how far back the time series goes: 1h.
	History time.Duration
	// FilterEvery is how often the filter's statistics are read: Interval
	// (never less).
	FilterEvery time.Duration
	// RulesEvery is how often the crawls' learned rules are read from
	// Sources.Rules: 5s (never less than Interval).
	RulesEvery time.Duration
	// TopHosts is how many top hosts /stats lists: 20.
	TopHosts int
	// Timeout bounds one sample's reads: 5s.
	Timeout time.Duration
	// Registry receives the filter and queue metrics and is served at
	// /metrics; nil: a registry of the Server's own.
	Registry Registry
	// AnnounceEvery is how often the process announces itself to
	// Sources.Peers and reads the others' announcements: 5s.
	AnnounceEvery time.Duration
	// Dir, if set, is a directory the Server announces itself in (URLFile,
	// from Listen until Close) and leaves its last report in (ReportFile, at
	// Close): an embedded crawl's data directory, read by ReadDir.
	Dir string
	// Logger receives sampling failures (once per part until it recovers);
	// nil discards them.
	Logger *slog.Logger
	// WebConfigFile is the Prometheus web configuration file Listen
	// serves by (see Web; empty: plain HTTP), and TLS says it enables
	// TLS, so that URL says https (as it does anyway when the file does).
	WebConfigFile string
	TLS           bool
	// Auth, if set, guards every path with tokens or certificates' roles
	// (any role reads), beside the file's users, but /healthz and /readyz
	// with HealthOpen.
	Auth       *auth.Authenticator
	HealthOpen bool
}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.History <= 0 {
		o.History = time.Hour
	}
	o.FilterEvery = max(o.FilterEvery, o.Interval)
	if o.RulesEvery <= 0 {
		o.RulesEvery = 5 * time.Second
	}
	o.RulesEvery = max(o.RulesEvery, o.Interval)
	if o.AnnounceEvery <= 0 {
		o.AnnounceEvery = 5 * time.Second
	}
	if o.TopHosts <= 0 {
		o.TopHosts = 20
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Server samples its Sources and serves the watch surface. Construct with
// New, serve Handler (or call Listen), then Close. It is safe for concurrent
// use.
type Server struct {
	src     Sources
	opts    Options
	started time.Time
	series  *series

	mu          sync.Mutex
	last        Report
	failing     map[string]bool
	lines       *lograte.Limiter // parts that cannot be read: each at once, then once a minute
	filterAt    time.Time
	rulesAt     time.Time
	announcedAt time.Time
	announced   bool // once: Close takes the announcement back
	peers       []Peer

	web       *Web
	srv       *http.Server
	addr      net.Addr
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// New returns a Server watching src; it takes its first sample before it
// returns and then one every Interval until Close.
func New(src Sources, opts Options) (*Server, error) {
	opts = opts.withDefaults()
	if src.ID == "" && src.Crawler != nil {
		src.ID = src.Crawler.ID()
	}
	if src.ID == "" {
		src.ID = defaultID(src.Role)
	}
	s := &Server{
		src:     src,
		opts:    opts,
		started: time.Now(),
		series:  newSeries(int(opts.History/opts.Interval) + 1),
		failing: map[string]bool{},
		lines:   lograte.New(time.Minute),
	}
	if err := registerMetrics(opts.Registry, s); err != nil {
		return nil, fmt.Errorf("watch: metrics: %w", err)
	}
	web, err := OpenWeb(WebOptions{ConfigFile: opts.WebConfigFile, Auth: opts.Auth, HealthOpen: opts.HealthOpen,
		Registerer: opts.Registry, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	s.web = web
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.sample(ctx, time.Now())
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(opts.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				s.sample(ctx, now)
			}
		}
	}()
	return s, nil
}

// Listen serves Handler on addr (host:port; port 0 picks a free one) until
// Close, and returns the address it listens on.
func (s *Server) Listen(addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("watch: listen: %w", err)
	}
	s.mu.Lock()
	s.srv = NewHTTPServer(s.web.Handler(s.Handler()))
	s.addr = ln.Addr()
	srv := s.srv
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.web.Serve(ln, srv); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.opts.Logger.Error("watch: serve", "err", err)
		}
	}()
	if err := s.announce(s.pageURL(ln.Addr())); err != nil {
		s.opts.Logger.Warn("watch: commands will not find this process", "err", err)
	}
	return ln.Addr(), nil
}

// NewHTTPServer returns the http.Server a watch surface is served by
// (Listen's, and a process's that serves Handler itself): a client has
// 10 seconds to finish its TLS handshake and send its headers (net/http
// bounds the handshake by ReadHeaderTimeout too) and 64 KiB of headers at
// most, so that clients holding connections half-open (slowloris) are
// dropped; an idle keep-alive connection is closed after 2 minutes.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
}

// URL returns the page's address once Listen succeeded ("" before): a
// wildcard host is shown as 127.0.0.1.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.addr == nil {
		return ""
	}
	return s.pageURL(s.addr)
}

// pageURL is PageURL, https when the web configuration enables TLS.
func (s *Server) pageURL(addr net.Addr) string {
	return withTLS(PageURL(addr.String()), s.opts.TLS || s.web.TLS())
}

// withTLS is page URL u, over https if tls.
func withTLS(u string, tls bool) string {
	if tls {
		return "https" + u[len("http"):]
	}
	return u
}

// LocalPageURL is the base URL at which a command on this machine reaches
// the surface that the settings h serve: PageURL of http.addr, https when
// http.web_config_file sets TLS.
func LocalPageURL(h config.HTTP) (string, error) {
	if h.Addr == "" {
		return "", &config.FieldError{Field: "http.addr", Err: errors.New("empty: this process serves no HTTP surface")}
	}
	if _, _, err := net.SplitHostPort(h.Addr); err != nil {
		return "", &config.FieldError{Field: "http.addr", Err: err}
	}
	tls, _, err := h.Web()
	if err != nil {
		return "", err
	}
	return withTLS(PageURL(h.Addr), tls), nil
}

// PageURL turns a listen address into the URL of its page.
func PageURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr + "/"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// Close stops the HTTP server (letting requests in progress finish for up to
// 5 seconds) and sampling, and waits for their goroutines; with Options.Dir
// it first takes a last sample and saves its report there. It may be called
// more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		srv := s.srv
		s.mu.Unlock()
		var errs []error
		if srv != nil {
			// Connections that never sent a request (stalled in the TLS
			// handshake or the headers) are not idle to Shutdown: past
			// the grace they are closed rather than waited for.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := srv.Shutdown(ctx); errors.Is(err, context.DeadlineExceeded) {
				srv.Close()
			} else {
				errs = append(errs, err)
			}
			cancel()
		}
		s.cancel()
		s.wg.Wait()
		errs = append(errs, s.web.Close(), s.retire())
		s.mu.Lock()
		announced := s.announced
		s.mu.Unlock()
		if s.src.Peers != nil && announced { // else it has nothing to take back
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			errs = append(errs, s.src.Peers.Leave(ctx, s.src.ID))
			cancel()
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// Report returns the last sample's report.
func (s *Server) Report() Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Samples returns the time series after the time ms (Unix milliseconds; 0:
// all of it).
func (s *Server) Samples(ms int64) Samples {
	out := s.series.after(ms)
	out.IntervalMS = s.opts.Interval.Milliseconds()
	return out
}

// sample reads the sources into a Report and the time series.
func (s *Server) sample(ctx context.Context, now time.Time) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	src := s.src
	r := Report{Role: src.Role, Started: s.started, At: now}
	v := map[string]float64{}
	if src.Counters != nil {
		if snap, err := src.Counters.Snapshot(ctx, s.opts.TopHosts); err != nil {
			r.fail("shared", err)
		} else {
			r.Shared = &snap
			t := snap.Totals
			v["links"], v["admitted"], v["duplicates"] = float64(t.Links), float64(t.Admitted), float64(t.Duplicates)
			v["rejected"], v["poison"], v["pages"] = float64(t.RejectedTotal()), float64(t.PoisonTotal()), float64(t.Pages)
			for id, c := range t.Crawls {
				p := "crawl:" + id + ":"
				v[p+"links"], v[p+"admitted"], v[p+"duplicates"], v[p+"rejected"] = float64(c.Links), float64(c.Admitted), float64(c.Duplicates), float64(c.Rejected)
			}
		}
	}
	s.mu.Lock()
	prev := s.last
	readFilter := now.Sub(s.filterAt) >= s.opts.FilterEvery || prev.Filter == nil
	s.mu.Unlock()
	if src.Filter != nil {
		if !readFilter {
			r.Filter, r.FilterAt = prev.Filter, prev.FilterAt
		} else if fs, err := src.Filter.Stats(ctx); err != nil {
			r.fail("filter", err)
		} else {
			r.Filter, r.FilterAt = &fs, now
		}
		if r.Filter != nil {
			r.Growth = growthRemaining(r.Filter)
			v["filter:items"], v["filter:fpp"] = float64(r.Filter.Items), r.Filter.EstimatedFPP
		}
	}
	if src.Queues != nil {
		if d, err := src.Queues.Depths(ctx); err != nil {
			r.fail("streams", err)
		} else {
			r.Streams = &d
			v["queue:discovered"], v["queue:discovered_in_flight"] = float64(d.DiscoveredQueued), float64(d.DiscoveredInFlight)
			v["queue:frontier"], v["queue:redelivered"] = float64(d.FrontierQueued), float64(d.DiscoveredRedelivered+d.FrontierRedelivered)
			for id, n := range d.Crawls {
				v["crawl:"+id+":queued"] = float64(n)
			}
		}
	}
	if src.Worker != nil {
		if st, ok := src.Worker.Status(); ok {
			r.Worker = &st
		}
		rd := src.Worker.Readiness()
		r.Readiness = &rd
	}
	if src.Crawler != nil {
		st := src.Crawler.Stats()
		r.Crawler = &CrawlerState{ID: src.Crawler.ID(), Stats: st}
		crawlerValues(v, "", st.Fetched, st.Outcomes, crawl.Sum(st.Retried), crawl.Sum(st.Failed))
		for id, cs := range st.Crawls {
			crawlerValues(v, "crawl:"+id+":", cs.Fetched, cs.Outcomes, cs.Retried, cs.Failed)
		}
	}
	s.readRules(ctx, &r, prev, now)
	if src.Archive != nil {
		a := src.Archive()
		r.Archive = &a
		v["warc:bytes"] = float64(a.Bytes)
	}
	r.Ready, r.NotReady = s.ready()
	r.Degraded = s.degraded()
	s.series.add(now, v)
	win := 10 * time.Second
	r.Rates = Rates{
		Window: win.Seconds(), Links: s.series.rate("links", win), Admitted: s.series.rate("admitted", win),
		Duplicates: s.series.rate("duplicates", win), Rejected: s.series.rate("rejected", win),
		Fetched: s.series.rate("fetched", win),
	}
	r.ID = src.ID
	s.announcePeers(ctx, &r)

	s.mu.Lock()
	defer s.mu.Unlock()
	if r.FilterAt.Equal(now) {
		s.filterAt = now
	}
	s.last = r
	for part, msg := range r.Errors {
		// Flapping (a NATS node away) is said once a minute.
		if !s.failing[part] {
			s.lines.Log(s.opts.Logger, slog.LevelWarn, part, "watch: cannot read "+part, "err", msg)
		} else {
			s.lines.LogOwed(s.opts.Logger, slog.LevelWarn, part, "watch: cannot read "+part, "err", msg)
		}
	}
	s.failing = map[string]bool{}
	for part := range r.Errors {
		s.failing[part] = true
	}
}

// announcePeers tells Sources.Peers about this process and reads the others,
// every AnnounceEvery; between, r shows the last list read.
func (s *Server) announcePeers(ctx context.Context, r *Report) {
	if s.src.Peers == nil {
		return
	}
	s.mu.Lock()
	due := r.At.Sub(s.announcedAt) >= s.opts.AnnounceEvery
	peers := s.peers
	url := ""
	if s.addr != nil {
		url = PageURL(s.addr.String())
	}
	s.mu.Unlock()
	if due {
		err := s.src.Peers.Announce(ctx, Peer{ID: s.src.ID, Role: s.src.Role, URL: url, Ready: r.Ready, Degraded: r.Degraded, Held: held(r), Started: s.started, At: r.At, Rates: r.Rates})
		if err == nil {
			s.mu.Lock()
			s.announced = true
			s.mu.Unlock()
			peers, err = s.src.Peers.List(ctx)
		}
		if err != nil {
			r.fail("peers", err)
		} else {
			s.mu.Lock()
			s.announcedAt, s.peers = r.At, peers
			s.mu.Unlock()
		}
	}
	r.Peers = peers
}

// held is the report's worker's held batches, or nil.
func held(r *Report) *frontier.Held {
	if r.Worker == nil {
		return nil
	}
	return r.Worker.Held
}

// crawlerValues puts a crawler's counts into a sample, under prefix.
func crawlerValues(v map[string]float64, prefix string, fetched int64, outcomes map[string]int64, retried, failed int64) {
	v[prefix+"fetched"], v[prefix+"retried"], v[prefix+"failed"] = float64(fetched), float64(retried), float64(failed)
	for _, o := range crawl.Outcomes() {
		v[prefix+"outcome:"+o] = float64(outcomes[o])
	}
}

// ready runs the readiness checks.
func (s *Server) ready() (bool, map[string]string) {
	checks := maps.Clone(s.src.Checks)
	if s.src.Worker != nil {
		if checks == nil {
			checks = map[string]func() error{}
		}
		checks["worker"] = func() error {
			if r := s.src.Worker.Readiness(); !r.Ready {
				return errors.New(r.Error)
			}
			return nil
		}
	}
	var not map[string]string
	for _, name := range slices.Sorted(maps.Keys(checks)) {
		if err := checks[name](); err != nil {
			if not == nil {
				not = map[string]string{}
			}
			not[name] = err.Error()
		}
	}
	return not == nil, not
}

// degraded gathers what works, but not as it should, by part; nil when
// nothing is.
func (s *Server) degraded() map[string]string {
	var out map[string]string
	if s.src.Worker != nil {
		if st, ok := s.src.Worker.Status(); ok && st.Held != nil {
			out = map[string]string{"worker": st.Held.String()}
		}
	}
	for _, d := range s.src.Degraded {
		for part, why := range d.Degraded() {
			if out == nil {
				out = map[string]string{}
			}
			out[part] = why
		}
	}
	return out
}

// Handler serves the watch surface: / (the page and its files), /stats,
// /series, /metrics, /healthz, /readyz, and POST /contains.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	page, _ := fs.Sub(ui, "ui")
	mux.Handle("GET /", http.FileServerFS(page))
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Report())
	})
	mux.HandleFunc("GET /series", func(w http.ResponseWriter, r *http.Request) {
		after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		writeJSON(w, http.StatusOK, s.Samples(after))
	})
	mux.HandleFunc("POST /contains", s.serveContains)
	// A source that cannot be read (Redis failing over, NATS away) is left
	// out of the scrape, and said by sieve_watch_source_up and in the log;
	// the rest answers 200, so Prometheus does not mark the process down,
	// and the dashboards go blank, just when an incident needs them.
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{
		Registry: s.opts.Registry, ErrorHandling: promhttp.ContinueOnError, ErrorLog: scrapeLog{s.opts.Logger}}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, not := s.ready()
		// Degraded parts leave the process ready: they are named.
		body := struct {
			Ready    bool                `json:"ready"`
			NotReady map[string]string   `json:"not_ready,omitempty"`
			Degraded map[string]string   `json:"degraded,omitempty"`
			Worker   *pipeline.Readiness `json:"worker,omitempty"`
		}{Ready: ok, NotReady: not, Degraded: s.degraded()}
		if s.src.Worker != nil {
			rd := s.src.Worker.Readiness()
			body.Worker = &rd
		}
		code := http.StatusOK
		if !ok {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, body)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// scrapeLog hands promhttp's errors (a collector that could not be read)
// to the logger.
type scrapeLog struct{ l *slog.Logger }

func (s scrapeLog) Println(v ...any) {
	s.l.Warn("metrics: part of a scrape left out", "error", fmt.Sprint(v...))
}
