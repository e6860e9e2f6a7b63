package natstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// cluster is what the servers of one Cluster share: its name and every
// node's route port, so that each node routes to all the others.
type cluster struct {
	name  string
	ports []int
}

func (c *cluster) routes() []*url.URL {
	var out []*url.URL
	for _, p := range c.ports {
		out = append(out, &url.URL{Scheme: "nats", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(p))})
	}
	return out
}

// Cluster is a JetStream cluster of embedded servers on loopback, owned by a
// test: every node routes to every other (full mesh), each stores in its
// own temporary directory, and each can be shut down and started again on
// its ports, as a node of a real deployment would be. Its methods are meant
// for the test goroutine.
type Cluster struct {
	// Servers are the nodes, named n1, n2, …
	Servers []*Server
	mesh
}

// node is what the client side of a cluster needs of one of its nodes,
// embedded (Server) or a process (External).
type node interface {
	URL() string
	Name() string
	Running() bool
}

// mesh is the client side of a cluster of nodes, embedded or processes:
// its URLs, connections and leaders.
type mesh struct {
	tb    testing.TB
	nodes []node
}

// clusterReadyTimeout bounds how long a cluster may take to elect its
// JetStream meta leader.
const clusterReadyTimeout = 30 * time.Second

// StartCluster starts n embedded servers (at least 3, so that replicated
// streams survive the loss of one) as one JetStream cluster and waits until
// JetStream answers through every node. The servers are shut down when the
// test ends.
func StartCluster(tb testing.TB, n int, opts Options) *Cluster {
	tb.Helper()
	if n < 3 {
		tb.Fatalf("natstest: a JetStream cluster needs at least 3 servers, got %d", n)
	}
	cl := &cluster{name: "natstest"}
	for i := 0; i < n; i++ {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("natstest: %v", err)
		}
		cl.ports = append(cl.ports, port)
	}
	c := &Cluster{mesh: mesh{tb: tb}}
	for i := 0; i < n; i++ {
		s := &Server{StoreDir: tb.TempDir(), tb: tb, opts: opts, port: -1,
			name: "n" + strconv.Itoa(i+1), cluster: cl, route: cl.ports[i]}
		if err := s.start(); err != nil {
			tb.Fatalf("natstest: start cluster node %s: %v", s.name, err)
		}
		s.port = s.srv.Addr().(*net.TCPAddr).Port
		tb.Cleanup(s.Shutdown)
		c.Servers = append(c.Servers, s)
		c.nodes = append(c.nodes, s)
	}
	c.WaitReady()
	return c
}

// URLs returns the client URLs of every node, first to last.
func (c *mesh) URLs() []string {
	var out []string
	for _, s := range c.nodes {
		out = append(out, s.URL())
	}
	return out
}

// URL returns the nodes' client URLs as one comma-separated list starting
// with node first (an index into Servers): the form of nats.url that makes
// a client try that node first and the others when it goes away.
func (c *mesh) URL(first int) string {
	urls := []string{c.nodes[first].URL()}
	for i, s := range c.nodes {
		if i != first {
			urls = append(urls, s.URL())
		}
	}
	return strings.Join(urls, ",")
}

// Conn returns a client connection that tries node first before the others
// (in order, not at random) and reconnects forever, closed when the test
// ends.
func (c *mesh) Conn(first int) *nats.Conn {
	c.tb.Helper()
	nc, err := nats.Connect(c.URL(first),
		nats.DontRandomize(),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond),
		nats.RetryOnFailedConnect(true))
	if err != nil {
		c.tb.Fatalf("natstest: connect %s: %v", c.URL(first), err)
	}
	c.tb.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on a fresh Conn(first).
func (c *mesh) JetStream(first int) jetstream.JetStream {
	c.tb.Helper()
	js, err := jetstream.New(c.Conn(first))
	if err != nil {
		c.tb.Fatalf("natstest: jetstream: %v", err)
	}
	return js
}

// WaitReady waits until JetStream answers through every running node (the
// meta leader is elected and every node knows it).
func (c *mesh) WaitReady() {
	c.tb.Helper()
	deadline := time.Now().Add(clusterReadyTimeout)
	for _, s := range c.nodes {
		if !s.Running() {
			continue
		}
		nc, err := nats.Connect(s.URL())
		if err != nil {
			c.tb.Fatalf("natstest: connect %s: %v", s.Name(), err)
		}
		js, _ := jetstream.New(nc)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err = js.AccountInfo(ctx)
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				nc.Close()
				c.tb.Fatalf("natstest: JetStream not ready on %s within %v: %v", s.Name(), clusterReadyTimeout, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		nc.Close()
	}
}

// ErrNoLeader is returned (wrapped) by Leader while a stream has no leader.
var ErrNoLeader = errors.New("natstest: stream has no leader")

// Leader returns the index (in Servers or Nodes) of the node that leads stream, asking
// through js.
func (c *mesh) Leader(ctx context.Context, js jetstream.JetStream, stream string) (int, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("natstest: stream %s: %w", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("natstest: stream %s: %w", stream, err)
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return 0, fmt.Errorf("%w: %s", ErrNoLeader, stream)
	}
	for i, s := range c.nodes {
		if s.Name() == info.Cluster.Leader {
			return i, nil
		}
	}
	return 0, fmt.Errorf("natstest: stream %s led by unknown server %q", stream, info.Cluster.Leader)
}
