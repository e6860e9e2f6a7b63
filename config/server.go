package config

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/prometheus/exporter-toolkit/web"
	"gopkg.in/yaml.v3"

	"github.com/sievecrawl/sieve/auth"
)

// ServerSecurity is the TLS and authentication of one of Sieve's own
// servers (the URLFrontier API, the HTTP surface), set in its section:
// urlfrontier.tls_cert, … (package auth says how each is used). Its zero
// value is a server without TLS or authentication.
type ServerSecurity struct {
	TLSCert     string   `yaml:"tls_cert" help:"PEM certificate (chain) the server presents, with tls_key; re-read when the file changes, so a renewed certificate needs no restart. Empty: no TLS"`
	TLSKey      string   `yaml:"tls_key" help:"PEM private key of tls_cert; re-read with it"`
	TLSClientCA string   `yaml:"tls_client_ca" help:"PEM file of the CAs client certificates are verified against (mutual TLS), re-read when it changes; a client may still come without one and use a token, unless tls_client_required"`
	TLSRequired bool     `yaml:"tls_client_required" help:"refuse, in the TLS handshake, a client without a certificate of tls_client_ca"`
	TokensFile  string   `yaml:"tokens_file" help:"file of bearer tokens, CSV lines token,name,role (role read, crawl or admin; # comments); re-read when it changes, so tokens rotate without a restart. Never give a token on the command line"`
	ClientRoles []string `yaml:"client_roles" help:"roles of client certificates (tls_client_ca), as name=role: name is the subject common name or a DNS, URI or e-mail subject alternative name; e.g. fetcher-1=crawl,ops.example=admin"`
	Insecure    bool     `yaml:"insecure" help:"serve on an address beyond loopback without authentication (no tokens_file, no client_roles), which is refused at start otherwise; a warning is logged at every start"`
}

// Authenticates reports whether the settings name any credential (tokens
// or certificates' roles): the server then refuses unauthenticated calls.
func (s ServerSecurity) Authenticates() bool {
	return s.TokensFile != "" || len(s.ClientRoles) > 0
}

// Validate checks the settings of section (urlfrontier, http), naming the
// offending one.
func (s ServerSecurity) Validate(section string) error {
	var errs []error
	bad := func(field, msg string) {
		errs = append(errs, &FieldError{Field: section + "." + field, Err: errors.New(msg)})
	}
	if (s.TLSCert == "") != (s.TLSKey == "") {
		bad("tls_cert", "tls_cert and tls_key go together")
	}
	if s.TLSClientCA != "" && s.TLSCert == "" {
		bad("tls_client_ca", "client certificates need TLS: set tls_cert and tls_key")
	}
	if s.TLSRequired && s.TLSClientCA == "" {
		bad("tls_client_required", "needs tls_client_ca")
	}
	if len(s.ClientRoles) > 0 {
		if s.TLSClientCA == "" {
			bad("client_roles", "needs tls_client_ca, the CA that vouches for the names")
		}
		if _, err := auth.ParseIdentities(s.ClientRoles); err != nil {
			bad("client_roles", err.Error())
		}
	}
	return errors.Join(errs...)
}

// Loopback reports whether addr (host:port) listens on loopback only: a
// loopback IP or "localhost". An empty host (":7071") listens on every
// interface, and another name may resolve anywhere: neither is loopback.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Exposure checks a server of section listening on addr: beyond loopback
// without authentication, it is an error naming section.addr, unless
// insecure (section.insecure) says so; then warning says what is exposed,
// to be logged at every start. A server beyond loopback that
// authenticates without TLS is warned of too: its tokens cross the
// network in clear.
func Exposure(section, addr string, authenticates, tls, insecure bool) (warning string, err error) {
	if addr == "" || Loopback(addr) {
		return "", nil
	}
	switch {
	case authenticates && !tls:
		return fmt.Sprintf("%s.addr %s is beyond loopback without TLS: its tokens cross the network in clear (set %s.tls_cert and %s.tls_key)",
			section, addr, section, section), nil
	case authenticates:
		return "", nil
	case insecure:
		return fmt.Sprintf("%s.addr %s is beyond loopback and anyone who reaches it may call it (%s.insecure is set)", section, addr, section), nil
	}
	return "", &FieldError{Field: section + ".addr", Err: fmt.Errorf(
		"%s is beyond loopback without authentication: set %s.tokens_file or %s.client_roles (see docs/security.md), or %s.insecure to serve it to anyone who reaches it",
		addr, section, section, section)}
}

// Exposure is Exposure for this server's settings.
func (s ServerSecurity) Exposure(section, addr string) (warning string, err error) {
	return Exposure(section, addr, s.Authenticates(), s.TLSCert != "", s.Insecure)
}

// Web reads WebConfigFile (none: false, false) with exporter-toolkit's
// own validation, and says whether it enables TLS and names basic-auth
// users.
func (h HTTP) Web() (tls, users bool, err error) {
	if h.WebConfigFile == "" {
		return false, false, nil
	}
	bad := func(err error) (bool, bool, error) {
		return false, false, &FieldError{Field: "http.web_config_file", Err: err}
	}
	if err := web.Validate(h.WebConfigFile); err != nil {
		return bad(err)
	}
	b, err := os.ReadFile(h.WebConfigFile)
	if err != nil {
		return bad(err)
	}
	var c struct {
		TLS   map[string]any    `yaml:"tls_server_config"`
		Users map[string]string `yaml:"basic_auth_users"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return bad(err)
	}
	return c.TLS["cert_file"] != nil || c.TLS["cert"] != nil, len(c.Users) > 0, nil
}
