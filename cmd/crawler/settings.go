package main

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/urlstore"
	"github.com/sievecrawl/sieve/warc"
)

// settings is everything the crawler reads; package config fills it from
// the YAML file, SIEVE_* variables and flags.
type settings struct {
	config.Config `yaml:",inline"`
	Crawl         crawlSettings `yaml:"crawl"`
	Create        crawlCreate   `yaml:",inline"`
	Warc          warcSettings  `yaml:"warc"`

	Embedded bool          `yaml:"embedded" help:"run the whole pipeline in this process: an embedded NATS server with JetStream and a dedup worker, storing everything under data_dir (the filter in memory, snapshotted there, unless redis.url is set)"`
	Demo     bool          `yaml:"demo" help:"crawl the bundled demo site, served on loopback by this process (implies embedded unless nats.url is given explicitly)"`
	Seed     []string      `yaml:"seed" help:"URLs to seed the crawl with before crawling (comma-separated)"`
	IdleExit time.Duration `yaml:"idle_exit" help:"end the run when the frontier has been empty with nothing in flight for this long, printing a summary; 0: run until stopped (embedded runs default to 1s)"`
	DataDir  string        `yaml:"data_dir" help:"directory of the embedded mode's NATS store and filter snapshots, of an archiving crawler's index of the crawls' captures (captures/, with warc.captures disk) and of serve's index of the URLFrontier queues (urlfrontier/); keep it across restarts (a lost index is rebuilt from the log); seed, crawls, delete-crawl and rules given it (and no nats.url) seed, list or delete the crawls stored there, or show and veto their learned rules"`
	Progress string        `yaml:"progress" help:"live progress: auto (on a terminal), always or never"`

	// URLFrontier is `crawler serve`'s API (issue 19).
	URLFrontier urlfrontierSettings `yaml:"urlfrontier"`
}

// urlfrontierSettings is the urlfrontier section: the URLFrontier API that
// `crawler serve` serves.
type urlfrontierSettings struct {
	Addr            string        `yaml:"addr" help:"address crawler serve serves the URLFrontier gRPC API on (StormCrawler: urlfrontier.host and urlfrontier.port)"`
	DefaultDelay    time.Duration `yaml:"default_delay" help:"pause between two hand-outs of one queue unless SetDelay set another"`
	DefaultLease    time.Duration `yaml:"default_lease" help:"time a handed-out URL waits for its update before it is handed out again, when GetURLs asks for 0"`
	MaxBatch        int           `yaml:"max_batch" help:"most URLs in one PutDiscovered batch; a larger batch ends its stream with INVALID_ARGUMENT"`
	MaxMessageBytes config.Bytes  `yaml:"max_message_bytes" help:"largest gRPC message received; a larger one is refused with RESOURCE_EXHAUSTED"`
	CompactEvery    time.Duration `yaml:"compact_every" help:"how often the queues' index is snapshotted into NATS (bucket <PREFIX>_STORE_SNAP) and the queues' log trimmed below the previous snapshot, so that the log holds about two periods of work and a new or wiped serve starts from the snapshot; a serve may be stopped or lag up to this long and catch up from the log, longer and it restores from the snapshot. 0: this serve never compacts (if none does, the log keeps every entry)"`
	// Security is the API's TLS and authentication (issue 29).
	Security config.ServerSecurity `yaml:",inline"`
}

func defaultURLFrontier() urlfrontierSettings {
	return urlfrontierSettings{Addr: "127.0.0.1:7071", DefaultDelay: time.Second, DefaultLease: 30 * time.Second,
		MaxBatch: 10_000, MaxMessageBytes: 16 << 20, CompactEvery: urlstore.DefaultCompactEvery}
}

func (u urlfrontierSettings) validate() error {
	var errs []error
	bad := func(field, msg string) { errs = append(errs, &config.FieldError{Field: field, Err: errors.New(msg)}) }
	if u.Addr == "" {
		bad("urlfrontier.addr", "must not be empty")
	}
	if u.DefaultDelay < 0 {
		bad("urlfrontier.default_delay", "must be ≥ 0")
	}
	if u.DefaultLease <= 0 {
		bad("urlfrontier.default_lease", "must be positive")
	}
	if u.MaxBatch <= 0 {
		bad("urlfrontier.max_batch", "must be positive")
	}
	if u.CompactEvery != 0 && u.CompactEvery < time.Minute {
		bad("urlfrontier.compact_every", "must be 0 (never) or at least 1m: a serve that lags longer must restore")
	}
	if u.MaxMessageBytes < 1024 {
		bad("urlfrontier.max_message_bytes", "must be at least 1KiB")
	}
	errs = append(errs, u.Security.Validate("urlfrontier"))
	if _, err := u.Security.Exposure("urlfrontier", u.Addr); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// crawlSettings is the crawl section: what the crawler fetches and how.
type crawlSettings struct {
	ID              string        `yaml:"id" help:"crawl id, 1-64 of [A-Za-z0-9_-]: the crawl seed (and run --seed) adds to; run crawls every crawl on the frontier, each in the scope of its own seeds"`
	UserAgent       string        `yaml:"user_agent" help:"User-Agent header; its product token (before the first /) is matched against robots.txt groups"`
	Scope           string        `yaml:"scope" help:"hosts followed from the seeds: host (the seeds' host names), domain (their registrable domains) or any"`
	AllowDomains    []string      `yaml:"allow_domains" help:"further domains followed (example.org also allows its subdomains)"`
	DenyDomains     []string      `yaml:"deny_domains" help:"domains never followed, whatever the scope"`
	AllowAddresses  []string      `yaml:"allow_addresses" help:"host names, IPs or CIDR prefixes that may be fetched although loopback, private or link-local (seed hosts are allowed anyway)"`
	MaxDepth        int           `yaml:"max_depth" help:"deepest page fetched, in links from a seed (seeds are 0)"`
	MaxRedirects    int           `yaml:"max_redirects" help:"redirects followed in a row (each target goes through dedup like a link); a URL reached through this many that redirects again is given up"`
	MaxPages        int64         `yaml:"max_pages" help:"stop this crawler after this many fetches; the rest stays queued; 0: no limit"`
	HostParallel    int           `yaml:"host_parallel" help:"requests in flight to one host at a time"`
	HostDelay       time.Duration `yaml:"host_delay" help:"pause between the starts of two requests to one host (a longer robots.txt Crawl-delay wins); 0: none"`
	MaxCrawlDelay   time.Duration `yaml:"max_crawl_delay" help:"longest robots.txt Crawl-delay or Retry-After honoured between requests to a host"`
	RetryAfter      string        `yaml:"retry_after" help:"what a 429's or 503's Retry-After holds back: host (every URL of the host, as RFC 9110 reads a 503) or url (that URL's retry only: for a site of one's own whose errors are per page)"`
	Parallel        int           `yaml:"parallel" help:"requests in flight over all hosts"`
	RequestTimeout  time.Duration `yaml:"request_timeout" help:"limit on one request, body included"`
	MaxBodySize     config.Bytes  `yaml:"max_body_size" help:"bytes of a page read; longer pages are cut"`
	IgnoreRobots    bool          `yaml:"ignore_robots" help:"do not read robots.txt (only for sites you own)"`
	Canonical       bool          `yaml:"canonical" help:"also follow <link rel=canonical>"`
	Frames          bool          `yaml:"frames" help:"also follow <frame src> and <iframe src>"`
	InFlight        int           `yaml:"in_flight" help:"frontier messages held at once over all hosts, a few per host waiting for their turn or being fetched (2 × host_parallel; for a host with no delay that answers fast, what it starts in the next 5 s, up to a quarter of in_flight); the rest stays in JetStream. Bounds memory, not speed"`
	MaxRetries      int           `yaml:"max_retries" help:"retries of a URL failing temporarily (timeout, network, 5xx, 429)"`
	RetryBackoff    time.Duration `yaml:"retry_backoff" help:"wait before the first retry, doubled for each next one (a longer Retry-After wins)"`
	MaxRetryDelay   time.Duration `yaml:"max_retry_delay" help:"longest wait before a retry"`
	AckWait         time.Duration `yaml:"ack_wait" help:"time a crawler that went silent keeps its frontier messages before they go to another"`
	LeaseTTL        time.Duration `yaml:"lease_ttl" help:"time a crawler that went silent keeps its frontier partitions (hosts) before others take them"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" help:"on SIGTERM, time allowed to finish the fetches in hand"`
	FetchEvents     string        `yaml:"fetch_events" help:"publish an event per fetch on the stream <PREFIX>_FETCHED, for tools downstream: on, off, or empty: on with an external NATS, off in the embedded mode, whose NATS server no other process can reach (3–6 % of a one-site crawl's CPU for a stream nothing reads)"`
}

// warcSettings is the warc section: where and how fetched pages are kept.
type warcSettings struct {
	Dir          string        `yaml:"dir" help:"keep every fetch (pages, redirects, errors, robots.txt) as WARC/1.1 files in this directory, a CDXJ index beside each; pages are acknowledged only once written, and a directory that cannot be written stops the crawl; each run may use a new one (the crawl records every directory it wrote and revisits against all of them); empty: keep nothing"`
	MaxFileSize  config.Bytes  `yaml:"max_file_size" help:"size at which a WARC file is closed and the next begun"`
	Prefix       string        `yaml:"prefix" help:"start of every WARC file name: <prefix>-<17-digit UTC time>-<serial>-<crawler id>.warc.gz"`
	Captures     string        `yaml:"captures" help:"where each crawl's last capture of every URL is kept for revisits: disk (on disk under data_dir/captures, bounded memory, shared by every crawler through the NATS stream <PREFIX>_STORE), redis (redis.url: ~1 KB of RAM per URL) or bucket (a JetStream bucket: an in-memory entry per URL in NATS); redis and bucket are what earlier versions used"`
	CompactEvery time.Duration `yaml:"compact_every" help:"with captures disk, how often an archiving crawler may snapshot the captures' index into NATS (<PREFIX>_STORE_SNAP) and trim the captures' log below the previous snapshot: once the log written since the last snapshot is as large as it, so that revisits do not grow the log without end and a new crawler starts from the snapshot; a crawler stopped for longer restores from it. 0: this crawler never compacts (if none does, the log keeps every capture)"`
}

func defaultSettings() settings {
	cfg := config.Default()
	cfg.HTTP.Addr = "127.0.0.1:0" // the watch page on a free loopback port, printed at start
	// The crawler opens a filter only in embedded mode, mostly for small
	// crawls: it starts small (0.4 MB) and grows with the crawl.
	cfg.Filter.Capacity = 100_000
	return settings{
		Config: cfg,
		Crawl: crawlSettings{
			ID:              "default",
			UserAgent:       crawl.DefaultUserAgent,
			Scope:           string(crawl.ScopeHost),
			MaxDepth:        16,
			MaxRedirects:    5,
			HostParallel:    1,
			HostDelay:       time.Second,
			MaxCrawlDelay:   time.Minute,
			RetryAfter:      "host",
			Parallel:        64,
			RequestTimeout:  30 * time.Second,
			MaxBodySize:     10 << 20,
			InFlight:        4096,
			MaxRetries:      3,
			RetryBackoff:    5 * time.Second,
			MaxRetryDelay:   5 * time.Minute,
			AckWait:         time.Minute,
			LeaseTTL:        15 * time.Second,
			ShutdownTimeout: 10 * time.Second,
		},
		Warc:        warcSettings{MaxFileSize: warc.DefaultMaxFileSize, Prefix: "sieve", Captures: "disk", CompactEvery: time.Hour},
		DataDir:     "sieve-data",
		Progress:    "auto",
		URLFrontier: defaultURLFrontier(),
	}
}

// validate checks the crawler's own settings; the shared ones are checked by
// config.Config.Validate.
func (s settings) validate() error {
	var errs []error
	bad := func(field, msg string) { errs = append(errs, &config.FieldError{Field: field, Err: errors.New(msg)}) }
	c := s.Crawl
	if !frontier.ValidCrawl(c.ID) {
		bad("crawl.id", "want 1-64 of [A-Za-z0-9_-], got "+c.ID)
	}
	if c.UserAgent == "" {
		bad("crawl.user_agent", "must not be empty")
	}
	if err := s.scope().Validate(); err != nil {
		bad("crawl.scope", err.Error())
	}
	positive := map[string]int64{
		"crawl.max_depth": int64(c.MaxDepth), "crawl.max_redirects": int64(c.MaxRedirects), "crawl.host_parallel": int64(c.HostParallel),
		"crawl.parallel": int64(c.Parallel), "crawl.in_flight": int64(c.InFlight),
		"crawl.max_body_size": int64(c.MaxBodySize), "crawl.request_timeout": int64(c.RequestTimeout),
		"crawl.retry_backoff": int64(c.RetryBackoff), "crawl.max_retry_delay": int64(c.MaxRetryDelay),
		"crawl.max_crawl_delay": int64(c.MaxCrawlDelay), "crawl.shutdown_timeout": int64(c.ShutdownTimeout),
	}
	for _, f := range sortedKeys(positive) {
		if positive[f] <= 0 {
			bad(f, "must be positive")
		}
	}
	if c.MaxPages < 0 {
		bad("crawl.max_pages", "must be ≥ 0")
	}
	if s.Warc.MaxFileSize <= 0 {
		bad("warc.max_file_size", "must be positive")
	}
	if s.Warc.Prefix == "" {
		bad("warc.prefix", "must not be empty")
	}
	switch s.Warc.Captures {
	case "disk", "bucket":
	case "redis":
		if s.Redis.URL == "" {
			bad("warc.captures", "redis needs redis.url")
		}
	default:
		bad("warc.captures", "want disk, redis or bucket, got "+s.Warc.Captures)
	}
	if s.Warc.CompactEvery != 0 && s.Warc.CompactEvery < time.Minute {
		bad("warc.compact_every", "must be 0 (never) or at least 1m: a crawler that lags longer must restore")
	}
	if s.Warc.Captures == "disk" && s.DataDir == "" {
		bad("data_dir", "must be set to keep captures on disk (warc.captures disk)")
	}
	if c.MaxRetries < 0 {
		bad("crawl.max_retries", "must be ≥ 0")
	}
	if c.FetchEvents != "" && c.FetchEvents != "on" && c.FetchEvents != "off" {
		bad("crawl.fetch_events", "want on, off or empty, got \""+c.FetchEvents+"\"")
	}
	if c.RetryAfter != "host" && c.RetryAfter != "url" {
		bad("crawl.retry_after", "want host or url, got \""+c.RetryAfter+"\"")
	}
	if c.HostDelay < 0 {
		bad("crawl.host_delay", "must be ≥ 0")
	}
	if c.AckWait < 3*time.Second {
		bad("crawl.ack_wait", "must be at least 3s")
	}
	if c.LeaseTTL < 3*time.Second {
		bad("crawl.lease_ttl", "must be at least 3s")
	}
	if s.IdleExit < 0 {
		bad("idle_exit", "must be ≥ 0")
	}
	switch s.Progress {
	case "auto", "always", "never":
	default:
		bad("progress", "want auto, always or never, got "+s.Progress)
	}
	if s.Embedded && s.DataDir == "" {
		bad("data_dir", "must be set in embedded mode")
	}
	if err := s.Create.validate(s.Frontier.DuplicateWindow); err != nil {
		errs = append(errs, err)
	}
	if len(s.Seed) > 0 {
		if err := crawls.CheckSeeds(s.Seed); err != nil {
			bad("seed", err.Error())
		}
	}
	return errors.Join(errs...)
}

func (s settings) scope() crawl.Scope {
	return crawl.Scope{Mode: crawl.ScopeMode(s.Crawl.Scope), Allow: s.Crawl.AllowDomains, Deny: s.Crawl.DenyDomains}
}

// crawlOptions maps the settings onto the crawler's options.
func (s settings) crawlOptions() crawl.Options {
	c := s.Crawl
	delay := c.HostDelay
	if delay == 0 {
		delay = -1 // none
	}
	retries := c.MaxRetries
	if retries == 0 {
		retries = -1 // none
	}
	return crawl.Options{
		Topology: s.Frontier.Topology(),
		Fetcher: crawl.FetcherOptions{
			UserAgent:      c.UserAgent,
			RequestTimeout: c.RequestTimeout,
			MaxBodySize:    int64(c.MaxBodySize),
			HostParallel:   c.HostParallel,
			HostDelay:      delay,
			MaxParallel:    c.Parallel,
			MaxCrawlDelay:  c.MaxCrawlDelay,
			IgnoreRobots:   c.IgnoreRobots,
			MaxLinks:       s.Frontier.MaxLinks,
			Canonical:      c.Canonical,
			Frames:         c.Frames,
			RetryAfterURL:  c.RetryAfter == "url",
			AllowAddresses: c.AllowAddresses,
		},
		Scope:           s.scope(),
		MaxDepth:        c.MaxDepth,
		MaxRedirects:    c.MaxRedirects,
		MaxPages:        c.MaxPages,
		InFlight:        c.InFlight,
		MaxRetries:      retries,
		RetryBackoff:    c.RetryBackoff,
		MaxRetryDelay:   c.MaxRetryDelay,
		AckWait:         c.AckWait,
		LeaseTTL:        c.LeaseTTL,
		IdleExit:        s.IdleExit,
		ShutdownTimeout: c.ShutdownTimeout,
		SkipFetchEvents: c.FetchEvents == "off" || (c.FetchEvents == "" && s.Embedded),
	}
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
