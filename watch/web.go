package watch

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sievecrawl/sieve/auth"
)

// WebOptions says how an HTTP surface is secured (config's http section).
type WebOptions struct {
	// ConfigFile is the Prometheus exporters' web configuration file
	// (--web.config.file): tls_server_config, http_server_config,
	// rate_limit and basic_auth_users. Empty: plain HTTP.
	ConfigFile string
	// Auth, if set, guards every path with tokens or certificates' roles;
	// the file's users are added to it.
	Auth *auth.Authenticator
	// HealthOpen leaves /healthz and /readyz open, for orchestrators'
	// probes, whatever guards the rest.
	HealthOpen bool
	// Registerer receives the refusals and failed reloads (nil: none).
	Registerer prometheus.Registerer
	// Logger logs refusals and reloads (nil: discard).
	Logger *slog.Logger
}

// Web serves one HTTP surface as its WebOptions say. With a web
// configuration file it serves TLS as the file's tls_server_config says
// (built for every handshake by exporter-toolkit's own code, so renewed
// certificates and client CAs apply without a restart), applies its
// headers and rate limit, and makes its basic-auth users identities of the
// Authenticator beside tokens and certificates: a user has the read role
// (the whole surface is read), its refusals are counted in
// sieve_auth_refusals_total{server="http"} like any other, and the health
// paths can stay open. The file is read again every 2 seconds; a user
// added to a file that had none starts guarding the surface at once.
// Close stops reading it.
type Web struct {
	config     *auth.WebConfig     // nil: plain HTTP, no users
	auth       *auth.Authenticator // nil: nothing guards the surface
	always     bool                // tokens or certificates guard it, users or not
	healthOpen bool
}

// OpenWeb reads o.ConfigFile, if any, and returns the surface's Web.
func OpenWeb(o WebOptions) (*Web, error) {
	w := &Web{auth: o.Auth, always: o.Auth != nil, healthOpen: o.HealthOpen}
	if o.ConfigFile == "" {
		return w, nil
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	wc, err := auth.OpenWebConfig(o.ConfigFile, auth.FileOptions{Logger: o.Logger,
		Failed: auth.ReloadFailures(o.Registerer, "http.web_config_file")})
	if err != nil {
		return nil, fmt.Errorf("http.web_config_file: %w", err)
	}
	w.config = wc
	if w.auth == nil {
		w.auth = auth.New(auth.Options{Server: "http", Registerer: o.Registerer, Logger: o.Logger})
	}
	w.auth = w.auth.WithUsers(wc)
	return w, nil
}

// TLS reports whether the surface serves TLS.
func (w *Web) TLS() bool { return w.config != nil && w.config.TLS() }

// Handler returns h behind the surface's guard: every path needs a
// credential of any role (the whole surface is read), but /healthz and
// /readyz when HealthOpen; and behind the file's headers and rate limit.
func (w *Web) Handler(h http.Handler) http.Handler {
	if w.auth == nil {
		return h
	}
	guarded := w.auth.HTTPHandler(h, auth.Read, func(path string) bool {
		return w.healthOpen && (path == "/healthz" || path == "/readyz")
	})
	out := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if !w.always && !w.auth.HasUsers() {
			h.ServeHTTP(rw, r) // a web config file without users guards nothing
			return
		}
		guarded.ServeHTTP(rw, r)
	})
	if w.config == nil {
		return out
	}
	return w.config.Handler(out)
}

// Serve serves srv on ln until it is shut down: over TLS when the web
// configuration file enables it (and HTTP/2 unless it turns it off), else
// plain HTTP. Whether TLS is on is decided here, once: turning it on or
// off in the file takes a restart.
func (w *Web) Serve(ln net.Listener, srv *http.Server) error {
	if !w.TLS() {
		return srv.Serve(ln)
	}
	cfg, err := w.config.ServerTLS()
	if err != nil {
		return fmt.Errorf("http.web_config_file: %w", err)
	}
	srv.TLSConfig = cfg
	if !w.config.HTTP2() {
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	return srv.ServeTLS(ln, "", "")
}

// Close stops reading the web configuration file. It is idempotent.
func (w *Web) Close() error {
	if w.config == nil {
		return nil
	}
	return w.config.Close()
}
