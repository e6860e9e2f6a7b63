package auth

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v2"
	"golang.org/x/time/rate"
)

// WebConfig is a Prometheus web configuration file (the exporters'
// --web.config.file: tls_server_config, http_server_config, rate_limit,
// basic_auth_users), in exporter-toolkit's own types and read with its
// validation, kept current as a TokenFile is: read again every interval
// and swapped when its bytes change, the last good one kept when it no
// longer parses. Sieve serves it itself, rather than through the
// toolkit's web.Serve, so that its users are identities of the
// Authenticator: counted when refused, given the read role, beside tokens
// and certificates, and the health paths can stay open. Close stops it.
type WebConfig struct {
	r *reloader[webState]

	mu      sync.Mutex
	limiter *rate.Limiter // of the config it was made for
	limitOf web.RateLimiterConfig
}

// webState is a parse of the file and its users as Users gives them,
// converted once per reload rather than at every request.
type webState struct {
	config *web.Config
	users  map[string]string
}

// OpenWebConfig reads the web configuration file at path (relative paths
// in it are of its directory) and keeps it current until Close.
func OpenWebConfig(path string, o FileOptions) (*WebConfig, error) {
	o = o.withDefaults()
	r := &reloader[webState]{
		paths: []string{path}, logger: o.Logger, what: "web config", failed: o.Failed,
		parse: func(c [][]byte) (webState, error) {
			cfg, err := ParseWebConfig(path, c[0])
			if err != nil {
				return webState{}, err
			}
			users := make(map[string]string, len(cfg.Users))
			for name, hash := range cfg.Users {
				users[name] = string(hash)
			}
			return webState{config: cfg, users: users}, nil
		},
	}
	if err := r.start(o.Interval); err != nil {
		return nil, err
	}
	return &WebConfig{r: r}, nil
}

// ParseWebConfig parses the contents of the web configuration file at
// path as exporter-toolkit does (its defaults: TLS 1.2 to 1.3, HTTP/2;
// unknown keys refused; paths relative to the file's directory), then
// checks it with the toolkit's own web.Validate (bcrypt hashes, headers,
// certificate files). A file whose TLS files do not load is an error.
func ParseWebConfig(path string, contents []byte) (*web.Config, error) {
	c := &web.Config{
		TLSConfig:  web.TLSConfig{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13},
		HTTPConfig: web.HTTPConfig{HTTP2: true},
	}
	if err := yaml.UnmarshalStrict(contents, c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.TLSConfig.SetDirectory(filepath.Dir(path))
	if err := web.Validate(path); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Config returns the current configuration.
func (w *WebConfig) Config() *web.Config { return w.r.cur.Load().config }

// TLS reports whether the current configuration serves TLS.
func (w *WebConfig) TLS() bool {
	t := w.Config().TLSConfig
	return t.TLSCertPath != "" || t.TLSCert != ""
}

// Users returns the current basic-auth users: name to bcrypt hash. The
// map is shared: read it, never change it.
func (w *WebConfig) Users() map[string]string { return w.r.cur.Load().users }

// ServerTLS returns the tls.Config to serve with, nil when the file
// serves no TLS. Each handshake builds its config anew from the current
// file with exporter-toolkit's web.ConfigToTLSConfig, which reads the
// certificate, key and client CA files: a renewed certificate or CA is
// taken by the next connection without a restart, as with the toolkit's
// own server. nextProtos is the server's ALPN (h2 unless the file turns
// HTTP/2 off).
func (w *WebConfig) ServerTLS() (*tls.Config, error) {
	if !w.TLS() {
		return nil, nil
	}
	build := func() (*tls.Config, error) {
		c := w.Config()
		cfg, err := web.ConfigToTLSConfig(&c.TLSConfig)
		if err != nil {
			return nil, fmt.Errorf("web config: %w", err)
		}
		cfg.NextProtos = nextProtos(c)
		return cfg, nil
	}
	cfg, err := build()
	if err != nil {
		return nil, err
	}
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return build() }
	return cfg, nil
}

func nextProtos(c *web.Config) []string {
	if c.HTTPConfig.HTTP2 {
		return []string{"h2", "http/1.1"}
	}
	return []string{"http/1.1"}
}

// HTTP2 reports whether the file lets the server speak HTTP/2.
func (w *WebConfig) HTTP2() bool { return w.Config().HTTPConfig.HTTP2 }

// Handler returns next behind the file's http_server_config headers and
// its rate_limit (a token bucket of burst, refilled every interval, for
// the whole server: 429 when empty), as the toolkit's server applies
// them.
func (w *WebConfig) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		c := w.Config()
		if l := w.rateLimiter(c.RateLimiterConfig); l != nil && !l.Allow() {
			http.Error(rw, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
			return
		}
		for k, v := range c.HTTPConfig.Header {
			rw.Header().Set(k, v)
		}
		next.ServeHTTP(rw, r)
	})
}

// rateLimiter returns the limiter of rc, made anew when the file's
// rate_limit changed; nil when it sets none.
func (w *WebConfig) rateLimiter(rc web.RateLimiterConfig) *rate.Limiter {
	if rc.Interval == 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.limiter == nil || w.limitOf != rc {
		w.limiter, w.limitOf = rate.NewLimiter(rate.Every(rc.Interval), rc.Burst), rc
	}
	return w.limiter
}

// Close stops reading the file. It is idempotent.
func (w *WebConfig) Close() error {
	w.r.close()
	return nil
}
