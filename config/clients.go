package config

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/auth"
	"github.com/sievecrawl/sieve/frontier"
)

// Enabled reports whether a Redis URL is set; without one, Sieve keeps the
// filter and stats in memory.
func (r Redis) Enabled() bool { return strings.TrimSpace(r.URL) != "" }

// IsCluster reports whether the URL names a Redis Cluster (an address list,
// or one seed with Cluster set).
func (r Redis) IsCluster() bool {
	return r.Cluster || strings.Contains(r.URL, ",")
}

// redisAddr is one parsed entry of Redis.URL.
type redisAddr struct {
	addr     string
	user     string
	password string
	db       int
	tls      bool
}

func (r Redis) addrs() ([]redisAddr, error) {
	var out []redisAddr
	for _, part := range strings.Split(r.URL, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "://") {
			if _, _, err := net.SplitHostPort(part); err != nil {
				return nil, fmt.Errorf("want redis://host:port, rediss://host:port or host:port, got %q", part)
			}
			out = append(out, redisAddr{addr: part})
			continue
		}
		o, err := redis.ParseURL(part)
		if err != nil {
			return nil, fmt.Errorf("parse %q: %w", redactURLs(part), err)
		}
		out = append(out, redisAddr{addr: o.Addr, user: o.Username, password: o.Password, db: o.DB, tls: o.TLSConfig != nil})
	}
	if len(out) == 0 {
		return nil, errors.New("no address")
	}
	if len(out) > 1 || r.Cluster {
		for _, a := range out {
			if a.db != 0 {
				return nil, fmt.Errorf("a Redis Cluster has only database 0, got /%d", a.db)
			}
		}
	}
	return out, nil
}

func (r Redis) tlsConfig(host string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host, InsecureSkipVerify: r.TLSInsecure}
	if r.TLSCA != "" {
		pool, err := auth.LoadCAs(r.TLSCA)
		if err != nil {
			return nil, &FieldError{Field: "redis.tls_ca", Err: err}
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// Client builds the Redis client the URL describes: a *redis.Client for one
// server, a *redis.ClusterClient for an address list or with Cluster set.
// The caller closes it. It does not connect; the first command does.
//
// Every command and pipeline is bounded by Timeout as a whole, including
// go-redis's own retries: a Redis that hangs (SIGSTOP, a stalled host)
// yields a timeout error after Timeout, which the caller sees, counts and
// retries on its own terms. go-redis retries a timed-out command on another
// connection by default (up to 3 times, and a cluster client once more on
// another node), which made a hung Redis look like one slow call of four
// timeouts; the deadline leaves no time for that retry, while a broken
// pooled connection (EOF) is still retried at once within it.
func (r Redis) Client() (redis.UniversalClient, error) {
	quietRedisLog.Do(func() { redis.SetLogger(redisLogger{}) })
	if !r.Enabled() {
		return nil, &FieldError{Field: "redis.url", Err: errors.New("not set (memory mode has no Redis client)")}
	}
	addrs, err := r.addrs()
	if err != nil {
		return nil, &FieldError{Field: "redis.url", Err: err}
	}
	first := addrs[0]
	password, tlsCfg, err := r.credentials(first)
	if err != nil {
		return nil, err
	}
	if r.IsCluster() {
		list := make([]string, len(addrs))
		for i, a := range addrs {
			list[i] = a.addr
		}
		if tlsCfg != nil {
			tlsCfg.ServerName = "" // each node is verified under its own name
		}
		c := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 list,
			Username:              first.user,
			Password:              password,
			TLSConfig:             tlsCfg,
			PoolSize:              r.PoolSize,
			ReadTimeout:           r.Timeout,
			WriteTimeout:          r.Timeout,
			ContextTimeoutEnabled: true,
		})
		if r.Timeout > 0 {
			c.AddHook(deadlineHook(r.Timeout))
		}
		return c, nil
	}
	c := redis.NewClient(&redis.Options{
		Addr:                  first.addr,
		Username:              first.user,
		Password:              password,
		DB:                    first.db,
		TLSConfig:             tlsCfg,
		PoolSize:              r.PoolSize,
		ReadTimeout:           r.Timeout,
		WriteTimeout:          r.Timeout,
		ContextTimeoutEnabled: true,
	})
	if r.Timeout > 0 {
		c.AddHook(deadlineHook(r.Timeout))
	}
	return c, nil
}

// NodeOptions returns the client options of each address of the URL, in
// order: one redis.Options per node of a Redis Cluster, each with the
// URL's user, password (or Password) and TLS, for a command that talks to
// the nodes one by one (forming the cluster: package rediscluster) rather
// than through a cluster client. It connects to nothing.
func (r Redis) NodeOptions() ([]*redis.Options, error) {
	addrs, err := r.addrs()
	if err != nil {
		return nil, &FieldError{Field: "redis.url", Err: err}
	}
	out := make([]*redis.Options, len(addrs))
	for i, a := range addrs {
		password, tlsCfg, err := r.credentials(a)
		if err != nil {
			return nil, err
		}
		out[i] = &redis.Options{Addr: a.addr, Username: a.user, Password: password, DB: a.db, TLSConfig: tlsCfg,
			ReadTimeout: r.Timeout, WriteTimeout: r.Timeout}
	}
	return out, nil
}

// credentials returns the password (Password over the address's own) and
// the TLS settings (nil without TLS; verifying the address's host) of one
// address of the URL.
func (r Redis) credentials(a redisAddr) (string, *tls.Config, error) {
	password := a.password
	if r.Password != "" {
		password = r.Password
	}
	if !a.tls {
		return password, nil, nil
	}
	host, _, _ := net.SplitHostPort(a.addr)
	cfg, err := r.tlsConfig(host)
	return password, cfg, err
}

// quietRedisLog routes go-redis's own log lines ("failed to dial after 5
// attempts", once per call while Redis is down) to slog at debug level: the
// callers already report each failure, with its cause, once per outage.
var (
	quietRedisLog  sync.Once
	redisLogTarget atomic.Pointer[slog.Logger]
)

// RedisLogTo sends go-redis's own log lines to l, at debug level (before
// it is called, and for one-shot commands: slog.Default()).
func RedisLogTo(l *slog.Logger) {
	redisLogTarget.Store(l)
	quietRedisLog.Do(func() { redis.SetLogger(redisLogger{}) })
}

type redisLogger struct{}

func (redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l := redisLogTarget.Load()
	if l == nil {
		l = slog.Default()
	}
	l.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}

// Ping checks that Redis answers, for a one-shot command, within a few
// seconds; its error names the server and the cause.
func (r Redis) Ping(ctx context.Context, c redis.UniversalClient) error {
	ctx, cancel := context.WithTimeout(ctx, redisPingTimeout)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("connect to redis %s: %w", redactURLs(r.URL), err)
	}
	return nil
}

// redisPingTimeout bounds a one-shot command's first contact with Redis.
const redisPingTimeout = 3 * time.Second

// deadlineHook gives every command and pipeline a deadline d from its start
// (or the caller's, if sooner). With ContextTimeoutEnabled the connection's
// read and write deadlines follow it, and go-redis's retry loop, which
// sleeps on the context before each new attempt, stops there.
type deadlineHook time.Duration

func (h deadlineHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h deadlineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		ctx, cancel := context.WithTimeout(ctx, time.Duration(h))
		defer cancel()
		return next(ctx, cmd)
	}
}

func (h deadlineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		ctx, cancel := context.WithTimeout(ctx, time.Duration(h))
		defer cancel()
		return next(ctx, cmds)
	}
}

// natsDialTimeout bounds one TCP connection attempt to a NATS server.
const natsDialTimeout = 3 * time.Second

// natsDialer is the NATS clients' dialer: a net.Dialer that remembers why
// its last attempt failed, so that an error or a readiness report can say
// "connection refused" where nats.go says only "no servers available". The
// frontier worker reads it through its LastDialError method.
type natsDialer struct {
	net.Dialer
	mu   sync.Mutex
	last error
}

// Dial dials like net.Dialer and records the outcome.
func (d *natsDialer) Dial(network, address string) (net.Conn, error) {
	c, err := d.Dialer.Dial(network, address)
	d.mu.Lock()
	d.last = err
	d.mu.Unlock()
	return c, err
}

// LastDialError is the error of the last attempt, nil if it connected.
func (d *natsDialer) LastDialError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

// Options returns the nats.go options for the settings: credentials, TLS,
// the connection name (name if Name is empty), a dialer that remembers why
// a connection failed, and reconnection forever, so that a client started
// while NATS is down connects when it comes up.
func (n NATS) Options(name string) ([]nats.Option, error) {
	return n.options(name, &natsDialer{Dialer: net.Dialer{Timeout: natsDialTimeout}})
}

func (n NATS) options(name string, d *natsDialer) ([]nats.Option, error) {
	if n.Name != "" {
		name = n.Name
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(n.ReconnectWait),
		nats.RetryOnFailedConnect(true),
		nats.SetCustomDialer(d),
	}
	if n.Creds != "" {
		o, err := credsOption(n.Creds)
		if err != nil {
			return nil, &FieldError{Field: "nats.creds", Err: err}
		}
		opts = append(opts, o)
	}
	if n.TLSCA != "" {
		if _, err := auth.LoadCAs(n.TLSCA); err != nil {
			return nil, &FieldError{Field: "nats.tls_ca", Err: err}
		}
		opts = append(opts, nats.RootCAs(n.TLSCA))
	}
	if n.TLSCert != "" {
		if _, err := tls.LoadX509KeyPair(n.TLSCert, n.TLSKey); err != nil {
			return nil, &FieldError{Field: "nats.tls_cert", Err: err}
		}
		opts = append(opts, nats.ClientCert(n.TLSCert, n.TLSKey))
	}
	return opts, nil
}

// credsOption is the nats.go option that authenticates with the file at
// path: a creds file (a user JWT, then its NKey seed) as
// nats.UserCredentials; a file holding only a user's NKey seed, bare as
// nk -gen user writes it or decorated as in a creds file, as that NKey
// user (nats.Nkey), signing the server's nonce. nats.UserCredentials
// would send such a seed to the server as the JWT: a private key on the
// wire, and a user the server does not know. The file is read again at
// each connection, so a rotated file is used at the next one.
func credsOption(path string) (nats.Option, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	defer clear(b)
	jwt, err := nkeys.ParseDecoratedJWT(b)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if isJWT(strings.TrimSpace(jwt)) {
		return nats.UserCredentials(path), nil
	}
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s holds neither a user JWT nor a user NKey seed: %w", path, err)
	}
	kp.Wipe()
	o, err := nats.NkeyOptionFromSeed(path)
	if err != nil {
		return nil, fmt.Errorf("nkey seed %s: %w", path, err)
	}
	return o, nil
}

// isJWT reports whether s has a JWT's shape: three base64url parts, the
// first a JSON object's ("eyJ" is the encoding of `{"`). A seed (S…) and
// a public key (U…) never have it.
func isJWT(s string) bool {
	return strings.HasPrefix(s, "eyJ") && strings.Count(s, ".") == 2
}

// Connect connects to NATS for a long-running process, with Options(name)
// plus extra options (e.g. disconnect handlers). It returns at once even if
// the server is down; the client keeps trying. The process must check the
// server before using it: frontier.Worker does, and frontier.WaitServer
// waits for the connection, logging what it waits for, and checks it.
func (n NATS) Connect(name string, extra ...nats.Option) (*nats.Conn, error) {
	opts, err := n.Options(name)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(n.URL, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", redactURLs(n.URL), err)
	}
	return nc, nil
}

// ConnectOnce connects to NATS for a one-shot command (seed, stats): one
// attempt per server, each bounded by a few seconds, and no reconnection.
// Its error names the servers and the cause ("connection refused", "i/o
// timeout"); a server older than frontier.MinServerVersion is refused
// (frontier.ErrServerTooOld).
func (n NATS) ConnectOnce(name string, extra ...nats.Option) (*nats.Conn, error) {
	d := &natsDialer{Dialer: net.Dialer{Timeout: natsDialTimeout}}
	opts, err := n.options(name, d)
	if err != nil {
		return nil, err
	}
	opts = append(opts, nats.RetryOnFailedConnect(false), nats.MaxReconnects(0), nats.Timeout(natsDialTimeout))
	nc, err := nats.Connect(n.URL, append(opts, extra...)...)
	if err != nil {
		if derr := d.LastDialError(); derr != nil && errors.Is(err, nats.ErrNoServers) {
			err = derr
		}
		return nil, fmt.Errorf("connect to nats %s: %w", redactURLs(n.URL), err)
	}
	if err := frontier.CheckServer(nc); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}
