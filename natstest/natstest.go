// Package natstest runs a real NATS server with JetStream inside a test
// process: the embedded github.com/nats-io/nats-server/v2 on a free loopback
// port, storing its streams in a temporary directory. It never mocks NATS.
//
// A Server can be shut down and started again on the same port and store
// directory, so a test can take NATS away from its clients and give it back
// with its streams intact, as a restart of a real deployment would.
//
// StartExternal runs an installed nats-server binary instead (Debian's is an
// older release), for tests of what Sieve does with another server version.
package natstest

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readyTimeout bounds how long the server may take to accept connections.
const readyTimeout = 15 * time.Second

// Options configures a server. The zero value is a JetStream server with the
// server's default limits.
type Options struct {
	// MaxStore limits JetStream file storage in bytes (0: server default).
	MaxStore int64
	// MaxPayload limits a message's size in bytes (0: server default, 1 MiB).
	MaxPayload int32
	// Log turns the server's own log on, written through tb.Logf.
	Log bool
	// Port is the loopback port to listen on (0: a free one): a port
	// clients already try, such as ClosedAddr's, to test what they do
	// until the server comes.
	Port int
	// NKeys are the public NKeys of the users the server accepts (none:
	// anyone). Conn and JetStream connect without credentials, so a
	// server with NKeys refuses them.
	NKeys []string
}

// Server is one embedded NATS server owned by a test; it is shut down when
// the test ends. Its methods are meant for the test goroutine; they are not
// safe for concurrent use.
type Server struct {
	// StoreDir is the JetStream storage directory, kept across restarts.
	StoreDir string

	tb      testing.TB
	opts    Options
	port    int
	name    string   // server name (unique in a cluster)
	cluster *cluster // nil: a standalone server
	route   int      // the cluster (route) port, in a cluster
	srv     *server.Server
}

// Start starts an embedded NATS server with JetStream on a free loopback
// port and registers its shutdown with tb.Cleanup.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s := &Server{StoreDir: tb.TempDir(), tb: tb, opts: opts, port: -1, name: "natstest"}
	if opts.Port > 0 {
		s.port = opts.Port
	}
	if err := s.start(); err != nil {
		tb.Fatalf("natstest: %v", err)
	}
	s.port = s.srv.Addr().(*net.TCPAddr).Port
	tb.Cleanup(s.Shutdown)
	return s
}

func (s *Server) start() error {
	o := &server.Options{
		ServerName:            s.name,
		Host:                  "127.0.0.1",
		Port:                  s.port,
		JetStream:             true,
		StoreDir:              s.StoreDir,
		JetStreamMaxStore:     s.opts.MaxStore,
		MaxPayload:            s.opts.MaxPayload,
		NoSigs:                true,
		NoLog:                 !s.opts.Log,
		DisableShortFirstPing: true,
	}
	for _, k := range s.opts.NKeys {
		o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: k})
	}
	if c := s.cluster; c != nil {
		o.Cluster = server.ClusterOpts{Name: c.name, Host: "127.0.0.1", Port: s.route}
		o.Routes = c.routes()
	}
	srv, err := server.NewServer(o)
	if err != nil {
		return fmt.Errorf("new server: %w", err)
	}
	if s.opts.Log {
		srv.SetLogger(logger{s.tb}, false, false)
	}
	go srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		return fmt.Errorf("server not ready for connections within %v", readyTimeout)
	}
	s.srv = srv
	return nil
}

// URL returns the server's nats:// client URL. It stays the same across
// restarts.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// Name returns the server's name, as JetStream reports it (a stream's
// leader, a peer).
func (s *Server) Name() string { return s.name }

// Port returns the server's TCP port.
func (s *Server) Port() int { return s.port }

// Running reports whether the server is up.
func (s *Server) Running() bool { return s.srv != nil }

// Conn returns a client connection that reconnects forever, closed when the
// test ends.
func (s *Server) Conn() *nats.Conn {
	s.tb.Helper()
	nc, err := nats.Connect(s.URL(),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond),
		nats.RetryOnFailedConnect(true))
	if err != nil {
		s.tb.Fatalf("natstest: connect %s: %v", s.URL(), err)
	}
	s.tb.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on a fresh Conn.
func (s *Server) JetStream() jetstream.JetStream {
	s.tb.Helper()
	js, err := jetstream.New(s.Conn())
	if err != nil {
		s.tb.Fatalf("natstest: jetstream: %v", err)
	}
	return js
}

// Shutdown stops the server and waits until it has stopped. JetStream data
// stays in StoreDir. It is safe to call more than once.
func (s *Server) Shutdown() {
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.srv = nil
}

// StartAgain starts a shut-down server on its old port with its old store
// directory, so streams, consumers and their acknowledged state come back.
func (s *Server) StartAgain() {
	s.tb.Helper()
	var err error
	deadline := time.Now().Add(readyTimeout)
	for {
		if err = s.start(); err == nil {
			return
		}
		if time.Now().After(deadline) { // the port may linger briefly
			s.tb.Fatalf("natstest: start again on port %d: %v", s.port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Restart shuts the server down and starts it again on the same port and
// store directory.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Shutdown()
	s.StartAgain()
}

// logger routes the server's log lines to the test log.
type logger struct{ tb testing.TB }

func (l logger) Noticef(format string, v ...any) { l.tb.Logf("nats: "+format, v...) }
func (l logger) Warnf(format string, v ...any)   { l.tb.Logf("nats warn: "+format, v...) }
func (l logger) Fatalf(format string, v ...any)  { l.tb.Logf("nats fatal: "+format, v...) }
func (l logger) Errorf(format string, v ...any)  { l.tb.Logf("nats error: "+format, v...) }
func (l logger) Debugf(format string, v ...any)  { l.tb.Logf("nats debug: "+format, v...) }
func (l logger) Tracef(format string, v ...any)  { l.tb.Logf("nats trace: "+format, v...) }
