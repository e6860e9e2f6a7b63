package config_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/redistest"
)

// load runs the whole loading sequence as a binary does.
func load(tb testing.TB, args []string, env map[string]string, file string) (config.Config, error) {
	tb.Helper()
	cfg := config.Default()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	l := config.NewLoader(fs, &cfg)
	if file != "" {
		path := filepath.Join(tb.TempDir(), "sieve.yaml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			tb.Fatal(err)
		}
		args = append([]string{"--config", path}, args...)
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	err := l.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	return cfg, err
}

func TestPrecedence(t *testing.T) {
	file := `
filter:
  fpp: 0.01
  capacity: 500
  kind: cuckoo
worker:
  batch: 10
`
	cfg, err := load(t,
		[]string{"--filter-fpp", "0.0001", "--worker-fetch-wait=50ms"},
		map[string]string{"SIEVE_FILTER_FPP": "0.001", "SIEVE_FILTER_CAPACITY": "700", "SIEVE_WORKER_CONCURRENCY": "3"},
		file)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"flag beats env and file", cfg.Filter.FPP, 0.0001},
		{"env beats file", cfg.Filter.Capacity, int64(700)},
		{"file beats default", cfg.Filter.Kind, "cuckoo"},
		{"file only", cfg.Worker.Batch, 10},
		{"env only", cfg.Worker.Concurrency, 3},
		{"flag only", cfg.Worker.FetchWait, 50 * time.Millisecond},
		{"default", cfg.Frontier.Partitions, 16},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(path, []byte("frontier:\n  prefix: fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := load(t, nil, map[string]string{"SIEVE_CONFIG": path}, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Frontier.Prefix != "fromfile" {
		t.Fatalf("prefix = %q, want the file's %q", cfg.Frontier.Prefix, "fromfile")
	}
}

func TestLoadErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		file      string
		wantField string
		wantText  string
	}{
		{name: "bad env number", env: map[string]string{"SIEVE_FILTER_FPP": "lots"}, wantField: "filter.fpp", wantText: "env SIEVE_FILTER_FPP"},
		{name: "bad env duration", env: map[string]string{"SIEVE_FRONTIER_ACK_WAIT": "30"}, wantField: "frontier.ack_wait", wantText: "invalid duration"},
		{name: "unknown file key", file: "filter:\n  fppp: 0.1\n", wantField: "filter.fppp", wantText: "unknown setting"},
		{name: "unknown section", file: "nope:\n  a: 1\n", wantField: "nope", wantText: "unknown setting"},
		{name: "bad file value", file: "worker:\n  batch: many\n", wantField: "worker.batch", wantText: "line 2"},
		{name: "list for scalar", file: "redis:\n  url: [a, b]\n", wantField: "redis.url", wantText: "list"},
		{name: "bad bytes", file: "frontier:\n  max_message_bytes: 1 zillion\n", wantField: "frontier.max_message_bytes", wantText: "invalid size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.args, tt.env, tt.file)
			var fe *config.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error = %v, want a *config.FieldError", err)
			}
			if fe.Field != tt.wantField {
				t.Errorf("Field = %q, want %q (error %v)", fe.Field, tt.wantField, err)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q does not contain %q", err, tt.wantText)
			}
		})
	}
}

func TestBadFlagFailsParse(t *testing.T) {
	_, err := load(t, []string{"--worker-batch", "x"}, nil, "")
	if err == nil || !strings.Contains(err.Error(), "worker-batch") {
		t.Fatalf("error = %v, want one naming --worker-batch", err)
	}
}

func TestDefaultIsValid(t *testing.T) {
	if err := config.Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	tests := []struct {
		field  string
		mutate func(*config.Config)
	}{
		{"redis.url", func(c *config.Config) { c.Redis.URL = "redis://[::1" }},
		{"redis.url", func(c *config.Config) { c.Redis.URL = "justahost" }},
		{"redis.url", func(c *config.Config) { c.Redis.URL = "redis://a:1/2,redis://b:1/2" }},
		{"nats.url", func(c *config.Config) { c.NATS.URL = "" }},
		{"nats.url", func(c *config.Config) { c.NATS.URL = "http://x:4222" }},
		{"nats.tls_cert", func(c *config.Config) { c.NATS.TLSCert = "cert.pem" }},
		{"filter.kind", func(c *config.Config) { c.Filter.Kind = "quotient" }},
		{"filter.fpp", func(c *config.Config) { c.Filter.FPP = 1 }},
		{"filter.fpp", func(c *config.Config) { c.Filter.FPP = 0 }},
		{"filter.capacity", func(c *config.Config) { c.Filter.Capacity = 0 }},
		{"filter.growth", func(c *config.Config) { c.Filter.Growth = 0.5 }},
		{"filter.tightening", func(c *config.Config) { c.Filter.Tightening = 1 }},
		{"frontier.prefix", func(c *config.Config) { c.Frontier.Prefix = "Has.Dots" }},
		{"frontier.partitions", func(c *config.Config) { c.Frontier.Partitions = 0 }},
		{"frontier.duplicate_window", func(c *config.Config) { c.Frontier.DuplicateWindow = 45 * time.Second }},
		{"frontier.max_msgs", func(c *config.Config) { c.Frontier.FrontierMaxMsgs = 0 }},
		{"frontier.replicas", func(c *config.Config) { c.Frontier.Replicas = 2 }},
		{"frontier.routes", func(c *config.Config) { c.Frontier.Routes = -1 }},
		{"redis.wait_replicas", func(c *config.Config) { c.Redis.URL, c.Redis.WaitReplicas = "redis://r:6379", -1 }},
		{"redis.wait_timeout", func(c *config.Config) {
			c.Redis.URL, c.Redis.WaitReplicas, c.Redis.WaitTimeout = "redis://r:6379", 1, c.Redis.Timeout
		}},
		{"frontier.routes", func(c *config.Config) { c.Frontier.Routes = 1025 }},
		{"frontier.storage", func(c *config.Config) { c.Frontier.Storage = "tape" }},
		{"worker.batch", func(c *config.Config) { c.Worker.Batch = 0 }},
		{"worker.batch", func(c *config.Config) { c.Worker.Batch = 10_000 }},
		{"worker.backoff_max", func(c *config.Config) { c.Worker.BackoffMax = time.Minute }},
		{"worker.seen_cache", func(c *config.Config) { c.Worker.SeenCache = -1 }},
		{"http.addr", func(c *config.Config) { c.HTTP.Addr = "8080" }},
		{"http.public_url", func(c *config.Config) { c.HTTP.PublicURL = "127.0.0.1:49153" }},
		{"log.level", func(c *config.Config) { c.Log.Level = "loud" }},
		{"log.format", func(c *config.Config) { c.Log.Format = "xml" }},
	}
	for _, tt := range tests {
		cfg := config.Default()
		tt.mutate(&cfg)
		err := cfg.Validate()
		var fe *config.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: Validate() = %v, want a *config.FieldError", tt.field, err)
			continue
		}
		if fe.Field != tt.field {
			t.Errorf("Validate() named %q, want %q (%v)", fe.Field, tt.field, err)
		}
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want config.Bytes
		bad  bool
	}{
		{in: "1048576", want: 1 << 20},
		{in: "1MiB", want: 1 << 20},
		{in: "64 KiB", want: 64 << 10},
		{in: "64KB", want: 64_000},
		{in: "8GiB", want: 8 << 30},
		{in: "2g", want: 2 << 30},
		{in: "10B", want: 10},
		{in: "-1", want: -1},
		{in: "-2", bad: true},
		{in: "-1MiB", bad: true},
		{in: "MiB", bad: true},
		{in: "1.5MiB", bad: true},
		{in: "99999999999TiB", bad: true},
	}
	for _, tt := range tests {
		got, err := config.ParseBytes(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("ParseBytes(%q) = %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseBytes(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		if back, err := config.ParseBytes(got.String()); err != nil || back != got {
			t.Errorf("ParseBytes(%q.String() = %q) = %v, %v; want round trip", tt.in, got.String(), back, err)
		}
	}
}

func TestHelpDocumentsEverySetting(t *testing.T) {
	cfg := config.Default()
	fs := flag.NewFlagSet("dedup-worker run", flag.ContinueOnError)
	fs.Bool("json", false, "print JSON")
	l := config.NewLoader(fs, &cfg)
	var out bytes.Buffer
	fs.SetOutput(&out)
	fs.Usage()
	help := out.String()
	for _, path := range l.Settings() {
		flagName := "--" + strings.NewReplacer(".", "-", "_", "-").Replace(path)
		env := "SIEVE_" + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
		for _, want := range []string{flagName + " ", env, "yaml " + path} {
			if !strings.Contains(help, want) {
				t.Errorf("help lacks %q for %s", want, path)
			}
		}
	}
	for _, want := range []string{"--json", "--config", `(default 1e-06)`, "(default 10m0s)", "(default 1MiB)"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	if strings.Count(help, "(default ") < len(l.Settings()) {
		t.Errorf("help shows fewer defaults than settings:\n%s", help)
	}
}

// TestEmbeddingAddsSections shows how a binary adds its own settings.
func TestEmbeddingAddsSections(t *testing.T) {
	type crawler struct {
		UserAgent string   `yaml:"user_agent" help:"User-Agent header"`
		Allow     []string `yaml:"allow" help:"hosts to follow"`
	}
	type crawlerConfig struct {
		config.Config `yaml:",inline"`
		Crawler       crawler `yaml:"crawler"`
	}
	cfg := crawlerConfig{Config: config.Default(), Crawler: crawler{UserAgent: "sieve"}}
	fs := flag.NewFlagSet("crawler", flag.ContinueOnError)
	l := config.NewLoader(fs, &cfg)
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("crawler:\n  allow: [a.example, b.example]\nfilter:\n  kind: cuckoo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--config", path, "--crawler-user-agent", "bot/1"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Load(func(k string) (string, bool) {
		if k == "SIEVE_REDIS_URL" {
			return "redis://127.0.0.1:6379", true
		}
		return "", false
	}); err != nil {
		t.Fatal(err)
	}
	if cfg.Crawler.UserAgent != "bot/1" || strings.Join(cfg.Crawler.Allow, "|") != "a.example|b.example" ||
		cfg.Filter.Kind != "cuckoo" || cfg.Redis.URL != "redis://127.0.0.1:6379" {
		t.Fatalf("loaded %+v", cfg)
	}
}

func TestRedisClient(t *testing.T) {
	tests := []struct {
		name        string
		r           config.Redis
		wantCluster bool
		wantAddr    string
		wantPass    string
		wantTLS     bool
		wantDB      int
	}{
		{name: "plain url", r: config.Redis{URL: "redis://10.0.0.1:6379/2"}, wantAddr: "10.0.0.1:6379", wantDB: 2},
		{name: "bare address", r: config.Redis{URL: "10.0.0.1:6380"}, wantAddr: "10.0.0.1:6380"},
		{name: "tls with password", r: config.Redis{URL: "rediss://:s3cret@cache.example:6380"}, wantAddr: "cache.example:6380", wantPass: "s3cret", wantTLS: true},
		{name: "password override", r: config.Redis{URL: "redis://:old@h:1", Password: "new"}, wantAddr: "h:1", wantPass: "new"},
		{name: "cluster list", r: config.Redis{URL: "h1:7000, h2:7001,h3:7002"}, wantCluster: true, wantAddr: "h1:7000"},
		{name: "cluster seed", r: config.Redis{URL: "rediss://:pw@h1:7000", Cluster: true}, wantCluster: true, wantAddr: "h1:7000", wantPass: "pw", wantTLS: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.r.Client()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			switch cl := c.(type) {
			case *redis.Client:
				if tt.wantCluster {
					t.Fatal("got a single-server client, want a cluster client")
				}
				o := cl.Options()
				if o.Addr != tt.wantAddr || o.Password != tt.wantPass || (o.TLSConfig != nil) != tt.wantTLS || o.DB != tt.wantDB {
					t.Fatalf("options addr=%q pass=%q tls=%v db=%d", o.Addr, o.Password, o.TLSConfig != nil, o.DB)
				}
			case *redis.ClusterClient:
				if !tt.wantCluster {
					t.Fatal("got a cluster client, want a single-server client")
				}
				o := cl.Options()
				if o.Addrs[0] != tt.wantAddr || o.Password != tt.wantPass || (o.TLSConfig != nil) != tt.wantTLS {
					t.Fatalf("options addrs=%q pass=%q tls=%v", o.Addrs, o.Password, o.TLSConfig != nil)
				}
			default:
				t.Fatalf("client type %T", c)
			}
		})
	}
	if _, err := (config.Redis{}).Client(); err == nil {
		t.Error("Client() without a URL succeeded")
	}
	if _, err := (config.Redis{URL: "rediss://h:1", TLSCA: "/nonexistent.pem"}).Client(); err == nil {
		t.Error("Client() with a missing CA file succeeded")
	}
}

func TestRedisClientTalksToRealServers(t *testing.T) {
	ctx := context.Background()
	single := redistest.Start(t, redistest.Options{})
	cluster := redistest.StartCluster(t, 3)
	for _, url := range []string{single.URL(), strings.Join(cluster.Addrs, ",")} {
		c, err := config.Redis{URL: url, Timeout: 5 * time.Second}.Client()
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20; i++ { // keys over several cluster slots
			key := "k" + string(rune('a'+i))
			if err := c.Set(ctx, key, i, 0).Err(); err != nil {
				t.Fatalf("%s: SET: %v", url, err)
			}
		}
		if n, err := c.Get(ctx, "kc").Int(); err != nil || n != 2 {
			t.Fatalf("%s: GET = %d, %v", url, n, err)
		}
		c.Close()
	}
}

func TestNATSConnect(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	n := config.Default().NATS
	n.URL = srv.URL()
	nc, err := n.Connect("config-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Request("$JS.API.INFO", nil, 5*time.Second); err != nil {
		t.Fatalf("JetStream info request: %v", err)
	}
	if nc.Opts.Name != "config-test" {
		t.Errorf("connection name = %q", nc.Opts.Name)
	}
	n.Creds = "/nonexistent.creds"
	var fe *config.FieldError
	if _, err := n.Options("x"); !errors.As(err, &fe) || fe.Field != "nats.creds" {
		t.Errorf("Options with a missing creds file = %v, want a nats.creds FieldError", err)
	}
}

func TestStringHidesPasswords(t *testing.T) {
	cfg := config.Default()
	cfg.Redis.URL = "rediss://:hunter2@h:6380"
	cfg.NATS.URL = "nats://u:hunter3@n:4222"
	s := cfg.String()
	if strings.Contains(s, "hunter") {
		t.Fatalf("String() = %q shows a password", s)
	}
}

func TestNormalizeSettings(t *testing.T) {
	tests := []struct {
		name        string
		env         map[string]string
		wantDefault bool // the policy of normalize.Options{}
	}{
		{name: "defaults are the default policy", wantDefault: true},
		{name: "own list", env: map[string]string{"SIEVE_NORMALIZE_STRIP_PARAMS": "ref,utm_*"}},
		{name: "none", env: map[string]string{"SIEVE_NORMALIZE_STRIP_PARAMS": "none"}},
		{name: "empty is none", env: map[string]string{"SIEVE_NORMALIZE_SESSION_PARAMS": ""}},
	}
	def, err := normalize.New(normalize.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := load(t, nil, tt.env, "")
			if err != nil {
				t.Fatal(err)
			}
			n, err := cfg.Normalize.Normalizer()
			if err != nil {
				t.Fatal(err)
			}
			if got := n.Version() == def.Version(); got != tt.wantDefault {
				t.Errorf("Version() = %q, default %q; same = %v, want %v", n.Version(), def.Version(), got, tt.wantDefault)
			}
		})
	}
	cfg := config.Default()
	cfg.Normalize.MaxLength = -5
	var fe *config.FieldError
	if err := cfg.Validate(); !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "normalize") {
		t.Errorf("Validate() with a negative max length = %v, want a normalize field error", err)
	}
}

// TestLoaderSkip checks that the sections of another program are passed
// over while a typo still is an error (issue 10 item 6: one file could not
// serve both programs).
func TestLoaderSkip(t *testing.T) {
	tests := []struct {
		name, file, wantErr string
	}{
		{"other program's sections", "crawl:\n  id: x\n  nonsense: 1\nseed: [a]\nworker:\n  batch: 3\n", ""},
		{"typo at the top", "crawll:\n  id: x\n", "crawll"},
		{"typo in a shared section", "crawl:\n  id: x\nfilter:\n  capcity: 3\n", "filter.capcity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			l := config.NewLoader(flag.NewFlagSet("x", flag.ContinueOnError), &cfg)
			l.Skip(config.CrawlerKeys()...)
			err := l.LoadYAML("f.yaml", []byte(tt.file))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("LoadYAML: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("LoadYAML: %v, want an error naming %s", err, tt.wantErr)
			}
		})
	}
}

// TestFormerNames checks that the frontier stream's limits, renamed from
// frontier.frontier_max_* (the flags stuttered: --frontier-frontier-max-msgs,
// issue 10 item 6), are still read under their former names, and that help
// lists only the new ones.
func TestFormerNames(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		file string
	}{
		{"new flag", []string{"--frontier-max-msgs", "7"}, nil, ""},
		{"old flag", []string{"--frontier-frontier-max-msgs", "7"}, nil, ""},
		{"old env", nil, map[string]string{"SIEVE_FRONTIER_FRONTIER_MAX_MSGS": "7"}, ""},
		{"old file key", nil, nil, "frontier:\n  frontier_max_msgs: 7\n"},
		{"new file key", nil, nil, "frontier:\n  max_msgs: 7\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := load(t, tt.args, tt.env, tt.file)
			if err != nil || cfg.Frontier.FrontierMaxMsgs != 7 {
				t.Errorf("frontier max msgs = %d, %v; want 7", cfg.Frontier.FrontierMaxMsgs, err)
			}
		})
	}
	cfg := config.Default()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	l := config.NewLoader(fs, &cfg)
	var help strings.Builder
	l.PrintSettings(&help, fs)
	if strings.Contains(help.String(), "frontier-frontier") || !strings.Contains(help.String(), "--frontier-max-bytes") {
		t.Errorf("help lists a former name, or not the new one:\n%s", help.String())
	}
}

// TestListFlagsAccumulate pins issue 39, item 17: `crawler run --seed A
// --seed B` crawled only B, silently: a list flag given again replaced
// the list. Every list setting, as a flag given twice, holds the values
// of both, in order; given once it replaces the environment's value, as
// any flag does.
func TestListFlagsAccumulate(t *testing.T) {
	type settings struct {
		config.Config `yaml:",inline"`
		API           config.ServerSecurity `yaml:"urlfrontier"`
	}
	fs := flag.NewFlagSet("lists", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	lists := config.NewLoader(fs, &settings{Config: config.Default()}).Lists()
	if len(lists) < 4 { // normalize.strip_params, normalize.session_params, http.client_roles, urlfrontier.client_roles
		t.Fatalf("Lists() = %q, want every list setting", lists)
	}
	for _, path := range lists {
		flagName := "--" + strings.NewReplacer(".", "-", "_", "-").Replace(path)
		env := config.EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
		cases := []struct {
			name string
			args []string
			env  map[string]string
			want []string
		}{
			{"given twice", []string{flagName, "a", flagName, "b,c"}, nil, []string{"a", "b", "c"}},
			{"given three times", []string{flagName + "=a", flagName, "b", flagName + "=c"}, nil, []string{"a", "b", "c"}},
			{"given twice, over the environment", []string{flagName, "a", flagName, "b"}, map[string]string{env: "x,y"}, []string{"a", "b"}},
			{"given once, over the environment", []string{flagName, "a"}, map[string]string{env: "x,y"}, []string{"a"}},
			{"the environment alone", nil, map[string]string{env: "x,y"}, []string{"x", "y"}},
		}
		for _, c := range cases {
			s := settings{Config: config.Default()}
			fs := flag.NewFlagSet("lists", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			l := config.NewLoader(fs, &s)
			if err := fs.Parse(c.args); err != nil {
				t.Fatalf("%s %s: %v", path, c.name, err)
			}
			if err := l.Load(func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }); err != nil {
				t.Fatalf("%s %s: %v", path, c.name, err)
			}
			if got := listAt(t, s, path); !slices.Equal(got, c.want) {
				t.Errorf("%s %s (%q): %q, want %q", path, c.name, c.args, got, c.want)
			}
		}
	}
}

// listAt reads the list at a YAML path of v, through its YAML form.
func listAt(tb testing.TB, v any, path string) []string {
	tb.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	var node any = map[string]any{}
	if err := yaml.Unmarshal(b, &node); err != nil {
		tb.Fatal(err)
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := node.(map[string]any)
		if !ok {
			tb.Fatalf("%s: no mapping at %q", path, k)
		}
		node = m[k]
	}
	items, _ := node.([]any)
	var out []string
	for _, it := range items {
		out = append(out, it.(string))
	}
	return out
}
