package main

import (
	"crypto/tls"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

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
// authentication, the interceptors that give each call its role.
func (s *serverSecurity) grpcOptions(roles map[string]auth.Role) []grpc.ServerOption {
	var opts []grpc.ServerOption
	if s.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.tls)))
	}
	if s.auth != nil {
		opts = append(opts, s.auth.GRPCOptions(roles)...)
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
