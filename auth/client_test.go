package auth_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sievecrawl/sieve/auth"
	"github.com/sievecrawl/sieve/auth/authtest"
)

// TestClientOptions: an HTTP client of ClientOptions trusts the CA file,
// presents the client certificate, and sends the token file's token read
// at each request (a rotated token is sent at once); a bad token file, CA
// file or key pair is an error naming its setting, and a request with a
// bad token file is never sent.
func TestClientOptions(t *testing.T) {
	ca := authtest.NewCA(t, "client CA")
	var seen []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cn := ""
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		seen = append(seen, r.Header.Get("Authorization")+"|"+cn)
		io.WriteString(w, "ok")
	}))
	pair := ca.Server(t, "server")
	cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: ca.Pool(), ClientAuth: tls.VerifyClientCertIfGiven}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	url := srv.URL

	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	authtest.WriteFile(t, tokenFile, []byte("first-0123456789abcdef\n"))
	client := ca.Client(t, "fetcher-1")
	hc, err := auth.ClientOptions{CAFile: ca.CertFile, CertFile: client.CertFile, KeyFile: client.KeyFile, TokenFile: tokenFile}.HTTPClient(0)
	if err != nil {
		t.Fatal(err)
	}
	get := func() error {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(); err != nil {
		t.Fatal(err)
	}
	authtest.WriteFile(t, tokenFile, []byte("second-0123456789abcdef"))
	if err := get(); err != nil {
		t.Fatal(err)
	}
	want := []string{"Bearer first-0123456789abcdef|fetcher-1", "Bearer second-0123456789abcdef|fetcher-1"}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Fatalf("the server saw %q, want %q", seen, want)
	}
	for _, bad := range []string{"", "has space 0123456789abcdef", strings.Repeat("a", 600)} {
		authtest.WriteFile(t, tokenFile, []byte(bad))
		if err := get(); err == nil || !strings.Contains(err.Error(), "client.token_file") {
			t.Errorf("token %.20q: %v, want an error naming client.token_file", bad, err)
		}
	}
	if len(seen) != 2 {
		t.Errorf("requests with a bad token file were sent: %d", len(seen))
	}
	os.Remove(tokenFile)
	if err := get(); err == nil || !strings.Contains(err.Error(), "client.token_file") {
		t.Errorf("missing token file: %v", err)
	}

	// Without the CA the server is not trusted, and the error says which
	// setting answers it.
	plain, _ := auth.ClientOptions{}.HTTPClient(0)
	_, err = plain.Get(url)
	if err == nil || !auth.Untrusted(err) || !strings.Contains(auth.ExplainHTTP(err).Error(), "client.ca_file") {
		t.Errorf("without the CA: %v", err)
	}
	notPEM := filepath.Join(dir, "not.pem")
	authtest.WriteFile(t, notPEM, []byte("nothing"))
	for name, o := range map[string]auth.ClientOptions{
		"client.ca_file":   {CAFile: notPEM},
		"client.cert_file": {CertFile: client.CertFile, KeyFile: notPEM},
	} {
		if _, err := o.HTTPClient(0); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
