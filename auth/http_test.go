package auth_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sievecrawl/sieve/auth"
)

// TestHTTPHandler: a real HTTP server behind the handler answers each
// credential with 200, 401 (and a Bearer challenge) or 403, and leaves
// the open paths open.
func TestHTTPHandler(t *testing.T) {
	tokens, _ := openTokens(t, tokensFile, auth.FileOptions{})
	a := auth.New(auth.Options{Server: "http", Tokens: tokens})
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "fine") })
	srv := httptest.NewServer(a.HTTPHandler(ok, auth.Crawl, func(p string) bool { return p == "/healthz" }))
	t.Cleanup(srv.Close)
	tests := []struct {
		path, authorization string
		want                int
	}{
		{"/stats", "", http.StatusUnauthorized},
		{"/stats", "Bearer " + crawlToken, http.StatusOK},
		{"/stats", "bearer " + adminToken, http.StatusOK},
		{"/stats", "Bearer " + readToken, http.StatusForbidden}, // below crawl
		{"/stats", "Bearer nope-nope-nope-nope", http.StatusUnauthorized},
		{"/stats", "Bearer " + strings.Repeat("a", 5000), http.StatusUnauthorized},
		{"/stats", "Basic cmVhZGVyOng=", http.StatusUnauthorized},
		{"/healthz", "", http.StatusOK},
		{"/healthz/", "", http.StatusUnauthorized}, // open means exactly the path
	}
	for _, tt := range tests {
		req, _ := http.NewRequest("GET", srv.URL+tt.path, nil)
		if tt.authorization != "" {
			req.Header.Set("Authorization", tt.authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET %s with %.20q = %d, want %d", tt.path, tt.authorization, resp.StatusCode, tt.want)
		}
		if resp.StatusCode == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") != `Bearer realm="sieve"` {
			t.Errorf("GET %s: 401 with challenge %q", tt.path, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if got := testutil.ToFloat64(a.Refusals().WithLabelValues("http", "forbidden")); got != 1 {
		t.Errorf("forbidden refusals = %v, want 1", got)
	}
}
