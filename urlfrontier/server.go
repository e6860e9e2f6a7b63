package urlfrontier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sievecrawl/sieve/admit"
	"github.com/sievecrawl/sieve/frontier"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
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

// Options configures a Server. Zero values mean the defaults.
type Options struct {
	// JetStream holds the buckets (required).
	JetStream jetstream.JetStream
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
	o     Options
	store *store
	core  *admit.Core
	m     *metrics

	// instance is this process's token among the servers, watching
	// whether it watches the queues bucket (follow.go).
	instance string
	watching atomic.Bool

	active   bool
	mu       sync.Mutex
	recorded map[string]bool // crawls recorded by this server

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

var _ pb.URLFrontierServer = (*Server)(nil)

// Open opens the buckets, loads them into the server's index and starts
// keeping it (and this node's liveness) up to date until Close.
func Open(ctx context.Context, o Options) (*Server, error) {
	if o.JetStream == nil || o.Filters == nil || o.Canonicalize == nil || o.Crawls == nil || o.Node == "" {
		return nil, errors.New("urlfrontier: Open needs JetStream, Filters, Canonicalize, Crawls and Node")
	}
	o = o.withDefaults()
	st, err := openStore(ctx, o.JetStream, o.Topology)
	if err != nil {
		return nil, err
	}
	s := &Server{o: o, store: st, recorded: map[string]bool{}, active: true}
	s.m, err = newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	s.core, err = admit.New(admit.Options{Filters: o.Filters, Publisher: publisher{s}, Logger: o.Logger, BackoffMax: time.Second})
	if err != nil {
		return nil, err
	}
	s.instance = newInstance()
	if err := s.announce(ctx); err != nil {
		return nil, fmt.Errorf("urlfrontier: announce this server: %w", err)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	p := newPeers(st.topo.URLFrontierServerKey(s.instance))
	known, loaded := make(chan struct{}), make(chan struct{})
	var knownOnce, loadedOnce sync.Once
	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		s.watchPeers(rctx, p, func() { knownOnce.Do(func() { close(known) }) })
	}()
	go func() { defer s.wg.Done(); s.heartbeat(rctx) }()
	go func() { defer s.wg.Done(); s.watchActive(rctx) }()
	wait := func(c chan struct{}) error {
		select {
		case <-c:
			return nil
		case <-ctx.Done():
			s.Close()
			return ctx.Err()
		}
	}
	// The servers live now are known before the load, which then knows
	// whether to keep watching.
	if err := wait(known); err != nil {
		return nil, err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.follow(rctx, p, func() { loadedOnce.Do(func() { close(loaded) }) })
	}()
	stopReport := s.reportLoad(ctx, loaded)
	defer stopReport()
	if err := wait(loaded); err != nil {
		return nil, err
	}
	return s, nil
}

// loadReport is how often a load still running is reported.
var loadReport = 5 * time.Second

// reportLoad logs the progress of the bucket's load every loadReport
// until loaded is closed (or the returned function is called): a server
// with millions of queued URLs takes a while to start, and says how far
// it is rather than seeming hung.
func (s *Server) reportLoad(ctx context.Context, loaded <-chan struct{}) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
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
			total := uint64(0)
			ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
			if info, err := s.store.stream.Info(ictx); err == nil {
				total = info.State.Msgs
			}
			cancel()
			s.o.Logger.Info("urlfrontier: loading the queues", "bucket", s.store.topo.URLFrontierQueuesBucket(),
				"values", s.store.delivered.Load(), "of", total, "elapsed", time.Since(start).Round(time.Second))
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
	s.once.Do(func() {
		s.cancel()
		s.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.store.nodes.Delete(ctx, s.store.topo.URLFrontierNodeKey(s.o.Node))
		_ = s.store.nodes.Delete(ctx, s.store.topo.URLFrontierServerKey(s.instance))
	})
	return nil
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
	t := s.store.topo
	for _, k := range []string{t.URLFrontierNodeKey(s.o.Node), t.URLFrontierServerKey(s.instance)} {
		if _, err := s.store.nodes.Put(ctx, k, []byte(s.o.Node)); err != nil {
			return err
		}
	}
	return nil
}

// watchActive follows this node's active flag.
func (s *Server) watchActive(ctx context.Context) {
	key := s.store.topo.URLFrontierActiveKey(s.o.Node)
	for ctx.Err() == nil {
		w, err := s.store.state.Watch(ctx, key)
		if err != nil {
			pause(ctx, time.Second)
			continue
		}
		for e := range w.Updates() {
			if e == nil {
				continue
			}
			s.mu.Lock()
			s.active = e.Operation() != jetstream.KeyValuePut || string(e.Value()) != "false"
			s.mu.Unlock()
		}
		_ = w.Stop()
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

// crawlArg checks a crawl id given to a call.
func crawlArg(id string) (string, error) {
	c := crawlOf(id)
	if !frontier.ValidCrawl(c) {
		return "", status.Errorf(codes.InvalidArgument, "crawl id %q: want 1-64 of [A-Za-z0-9_-]", id)
	}
	return c, nil
}

// existing checks that a crawl named by a call exists: DEFAULT always
// does; another must have URLs, queue state or a record.
func (s *Server) existing(ctx context.Context, id string) (string, error) {
	c, err := crawlArg(id)
	if err != nil || c == DefaultCrawl {
		return c, err
	}
	for _, have := range s.store.x.crawlIDs() {
		if have == c {
			return c, nil
		}
	}
	ids, err := s.o.Crawls.IDs(ctx)
	if err != nil {
		return "", errStatus(err)
	}
	for _, have := range ids {
		if have == c {
			return c, nil
		}
	}
	return "", status.Errorf(codes.NotFound, "no crawl %q", c)
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
