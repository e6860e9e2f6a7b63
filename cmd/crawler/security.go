package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/stats"

	"github.com/sievecrawl/sieve/auth"
	"github.com/sievecrawl/sieve/config"
)

// serverSecurity is one server's TLS and authentication, opened from its
// settings: the certificate and tokens files it keeps current, and the
// Authenticator over them. Close it after the server stopped.
type serverSecurity struct {
	tls     *tls.Config         // nil: no TLS
	auth    *auth.Authenticator // nil: no authentication
	closers []func() error
}

// openServerSecurity opens the files of sec, the settings of section
// (urlfrontier, http) whose server listens on addr; it refuses an address
// beyond loopback without authentication unless sec.Insecure, and then
// logs a warning (config.Exposure).
func openServerSecurity(section, addr string, sec config.ServerSecurity, reg prometheus.Registerer, logger *slog.Logger) (_ *serverSecurity, err error) {
	warning, err := sec.Exposure(section, addr)
	if err != nil {
		return nil, err
	}
	if warning != "" {
		logger.Warn(warning)
	}
	s := &serverSecurity{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	fo := func(setting string) auth.FileOptions {
		return auth.FileOptions{Logger: logger.With("server", section), Failed: auth.ReloadFailures(reg, section+"."+setting)}
	}
	if sec.TLSCert != "" {
		cert, err := auth.OpenCertFile(sec.TLSCert, sec.TLSKey, fo("tls_cert"))
		if err != nil {
			return nil, &config.FieldError{Field: section + ".tls_cert", Err: err}
		}
		s.closers = append(s.closers, cert.Close)
		o := auth.TLSOptions{Cert: cert, RequireClientCert: sec.TLSRequired}
		if sec.TLSClientCA != "" {
			if o.ClientCA, err = auth.OpenCAFile(sec.TLSClientCA, fo("tls_client_ca")); err != nil {
				return nil, &config.FieldError{Field: section + ".tls_client_ca", Err: err}
			}
			s.closers = append(s.closers, o.ClientCA.Close)
		}
		s.tls = auth.ServerTLS(o)
	}
	if !sec.Authenticates() {
		return s, nil
	}
	o := auth.Options{Server: section, Registerer: reg, Logger: logger}
	if sec.TokensFile != "" {
		tokens, err := auth.OpenTokenFile(sec.TokensFile, fo("tokens_file"))
		if err != nil {
			return nil, &config.FieldError{Field: section + ".tokens_file", Err: err}
		}
		s.closers = append(s.closers, tokens.Close)
		o.Tokens = tokens
	}
	if o.Identities, err = auth.ParseIdentities(sec.ClientRoles); err != nil {
		return nil, &config.FieldError{Field: section + ".client_roles", Err: err}
	}
	s.auth = auth.New(o)
	return s, nil
}

// grpcOptions returns the gRPC server's credentials and, with
// authentication, the checks that give each call its role before its
// messages are read. Either way a call's metadata is bounded by
// auth.MaxMetadataBytes (grpc's default is 16 MiB).
func (s *serverSecurity) grpcOptions(roles map[string]auth.Role) []grpc.ServerOption {
	var opts []grpc.ServerOption
	if s.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.tls)))
	}
	if s.auth != nil {
		opts = append(opts, s.auth.GRPCOptions(roles)...) // with the bound
	} else {
		opts = append(opts, grpc.MaxHeaderListSize(auth.MaxMetadataBytes))
	}
	return opts
}

// describe says how the server is reached, for its start line.
func (s *serverSecurity) describe() string {
	switch {
	case s.tls != nil && s.auth != nil:
		return "TLS, authenticated"
	case s.tls != nil:
		return "TLS, not authenticated"
	case s.auth != nil:
		return "plain text, authenticated"
	}
	return "plain text, not authenticated"
}

// close stops reading the files, in reverse order of opening.
func (s *serverSecurity) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// handshakeTimeout bounds a connection's handshake on the gRPC server (TLS,
// then HTTP/2's preface and settings). grpc's default, 120 s, let a client
// that sent one byte hold a goroutine and a descriptor for two minutes,
// and the server's stop with them.
const handshakeTimeout = 10 * time.Second

// handshakes tracks a gRPC server's connections from Accept until their
// handshake ends, so that a stopping server can cut those that never
// finish one: grpc.Server's GracefulStop and Stop both wait for every
// handshake under way (up to handshakeTimeout), and a connection still
// in its handshake has no call to finish. A connection's handshake ends
// when grpc tags it (its stats.Handler's TagConn, once the transport is
// up) or when it is closed (a failed handshake). It is safe for
// concurrent use; the zero value is not usable, use newHandshakes.
type handshakes struct {
	mu      sync.Mutex
	pending map[handshakeKey]*handshakeConn
	cut     bool // cutAll was called: every later connection is closed at once
}

// handshakeKey names a TCP connection by its two ends, as grpc's
// stats.ConnTagInfo does.
type handshakeKey struct{ remote, local string }

func newHandshakes() *handshakes {
	return &handshakes{pending: map[handshakeKey]*handshakeConn{}}
}

// listen returns lis, its accepted connections tracked.
func (h *handshakes) listen(lis net.Listener) net.Listener {
	return &handshakeListener{Listener: lis, h: h}
}

// serverOptions returns the grpc.ServerOptions that bound a handshake by
// handshakeTimeout and tell h when one ended.
func (h *handshakes) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ConnectionTimeout(handshakeTimeout), grpc.StatsHandler(handshakeDone{h})}
}

// add tracks c, or closes it if cutAll was called.
func (h *handshakes) add(c *handshakeConn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cut {
		c.Conn.Close() // its handshake fails at once
		return
	}
	h.pending[c.key] = c
}

// done stops tracking the connection of k.
func (h *handshakes) done(k handshakeKey) {
	h.mu.Lock()
	delete(h.pending, k)
	h.mu.Unlock()
}

// cutAll closes every connection still in its handshake, and every one
// accepted from now on. Connections whose handshake ended are left to the
// server's own stop.
func (h *handshakes) cutAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cut = true
	for k, c := range h.pending {
		c.Conn.Close() // not c.Close, which takes h.mu
		delete(h.pending, k)
	}
}

func connKey(c net.Conn) handshakeKey {
	return handshakeKey{remote: c.RemoteAddr().String(), local: c.LocalAddr().String()}
}

// handshakeListener is a net.Listener whose connections h tracks.
type handshakeListener struct {
	net.Listener
	h *handshakes
}

func (l *handshakeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	t := &handshakeConn{Conn: c, h: l.h, key: connKey(c)}
	l.h.add(t)
	return t, nil
}

// handshakeConn is an accepted connection that leaves its handshakes'
// tracking when closed.
type handshakeConn struct {
	net.Conn
	h   *handshakes
	key handshakeKey
}

func (c *handshakeConn) Close() error {
	c.h.done(c.key)
	return c.Conn.Close()
}

// handshakeDone is the stats.Handler that ends a connection's tracking
// when grpc tags it: its handshake succeeded.
type handshakeDone struct{ h *handshakes }

var _ stats.Handler = handshakeDone{}

func (d handshakeDone) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if info.RemoteAddr != nil && info.LocalAddr != nil {
		d.h.done(handshakeKey{remote: info.RemoteAddr.String(), local: info.LocalAddr.String()})
	}
	return ctx
}

func (handshakeDone) HandleConn(context.Context, stats.ConnStats) {}

func (handshakeDone) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (handshakeDone) HandleRPC(context.Context, stats.RPCStats) {}
