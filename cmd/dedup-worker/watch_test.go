package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/auth/authtest"
	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/watch"
)

// TestMainServesWatch checks that `dedup-worker run` serves the watch
// surface: the live page and its files, the report with the worker's role,
// and the time series, which fills as the worker samples.
func TestMainServesWatch(t *testing.T) {
	h := newHarness(t)
	m, stop := startMain(t, testConfig(h.nats.URL(), h.redis.URL()))
	defer stop()
	base := "http://" + m.Addr()
	for _, tc := range []struct{ path, contains string }{
		{"/", "uplot/uPlot.iife.min.js"},
		{"/uplot/uPlot.iife.min.js", "uPlot"},
		{"/healthz", "ok"},
	} {
		if code, body := get(t, base+tc.path); code != http.StatusOK || !strings.Contains(body, tc.contains) {
			t.Errorf("GET %s = %d, want 200 containing %q", tc.path, code, tc.contains)
		}
	}
	waitFor(t, 10*time.Second, "/readyz 200", func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK })
	h.publish(t, page(1, "/a", "/b"))
	waitFor(t, 10*time.Second, "the admitted URLs in the time series", func() bool {
		_, body := get(t, base+"/series")
		var s watch.Samples
		if json.Unmarshal([]byte(body), &s) != nil || len(s.At) == 0 {
			return false
		}
		v := s.Values["admitted"]
		return len(v) == len(s.At) && v[len(v)-1] == 2
	})
	_, body := get(t, base+"/stats")
	var r watch.Report
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("/stats: %v", err)
	}
	if r.Role != "dedup-worker" || !r.Ready || r.Worker == nil || r.Streams == nil || r.Filter == nil || r.Crawler != nil {
		t.Errorf("/stats: role %q ready %v worker %v streams %v filter %v crawler %v", r.Role, r.Ready, r.Worker != nil, r.Streams != nil, r.Filter != nil, r.Crawler != nil)
	}
}

// TestStatsFromSnapshot: in memory mode with no worker running, "stats"
// reads the filter from its snapshot file instead of failing to connect
// (issue 12: "connection refused"); a snapshot that does not exist is an
// error for stats and check alike, never an empty filter.
func TestStatsFromSnapshot(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Filter.Capacity = 1000
	cfg.Filter.Snapshot = filepath.Join(dir, "seen.bloom")
	canon, err := cfg.Normalize.Normalizer()
	if err != nil {
		t.Fatal(err)
	}
	f, err := pipeline.OpenFilter(t.Context(), cfg.Filter, nil, canon.Version())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.TestAndAdd(t.Context(), [][]byte{[]byte("https://a.example/"), []byte("https://b.example/")}); err != nil {
		t.Fatal(err)
	}
	if err := pipeline.SaveFilter(t.Context(), cfg.Filter, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, tc := range []struct {
		name     string
		snapshot string
		args     []string
		code     int
		contains string
	}{
		{"stats", cfg.Filter.Snapshot, []string{"stats", "--json"}, exitOK, `"items": 2`},
		{"check", cfg.Filter.Snapshot, []string{"check", "https://a.example/", "https://c.example/"}, exitOK, "seen\thttps://a.example/\nnew\thttps://c.example/"},
		{"stats, no snapshot", filepath.Join(dir, "none.bloom"), []string{"stats"}, exitFail, "does not exist"},
		{"check, no snapshot", filepath.Join(dir, "none.bloom"), []string{"check", "https://a.example/"}, exitFail, "does not exist"},
	} {
		var out, errb bytes.Buffer
		e := env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, lookupEnv: func(k string) (string, bool) {
			switch k {
			case "SIEVE_FILTER_SNAPSHOT":
				return tc.snapshot, true
			case "SIEVE_FILTER_CAPACITY":
				return "1000", true
			case "SIEVE_HTTP_ADDR":
				return "127.0.0.1:1", true // nothing listens
			}
			return "", false
		}}
		code := cli(t.Context(), tc.args, e)
		if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.contains) {
			t.Errorf("%s: exit %d, %q %q; want exit %d containing %q", tc.name, code, out.String(), errb.String(), tc.code, tc.contains)
		}
	}
}

// TestMainHTTPTokens: with http.tokens_file, `dedup-worker run`'s surface
// needs a token (any role reads), but its health with http.health_open.
func TestMainHTTPTokens(t *testing.T) {
	h := newHarness(t)
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte("prometheus-0123456789abcdef,prometheus,read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(h.nats.URL(), h.redis.URL())
	cfg.HTTP.TokensFile, cfg.HTTP.HealthOpen = tokens, true
	m, stop := startMain(t, cfg)
	defer stop()
	base := "http://" + m.Addr()
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/stats", "", http.StatusUnauthorized},
		{"/metrics", "wrong-0123456789abcdef", http.StatusUnauthorized},
		{"/stats", "prometheus-0123456789abcdef", http.StatusOK},
		{"/metrics", "prometheus-0123456789abcdef", http.StatusOK},
		{"/healthz", "", http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", base+tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s with %q = %d, want %d", tc.path, tc.token, resp.StatusCode, tc.want)
		}
	}
}

// TestStatsOfSecuredWorker: `dedup-worker stats --url` reads a worker whose
// surface is behind TLS (a private CA) and tokens with the client
// settings; without the token it fails naming client.token_file, without
// the CA naming client.ca_file.
func TestStatsOfSecuredWorker(t *testing.T) {
	h := newHarness(t)
	ca := authtest.NewCA(t, "worker CA")
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	authtest.WriteFile(t, tokens, []byte("ops-token-0123456789abcdef,ops,read\n"))
	tokenFile := filepath.Join(dir, "ops.token")
	authtest.WriteFile(t, tokenFile, []byte("ops-token-0123456789abcdef\n"))
	wrongFile := filepath.Join(dir, "wrong.token")
	authtest.WriteFile(t, wrongFile, []byte("wrong-token-0123456789abcdef\n"))
	cfg := testConfig(h.nats.URL(), h.redis.URL())
	cfg.HTTP.TokensFile = tokens
	cfg.HTTP.WebConfigFile = ca.WebConfig(t, "reader", "s3cret-pass")
	m, stop := startMain(t, cfg)
	defer stop()
	url := "https://" + m.Addr() + "/stats"
	for _, tc := range []struct {
		name     string
		env      map[string]string
		code     int
		contains string
	}{
		{"CA and token", map[string]string{"SIEVE_CLIENT_CA_FILE": ca.CertFile, "SIEVE_CLIENT_TOKEN_FILE": tokenFile}, 0, "filter"},
		{"no token", map[string]string{"SIEVE_CLIENT_CA_FILE": ca.CertFile}, exitFail, "client.token_file"},
		{"unknown token", map[string]string{"SIEVE_CLIENT_CA_FILE": ca.CertFile, "SIEVE_CLIENT_TOKEN_FILE": wrongFile}, exitFail, "401"},
		{"no CA", map[string]string{"SIEVE_CLIENT_TOKEN_FILE": tokenFile}, exitFail, "client.ca_file"},
	} {
		code, out, errOut := runCLI(t, "", tc.env, "stats", "--url", url)
		if code != tc.code || !strings.Contains(strings.ToLower(out+errOut), strings.ToLower(tc.contains)) {
			t.Errorf("%s: exit %d, %q %q; want exit %d containing %q", tc.name, code, out, errOut, tc.code, tc.contains)
		}
	}

	// `dedup-worker health`, compose's probe, asks the worker that its
	// own settings serve (https, since the web config sets TLS) and
	// verifies the certificate like any client: without the CA it fails.
	// /readyz is guarded here (no http.health_open): the token opens it.
	served := map[string]string{"SIEVE_HTTP_ADDR": m.Addr(), "SIEVE_HTTP_WEB_CONFIG_FILE": cfg.HTTP.WebConfigFile, "SIEVE_HTTP_TOKENS_FILE": tokens}
	with := func(more map[string]string) map[string]string {
		env := maps.Clone(served)
		maps.Copy(env, more)
		return env
	}
	other := authtest.NewCA(t, "another CA")
	for _, tc := range []struct {
		name     string
		env      map[string]string
		args     []string
		code     int
		contains string
	}{
		{"ready", with(map[string]string{"SIEVE_CLIENT_CA_FILE": ca.CertFile, "SIEVE_CLIENT_TOKEN_FILE": tokenFile}), nil, 0, "ok"},
		{"live", with(map[string]string{"SIEVE_CLIENT_CA_FILE": ca.CertFile, "SIEVE_CLIENT_TOKEN_FILE": tokenFile}), []string{"--live"}, 0, "ok"},
		{"no CA", with(map[string]string{"SIEVE_CLIENT_TOKEN_FILE": tokenFile}), nil, exitFail, "client.ca_file"},
		{"another CA", with(map[string]string{"SIEVE_CLIENT_CA_FILE": other.CertFile, "SIEVE_CLIENT_TOKEN_FILE": tokenFile}), nil, exitFail, "client.ca_file"},
		{"no token", with(map[string]string{"SIEVE_CLIENT_CA_FILE": ca.CertFile}), nil, exitFail, "client.token_file"},
		{"nothing served", map[string]string{"SIEVE_HTTP_ADDR": ""}, nil, exitFail, "http.addr"},
	} {
		code, out, errOut := runCLI(t, "", tc.env, append([]string{"health"}, tc.args...)...)
		if code != tc.code || !strings.Contains(strings.ToLower(out+errOut), strings.ToLower(tc.contains)) {
			t.Errorf("health, %s: exit %d, %q %q; want exit %d containing %q", tc.name, code, out, errOut, tc.code, tc.contains)
		}
	}
}
