package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sievecrawl/sieve/auth/authtest"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// Tokens of the tests' tokens files, one per role.
const (
	testReadToken  = "read-0123456789abcdefghij"
	testCrawlToken = "crawl-0123456789abcdefghij"
	testAdminToken = "admin-0123456789abcdefghij"
	testTokens     = "# token,name,role\n" +
		testReadToken + ",dashboard,read\n" +
		testCrawlToken + ",fetcher-1,crawl\n" +
		testAdminToken + ",ops,admin\n"
)

// securedServe is a `crawler serve --embedded` in this process with TLS
// (a certificate of its own CA), client certificates of that CA, the
// tokens above and the certificate name "fetcher-2" as crawl.
type securedServe struct {
	addr, page string
	ca         *authtest.CA
	tokens     string
	stderr     *syncBuffer
}

func startSecuredServe(t *testing.T) *securedServe {
	t.Helper()
	ca := authtest.NewCA(t, "serve test CA")
	cert := ca.Server(t, "serve")
	s := &securedServe{ca: ca, tokens: filepath.Join(t.TempDir(), "tokens.csv"), stderr: &syncBuffer{}}
	authtest.WriteFile(t, s.tokens, []byte(testTokens))
	s.addr = bootServe(t, s.stderr, "--urlfrontier-tls-cert", cert.CertFile, "--urlfrontier-tls-key", cert.KeyFile,
		"--urlfrontier-tls-client-ca", ca.CertFile, "--urlfrontier-tokens-file", s.tokens,
		"--urlfrontier-client-roles", "fetcher-2=crawl", "--http-addr", "127.0.0.1:0")
	if m := watchAt.FindStringSubmatch(s.stderr.String()); m != nil {
		s.page = strings.TrimSuffix(m[1], "/")
	}
	return s
}

// bootServe runs `crawler serve --embedded` with args in this process
// until the test ends, and returns the API's address.
func bootServe(t *testing.T, stderr *syncBuffer, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--embedded", "--data-dir", t.TempDir(), "--urlfrontier-addr", "127.0.0.1:0",
			"--urlfrontier-default-delay", "0s"}, args...), io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop within 30s of its context")
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case code := <-done:
			t.Fatalf("serve exited with %d: %s", code, stderr.String())
		default:
		}
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not listen within 30s: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func frontierClient(t *testing.T, addr string, cfg *tls.Config) pb.URLFrontierClient {
	t.Helper()
	return pb.NewURLFrontierClient(authtest.Dial(t, addr, cfg))
}

// frontierCalls makes one call of each role and returns their codes:
// GetStats (read), PutDiscovered (crawl, a stream), SetLogLevel (admin).
func frontierCalls(t *testing.T, c pb.URLFrontierClient, token string) [3]codes.Code {
	t.Helper()
	var out [3]codes.Code
	_, err := c.GetStats(authtest.Bearer(t, token), &pb.QueueWithinCrawlParams{})
	out[0] = status.Code(err)
	b, err := c.PutDiscovered(authtest.Bearer(t, token))
	if err == nil {
		// A Send that finds the stream ended says io.EOF; Recv has
		// the stream's status (grpc-go's ClientStream.SendMsg).
		if err = b.Send(&pb.DiscoveredBatch{ID: "p", Items: []*pb.URLInfo{{Url: "https://example.com/"}}}); err == nil || errors.Is(err, io.EOF) {
			_, err = b.Recv()
		}
		b.CloseSend()
	}
	out[1] = status.Code(err)
	_, err = c.SetLogLevel(authtest.Bearer(t, token), &pb.LogLevelParams{Level: pb.LogLevelParams_INFO})
	out[2] = status.Code(err)
	return out
}

// TestServeTLSAuth: serve's API over TLS answers each role's calls and
// refuses the others, to Go's grpc client with tokens and with a client
// certificate; a plain-text client gets nothing; /metrics counts the
// refusals by reason; a token rotated in its file while the client stays
// connected is taken.
func TestServeTLSAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve")
	}
	s := startSecuredServe(t)
	if !strings.Contains(s.stderr.String(), "(TLS, authenticated)") {
		t.Fatalf("serve does not say it is secured: %s", s.stderr.String())
	}
	tlsClient := frontierClient(t, s.addr, s.ca.ClientTLS(t, authtest.Pair{}))
	certClient := frontierClient(t, s.addr, s.ca.ClientTLS(t, s.ca.Client(t, "fetcher-2")))
	const ok, unauth, denied = codes.OK, codes.Unauthenticated, codes.PermissionDenied
	tests := []struct {
		name   string
		client pb.URLFrontierClient
		token  string
		want   [3]codes.Code // read, crawl, admin
	}{
		{"no token", tlsClient, "", [3]codes.Code{unauth, unauth, unauth}},
		{"read token", tlsClient, testReadToken, [3]codes.Code{ok, denied, denied}},
		{"crawl token", tlsClient, testCrawlToken, [3]codes.Code{ok, ok, denied}},
		{"admin token", tlsClient, testAdminToken, [3]codes.Code{ok, ok, ok}},
		{"unknown token", tlsClient, "not-a-token-0123456789", [3]codes.Code{unauth, unauth, unauth}},
		{"oversized token", tlsClient, strings.Repeat("x", 8192), [3]codes.Code{unauth, unauth, unauth}},
		{"crawl certificate", certClient, "", [3]codes.Code{ok, ok, denied}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := frontierCalls(t, tt.client, tt.token); got != tt.want {
				t.Fatalf("read, crawl, admin calls = %v, want %v", got, tt.want)
			}
		})
	}
	plain := frontierClient(t, s.addr, nil)
	if got := frontierCalls(t, plain, testAdminToken); got[0] != codes.Unavailable {
		t.Errorf("a plain-text client: %v, want UNAVAILABLE", got)
	}
	// Rotation while the client's connection stays open.
	const rotated = "read-rotated-0123456789abcdef"
	authtest.WriteFile(t, s.tokens, []byte(strings.Replace(testTokens, testReadToken, rotated, 1)))
	deadline := time.Now().Add(15 * time.Second)
	stats := func(token string) codes.Code {
		_, err := tlsClient.GetStats(authtest.Bearer(t, token), &pb.QueueWithinCrawlParams{})
		return status.Code(err)
	}
	for stats(rotated) != ok {
		if time.Now().After(deadline) {
			t.Fatal("the rotated token was not taken within 15s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := stats(testReadToken); got != unauth {
		t.Errorf("the old token after rotation: %v, want UNAUTHENTICATED", got)
	}
	resp, err := http.Get(s.page + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`sieve_auth_refusals_total{reason="missing",server="urlfrontier"} 3`,
		`sieve_auth_refusals_total{reason="forbidden",server="urlfrontier"} 4`,
		`sieve_auth_refusals_total{reason="oversized",server="urlfrontier"} 3`,
		`sieve_auth_reload_failures_total{setting="urlfrontier.tokens_file"} 0`,
		`sieve_auth_reload_failures_total{setting="urlfrontier.tls_cert"} 0`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Refused before their messages are read, the calls never reach the
	// API: they are counted as refusals only.
	if strings.Contains(string(metrics), `sieve_urlfrontier_calls_total{code="PermissionDenied"`) {
		t.Errorf("/metrics counts refused calls as the API's calls")
	}
	for _, secret := range []string{testReadToken, testCrawlToken, testAdminToken, rotated, "not-a-token"} {
		if strings.Contains(s.stderr.String(), secret) {
			t.Errorf("serve's log shows a token (%s)", secret)
		}
	}
}

// TestServeExposure: serve refuses an address beyond loopback without
// authentication, naming the setting, before opening anything; with
// urlfrontier.insecure it starts and warns.
func TestServeExposure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve")
	}
	refused := []struct {
		name, setting string
		args          []string
	}{
		{"API on every interface", "urlfrontier.addr", []string{"--urlfrontier-addr", "0.0.0.0:0"}},
		{"API on :port", "urlfrontier.addr", []string{"--urlfrontier-addr", ":0"}},
		{"HTTP surface on every interface", "http.addr", []string{"--http-addr", ":0"}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			var stderr syncBuffer
			args := append([]string{"serve", "--embedded", "--data-dir", t.TempDir()}, tt.args...)
			if code := run(context.Background(), args, io.Discard, &stderr); code == 0 {
				t.Fatalf("serve %v started", tt.args)
			}
			if !strings.Contains(stderr.String(), tt.setting) || !strings.Contains(stderr.String(), "insecure") {
				t.Fatalf("serve's error does not name %s and its insecure setting: %s", tt.setting, stderr.String())
			}
		})
	}
	var stderr syncBuffer
	addr := bootServe(t, &stderr, "--urlfrontier-addr", "0.0.0.0:0", "--urlfrontier-insecure", "--http-addr", "")
	if !strings.Contains(stderr.String(), "urlfrontier.insecure is set") {
		t.Fatalf("serve with urlfrontier.insecure does not warn: %s", stderr.String())
	}
	_, port, _ := strings.Cut(addr, "]:")
	if port == "" {
		_, port, _ = strings.Cut(addr, ":")
	}
	c := frontierClient(t, "127.0.0.1:"+port, nil)
	if _, err := c.GetActive(authtest.Bearer(t, ""), &pb.Local{}); err != nil {
		t.Fatalf("an insecure serve refused a call: %v", err)
	}
}

// securityDocBlock returns the first sh block of docs/security.md under
// heading.
func securityDocBlock(t *testing.T, heading string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), heading)
	_, block, _ := strings.Cut(section, "```sh\n")
	script, _, found := strings.Cut(block, "```")
	if !found {
		t.Fatalf("docs/security.md has no sh block under %s", heading)
	}
	return script
}

// TestSecurityDocCommands runs docs/security.md's commands that make a CA,
// serve's certificate, a client certificate and a tokens file, as written,
// and calls a serve started with those files with each token and with the
// client certificate: the documented way works. It needs openssl: without
// it, it skips, and fails under CI=true.
func TestSecurityDocCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve")
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("openssl is missing (apt-get install openssl)")
		}
		t.Skip("openssl is missing")
	}
	script := securityDocBlock(t, "## Generating credentials")
	dir := t.TempDir()
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the documented commands: %v\n%s", err, out)
	}
	file := func(name string) string { return filepath.Join(dir, name) }
	tokens := map[string]string{}
	lines, err := os.ReadFile(file("tokens.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(lines), "\n") {
		if f := strings.Split(line, ","); len(f) == 3 {
			tokens[f[2]] = f[0]
		}
	}
	var stderr syncBuffer
	addr := bootServe(t, &stderr, "--http-addr", "",
		"--urlfrontier-tls-cert", file("serve.pem"), "--urlfrontier-tls-key", file("serve-key.pem"),
		"--urlfrontier-tls-client-ca", file("ca.pem"), "--urlfrontier-client-roles", "fetcher-1=crawl",
		"--urlfrontier-tokens-file", file("tokens.csv"))
	ca, err := os.ReadFile(file("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	plain := frontierClient(t, addr, &tls.Config{RootCAs: roots})
	const ok, denied = codes.OK, codes.PermissionDenied
	for role, want := range map[string][3]codes.Code{"read": {ok, denied, denied}, "crawl": {ok, ok, denied}, "admin": {ok, ok, ok}} {
		if got := frontierCalls(t, plain, tokens[role]); got != want {
			t.Errorf("the documented %s token: %v, want %v", role, got, want)
		}
	}
	pair, err := tls.LoadX509KeyPair(file("fetcher-1.pem"), file("fetcher-1-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	withCert := frontierClient(t, addr, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}})
	if got := frontierCalls(t, withCert, ""); got != [3]codes.Code{ok, ok, denied} {
		t.Errorf("the documented client certificate (crawl): %v", got)
	}
}

// TestServeSlowClients: 100 connections that send a byte of a TLS
// handshake and stall, and 50 that finish TLS but never speak HTTP/2, do
// not keep a good client from being answered at once, nor serve from
// stopping.
func TestServeSlowClients(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve")
	}
	s := startSecuredServe(t)
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for range 100 {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte{0x16}) // a handshake record's first byte, then nothing
		held = append(held, c)
	}
	for range 50 {
		c, err := tls.Dial("tcp", s.addr, s.ca.ClientTLS(t, authtest.Pair{}))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	c := frontierClient(t, s.addr, s.ca.ClientTLS(t, authtest.Pair{}))
	for range 5 {
		start := time.Now()
		if got := frontierCalls(t, c, testAdminToken); got != [3]codes.Code{codes.OK, codes.OK, codes.OK} {
			t.Fatalf("a good client beside 150 stalled ones: %v", got)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("a good client beside 150 stalled ones waited %v", d)
		}
	}
}

// TestServeWebConfig: serve's HTTP surface takes http.web_config_file
// (TLS and a basic-auth user), announces an https page, and refuses
// /metrics without the user; beyond loopback, the file's users let it
// start without http.insecure.
func TestServeWebConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve")
	}
	ca := authtest.NewCA(t, "web CA")
	web := ca.WebConfig(t, "prometheus", "s3cret-pass")
	var stderr syncBuffer
	bootServe(t, &stderr, "--http-addr", "0.0.0.0:0", "--http-web-config-file", web)
	m := watchAt.FindStringSubmatch(stderr.String())
	if m == nil || !strings.HasPrefix(m[1], "https://127.0.0.1:") {
		t.Fatalf("serve does not announce an https page: %s", stderr.String())
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientTLS(t, authtest.Pair{})}, Timeout: 10 * time.Second}
	for _, tt := range []struct {
		user string
		want int
	}{{"", http.StatusUnauthorized}, {"prometheus", http.StatusOK}} {
		req, _ := http.NewRequest("GET", m[1]+"metrics", nil)
		if tt.user != "" {
			req.SetBasicAuth(tt.user, "s3cret-pass")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET /metrics as %q = %d, want %d", tt.user, resp.StatusCode, tt.want)
		}
	}
}

// TestServeHTTPTokens: serve's HTTP surface behind http.tokens_file: any
// role's token reads it (curl-like requests with Go's client), none gets
// 401 with a Bearer challenge, health stays open with http.health_open,
// and the surface's own /metrics counts its refusals by reason. Tokens
// beyond loopback without TLS start with a warning.
func TestServeHTTPTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve")
	}
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	authtest.WriteFile(t, tokens, []byte(testTokens))
	var stderr syncBuffer
	bootServe(t, &stderr, "--http-addr", "0.0.0.0:0", "--http-tokens-file", tokens, "--http-health-open")
	m := watchAt.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no page announced: %s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "credentials cross the network in clear") {
		t.Errorf("tokens without TLS beyond loopback start without a warning: %s", stderr.String())
	}
	get := func(path, token string) *http.Response {
		req, _ := http.NewRequest("GET", m[1]+strings.TrimPrefix(path, "/"), nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	tests := []struct {
		path, token string
		want        int
	}{
		{"/stats", "", http.StatusUnauthorized},
		{"/", "", http.StatusUnauthorized},
		{"/metrics", "not-a-token-0123456789", http.StatusUnauthorized},
		{"/stats", testReadToken, http.StatusOK},
		{"/series", testCrawlToken, http.StatusOK},
		{"/healthz", "", http.StatusOK},
		{"/readyz", "", http.StatusOK},
	}
	for _, tt := range tests {
		if got := get(tt.path, tt.token).StatusCode; got != tt.want {
			t.Errorf("GET %s with %q = %d, want %d", tt.path, tt.token, got, tt.want)
		}
	}
	metrics, _ := io.ReadAll(get("/metrics", testAdminToken).Body)
	for _, want := range []string{`sieve_auth_refusals_total{reason="missing",server="http"} 2`, `sieve_auth_refusals_total{reason="unknown_token",server="http"} 1`,
		`sieve_auth_reload_failures_total{setting="http.tokens_file"} 0`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestServeCurl: curl, a client not written in Go, against serve's HTTP
// surface over TLS behind a basic-auth user: the page and /metrics with
// the user, 401 without it or with a wrong password, and a refused
// handshake when it trusts another CA (curl's exit 60). It needs curl:
// without it, it skips, and fails under CI=true.
func TestServeCurl(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is missing (apt-get install curl)")
		}
		t.Skip("curl is missing")
	}
	ca, other := authtest.NewCA(t, "curl CA"), authtest.NewCA(t, "another CA")
	web := ca.WebConfig(t, "ops", "s3cret-pass")
	var stderr syncBuffer
	bootServe(t, &stderr, "--http-addr", "127.0.0.1:0", "--http-web-config-file", web)
	m := watchAt.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no page announced: %s", stderr.String())
	}
	tests := []struct {
		name string
		args []string
		want string // the status curl writes, or its exit code as "exit N"
	}{
		{"page with the user", []string{"--cacert", ca.CertFile, "-u", "ops:s3cret-pass", m[1]}, "200"},
		{"metrics with the user", []string{"--cacert", ca.CertFile, "-u", "ops:s3cret-pass", m[1] + "metrics"}, "200"},
		{"no user", []string{"--cacert", ca.CertFile, m[1] + "stats"}, "401"},
		{"wrong password", []string{"--cacert", ca.CertFile, "-u", "ops:nope", m[1] + "stats"}, "401"},
		{"another CA", []string{"--cacert", other.CertFile, "-u", "ops:s3cret-pass", m[1] + "stats"}, "exit 60"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10"}, tt.args...)
			out, err := exec.Command(curl, args...).Output()
			got := string(out)
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				got = fmt.Sprintf("exit %d", exit.ExitCode())
			} else if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("curl %v = %s, want %s", tt.args, got, tt.want)
			}
		})
	}
}
