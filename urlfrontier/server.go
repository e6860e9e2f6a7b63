package urlfrontier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sievecrawl/sieve/admit"
	"github.com/sievecrawl/sieve/dust"
	"github.com/sievecrawl/sieve/frontier"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
	"github.com/sievecrawl/sieve/urlstore"
)

// Crawls records and deletes crawls: package crawls' Store, which keeps a
// crawl's record, filter and counts, in the server's program.
type Crawls interface {
	// Create records the crawl if it has no record (its filter is opened
	// from the record's settings).
	Create(ctx context.Context, id string) error
	// Delete removes the crawl's filter, counts, record and its messages
	// on the pipeline's streams; found says it had a record.
	Delete(ctx context.Context, id string) (found bool, err error)
	// IDs lists the recorded crawls.
	IDs(ctx context.Context) ([]string, error)
}

// Rules gives each crawl's learned rewrite rules (package dust), as the
// crawlers learn them: *frontier.Rules, following the bucket <PREFIX>_RULES.
type Rules interface {
	// Set returns the crawl's active rules (nil: none).
	Set(crawl string) *dust.Set
}

var _ Rules = (*frontier.Rules)(nil)

// Options configures a Server. Zero values mean the defaults.
type Options struct {
	// JetStream holds the queues' log and the nodes' buckets (required).
	JetStream jetstream.JetStream
	// Dir is where the server keeps its index of the queues (a Pebble
	// database; another process's directory is not shared: the first of
	// Dir, Dir.1, … that is free). Empty: a temporary directory, removed
	// at Close, rebuilt from the log at every start.
	Dir string
	// CacheBytes is the index's block cache (default 64 MiB: at 3 M
	// queued URLs, puts ran 1.22x and acknowledgements 1.20x faster than
	// with 16 MiB, the tables' filter and index blocks staying in it).
	CacheBytes int64
	// Topology names them.
	Topology frontier.Topology
	// Filters are the crawls' seen-URL filters, shared with the dedup
	// workers (required).
	Filters admit.Filters
	// Canonicalize turns a URL into its canonical form (required:
	// normalize.Normalizer.URL).
	Canonicalize func(string) (string, error)
	// Crawls records and deletes crawls (required).
	Crawls Crawls
	// Rules, if set, gives each crawl's learned rules: a URL is tested
	// and marked in its crawl's filter under its page's key
	// (dust.Set.Key), as the dedup workers admit it, so that another
	// spelling of a page already put is a duplicate; the store keeps the
	// spelling put (see the package documentation). Nil: no rules.
	Rules Rules
	// Node is this server's address, as ListNodes shows it (required).
	Node string
	// DefaultDelay is a queue's delay between two turns unless SetDelay
	// set another (default 1 s).
	DefaultDelay time.Duration
	// DefaultLease is how long a handed-out URL waits for its update when
	// GetURLs asks for 0 (default 30 s).
	DefaultLease time.Duration
	// MaxBatch bounds the URLs of one DiscoveredBatch (default 10,000).
	MaxBatch int
	// MaxHandOut bounds the URLs of one GetURLs call (default 100,000).
	MaxHandOut int
	// AdmitTimeout bounds the admission of one batch: a URL not decided
	// by then is answered FAIL (default 10 s).
	AdmitTimeout time.Duration
	// CompactEvery is how often the queues' index is snapshotted and
	// their log trimmed below the previous snapshot (urlstore.Compact;
	// 0: this server never does, another may; every server restores
	// from the snapshots).
	CompactEvery time.Duration
	// Progress, if set, is told how Open's catch-up with the queues' log
	// goes (as the log says it, every 5 s), for a page that shows it while
	// the server is not ready yet.
	Progress func(status string)
	// Registerer receives the metrics (nil: none).
	Registerer prometheus.Registerer
	// Logger logs (nil: discard); LogLevel, if set, is what SetLogLevel
	// changes.
	Logger   *slog.Logger
	LogLevel *slog.LevelVar
	// Now tells the time (default time.Now).
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.DefaultDelay == 0 {
		o.DefaultDelay = time.Second
	}
	if o.DefaultLease <= 0 {
		o.DefaultLease = 30 * time.Second
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = 64 << 20
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 10_000
	}
	if o.MaxHandOut <= 0 {
		o.MaxHandOut = 100_000
	}
	if o.AdmitTimeout <= 0 {
		o.AdmitTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Server implements the URLFrontier service on Sieve (see the package
// documentation). Open it, Register it on a grpc.Server, and Close it
// after the grpc.Server stopped. It is safe for concurrent use.
type Server struct {
	// Unsafe, not Unimplemented: the compiler then checks that every RPC
	// of the API is implemented here; none answers UNIMPLEMENTED.
	pb.UnsafeURLFrontierServer
	o    Options
	b    *buckets
	q    *queues
	core *admit.Core
	m    *metrics
	// tmp is the temporary directory of the index (Options.Dir empty).
	tmp string

	// instance is this process's token among the servers.
	instance string

	active   bool
	mu       sync.Mutex
	recorded map[string]bool // crawls recorded by this server

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

var _ pb.URLFrontierServer = (*Server)(nil)

// Open opens the queues' store (its log in the stores' stream, its index
// in Options.Dir), reads what it holds per crawl, waits until the index has
// caught up with the log (reporting progress: a server that lost its disk
// rebuilds from the log) and starts keeping this node's liveness until
// Close. A restart reads only the log's entries written since the index
// last saw it, whatever the number of URLs.
func Open(ctx context.Context, o Options) (*Server, error) {
	if o.JetStream == nil || o.Filters == nil || o.Canonicalize == nil || o.Crawls == nil || o.Node == "" {
		return nil, errors.New("urlfrontier: Open needs JetStream, Filters, Canonicalize, Crawls and Node")
	}
	o = o.withDefaults()
	b, err := openBuckets(ctx, o.JetStream, o.Topology)
	if err != nil {
		return nil, err
	}
	s := &Server{o: o, b: b, recorded: map[string]bool{}, active: true, q: newQueues()}
	s.m, err = newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	s.core, err = admit.New(admit.Options{Filters: o.Filters, Publisher: publisher{s}, Logger: o.Logger, BackoffMax: time.Second})
	if err != nil {
		return nil, err
	}
	log, err := frontier.OpenStoreLog(ctx, o.JetStream, o.Topology, storeName)
	if err != nil {
		return nil, fmt.Errorf("urlfrontier: %w", err)
	}
	dir := o.Dir
	if dir == "" {
		if s.tmp, err = os.MkdirTemp("", "sieve-urlfrontier-"); err != nil {
			return nil, fmt.Errorf("urlfrontier: %w", err)
		}
		dir = s.tmp
	}
	logf := func(format string, args ...any) { o.Logger.Info(fmt.Sprintf(format, args...)) }
	so := urlstore.Options{CacheBytes: o.CacheBytes, Logf: logf, OnApply: s.q.onApply, CompactEvery: o.CompactEvery, Now: o.Now,
		Formats: map[string]int{storeName: formatVersion}, CheckValue: checkValue}
	// The snapshots whether this server compacts or not: another may
	// have trimmed the log, and then a new directory starts from them.
	if so.Snapshots, err = frontier.OpenStoreSnapshots(ctx, o.JetStream, o.Topology, storeName); err != nil {
		s.removeTmp()
		return nil, fmt.Errorf("urlfrontier: %w", err)
	}
	s.q.st, err = urlstore.OpenFree(ctx, dir, log, so)
	if err != nil {
		s.removeTmp()
		return nil, fmt.Errorf("urlfrontier: queues' store: %w", err)
	}
	if err := s.q.load(); err != nil {
		s.q.st.Close()
		s.removeTmp()
		return nil, fmt.Errorf("urlfrontier: queues' store: %w", err)
	}
	s.q.start()
	stopReport := s.reportLoad(ctx, s.q.st.Ready())
	err = s.q.st.WaitReady(ctx)
	stopReport()
	if err != nil {
		s.closeStore()
		return nil, fmt.Errorf("urlfrontier: %w", err)
	}
	if err := s.migrateBucket(ctx); err != nil {
		s.closeStore()
		return nil, err
	}
	if err := s.indexTurns(ctx); err != nil {
		s.closeStore()
		return nil, err
	}
	s.instance = newInstance()
	if err := s.announce(ctx); err != nil {
		s.closeStore()
		return nil, fmt.Errorf("urlfrontier: announce this server: %w", err)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.wg.Add(4)
	go func() { defer s.wg.Done(); s.heartbeat(rctx) }()
	go func() { defer s.wg.Done(); s.watchActive(rctx) }()
	go func() { defer s.wg.Done(); s.compactLoop(rctx) }()
	go func() { defer s.wg.Done(); s.reindex(rctx) }()
	return s, nil
}

// compactLoop compacts the queues' store (urlstore.Compact) until ctx
// ends, if this server compacts, and logs and counts each snapshot.
func (s *Server) compactLoop(ctx context.Context) {
	if s.o.CompactEvery <= 0 {
		return
	}
	s.q.st.CompactLoop(ctx, func(c urlstore.Compaction, err error) {
		switch {
		case err != nil:
			s.o.Logger.Warn("urlfrontier: compacting the queues' log failed; trying again", "error", err)
		case c.Snapshot != "":
			s.m.snapshots.Inc()
			s.m.snapshotBytes.Set(float64(c.Bytes))
			s.o.Logger.Info("urlfrontier: queues' index snapshotted, log trimmed below the previous snapshot",
				"snapshot", c.Snapshot, "bytes", c.Bytes, "took", c.Took.Round(time.Millisecond), "partitions_trimmed", c.Trimmed)
		}
	})
}

// Work counts the URLs put (each acknowledged item) and handed out since
// Open: how busy the server is, for a process that returns its free
// memory once the API is quiet (package memtrim), whatever its stores
// still do in the background. Listings and stats are not counted.
func (s *Server) Work() uint64 { return s.m.work.Load() }

// Err is why the queues' index stopped following their log
// (urlstore.ErrStale: a hole, this server having lagged behind the log's
// trims; restarted, it restores from the snapshot; urlstore.ErrNewerFormat:
// a newer build wrote what this one cannot read), nil while it follows: a
// readiness check.
func (s *Server) Err() error { return s.q.st.Err() }

// Stopped is closed once the queues' index stops following their log: at
// Close, or at a hole or a newer format (then Err says which).
func (s *Server) Stopped() <-chan struct{} { return s.q.st.Stopped() }

func (s *Server) removeTmp() {
	if s.tmp != "" {
		os.RemoveAll(s.tmp)
	}
}

// loadReport is how often a catch-up still running is reported.
var loadReport = 5 * time.Second

// reportLoad logs the progress of the index's catch-up with the log every
// loadReport until loaded is closed (or the returned function is called):
// a server that lost its index, or was stopped long, takes a while to
// start, and says how far it is rather than seeming hung.
func (s *Server) reportLoad(ctx context.Context, loaded <-chan struct{}) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	progress := s.o.Progress
	if progress == nil {
		progress = func(string) {}
	}
	progress("catching up with the queues' log")
	go func() {
		defer close(done)
		start := time.Now()
		t := time.NewTicker(loadReport)
		defer t.Stop()
		for {
			select {
			case <-loaded:
				return
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			st := s.q.st.Stats()
			elapsed := time.Since(start).Round(time.Second)
			s.o.Logger.Info("urlfrontier: catching up with the queues' log", "entries", st.Read,
				"at", st.Followed, "elapsed", elapsed)
			progress(fmt.Sprintf("catching up with the queues' log: %d entries read, at entry %d, for %v", st.Read, st.Followed, elapsed))
		}
	}()
	return func() { close(stop); <-done }
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Close stops the server's goroutines and removes this node from the live
// ones. It does not stop a grpc.Server; stop that first.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		s.cancel()
		s.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.b.nodes.Delete(ctx, s.b.topo.URLFrontierNodeKey(s.o.Node))
		_ = s.b.nodes.Delete(ctx, s.b.topo.URLFrontierServerKey(s.instance))
		err = s.closeStore()
	})
	return err
}

// closeStore stops the writers and closes the queues' store.
func (s *Server) closeStore() error {
	s.q.stop()
	err := s.q.st.Close()
	s.removeTmp()
	return err
}

// Register registers the service on g.
func (s *Server) Register(g *grpc.Server) { pb.RegisterURLFrontierServer(g, s) }

// ServerOptions are the grpc.Server options the service needs: its
// metrics interceptors and maxMsg as the largest message received.
func (s *Server) ServerOptions(maxMsg int) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(s.m.unary),
		grpc.ChainStreamInterceptor(s.m.stream),
		grpc.MaxRecvMsgSize(maxMsg),
	}
}

// heartbeat keeps this node and this process in the nodes bucket.
func (s *Server) heartbeat(ctx context.Context) {
	for {
		pause(ctx, nodeTTL/3)
		if ctx.Err() != nil {
			return
		}
		if err := s.announce(ctx); err != nil && ctx.Err() == nil {
			s.o.Logger.Warn("urlfrontier: heartbeat", "error", err)
		}
	}
}

// announce puts this node's address and this process in the nodes bucket.
func (s *Server) announce(ctx context.Context) error {
	t := s.b.topo
	for _, k := range []string{t.URLFrontierNodeKey(s.o.Node), t.URLFrontierServerKey(s.instance)} {
		if _, err := s.b.nodes.Put(ctx, k, []byte(s.o.Node)); err != nil {
			return err
		}
	}
	return nil
}

// watchActive follows this node's active flag until ctx ends. It leaves
// on ctx itself, not on the watcher's channel closing: a watcher stopped
// by its context did not always close it (TestCloseLeaksNothing waited 10
// minutes for Close under the race detector).
func (s *Server) watchActive(ctx context.Context) {
	key := s.b.topo.URLFrontierActiveKey(s.o.Node)
	for ctx.Err() == nil {
		w, err := s.b.state.Watch(ctx, key)
		if err != nil {
			pause(ctx, time.Second)
			continue
		}
		s.followActive(ctx, w)
		_ = w.Stop()
	}
}

// followActive applies w's updates of the active flag until ctx ends or
// w stops.
func (s *Server) followActive(ctx context.Context, w jetstream.KeyWatcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue
			}
			s.mu.Lock()
			s.active = e.Operation() != jetstream.KeyValuePut || string(e.Value()) != "false"
			s.mu.Unlock()
		}
	}
}

func (s *Server) isActive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// ensureCrawl records a crawl once per server.
func (s *Server) ensureCrawl(ctx context.Context, crawl string) error {
	s.mu.Lock()
	ok := s.recorded[crawl]
	s.mu.Unlock()
	if ok {
		return nil
	}
	if err := s.o.Crawls.Create(ctx, crawl); err != nil {
		return err
	}
	s.mu.Lock()
	s.recorded[crawl] = true
	s.mu.Unlock()
	return nil
}

// errStatus turns an internal error into a gRPC status: a context's end
// as such, anything else Unavailable (the client may retry).
func errStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Unavailable, err.Error())
}

// quoted is a client's string as a status message quotes it: at most
// maxQuoted bytes of it, then its length. A status travels in the
// response's trailers, and a client refuses trailers over its limit (16
// KiB in gRPC's C core, Python's grpcio) and sees INTERNAL instead: a
// 100 KB URL quoted whole hid its INVALID_ARGUMENT (issue 39).
func quoted(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:cut], len(s))
}

// maxQuoted bounds what a status message quotes of a client's string.
const maxQuoted = 256

// crawlArg checks a crawl id given to a call.
func crawlArg(id string) (string, error) {
	c := crawlOf(id)
	if !frontier.ValidCrawl(c) {
		return "", status.Errorf(codes.InvalidArgument, "crawl id %s: want 1-64 of [A-Za-z0-9_-]", quoted(id))
	}
	return c, nil
}

// existing checks that a crawl named by a call exists: DEFAULT always
// does; another must have URLs, queue state or a record. One that does
// not is NotFound (GetURLStatus: its URLs are unknown, as the reference
// answers).
func (s *Server) existing(ctx context.Context, id string) (string, error) {
	c, err := crawlArg(id)
	if err != nil {
		return "", err
	}
	ok, err := s.crawlExists(ctx, c)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", status.Errorf(codes.NotFound, "no crawl %q", c)
	}
	return c, nil
}

// crawlExists reports whether crawl c exists: DEFAULT always does;
// another has URLs, queue state or a record. The reference service
// answers the calls that read or delete an unknown crawl as for an empty
// one (0, empty stats, nothing listed), and so does this server: a call
// uses it only to skip work that would find nothing.
func (s *Server) crawlExists(ctx context.Context, c string) (bool, error) {
	if c == DefaultCrawl || s.q.hasCrawl(c) {
		return true, nil
	}
	ids, err := s.o.Crawls.IDs(ctx)
	if err != nil {
		return false, errStatus(err)
	}
	return slices.Contains(ids, c), nil
}

func keyArg(key string, required bool) error {
	if required && key == "" {
		return status.Error(codes.InvalidArgument, "a queue key is required")
	}
	if len(key) > frontier.MaxKeyBytes {
		return status.Errorf(codes.InvalidArgument, "queue key of %d bytes: at most %d", len(key), frontier.MaxKeyBytes)
	}
	return nil
}

func (s *Server) now() int64 { return ms(s.o.Now()) }
