package watch

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/sievecrawl/sieve/auth/authtest"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/watch/watchtest"
)

// webServer is a watch Server listening on loopback by a web configuration
// file of TLS (a certificate of ca) and the basic-auth user "reader" with
// password "s3cret-pass".
type webServer struct {
	url string
	ca  *authtest.CA
}

func startWeb(t *testing.T) *webServer {
	t.Helper()
	ca := authtest.NewCA(t, "watch CA")
	path := ca.WebConfig(t, "reader", "s3cret-pass")
	s, err := New(Sources{Role: "dedup-worker", Counters: stats.NewMemory()},
		Options{Interval: 50 * time.Millisecond, WebConfigFile: path, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return &webServer{url: strings.TrimSuffix(s.URL(), "/"), ca: ca}
}

// TestWebConfig: with a web configuration file, the surface is served over
// TLS and every path needs a basic-auth user (exporter-toolkit's format and
// code), health included.
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
		{"/healthz", "", "", http.StatusUnauthorized}, // every path: the toolkit has no exceptions
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
