package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sievecrawl/sieve/auth/authtest"
	"github.com/sievecrawl/sieve/internal/toolstest"
	"github.com/sievecrawl/sieve/stats"
)

// TestPrometheusScrapesSecuredSurface: a real Prometheus server (Debian's,
// nobody here wrote it) scrapes a surface behind TLS, users and tokens as
// an operator configures it — one job with a token (authorization:
// credentials_file), one with a user (basic_auth), one with a token the
// surface does not know — all verifying the surface's certificate against
// its CA. The first two are up and their samples queryable; the third is
// down with the 401 Prometheus reports, counted by the surface.
func TestPrometheusScrapesSecuredSurface(t *testing.T) {
	promBin := toolstest.Find(t, "prometheus")
	dir := t.TempDir()
	ca := authtest.NewCA(t, "scrape CA")
	webPath := ca.WebConfig(t, "grafana", "s3cret-pass")
	reg := prometheus.NewRegistry()
	a := tokenAuth(t, reg)
	s, err := New(Sources{Role: "dedup-worker", Counters: stats.NewMemory()},
		Options{Interval: 50 * time.Millisecond, WebConfigFile: webPath, Auth: a, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	addr, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr.String())
	target := "localhost:" + port // the name the test certificate is for
	authtest.WriteFile(t, filepath.Join(dir, "good.token"), []byte(scraperToken+"\n"))
	authtest.WriteFile(t, filepath.Join(dir, "bad.token"), []byte("stale-0123456789abcdef\n"))
	authtest.WriteFile(t, filepath.Join(dir, "password"), []byte("s3cret-pass"))
	job := func(name, auth string) string {
		return fmt.Sprintf(`  - job_name: %s
    scheme: https
    tls_config: {ca_file: %s}
%s    static_configs: [{targets: ["%s"]}]
`, name, ca.CertFile, auth, target)
	}
	config := "global: {scrape_interval: 1s, scrape_timeout: 1s}\nscrape_configs:\n" +
		job("token", fmt.Sprintf("    authorization: {credentials_file: %s}\n", filepath.Join(dir, "good.token"))) +
		job("user", fmt.Sprintf("    basic_auth: {username: grafana, password_file: %s}\n", filepath.Join(dir, "password"))) +
		job("stale", fmt.Sprintf("    authorization: {credentials_file: %s}\n", filepath.Join(dir, "bad.token")))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	authtest.WriteFile(t, cfgPath, []byte(config))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	promAddr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, promBin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })

	type targetState struct {
		Labels    map[string]string `json:"labels"`
		Health    string            `json:"health"`
		LastError string            `json:"lastError"`
	}
	var got map[string]targetState
	deadline := time.Now().Add(60 * time.Second)
	for {
		got = map[string]targetState{}
		var body struct {
			Data struct {
				ActiveTargets []targetState `json:"activeTargets"`
			} `json:"data"`
		}
		if resp, err := http.Get("http://" + promAddr + "/api/v1/targets"); err == nil {
			json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
		}
		for _, tg := range body.Data.ActiveTargets {
			got[tg.Labels["job"]] = tg
		}
		if got["token"].Health == "up" && got["user"].Health == "up" && got["stale"].Health == "down" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus's targets after 60 s: %+v\nits log:\n%s", got, logs.String())
		}
		time.Sleep(250 * time.Millisecond)
	}
	if !strings.Contains(got["stale"].LastError, "401") {
		t.Errorf("the stale token's target failed with %q, want a 401", got["stale"].LastError)
	}
	q := url.Values{"query": {`sum by (job) (sieve_auth_refusals_total{job=~"token|user"})`}}
	for {
		var body struct {
			Data struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
				} `json:"result"`
			} `json:"data"`
		}
		if resp, err := http.Get("http://" + promAddr + "/api/v1/query?" + q.Encode()); err == nil {
			json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
		}
		if len(body.Data.Result) == 2 { // Sieve's own samples, scraped by both jobs
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus holds no Sieve samples of both jobs: %+v", body)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if n := testutil.ToFloat64(a.Refusals().WithLabelValues("http", "unknown_token")); n < 1 {
		t.Errorf("the stale token's scrapes were not counted as refusals: %v", n)
	}
	if strings.Contains(logs.String(), scraperToken) {
		t.Error("Prometheus logged the token")
	}
}
