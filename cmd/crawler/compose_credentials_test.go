package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	promconfig "github.com/prometheus/common/config"
	"google.golang.org/grpc/codes"
	"gopkg.in/yaml.v3"

	"github.com/sievecrawl/sieve/auth"
	"github.com/sievecrawl/sieve/auth/authtest"
	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/credentials"
)

// credentialsMount is where every service of compose.yaml mounts the
// volume the credentials service writes.
const credentialsMount = "/credentials"

// composeCredentials runs compose.yaml's credentials service's command in
// this process, into a temporary directory instead of the volume, and
// returns the directory. Not as root, the files stay the test's (its
// --owner and --token-owner are dropped).
func composeCredentials(t *testing.T) string {
	t.Helper()
	s, ok := readCompose(t).Services["credentials"]
	if !ok {
		t.Fatal("compose.yaml has no service credentials")
	}
	args := slices.Concat(s.Entrypoint, s.Command)
	if len(args) < 2 || args[0] != "crawler" || args[1] != "credentials" {
		t.Fatalf("service credentials runs %q, want crawler credentials", args)
	}
	dir := t.TempDir()
	args = credentialsArgs(args[1:], dir, os.Geteuid() == 0)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("crawler %q: exit %d: %s", args, code, stderr.String())
	}
	return dir
}

// credentialsArgs puts dir for the mount in args and, unless owners, drops
// the flags giving files away.
func credentialsArgs(args []string, dir string, owners bool) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if !owners && (args[i] == "--owner" || args[i] == "--token-owner") {
			i++
			continue
		}
		out = append(out, inMount(args[i], dir))
	}
	return out
}

// inMount returns v with the credentials mount replaced by dir.
func inMount(v, dir string) string {
	if v == credentialsMount || strings.HasPrefix(v, credentialsMount+"/") {
		return dir + strings.TrimPrefix(v, credentialsMount)
	}
	return v
}

// sieveServers are compose.yaml's services serving Sieve's HTTP surface:
// the crawlers and dedup workers of every profile, and serve's API.
func sieveServers(c composeFile) []string {
	var names []string
	for name, s := range c.Services {
		if s.Build != nil && len(s.Entrypoint) == 1 && len(s.Command) > 0 && (s.Command[0] == "run" || s.Command[0] == "serve") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// TestComposeCredentials: no service of compose.yaml serves without
// authentication (SIEVE_HTTP_INSECURE); every Sieve server mounts the
// credentials volume read-only, waits for the credentials service to
// complete, and its settings, with the files the service writes, are
// accepted by Sieve's config on :8080 without a warning (TLS and tokens);
// Prometheus mounts the volume, waits for it, and scrapes over https with
// the CA and its token, files the service writes.
func TestComposeCredentials(t *testing.T) {
	c := readCompose(t)
	dir := composeCredentials(t)
	for name, s := range c.Services {
		if _, ok := s.Environment["SIEVE_HTTP_INSECURE"]; ok {
			t.Errorf("service %s sets SIEVE_HTTP_INSECURE", name)
		}
	}
	cred := c.Services["credentials"]
	if !slices.Contains(cred.Volumes, "credentials:"+credentialsMount) || !hasKey(c.Volumes, "credentials") {
		t.Errorf("service credentials volumes %q: want the named volume credentials on %s", cred.Volumes, credentialsMount)
	}
	servers := sieveServers(c)
	if len(servers) < 4 {
		t.Fatalf("Sieve servers %q: want the workers and crawlers of both profiles", servers)
	}
	for _, name := range append(servers, "prometheus") {
		s := c.Services[name]
		if !slices.Contains(s.Volumes, "credentials:"+credentialsMount+":ro") {
			t.Errorf("service %s volumes %q: want credentials:%s:ro", name, s.Volumes, credentialsMount)
		}
		if got := s.DependsOn["credentials"].Condition; got != "service_completed_successfully" {
			t.Errorf("service %s depends on credentials with %q, want service_completed_successfully", name, got)
		}
	}
	for _, name := range servers {
		s := c.Services[name]
		env := map[string]string{}
		for k, v := range s.Environment {
			env[k] = inMount(v, dir)
		}
		for _, k := range []string{"SIEVE_HTTP_WEB_CONFIG_FILE", "SIEVE_HTTP_TOKENS_FILE"} {
			if !strings.HasPrefix(s.Environment[k], credentialsMount+"/") {
				t.Errorf("service %s: %s = %q, want a file of %s", name, k, s.Environment[k], credentialsMount)
			}
		}
		if s.Environment["SIEVE_HTTP_HEALTH_OPEN"] != "true" {
			t.Errorf("service %s: SIEVE_HTTP_HEALTH_OPEN = %q: its health check holds no token", name, s.Environment["SIEVE_HTTP_HEALTH_OPEN"])
		}
		var h config.HTTP
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		switch s.Entrypoint[0] {
		case "crawler":
			cs := defaultSettings()
			_, l := envNames(t, &cs)
			if err := l.Load(lookup); err != nil {
				t.Fatalf("%s environment: %v", name, err)
			}
			if err := cs.Config.Validate(); err != nil {
				t.Errorf("%s environment: %v", name, err)
			}
			h = cs.Config.HTTP
			if s.Command[0] == "serve" {
				u := cs.URLFrontier
				warning, err := u.Security.Exposure("urlfrontier", u.Addr)
				if err := errors.Join(u.validate(), u.Security.Validate("urlfrontier")); err != nil {
					t.Errorf("%s urlfrontier settings: %v", name, err)
				}
				if u.Addr != ":7071" || u.Security.TLSCert == "" || u.Security.TokensFile == "" || warning != "" || err != nil {
					t.Errorf("service %s: urlfrontier.addr %q, TLS %q, tokens %q; exposure %q, %v: want :7071 over TLS with tokens, no warning",
						name, u.Addr, u.Security.TLSCert, u.Security.TokensFile, warning, err)
				}
			}
		case "dedup-worker":
			cfg := config.Default()
			_, l := envNames(t, &cfg)
			if err := l.Load(lookup); err != nil {
				t.Fatalf("%s environment: %v", name, err)
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("%s environment: %v", name, err)
			}
			h = cfg.HTTP
		}
		tls, users, err := h.Web()
		warning, xerr := h.Exposure()
		if h.Addr != ":8080" || !tls || !users || !h.Authenticates() || err != nil || xerr != nil || warning != "" {
			t.Errorf("service %s: http.addr %q, TLS %v, users %v, tokens %v (%v); exposure %q, %v: want :8080 over TLS with users and tokens, no warning",
				name, h.Addr, tls, users, h.Authenticates(), err, warning, xerr)
		}
	}

	for job, hc := range prometheusScrapes(t, dir) {
		if err := hc.Validate(); err != nil {
			t.Errorf("prometheus.yml job %s: %v", job, err)
		}
		if hc.Authorization == nil || hc.TLSConfig.CAFile == "" {
			t.Errorf("prometheus.yml job %s: no authorization or CA", job)
			continue
		}
		for _, f := range []string{hc.Authorization.CredentialsFile, hc.TLSConfig.CAFile} {
			if _, err := os.Stat(f); err != nil {
				t.Errorf("prometheus.yml job %s reads %s, which the credentials service does not write: %v", job, f, err)
			}
		}
	}
}

// prometheusScrapes returns the HTTP client settings of each job of
// monitoring/prometheus.yml (the part of a scrape config Prometheus makes
// its client from), the credentials mount replaced by dir.
func prometheusScrapes(t *testing.T, dir string) map[string]promconfig.HTTPClientConfig {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "monitoring", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var prom struct {
		ScrapeConfigs []struct {
			Job    string `yaml:"job_name"`
			Scheme string `yaml:"scheme"`
			TLS    struct {
				CAFile     string `yaml:"ca_file"`
				ServerName string `yaml:"server_name"`
			} `yaml:"tls_config"`
			Authorization struct {
				CredentialsFile string `yaml:"credentials_file"`
			} `yaml:"authorization"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(data, &prom); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	out := map[string]promconfig.HTTPClientConfig{}
	for _, sc := range prom.ScrapeConfigs {
		if sc.Scheme != "https" {
			t.Errorf("prometheus.yml job %s scrapes with scheme %q, want https", sc.Job, sc.Scheme)
		}
		hc := promconfig.DefaultHTTPClientConfig
		hc.TLSConfig = promconfig.TLSConfig{CAFile: inMount(sc.TLS.CAFile, dir), ServerName: sc.TLS.ServerName}
		if sc.Authorization.CredentialsFile != "" {
			hc.Authorization = &promconfig.Authorization{Type: "Bearer", CredentialsFile: inMount(sc.Authorization.CredentialsFile, dir)}
		}
		out[sc.Job] = hc
	}
	return out
}

// TestComposeCredentialsServe: a Sieve HTTP surface configured as
// compose.yaml configures its crawlers (their SIEVE_HTTP_* settings, the
// files written by compose's credentials command), but on loopback, is
// scraped by a client made as Prometheus makes it from prometheus.yml
// (its CA, server name and token file): /metrics answers it, refuses a
// client without a token, and /readyz answers without one, as the health
// check asks. Running the credentials command again changes no file.
func TestComposeCredentialsServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve")
	}
	dir := composeCredentials(t)
	before := map[string][]byte{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		before[e.Name()], _ = os.ReadFile(filepath.Join(dir, e.Name()))
	}
	// compose's frontier: serve with its HTTP surface and its API as
	// compose sets them, on loopback ports of the test's.
	for k, v := range readCompose(t).Services["frontier"].Environment {
		if (strings.HasPrefix(k, "SIEVE_HTTP_") || strings.HasPrefix(k, "SIEVE_URLFRONTIER_")) && !strings.HasSuffix(k, "_ADDR") {
			t.Setenv(k, inMount(v, dir))
		}
	}
	var stderr syncBuffer
	apiAddr := bootServe(t, &stderr, "--http-addr", "127.0.0.1:0")
	m := watchAt.FindStringSubmatch(stderr.String())
	if m == nil || !strings.HasPrefix(m[1], "https://") {
		t.Fatalf("no https page announced: %s", stderr.String())
	}
	base := strings.TrimSuffix(m[1], "/")

	for job, hc := range prometheusScrapes(t, dir) {
		scraper, err := promconfig.NewClientFromConfig(hc, job)
		if err != nil {
			t.Fatalf("job %s: %v", job, err)
		}
		anonymous := hc
		anonymous.Authorization = nil
		plain, err := promconfig.NewClientFromConfig(anonymous, job)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			client *http.Client
			path   string
			want   int
		}{
			{scraper, "/metrics", http.StatusOK},
			{plain, "/metrics", http.StatusUnauthorized},
			{plain, "/stats", http.StatusUnauthorized},
			{plain, "/readyz", http.StatusOK},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			req, _ := http.NewRequestWithContext(ctx, "GET", base+tc.path, nil)
			resp, err := tc.client.Do(req)
			if err != nil {
				cancel()
				t.Fatalf("job %s: GET %s: %v", job, tc.path, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			if resp.StatusCode != tc.want {
				t.Errorf("job %s: GET %s (token %v) = %d, want %d", job, tc.path, tc.client == scraper, resp.StatusCode, tc.want)
			}
			if tc.client == scraper && !bytes.Contains(body, []byte("sieve_auth_refusals_total")) {
				t.Errorf("job %s: /metrics lacks Sieve's metrics", job)
			}
		}
	}
	// The user operator reads the page, as a browser would, with the
	// password compose generated (docs/running.md).
	password, err := os.ReadFile(filepath.Join(dir, credentials.PasswordFile("operator")))
	if err != nil {
		t.Fatal(err)
	}
	for pass, want := range map[string]int{strings.TrimSpace(string(password)): http.StatusOK, "not-the-password": http.StatusUnauthorized} {
		hc, err := auth.ClientOptions{CAFile: filepath.Join(dir, credentials.CAFile)}.HTTPClient(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("GET", base+"/", nil)
		req.SetBasicAuth("operator", pass)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("the page as operator with %s password: %d, want %d", map[bool]string{true: "its", false: "a wrong"}[want == 200], resp.StatusCode, want)
		}
	}
	// The API: over TLS with the CA, the fetcher's token crawls but does
	// not administer, the ops token does both, no token is refused.
	caPool := x509.NewCertPool()
	if pem, err := os.ReadFile(filepath.Join(dir, credentials.CAFile)); err != nil || !caPool.AppendCertsFromPEM(pem) {
		t.Fatalf("ca.pem: %v", err)
	}
	api := frontierClient(t, apiAddr, &tls.Config{RootCAs: caPool, ServerName: "frontier", MinVersion: tls.VersionTLS12})
	readToken := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, credentials.TokenFile(name)))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		token string
		want  [3]codes.Code
	}{
		{readToken("fetcher"), [3]codes.Code{codes.OK, codes.OK, codes.PermissionDenied}},
		{readToken("ops"), [3]codes.Code{codes.OK, codes.OK, codes.OK}},
		{"", [3]codes.Code{codes.Unauthenticated, codes.Unauthenticated, codes.Unauthenticated}},
	} {
		if got := frontierCalls(t, api, tc.token); got != tc.want {
			t.Errorf("the API with token %.6q…: GetStats, PutDiscovered, SetLogLevel = %v, want %v", tc.token, got, tc.want)
		}
	}
	// The operator's token reads the page too (README).
	ops, err := os.ReadFile(filepath.Join(dir, credentials.TokenFile("ops")))
	if err != nil {
		t.Fatal(err)
	}
	tokens, _ := os.ReadFile(filepath.Join(dir, credentials.TokensFile))
	if set, err := auth.ParseTokens(bytes.NewReader(tokens)); err != nil || set.Len() != 3 || !bytes.Contains(tokens, append(ops, []byte(",ops,admin")...)) {
		t.Errorf("tokens.csv (%v): want prometheus's, fetcher's and ops's tokens, ops admin", err)
	}

	// The service's health check, run as compose runs it (its program's
	// health command with the service's client settings), verifies the
	// certificate against the deployment's CA: another CA fails it.
	svc := readCompose(t).Services["frontier"]
	check := svc.Healthcheck.Test
	if len(check) < 3 || check[0] != "CMD" || check[1] != svc.Entrypoint[0] || check[2] != "health" {
		t.Fatalf("frontier health check %q: want [CMD %s health …]", check, svc.Entrypoint[0])
	}
	for k, v := range svc.Environment {
		if strings.HasPrefix(k, "SIEVE_CLIENT_") {
			t.Setenv(k, inMount(v, dir))
		}
	}
	t.Setenv("SIEVE_HTTP_ADDR", strings.TrimPrefix(base, "https://"))
	var out, errs bytes.Buffer
	if code := run(context.Background(), check[2:], &out, &errs); code != 0 || out.String() != "ok\n" {
		t.Errorf("the health check %q: exit %d, %q %q; want 0, ok", check, code, out.String(), errs.String())
	}
	t.Setenv("SIEVE_CLIENT_CA_FILE", authtest.NewCA(t, "another CA").CertFile)
	out.Reset()
	errs.Reset()
	if code := run(context.Background(), check[2:], &out, &errs); code != 1 || !strings.Contains(errs.String(), "client.ca_file") {
		t.Errorf("the health check trusting another CA: exit %d, %q; want 1 naming client.ca_file", code, errs.String())
	}

	composeCredentialsInto(t, dir)
	for name, b := range before {
		if now, _ := os.ReadFile(filepath.Join(dir, name)); !bytes.Equal(now, b) {
			t.Errorf("a second run of the credentials service changed %s", name)
		}
	}
}

// composeCredentialsInto runs compose's credentials command again into dir.
func composeCredentialsInto(t *testing.T, dir string) {
	t.Helper()
	s := readCompose(t).Services["credentials"]
	args := credentialsArgs(slices.Concat(s.Entrypoint, s.Command)[1:], dir, os.Geteuid() == 0)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "kept as they are") {
		t.Errorf("second run: exit %d, %q %q; want 0, kept as they are", code, stdout.String(), stderr.String())
	}
}

// TestComposeCredentialsDoc: docs/security.md's "In compose" shows the
// command compose.yaml's credentials service runs.
func TestComposeCredentialsDoc(t *testing.T) {
	script := securityDocBlock(t, "### In compose")
	s := readCompose(t).Services["credentials"]
	want := slices.Concat(s.Entrypoint, s.Command)
	if got := strings.Fields(strings.ReplaceAll(script, "\\\n", " ")); !slices.Equal(got, want) {
		t.Errorf("docs/security.md runs %q, compose.yaml %q", got, want)
	}
}
