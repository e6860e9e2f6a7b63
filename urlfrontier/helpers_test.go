package urlfrontier_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sievecrawl/sieve/admit"
	"github.com/sievecrawl/sieve/admit/admittest"
	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/urlfrontier"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// clock is a settable time shared by a test's servers.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is one NATS server, the filters and clock its URLFrontier servers
// share.
type env struct {
	tb      testing.TB
	nats    *natstest.Server
	filters admit.Filters
	clk     *clock
	// js, when set, is every server's connection; else each has its own.
	js jetstream.JetStream
}

func newEnv(tb testing.TB) *env {
	tb.Helper()
	return &env{tb: tb, nats: natstest.Start(tb, natstest.Options{}), filters: admittest.NewFilters(nil, nil),
		clk: &clock{t: time.Unix(1_764_000_000, 0)}}
}

// node is one running server and a client of it.
type node struct {
	srv    *urlfrontier.Server
	grpc   *grpc.Server
	client pb.URLFrontierClient
	addr   string
	stop   func()
}

// dial opens another client of n, with opts; it is closed with the test.
func (n *node) dial(tb testing.TB, opts ...grpc.DialOption) pb.URLFrontierClient {
	tb.Helper()
	conn, err := grpc.NewClient(n.addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return pb.NewURLFrontierClient(conn)
}

// start opens a server (a node named name) and serves it on loopback.
func (e *env) start(name string, tweak ...func(*urlfrontier.Options)) *node {
	tb := e.tb
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv, err := urlfrontier.Open(ctx, e.options(ctx, name, tweak...))
	if err != nil {
		tb.Fatal(err)
	}
	return e.serve(srv)
}

// options are the options of a server (a node named name) on e.
func (e *env) options(ctx context.Context, name string, tweak ...func(*urlfrontier.Options)) urlfrontier.Options {
	tb := e.tb
	tb.Helper()
	js := e.js
	if js == nil {
		js = e.nats.JetStream()
	}
	topo := frontier.Topology{}
	store, err := crawls.Open(ctx, js, topo, crawls.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	reg, err := frontier.OpenCrawls(ctx, js, topo)
	if err != nil {
		tb.Fatal(err)
	}
	canon, err := normalize.New(normalize.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	o := urlfrontier.Options{JetStream: js, Topology: topo, Filters: e.filters, Canonicalize: canon.URL,
		Crawls: urlfrontier.StoreCrawls{Store: store, Registry: reg, Forget: func(id string) {
			if f, ok := e.filters.(*admittest.Filters); ok {
				f.Drop(id)
			}
		}},
		Node: name, Now: e.clk.Now}
	for _, t := range tweak {
		t(&o)
	}
	return o
}

// serve serves srv on loopback.
func (e *env) serve(srv *urlfrontier.Server) *node {
	tb := e.tb
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	g := grpc.NewServer(srv.ServerOptions(4 << 20)...)
	srv.Register(g)
	go g.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	n := &node{srv: srv, grpc: g, client: pb.NewURLFrontierClient(conn), addr: lis.Addr().String()}
	var once sync.Once
	n.stop = func() {
		once.Do(func() {
			conn.Close()
			g.Stop()
			srv.Close()
		})
	}
	tb.Cleanup(n.stop)
	return n
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

func disc(crawl, url, key string) *pb.URLItem {
	return &pb.URLItem{Item: &pb.URLItem_Discovered{Discovered: &pb.DiscoveredURLItem{Info: &pb.URLInfo{Url: url, Key: key, CrawlID: crawl}}}}
}

func known(crawl, url string, refetch uint64) *pb.URLItem {
	return &pb.URLItem{Item: &pb.URLItem_Known{Known: &pb.KnownURLItem{Info: &pb.URLInfo{Url: url, CrawlID: crawl}, RefetchableFromDate: refetch}}}
}

// put sends items on one PutURLs stream and returns the acks' statuses by
// ID.
func (n *node) put(tb testing.TB, items ...*pb.URLItem) map[string]pb.AckMessage_Status {
	tb.Helper()
	st, err := n.client.PutURLs(ctxT(tb))
	if err != nil {
		tb.Fatal(err)
	}
	for _, it := range items {
		if err := st.Send(it); err != nil {
			tb.Fatal(err)
		}
	}
	st.CloseSend()
	got := map[string]pb.AckMessage_Status{}
	for {
		a, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
		got[a.GetID()] = a.GetStatus()
	}
	if len(got) != len(items) {
		tb.Fatalf("PutURLs: %d acks for %d items: %v", len(got), len(items), got)
	}
	return got
}

// get calls GetURLs and returns the URLs handed out.
func (n *node) get(tb testing.TB, p *pb.GetParams) []string {
	tb.Helper()
	st, err := n.client.GetURLs(ctxT(tb), p)
	if err != nil {
		tb.Fatal(err)
	}
	var urls []string
	for {
		u, err := st.Recv()
		if err == io.EOF {
			return urls
		}
		if err != nil {
			tb.Fatal(err)
		}
		urls = append(urls, u.GetUrl())
	}
}

func anyCrawl(perQueue, queues, lease uint32) *pb.GetParams {
	return &pb.GetParams{MaxUrlsPerQueue: perQueue, MaxQueues: queues, DelayRequestable: lease, Item: &pb.GetParams_AnyCrawlID{AnyCrawlID: &pb.AnyCrawlID{}}}
}

// eventually polls cond until it holds or 10 s pass.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
