package watch

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/crypto/bcrypt"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/sievecrawl/sieve/auth"
	"github.com/sievecrawl/sieve/auth/authtest"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/watch/watchtest"
)

// webServer is a watch Server listening on loopback by a web configuration
// file of TLS (a certificate of ca) and the basic-auth user "reader" with
// password "s3cret-pass", beside a tokens file (so that a 401 offers both
// schemes, as in a deployment where people and scrapers share the page).
type webServer struct {
	url string
	ca  *authtest.CA
	srv *Server
}

func startWeb(t *testing.T) *webServer {
	t.Helper()
	ca := authtest.NewCA(t, "watch CA")
	path := ca.WebConfig(t, "reader", "s3cret-pass")
	s, err := New(Sources{Role: "dedup-worker", Counters: stats.NewMemory()},
		Options{Interval: 50 * time.Millisecond, WebConfigFile: path, Auth: tokenAuth(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return &webServer{url: strings.TrimSuffix(s.URL(), "/"), ca: ca, srv: s}
}

// scraperToken is the token of the read role tokenAuth knows.
const scraperToken = "prometheus-0123456789abcdef"

// tokenAuth returns an Authenticator of server "http" knowing
// scraperToken, from a tokens file read until the test ends, its refusals
// counted on reg (nil: none).
func tokenAuth(t *testing.T, reg prometheus.Registerer) *auth.Authenticator {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.csv")
	authtest.WriteFile(t, path, []byte(scraperToken+",prometheus,read\n"))
	tokens, err := auth.OpenTokenFile(path, auth.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tokens.Close() })
	return auth.New(auth.Options{Server: "http", Tokens: tokens, Registerer: reg})
}

// TestWebConfig: with a web configuration file, the surface is served over
// TLS (exporter-toolkit's format and code) and every path needs a
// basic-auth user, health included.
func TestWebConfig(t *testing.T) {
	w := startWeb(t)
	if !strings.HasPrefix(w.url, "https://") {
		t.Fatalf("URL() = %s, want https", w.url)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: w.ca.ClientTLS(t, authtest.Pair{})}, Timeout: 10 * time.Second}
	tests := []struct {
		path, user, pass string
		want             int
	}{
		{"/stats", "", "", http.StatusUnauthorized},
		{"/stats", "reader", "wrong", http.StatusUnauthorized},
		{"/stats", "nobody", "s3cret-pass", http.StatusUnauthorized},
		{"/stats", "reader", "s3cret-pass", http.StatusOK},
		{"/series", "reader", "s3cret-pass", http.StatusOK},
		{"/metrics", "", "", http.StatusUnauthorized},
		{"/metrics", "reader", "s3cret-pass", http.StatusOK},
		{"/", "", "", http.StatusUnauthorized},
		{"/", "reader", "s3cret-pass", http.StatusOK},
		{"/healthz", "", "", http.StatusUnauthorized}, // closed unless HealthOpen
		{"/healthz", "reader", "s3cret-pass", http.StatusOK},
	}
	for _, tt := range tests {
		req, err := http.NewRequest("GET", w.url+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tt.user != "" {
			req.SetBasicAuth(tt.user, tt.pass)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET %s as %q/%q = %d, want %d", tt.path, tt.user, tt.pass, resp.StatusCode, tt.want)
		}
		if resp.StatusCode == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
			t.Errorf("GET %s: 401 without a Basic challenge", tt.path)
		}
	}
	plain := "http://" + strings.TrimPrefix(w.url, "https://") + "/stats"
	resp, err := http.Get(plain)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain HTTP to the TLS port = %d, want 400", resp.StatusCode)
	}
}

// TestPageBehindBasicAuth: headless Chromium opens the live page over TLS
// behind basic auth, answering the browser's own credentials prompt once;
// the page's requests (/stats, /series) then carry them, as the page shows
// the process's role and charts fed by them.
func TestPageBehindBasicAuth(t *testing.T) {
	w := startWeb(t)
	// The test CA is not in Chromium's store: its errors are ignored, the
	// certificate itself is checked by TestWebConfig.
	ctx := watchtest.Browser(t, 60*time.Second, chromedp.Flag("ignore-certificate-errors", true))
	prompts := make(chan struct{}, 100)
	if err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *fetch.EventAuthRequired:
			prompts <- struct{}{}
			go chromedp.Call(ctx, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{RequestID: ev.RequestID,
				AuthChallengeResponse: &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseProvideCredentials,
					Username: "reader", Password: "s3cret-pass"}})
		case *fetch.EventRequestPaused:
			go chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		}
	}); err != nil {
		t.Fatal(err)
	}
	handle := true
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{HandleAuthRequests: &handle}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(w.url+"/")); err != nil {
		t.Fatalf("open %s: %v", w.url, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := watchtest.Text(ctx, "role", "updated")
		if err != nil {
			t.Fatal(err)
		}
		points, err := watchtest.ChartPoints(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total := 0.0
		for _, n := range points {
			total += n
		}
		if got["role"] == "dedup-worker" && strings.HasPrefix(got["updated"], "updated") && total > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page behind basic auth shows %v and %v chart points", got, total)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(prompts) == 0 {
		t.Fatal("the browser was never asked for credentials")
	}
	t.Logf("the browser asked for credentials %d times", len(prompts))
}

// TestWebUsersBesideTokens: the web configuration file's users and a
// tokens file guard one surface together: a user reads as the read role,
// a scraper's token too, health stays open with HealthOpen, a 401 offers
// both schemes (Basic first, for browsers), every refusal is counted by
// reason, and a user added to the file is let in without a restart.
func TestWebUsersBesideTokens(t *testing.T) {
	ca := authtest.NewCA(t, "watch CA")
	path := ca.WebConfig(t, "reader", "s3cret-pass")
	reg := prometheus.NewRegistry()
	a := tokenAuth(t, reg)
	s, err := New(Sources{Role: "dedup-worker", Counters: stats.NewMemory()},
		Options{Interval: 50 * time.Millisecond, WebConfigFile: path, Auth: a, HealthOpen: true, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSuffix(s.URL(), "/")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientTLS(t, authtest.Pair{})}, Timeout: 10 * time.Second}
	get := func(path string, set func(*http.Request)) *http.Response {
		t.Helper()
		req, err := http.NewRequest("GET", base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if set != nil {
			set(req)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	user := func(u, p string) func(*http.Request) { return func(r *http.Request) { r.SetBasicAuth(u, p) } }
	token := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}
	tests := []struct {
		name string
		path string
		set  func(*http.Request)
		want int
	}{
		{"user", "/stats", user("reader", "s3cret-pass"), http.StatusOK},
		{"token", "/metrics", token(scraperToken), http.StatusOK},
		{"nothing", "/stats", nil, http.StatusUnauthorized},
		{"wrong password", "/stats", user("reader", "wrong"), http.StatusUnauthorized},
		{"unknown user", "/", user("nobody", "s3cret-pass"), http.StatusUnauthorized},
		{"unknown token", "/metrics", token("nope-0123456789abcdef"), http.StatusUnauthorized},
		{"health open", "/healthz", nil, http.StatusOK},
		{"readiness open", "/readyz", nil, http.StatusOK},
	}
	for _, tt := range tests {
		resp := get(tt.path, tt.set)
		if resp.StatusCode != tt.want {
			t.Errorf("%s: GET %s = %d, want %d", tt.name, tt.path, resp.StatusCode, tt.want)
		}
		if resp.StatusCode == http.StatusUnauthorized {
			got := resp.Header.Values("WWW-Authenticate")
			if len(got) != 2 || !strings.HasPrefix(got[0], "Basic") || !strings.HasPrefix(got[1], "Bearer") {
				t.Errorf("%s: challenges %q, want Basic then Bearer", tt.name, got)
			}
		}
	}
	for reason, want := range map[string]float64{"bad_user": 2, "unknown_token": 1, "missing": 1} {
		if got := testutil.ToFloat64(a.Refusals().WithLabelValues("http", reason)); got != want {
			t.Errorf("refusals{reason=%q} = %v, want %v", reason, got, want)
		}
	}

	// A second user, written over the file as an operator would, is let
	// in within the file's reload interval; the first stays.
	hash, err := bcrypt.GenerateFromPassword([]byte("other-pass"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	authtest.WriteFile(t, path+".new", fmt.Appendf(old, "  ops: %s\n", hash))
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for get("/stats", user("ops", "other-pass")).StatusCode != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("a user added to the web config file was never let in")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := get("/stats", user("reader", "s3cret-pass")).StatusCode; got != http.StatusOK {
		t.Errorf("the first user after the reload: %d", got)
	}
}

// TestWebConfigWithoutUsers: a web configuration file of TLS only guards
// nothing (Exposure says so beyond loopback) until a user is added.
func TestWebConfigWithoutUsers(t *testing.T) {
	ca := authtest.NewCA(t, "watch CA")
	path := ca.WebConfig(t, "reader", "s3cret-pass")
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tlsOnly, _, _ := strings.Cut(string(full), "basic_auth_users:")
	authtest.WriteFile(t, path, []byte(tlsOnly))
	s, err := New(Sources{Role: "dedup-worker", Counters: stats.NewMemory()},
		Options{Interval: 50 * time.Millisecond, WebConfigFile: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientTLS(t, authtest.Pair{})}, Timeout: 10 * time.Second}
	status := func() int {
		resp, err := client.Get(strings.TrimSuffix(s.URL(), "/") + "/stats")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(); got != http.StatusOK {
		t.Fatalf("TLS only: /stats = %d, want 200", got)
	}
	authtest.WriteFile(t, path+".new", full)
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for status() != http.StatusUnauthorized {
		if time.Now().After(deadline) {
			t.Fatal("a user added to a file without users never guarded the surface")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestWebSlowClients: behind TLS and users, 100 connections stalled in
// the TLS handshake, 50 that finish it and send half a request's headers
// (slowloris), and one sending headers past the limit do not keep a good
// client from being answered, nor Close from returning: connections that
// never sent a request are closed after the grace, not waited for.
func TestWebSlowClients(t *testing.T) {
	w := startWeb(t)
	addr := strings.TrimPrefix(w.url, "https://")
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for range 100 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte{0x16}) // a handshake record's first byte, then nothing
		held = append(held, c)
	}
	for range 50 {
		c, err := tls.Dial("tcp", addr, w.ca.ClientTLS(t, authtest.Pair{}))
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET /stats HTTP/1.1\r\nHost: x\r\nX-Slow: ")
		held = append(held, c)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: w.ca.ClientTLS(t, authtest.Pair{})}, Timeout: 10 * time.Second}
	huge, _ := http.NewRequest("GET", w.url+"/stats", nil)
	huge.Header.Set("X-Huge", strings.Repeat("a", 100<<10))
	if resp, err := client.Do(huge); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("100 KiB of headers: %d, want 431", resp.StatusCode)
		}
	}
	for range 5 {
		req, _ := http.NewRequest("GET", w.url+"/stats", nil)
		req.SetBasicAuth("reader", "s3cret-pass")
		resp, err := client.Do(req) // the client's timeout bounds a hang
		if err != nil {
			t.Fatalf("a good client beside 150 stalled ones: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a good client beside 150 stalled ones: %d", resp.StatusCode)
		}
	}
	done := make(chan error, 1)
	go func() { done <- w.srv.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close beside stalled clients: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close waited for stalled clients")
	}
}
