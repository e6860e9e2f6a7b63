// Package config is the one place Sieve reads its settings from: a YAML file,
// SIEVE_* environment variables and command-line flags, in increasing
// precedence, over documented defaults (Default). Both binaries use it; each
// embeds Config in its own struct and adds its own sections, and the Loader
// turns every field into a flag, an environment variable and a YAML key.
//
// Nothing else in Sieve reads the environment, flags or files: deeper
// packages take Options structs, which the binaries fill from a Config.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/sievecrawl/sieve/auth"
	"github.com/sievecrawl/sieve/normalize"
)

// Config holds the settings shared by the dedup worker and the crawler. The
// zero value is not useful; start from Default.
type Config struct {
	Redis     Redis     `yaml:"redis"`
	NATS      NATS      `yaml:"nats"`
	Filter    Filter    `yaml:"filter"`
	Normalize Normalize `yaml:"normalize"`
	Frontier  Frontier  `yaml:"frontier"`
	Worker    Worker    `yaml:"worker"`
	HTTP      HTTP      `yaml:"http"`
	Client    Client    `yaml:"client"`
	Log       Log       `yaml:"log"`
}

// Client is what Sieve's own commands present to a running process's HTTP
// surface (crawler stats of a live run, dedup-worker stats --url, a filter
// query of a running crawl): the CA to trust and the credentials, for a
// surface behind TLS and authentication (docs/security.md).
type Client struct {
	CAFile    string `yaml:"ca_file" help:"PEM file of the CAs to trust besides the system's when reading a running process's HTTP surface over TLS"`
	CertFile  string `yaml:"cert_file" help:"PEM client certificate (with key_file) to present to a surface that maps certificates to roles"`
	KeyFile   string `yaml:"key_file" help:"PEM private key of cert_file"`
	TokenFile string `yaml:"token_file" help:"file holding one bearer token (only the token, as Prometheus' credentials_file), read at each request; never give a token on the command line"`
}

// Options returns the client settings as package auth takes them.
func (c Client) Options() auth.ClientOptions {
	return auth.ClientOptions{CAFile: c.CAFile, CertFile: c.CertFile, KeyFile: c.KeyFile, TokenFile: c.TokenFile}
}

// Redis locates the Redis that holds the shared filter and statistics.
type Redis struct {
	URL          string        `yaml:"url" help:"Redis holding the shared filter and stats: redis://[user:password@]host:port[/db], rediss://... for TLS, or a comma-separated list of host:port (or redis:// URLs) for a Redis Cluster. Empty: in-memory filter and stats, valid for a single worker only"`
	Cluster      bool          `yaml:"cluster" help:"treat a single address as a Redis Cluster seed node"`
	Password     string        `yaml:"password" help:"password, overriding the one in the URL (useful with a cluster address list)"`
	TLSCA        string        `yaml:"tls_ca" help:"PEM file of CA certificates to verify the server with (rediss://)"`
	TLSInsecure  bool          `yaml:"tls_insecure" help:"skip verifying the server certificate (testing only)"`
	PoolSize     int           `yaml:"pool_size" help:"connections per node; 0 means go-redis's default (10 per CPU)"`
	Timeout      time.Duration `yaml:"timeout" help:"read/write timeout of one command (a filter batch is one command)"`
	WaitReplicas int           `yaml:"wait_replicas" help:"replicas (of each master) that must hold a batch's marks before the dedup worker acknowledges its pages (Redis WAIT after marking), so that a failover to a replica forgets no mark; the worker holds its batches while fewer replicas answer. 0: off (a failover loses the marks the master had not yet replicated: those URLs are admitted again after the duplicate window). Turns off the Bloom filter's local mirror"`
	WaitTimeout  time.Duration `yaml:"wait_timeout" help:"how long one WAIT for redis.wait_replicas may block before the marks are written again; shorter than redis.timeout"`
}

// NATS locates the NATS server (with JetStream) that carries the pipeline.
type NATS struct {
	URL           string        `yaml:"url" help:"NATS server URL(s), comma-separated; nats://user:password@host:port and tls:// are accepted"`
	Creds         string        `yaml:"creds" help:"NATS credentials file: a creds file (user JWT and NKey seed), or a file holding only a user NKey seed (SU…), which signs in as that NKey user"`
	TLSCA         string        `yaml:"tls_ca" help:"PEM file of CA certificates to verify the server with"`
	TLSCert       string        `yaml:"tls_cert" help:"PEM client certificate for mutual TLS (with tls_key)"`
	TLSKey        string        `yaml:"tls_key" help:"PEM client key for mutual TLS (with tls_cert)"`
	Name          string        `yaml:"name" help:"connection name shown by the server; empty: the binary's name and host"`
	ReconnectWait time.Duration `yaml:"reconnect_wait" help:"pause between reconnection attempts (the client reconnects forever)"`
}

// Filter chooses and sizes the seen-URL filter.
type Filter struct {
	Kind             string        `yaml:"kind" help:"filter kind: bloom (scalable Bloom filter) or cuckoo; set when the filter is created: an existing one keeps its stored value"`
	Name             string        `yaml:"name" help:"filter name: its Redis key prefix, or its snapshot name in memory mode"`
	Capacity         int64         `yaml:"capacity" help:"URLs the first layer holds before the filter grows; set when the filter is created: an existing one keeps its stored value"`
	FPP              float64       `yaml:"fpp" help:"bound on the whole filter's false-positive rate (a false positive drops an unseen URL), in (0, 1); set when the filter is created: an existing one keeps its stored value"`
	Growth           float64       `yaml:"growth" help:"capacity factor of each new layer, ≥ 1; set when the filter is created: an existing one keeps its stored value"`
	Tightening       float64       `yaml:"tightening" help:"error-rate factor of each new layer, in (0, 1); set when the filter is created: an existing one keeps its stored value"`
	Shards           int           `yaml:"shards" help:"Redis keys each layer is split over (spreads a layer over a cluster); 0: the filter's default; set when the filter is created: an existing one keeps its stored value"`
	Snapshot         string        `yaml:"snapshot" help:"in memory mode, file the filter is loaded from at start and saved to periodically and at exit; empty: none"`
	SnapshotInterval time.Duration `yaml:"snapshot_interval" help:"in memory mode with a snapshot file, how often it is saved when the filter changed (a save taking d waits at least 9d for the next, so a large filter costs at most a tenth of the time): the URLs a crash forgets are those admitted since the last save"`
	Force            bool          `yaml:"force" help:"open a filter filled under another URL normalization policy version anyway, replacing the stored version (run and import only; logged)"`

	// Given lists the keys of this section's settings given explicitly
	// (in the file, the environment or a flag), filled by Loader.Load.
	// pipeline.OpenFilter adopts an existing filter's stored value of every parameter
	// (kind, capacity, fpp, growth, tightening, shards) not given.
	Given []string `yaml:"-"`
	// NoMirror turns off a Redis Bloom filter's local mirror (dedup.Spec):
	// set by the dedup worker when redis.wait_replicas is on.
	NoMirror bool `yaml:"-"`
	// Log receives pipeline.OpenFilter's notes: settings given that only apply when a
	// filter is created, and filter.force in use. nil: slog.Default().
	Log *slog.Logger `yaml:"-"`
}

// Normalize sets the URL canonicalization policy. Every worker and crawler
// of a deployment must use the same settings: they change the canonical form
// of URLs, and so the filter's keys (the policy version is stored with the
// filter, which refuses another one).
type Normalize struct {
	StripParams   []string `yaml:"strip_params" help:"tracking query parameters removed from URLs (a trailing * matches a prefix); setting it replaces the default list; 'none' removes none"`
	SessionParams []string `yaml:"session_params" help:"session parameters removed from queries and ;name=value path parameters; setting it replaces the default list; 'none' removes none"`
	MaxLength     int      `yaml:"max_length" help:"longest URL accepted, in bytes"`
}

// Frontier shapes the NATS streams of the pipeline (see package frontier).
type Frontier struct {
	Prefix             string        `yaml:"prefix" help:"subject prefix and stream name prefix: subjects <prefix>.discovered.<crawl> and <prefix>.frontier.<crawl>.<partition>, streams <PREFIX>_DISCOVERED and <PREFIX>_FRONTIER"`
	Partitions         int           `yaml:"partitions" help:"frontier partitions; a URL goes to partition hash(host) mod partitions, so one crawler can own a host. Fixed for the life of the streams"`
	DuplicateWindow    time.Duration `yaml:"duplicate_window" help:"how long the frontier stream remembers a published URL's message ID; bounds how long a crashed worker's batch may wait for redelivery without risking a duplicate (see package frontier)"`
	MaxMessageBytes    Bytes         `yaml:"max_message_bytes" help:"largest discovered message accepted; larger ones are rejected as poison"`
	MaxLinks           int           `yaml:"max_links" help:"most links in one discovered message; publishers split longer lists"`
	FrontierMaxMsgs    int64         `yaml:"max_msgs" old:"frontier_max_msgs" help:"frontier stream limit in messages; at the limit workers wait (backpressure); -1: unlimited"`
	FrontierMaxBytes   Bytes         `yaml:"max_bytes" old:"frontier_max_bytes" help:"frontier stream limit in bytes; at the limit workers wait (backpressure); -1: unlimited"`
	DiscoveredMaxBytes Bytes         `yaml:"discovered_max_bytes" help:"discovered stream limit in bytes; at the limit crawlers' publishes fail until workers catch up; -1: unlimited"`
	Replicas           int           `yaml:"replicas" help:"stream replicas in a NATS cluster (1, 3 or 5)"`
	Storage            string        `yaml:"storage" help:"stream storage: file or memory"`
	AckWait            time.Duration `yaml:"ack_wait" help:"time a worker has to process a fetched discovered message before it is redelivered to another worker; workers extend it while they wait on Redis or NATS"`
	MaxAckPending      int           `yaml:"max_ack_pending" help:"discovered messages in flight across all workers"`
	Routes             int           `yaml:"routes" help:"route partitions giving each URL one owner among the dedup workers: workers forward each page's canonical links to partition hash(crawl, URL) mod routes, each leased by one worker at a time, so no two workers publish the same URL and each seen cache covers its own share; 0: off (every worker admits any URL; right for a single worker). Every worker of a deployment must use the same value; a few per worker (e.g. 16 for up to 8 workers)"`
}

// Worker tunes one dedup worker process.
type Worker struct {
	Batch           int           `yaml:"batch" help:"most discovered messages fetched and filtered together (one filter call per batch); a batch is what is waiting, never held for more"`
	Concurrency     int           `yaml:"concurrency" help:"batches a worker processes at once"`
	FetchWait       time.Duration `yaml:"fetch_wait" help:"how long one pull waits for a message when none is waiting"`
	BackoffMin      time.Duration `yaml:"backoff_min" help:"first pause after Redis or NATS fails"`
	BackoffMax      time.Duration `yaml:"backoff_max" help:"longest pause between retries while Redis or NATS is down"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" help:"on SIGTERM, time allowed to finish the batches in hand"`
	StatsInterval   time.Duration `yaml:"stats_interval" help:"how often a worker adds its counts to the shared stats"`
	SeenCache       int           `yaml:"seen_cache" help:"canonical URLs a worker remembers as held by the filter, so repeated links skip the filter call (about 20 bytes each); 0: no cache"`
	ParkDelay       time.Duration `yaml:"park_delay" help:"how long the messages of a crawl whose filter cannot be opened (corrupt snapshot, conflicting parameters) wait in the stream before the next try; the other crawls go on meanwhile"`
}

// HTTP configures the watch server: the live page, /stats, /metrics,
// /healthz, /readyz (package watch).
type HTTP struct {
	Addr string `yaml:"addr" help:"listen address of the live page, /stats, /metrics, /healthz and /readyz (loopback by default; :PORT listens on every interface, which needs http.insecure); empty: no HTTP server"`
	// Insecure lets Addr be beyond loopback although the HTTP surface has
	// no authentication yet (issue 29).
	// WebConfigFile is the Prometheus exporters' web configuration file
	// (prometheus/exporter-toolkit): TLS and basic-auth users.
	WebConfigFile string   `yaml:"web_config_file" help:"Prometheus web configuration file (as exporters' --web.config.file): tls_server_config (cert_file, key_file, client_ca_file, client_auth_type) and basic_auth_users (name: bcrypt hash; each user has the read role, beside tokens_file and client_roles), read again every 2 seconds, certificates at every connection; TLS on or off takes a restart. Empty: plain HTTP, no users"`
	TokensFile    string   `yaml:"tokens_file" help:"file of bearer tokens (CSV lines token,name,role; any role reads the HTTP surface), for scrapers and tools: re-read when it changes"`
	ClientRoles   []string `yaml:"client_roles" help:"roles of client certificates verified by web_config_file's client_ca_file, as name=role (the subject common name or a DNS, URI or e-mail subject alternative name)"`
	HealthOpen    bool     `yaml:"health_open" help:"leave /healthz and /readyz open to anyone, for orchestrators' probes, when users, tokens_file or client_roles guard the rest"`
	Insecure      bool     `yaml:"insecure" help:"serve the HTTP surface on an address beyond loopback without authentication (basic_auth_users in web_config_file, tokens_file or client_roles: anyone who reaches it can read the stats and query /contains), which is refused at start otherwise; a warning is logged at every start"`
	// PublicURL is where people open the live page when that is not
	// Addr's URL: a port published for a container, a proxy.
	PublicURL string `yaml:"public_url" help:"the URL people open the live page at when it is not http.addr's (a container's published port, a proxy, an ingress), printed at start in its place; empty: http.addr's"`
}

// Authenticates reports whether tokens or certificates' roles guard the
// HTTP surface (package auth; basic-auth users are the web config file's).
func (h HTTP) Authenticates() bool { return h.TokensFile != "" || len(h.ClientRoles) > 0 }

// Exposure checks Addr: beyond loopback it needs Insecure, and then
// warning is what to log at start.
func (h HTTP) Exposure() (warning string, err error) {
	tls, users, err := h.Web()
	if err != nil {
		return "", err
	}
	switch {
	case h.Addr == "" || Loopback(h.Addr):
		return "", nil
	case (users || h.Authenticates()) && !tls:
		return fmt.Sprintf("http.addr %s is beyond loopback without TLS: its credentials cross the network in clear (set tls_server_config in http.web_config_file)", h.Addr), nil
	case users || h.Authenticates():
		return "", nil
	case h.Insecure:
		return fmt.Sprintf("http.addr %s is beyond loopback and anyone who reaches it can read the stats and query /contains (http.insecure is set)", h.Addr), nil
	}
	return "", &FieldError{Field: "http.addr", Err: fmt.Errorf(
		"%s is beyond loopback without authentication: set basic_auth_users in http.web_config_file (see docs/security.md), bind it to loopback, or set http.insecure to serve it to anyone who reaches it", h.Addr)}
}

// Log configures logging.
type Log struct {
	Level  string `yaml:"level" help:"log level: debug, info, warn or error"`
	Format string `yaml:"format" help:"log format: text or json"`
}

// Default returns the documented defaults.
func Default() Config {
	return Config{
		Redis: Redis{Timeout: 10 * time.Second, WaitTimeout: time.Second},
		NATS: NATS{
			URL:           "nats://127.0.0.1:4222",
			ReconnectWait: time.Second,
		},
		Filter: Filter{
			Kind:             "bloom",
			Name:             "sieve:seen",
			Capacity:         10_000_000,
			FPP:              1e-6,
			Growth:           2,
			Tightening:       0.8,
			SnapshotInterval: 2 * time.Second,
		},
		Normalize: Normalize{
			StripParams:   normalize.DefaultStripParams(),
			SessionParams: normalize.DefaultSessionParams(),
			MaxLength:     normalize.DefaultMaxLength,
		},
		Frontier: Frontier{
			Prefix:             "sieve",
			Partitions:         16,
			DuplicateWindow:    10 * time.Minute,
			MaxMessageBytes:    1 << 20,
			MaxLinks:           10_000,
			FrontierMaxMsgs:    -1,
			FrontierMaxBytes:   8 << 30,
			DiscoveredMaxBytes: 4 << 30,
			Replicas:           1,
			Storage:            "file",
			AckWait:            30 * time.Second,
			MaxAckPending:      10_000,
		},
		Worker: Worker{
			Batch:           64,
			Concurrency:     4,
			FetchWait:       100 * time.Millisecond,
			BackoffMin:      100 * time.Millisecond,
			BackoffMax:      5 * time.Second,
			ShutdownTimeout: 30 * time.Second,
			StatsInterval:   time.Second,
			SeenCache:       1_000_000,
			ParkDelay:       time.Minute,
		},
		HTTP: HTTP{Addr: "127.0.0.1:8080"}, // loopback: exposing it is a choice (compose sets ":8080")
		Log:  Log{Level: "info", Format: "text"},
	}
}

// maxRoutes bounds frontier.routes: each route is a durable consumer.
const maxRoutes = 1024

var prefixRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// Validate reports every setting that cannot work, as *FieldError values
// (joined) naming the field.
func (c Config) Validate() error {
	var errs []error
	add := func(e *FieldError) {
		if e != nil {
			errs = append(errs, e)
		}
	}
	add(c.Redis.validate())
	add(c.NATS.validate())
	for _, e := range c.Filter.validate() {
		add(e)
	}
	if _, err := c.Normalize.Options(); err != nil {
		add(&FieldError{Field: "normalize", Err: err})
	}
	for _, e := range c.Frontier.validate() {
		add(e)
	}
	for _, e := range c.Worker.validate(c.Frontier) {
		add(e)
	}
	if (c.Client.CertFile == "") != (c.Client.KeyFile == "") {
		add(invalid("client.cert_file", "client.cert_file and client.key_file go together"))
	}
	if c.HTTP.Addr != "" {
		if _, _, err := net.SplitHostPort(c.HTTP.Addr); err != nil {
			add(invalid("http.addr", "want host:port or :port, got %q", c.HTTP.Addr))
		} else if _, err := c.HTTP.Exposure(); err != nil {
			// a *FieldError of http.addr or http.web_config_file
			var fe *FieldError
			errors.As(err, &fe)
			add(fe)
		}
	}
	if u := c.HTTP.PublicURL; u != "" {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			add(invalid("http.public_url", "want an http:// or https:// URL, got %q", u))
		}
	}
	if _, err := auth.ParseIdentities(c.HTTP.ClientRoles); err != nil {
		add(&FieldError{Field: "http.client_roles", Err: err})
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		add(invalid("log.level", "want debug, info, warn or error, got %q", c.Log.Level))
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		add(invalid("log.format", "want text or json, got %q", c.Log.Format))
	}
	return errors.Join(errs...)
}

func (r Redis) validate() *FieldError {
	if r.URL == "" {
		return nil
	}
	if _, err := r.addrs(); err != nil {
		return &FieldError{Field: "redis.url", Err: err}
	}
	if r.PoolSize < 0 {
		return invalid("redis.pool_size", "must be ≥ 0, got %d", r.PoolSize)
	}
	if r.Timeout <= 0 {
		return invalid("redis.timeout", "must be positive, got %v", r.Timeout)
	}
	if r.WaitReplicas < 0 {
		return invalid("redis.wait_replicas", "must be ≥ 0, got %d", r.WaitReplicas)
	}
	if r.WaitReplicas > 0 && (r.WaitTimeout <= 0 || r.WaitTimeout >= r.Timeout) {
		return invalid("redis.wait_timeout", "must be positive and shorter than redis.timeout (%v), got %v", r.Timeout, r.WaitTimeout)
	}
	return nil
}

func (n NATS) validate() *FieldError {
	if strings.TrimSpace(n.URL) == "" {
		return invalid("nats.url", "must not be empty")
	}
	for _, u := range strings.Split(n.URL, ",") {
		p, err := url.Parse(strings.TrimSpace(u))
		if err != nil || p.Host == "" {
			return invalid("nats.url", "want nats://host:port (comma-separated for several), got %q", u)
		}
		switch p.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return invalid("nats.url", "unknown scheme %q in %q (want nats, tls, ws or wss)", p.Scheme, u)
		}
	}
	if (n.TLSCert == "") != (n.TLSKey == "") {
		return invalid("nats.tls_cert", "tls_cert and tls_key go together")
	}
	if n.ReconnectWait <= 0 {
		return invalid("nats.reconnect_wait", "must be positive, got %v", n.ReconnectWait)
	}
	return nil
}

func (f Filter) validate() []*FieldError {
	var errs []*FieldError
	switch f.Kind {
	case "bloom", "cuckoo":
	default:
		errs = append(errs, invalid("filter.kind", "want bloom or cuckoo, got %q", f.Kind))
	}
	if f.Name == "" {
		errs = append(errs, invalid("filter.name", "must not be empty"))
	}
	if f.Capacity <= 0 {
		errs = append(errs, invalid("filter.capacity", "must be positive, got %d", f.Capacity))
	}
	if !(f.FPP > 0 && f.FPP < 1) {
		errs = append(errs, invalid("filter.fpp", "must be in (0, 1), got %v", f.FPP))
	}
	if !(f.Growth >= 1) {
		errs = append(errs, invalid("filter.growth", "must be ≥ 1, got %v", f.Growth))
	}
	if !(f.Tightening > 0 && f.Tightening < 1) {
		errs = append(errs, invalid("filter.tightening", "must be in (0, 1), got %v", f.Tightening))
	}
	if f.Snapshot != "" && f.SnapshotInterval <= 0 {
		errs = append(errs, invalid("filter.snapshot_interval", "must be positive, got %v", f.SnapshotInterval))
	}
	if f.Shards < 0 {
		errs = append(errs, invalid("filter.shards", "must be ≥ 0, got %d", f.Shards))
	}
	return errs
}

func (f Frontier) validate() []*FieldError {
	var errs []*FieldError
	if !prefixRE.MatchString(f.Prefix) {
		errs = append(errs, invalid("frontier.prefix", "want 1-32 lowercase letters, digits, '-' or '_', got %q", f.Prefix))
	}
	if f.Partitions < 1 || f.Partitions > 4096 {
		errs = append(errs, invalid("frontier.partitions", "must be in [1, 4096], got %d", f.Partitions))
	}
	if f.DuplicateWindow < time.Second {
		errs = append(errs, invalid("frontier.duplicate_window", "must be at least 1s, got %v", f.DuplicateWindow))
	}
	if f.AckWait < time.Second {
		errs = append(errs, invalid("frontier.ack_wait", "must be at least 1s, got %v", f.AckWait))
	} else if f.DuplicateWindow < 2*f.AckWait {
		errs = append(errs, invalid("frontier.duplicate_window", "must be at least twice frontier.ack_wait (%v), got %v: a crashed worker's batch is redelivered after ack_wait and must be republished inside the window", f.AckWait, f.DuplicateWindow))
	}
	if f.MaxMessageBytes < 1024 {
		errs = append(errs, invalid("frontier.max_message_bytes", "must be at least 1KiB, got %v", f.MaxMessageBytes))
	}
	if f.MaxLinks < 1 {
		errs = append(errs, invalid("frontier.max_links", "must be positive, got %d", f.MaxLinks))
	}
	if f.FrontierMaxMsgs == 0 || f.FrontierMaxMsgs < -1 {
		errs = append(errs, invalid("frontier.max_msgs", "must be positive or -1 (unlimited), got %d", f.FrontierMaxMsgs))
	}
	if f.FrontierMaxBytes == 0 || f.FrontierMaxBytes < -1 {
		errs = append(errs, invalid("frontier.max_bytes", "must be positive or -1 (unlimited), got %v", f.FrontierMaxBytes))
	}
	if f.DiscoveredMaxBytes == 0 || f.DiscoveredMaxBytes < -1 {
		errs = append(errs, invalid("frontier.discovered_max_bytes", "must be positive or -1 (unlimited), got %v", f.DiscoveredMaxBytes))
	}
	switch f.Replicas {
	case 1, 3, 5:
	default:
		errs = append(errs, invalid("frontier.replicas", "want 1, 3 or 5, got %d", f.Replicas))
	}
	switch f.Storage {
	case "file", "memory":
	default:
		errs = append(errs, invalid("frontier.storage", "want file or memory, got %q", f.Storage))
	}
	if f.MaxAckPending < 1 {
		errs = append(errs, invalid("frontier.max_ack_pending", "must be positive, got %d", f.MaxAckPending))
	}
	if f.Routes < 0 || f.Routes > maxRoutes {
		errs = append(errs, invalid("frontier.routes", "want 0 (off) to %d, got %d", maxRoutes, f.Routes))
	}
	return errs
}

func (w Worker) validate(f Frontier) []*FieldError {
	var errs []*FieldError
	if w.Batch < 1 {
		errs = append(errs, invalid("worker.batch", "must be positive, got %d", w.Batch))
	}
	if w.Concurrency < 1 {
		errs = append(errs, invalid("worker.concurrency", "must be positive, got %d", w.Concurrency))
	}
	if w.Batch*w.Concurrency > f.MaxAckPending {
		errs = append(errs, invalid("worker.batch", "batch × concurrency (%d) exceeds frontier.max_ack_pending (%d): the worker could not fetch its batches", w.Batch*w.Concurrency, f.MaxAckPending))
	}
	if w.FetchWait < time.Millisecond {
		errs = append(errs, invalid("worker.fetch_wait", "must be at least 1ms, got %v", w.FetchWait))
	}
	if w.BackoffMin <= 0 {
		errs = append(errs, invalid("worker.backoff_min", "must be positive, got %v", w.BackoffMin))
	}
	if w.BackoffMax < w.BackoffMin {
		errs = append(errs, invalid("worker.backoff_max", "must be ≥ worker.backoff_min (%v), got %v", w.BackoffMin, w.BackoffMax))
	}
	if w.BackoffMax >= f.AckWait {
		errs = append(errs, invalid("worker.backoff_max", "must be below frontier.ack_wait (%v), got %v: a waiting worker extends its messages between retries", f.AckWait, w.BackoffMax))
	}
	if w.ShutdownTimeout <= 0 {
		errs = append(errs, invalid("worker.shutdown_timeout", "must be positive, got %v", w.ShutdownTimeout))
	}
	if w.SeenCache < 0 {
		errs = append(errs, invalid("worker.seen_cache", "must be ≥ 0, got %d", w.SeenCache))
	}
	if w.StatsInterval <= 0 {
		errs = append(errs, invalid("worker.stats_interval", "must be positive, got %v", w.StatsInterval))
	}
	if w.ParkDelay <= 0 {
		errs = append(errs, invalid("worker.park_delay", "must be positive, got %v", w.ParkDelay))
	}
	return errs
}

// String describes the configuration for a startup log line, without
// secrets.
func (c Config) String() string {
	redisURL := "memory"
	if c.Redis.URL != "" {
		redisURL = redactURLs(c.Redis.URL)
	}
	return fmt.Sprintf("redis=%s nats=%s filter=%s(%s cap=%d fpp=%g) prefix=%s partitions=%d",
		redisURL, redactURLs(c.NATS.URL), c.Filter.Kind, c.Filter.Name, c.Filter.Capacity, c.Filter.FPP,
		c.Frontier.Prefix, c.Frontier.Partitions)
}

// redactURLs hides passwords in a comma-separated URL list.
func redactURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}

// Options returns the normalize options the settings describe, checking
// them as normalize.New does.
func (n Normalize) Options() (normalize.Options, error) {
	list := func(l []string) []string {
		if len(l) == 1 && strings.EqualFold(l[0], "none") {
			return []string{}
		}
		if l == nil {
			return []string{}
		}
		return l
	}
	o := normalize.Options{StripParams: list(n.StripParams), SessionParams: list(n.SessionParams), MaxLength: n.MaxLength}
	if _, err := normalize.New(o); err != nil {
		return o, err
	}
	return o, nil
}

// Normalizer returns the Normalizer the settings describe.
func (n Normalize) Normalizer() (*normalize.Normalizer, error) {
	o, err := n.Options()
	if err != nil {
		return nil, err
	}
	return normalize.New(o)
}
