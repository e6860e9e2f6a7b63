// Package redistest starts real redis-server processes for tests: a single
// server on a free loopback port in a temporary directory, or a Redis Cluster
// of several masters, each with its replicas if asked, whose nodes a test can
// pause, kill and start again (a master's death and its replica's
// promotion). It never mocks Redis.
//
// When redis-server (or redis-cli, for a cluster) is not installed, a test is
// skipped with a message naming the missing binary, unless the environment
// variable CI is "true", in which case the test fails: a CI run must not pass
// by skipping what it was meant to check.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 15 * time.Second

// Options configures a server. The zero value is a server that keeps nothing
// on disk.
type Options struct {
	// AOF turns on the append-only file with fsync on every write, so a
	// restarted server comes back with everything it acknowledged.
	AOF bool
	// Args are extra redis-server arguments, e.g. "--maxmemory", "10mb",
	// or an ACL user: "--user", "alice", "on", ">password", "~*", "+@all".
	Args []string
	// Password is the default user's password (requirepass; none: no
	// password). Client, URL and the start's readiness check use it.
	Password string
}

// Server is one redis-server process owned by a test. It is stopped when the
// test ends.
type Server struct {
	// Addr is host:port of the server, on 127.0.0.1.
	Addr string
	// Dir is the server's working directory (its AOF and cluster files).
	Dir string

	tb       testing.TB
	port     int
	password string
	args     []string
	cmd      *exec.Cmd
	done     chan struct{}
}

// Binary returns the path of the named Redis binary, skipping or (with CI=true)
// failing tb when it is missing.
func Binary(tb testing.TB, name string) string {
	tb.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	msg := fmt.Sprintf("redistest: %s not found on PATH (install it: apt-get install redis-server, or run ./test.sh)", name)
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// Start starts a redis-server on a free loopback port in a temporary
// directory and registers its shutdown with tb.Cleanup.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	bin := Binary(tb, "redis-server")
	dir := tb.TempDir()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort(false)
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: dir, tb: tb, port: port, password: opts.Password}
		s.args = append(serverArgs(port, dir, opts), opts.Args...)
		if lastErr = s.start(bin); lastErr == nil {
			tb.Cleanup(s.Stop)
			return s
		}
	}
	tb.Fatalf("redistest: start redis-server: %v", lastErr)
	return nil
}

func serverArgs(port int, dir string, opts Options) []string {
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--save", "",
		"--daemonize", "no",
		"--logfile", filepath.Join(dir, "redis.log"),
		"--appendonly", "no",
	}
	if opts.AOF {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	}
	if opts.Password != "" {
		args = append(args, "--requirepass", opts.Password)
	}
	return args
}

func (s *Server) start(bin string) error {
	cmd := exec.Command(bin, s.args...)
	cmd.Dir = s.Dir
	// The server dies with the test binary even if the test is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	if err := s.waitReady(); err != nil {
		s.kill()
		log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
		return fmt.Errorf("%w; log: %s", err, tail(string(log), 800))
	}
	return nil
}

func (s *Server) waitReady() error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: s.password, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-s.done:
			return errors.New("redis-server exited during start")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PING answer within %v: %w", startTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Client returns a client for the server, closed when the test ends. Its
// read timeout is long (30s): go-redis retries a command whose reply timed
// out, and a retried script is not the call the test made (a loaded machine
// can take longer than go-redis's 3s default over a large batch).
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: s.password, ReadTimeout: 30 * time.Second})
	s.tb.Cleanup(func() { _ = c.Close() })
	return c
}

// URL returns the server's redis:// URL, with its password if it has one.
func (s *Server) URL() string {
	if s.password != "" {
		return (&url.URL{Scheme: "redis", User: url.UserPassword("", s.password), Host: s.Addr}).String()
	}
	return "redis://" + s.Addr
}

// Stop shuts the server down (SIGTERM, which flushes an AOF) and waits for it,
// resuming it first if it is paused. It is safe to call more than once.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a paused server must run to exit
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.kill()
	}
	s.cmd = nil
}

// Pause freezes the server with SIGSTOP, as a stalled host would: it keeps
// its connections and the kernel still accepts new ones, but it answers
// nothing until Resume.
func (s *Server) Pause() {
	s.tb.Helper()
	if s.cmd == nil {
		s.tb.Fatal("redistest: Pause of a stopped server")
	}
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.tb.Fatalf("redistest: SIGSTOP: %v", err)
	}
}

// Resume lets a paused server continue (SIGCONT).
func (s *Server) Resume() {
	s.tb.Helper()
	if s.cmd == nil {
		s.tb.Fatal("redistest: Resume of a stopped server")
	}
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		s.tb.Fatalf("redistest: SIGCONT: %v", err)
	}
}

// Kill ends the server at once with SIGKILL, as a crash would.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	s.kill()
	s.cmd = nil
}

func (s *Server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Restart stops the server and starts it again on the same port and
// directory, so an AOF-backed server comes back with its data.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	s.StartAgain()
}

// StartAgain starts a stopped or killed server on its old port and directory.
func (s *Server) StartAgain() {
	s.tb.Helper()
	bin := Binary(s.tb, "redis-server")
	var err error
	for attempt := 0; attempt < 50; attempt++ { // the port may linger briefly
		if err = s.start(bin); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.tb.Fatalf("redistest: restart redis-server on %s: %v", s.Addr, err)
}

// StartAgainOn starts a stopped or killed server on port, or on a free
// port (with a free cluster bus port) if port is 0, with its directory: its
// data and a cluster node's nodes.conf, which still names the addresses
// the node and its peers had. It is a container coming back on a
// recreated network at another address. Addr is the new address.
func (s *Server) StartAgainOn(port int) {
	s.tb.Helper()
	if s.cmd != nil {
		s.tb.Fatal("redistest: StartAgainOn of a running server")
	}
	if port == 0 {
		p, err := freePort(true)
		if err != nil {
			s.tb.Fatalf("redistest: %v", err)
		}
		port = p
	}
	for i := 0; i+1 < len(s.args); i++ {
		if s.args[i] == "--port" {
			s.args[i+1] = strconv.Itoa(port)
		}
	}
	s.port = port
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s.StartAgain()
}

// Cluster is a Redis Cluster on loopback, owned by a test: masters, each
// with its replicas.
type Cluster struct {
	// Addrs are the nodes' host:port addresses, masters first as created.
	Addrs   []string
	Servers []*Server
	tb      testing.TB
}

// ClusterOptions shapes a Cluster.
type ClusterOptions struct {
	// Masters is the number of masters (at least 3).
	Masters int
	// Replicas is the number of replicas of each master (0: none).
	Replicas int
	// NodeTimeout is cluster-node-timeout: how long a master may be
	// unreachable before its replica takes over (default 5 s).
	NodeTimeout time.Duration
	// AOF keeps every node's data in its append-only file (fsync always),
	// so that a node stopped and started again keeps it.
	AOF bool
}

// StartCluster starts masters redis-server processes with cluster mode on,
// joins them with redis-cli --cluster create (slots split evenly), and waits
// until every node reports cluster_state:ok.
func StartCluster(tb testing.TB, masters int) *Cluster {
	tb.Helper()
	return StartClusterWith(tb, ClusterOptions{Masters: masters})
}

// StartClusterWith starts a cluster of o.Masters masters with o.Replicas
// replicas each (redis-cli --cluster create --cluster-replicas) and waits
// until every node reports cluster_state:ok and every replica is in sync.
func StartClusterWith(tb testing.TB, o ClusterOptions) *Cluster {
	tb.Helper()
	if o.Masters < 3 {
		tb.Fatalf("redistest: a cluster needs at least 3 masters, got %d", o.Masters)
	}
	cli := Binary(tb, "redis-cli")
	c := &Cluster{tb: tb}
	c.Servers = StartClusterNodes(tb, o.Masters*(1+o.Replicas), o)
	for _, s := range c.Servers {
		c.Addrs = append(c.Addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(o.Replicas), "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitOK()
	if o.Replicas > 0 {
		c.waitReplicasSynced(o.Masters * o.Replicas)
	}
	return c
}

// StartClusterNodes starts n redis-server processes with cluster mode on,
// each in its own directory with its nodes.conf, and joins none of them:
// for a test of what forms a cluster. Of o, only NodeTimeout (default 5 s)
// and AOF apply.
func StartClusterNodes(tb testing.TB, n int, o ClusterOptions) []*Server {
	tb.Helper()
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = 5 * time.Second
	}
	bin := Binary(tb, "redis-server")
	out := make([]*Server, n)
	for i := range out {
		out[i] = startClusterNode(tb, bin, o.NodeTimeout, Options{AOF: o.AOF})
	}
	return out
}

func startClusterNode(tb testing.TB, bin string, nodeTimeout time.Duration, opts Options) *Server {
	tb.Helper()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort(true)
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		dir := tb.TempDir()
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: dir, tb: tb, port: port}
		s.args = append(serverArgs(port, dir, opts),
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10))
		if lastErr = s.start(bin); lastErr == nil {
			tb.Cleanup(s.Stop)
			return s
		}
	}
	tb.Fatalf("redistest: start cluster node: %v", lastErr)
	return nil
}

// Node is one node of a Cluster as CLUSTER NODES describes it.
type Node struct {
	ID, Addr string
	Master   bool
	// MasterID is a replica's master's ID.
	MasterID string
	// Failed is true while the cluster considers the node down.
	Failed bool
}

// Nodes returns the cluster's nodes as the running node at Servers[i]
// (the first running one) sees them.
func (c *Cluster) Nodes() []Node {
	c.tb.Helper()
	for _, s := range c.Servers {
		if s.cmd == nil {
			continue
		}
		cl := redis.NewClient(&redis.Options{Addr: s.Addr})
		text, err := cl.ClusterNodes(context.Background()).Result()
		cl.Close()
		if err != nil {
			continue
		}
		var out []Node
		for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
			f := strings.Fields(line)
			if len(f) < 4 {
				continue
			}
			addr, _, _ := strings.Cut(f[1], "@")
			flags := "," + f[2] + ","
			out = append(out, Node{ID: f[0], Addr: addr, Master: strings.Contains(flags, ",master,"),
				MasterID: strings.TrimPrefix(f[3], "-"), Failed: strings.Contains(flags, ",fail,") || strings.Contains(flags, ",fail?,")})
		}
		return out
	}
	c.tb.Fatal("redistest: no cluster node answers CLUSTER NODES")
	return nil
}

// Server returns the Server at addr.
func (c *Cluster) Server(addr string) *Server {
	c.tb.Helper()
	for _, s := range c.Servers {
		if s.Addr == addr {
			return s
		}
	}
	c.tb.Fatalf("redistest: no cluster node at %s", addr)
	return nil
}

// waitReplicasSynced waits until n replicas report their link to their
// master up (master_link_status:up).
func (c *Cluster) waitReplicasSynced(n int) {
	c.tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		up := 0
		for _, s := range c.Servers {
			cl := redis.NewClient(&redis.Options{Addr: s.Addr})
			info, err := cl.Info(context.Background(), "replication").Result()
			cl.Close()
			if err == nil && strings.Contains(info, "master_link_status:up") {
				up++
			}
		}
		if up >= n {
			return
		}
		if time.Now().After(deadline) {
			c.tb.Fatalf("redistest: %d of %d replicas in sync after 30 s", up, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitOK waits until every running node reports cluster_state:ok (after a
// failover: the replica promoted and known to all).
func (c *Cluster) WaitOK() {
	c.tb.Helper()
	c.waitOK()
}

func (c *Cluster) waitOK() {
	c.tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range c.Servers {
		if s.cmd == nil {
			continue
		}
		addr := s.Addr
		cl := redis.NewClient(&redis.Options{Addr: addr})
		for {
			info, err := cl.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				cl.Close()
				c.tb.Fatalf("redistest: cluster node %s not ok: %v %s", addr, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		cl.Close()
	}
}

// Client returns a cluster client for the cluster, closed when the test ends.
func (c *Cluster) Client() *redis.ClusterClient {
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	c.tb.Cleanup(func() { _ = cl.Close() })
	return cl
}

// freePort asks the kernel for a free loopback port. With bus set it also
// checks port+10000, which a cluster node uses for its cluster bus.
func freePort(bus bool) (int, error) {
	for i := 0; i < 100; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !bus {
			l.Close()
			return port, nil
		}
		if port+10000 > 65535 {
			l.Close()
			continue
		}
		b, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
		l.Close()
		if err != nil {
			continue
		}
		b.Close()
		return port, nil
	}
	return 0, errors.New("find free port: no port with a free cluster bus port")
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
