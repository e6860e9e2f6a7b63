package watch

import (
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/sievecrawl/sieve/auth"
)

// Serve serves srv on ln until it is shut down: plain HTTP without
// webConfigFile, else as that file says, in the Prometheus exporters' web
// configuration format (tls_server_config, basic_auth_users with bcrypt
// hashes, http_server_config), through prometheus/exporter-toolkit's
// web.Serve: the file is read again for every handshake and every
// request, so a renewed certificate or a changed user applies without a
// restart. Every path needs the basic-auth user then, health included.
func Serve(ln net.Listener, srv *http.Server, webConfigFile string, logger *slog.Logger) error {
	if webConfigFile == "" {
		return srv.Serve(ln)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	addrs := []string{ln.Addr().String()}
	systemd := false
	return web.Serve(ln, srv, &web.FlagConfig{WebListenAddresses: &addrs, WebSystemdSocket: &systemd, WebConfigFile: &webConfigFile}, logger)
}

// Guard returns h behind a (h itself if a is nil): every path needs a
// credential of any role (the whole surface is read), but /healthz and
// /readyz when healthOpen, for orchestrators' probes.
func Guard(h http.Handler, a *auth.Authenticator, healthOpen bool) http.Handler {
	if a == nil {
		return h
	}
	return a.HTTPHandler(h, auth.Read, func(path string) bool {
		return healthOpen && (path == "/healthz" || path == "/readyz")
	})
}
