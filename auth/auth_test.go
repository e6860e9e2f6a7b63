package auth_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sievecrawl/sieve/auth"
	"github.com/sievecrawl/sieve/internal/leaktest"
)

const (
	readToken  = "read-token-0123456789abcdef"
	crawlToken = "crawl-token-0123456789abcdef"
	adminToken = "admin-token-0123456789abcdef"
)

const tokensFile = `# token,name,role
read-token-0123456789abcdef,dashboard,read
crawl-token-0123456789abcdef, fetcher-1, crawl

admin-token-0123456789abcdef,ops,admin
`

func TestRoleAllows(t *testing.T) {
	tests := []struct {
		have, need auth.Role
		want       bool
	}{
		{auth.Read, auth.Read, true},
		{auth.Read, auth.Crawl, false},
		{auth.Read, auth.Admin, false},
		{auth.Crawl, auth.Read, true}, // crawl implies read
		{auth.Crawl, auth.Crawl, true},
		{auth.Crawl, auth.Admin, false},
		{auth.Admin, auth.Read, true}, // admin implies everything
		{auth.Admin, auth.Crawl, true},
		{auth.Admin, auth.Admin, true},
		{auth.None, auth.Read, false},
		{auth.Admin, auth.None, false}, // a call given no role is nobody's
	}
	for _, tt := range tests {
		if got := tt.have.Allows(tt.need); got != tt.want {
			t.Errorf("%s.Allows(%s) = %v, want %v", tt.have, tt.need, got, tt.want)
		}
	}
	for _, r := range []auth.Role{auth.Read, auth.Crawl, auth.Admin} {
		if got, err := auth.ParseRole(r.String()); err != nil || got != r {
			t.Errorf("ParseRole(%q) = %v, %v, want %v", r.String(), got, err, r)
		}
	}
	if _, err := auth.ParseRole("root"); err == nil {
		t.Error("ParseRole(root) succeeded")
	}
}

func TestParseTokens(t *testing.T) {
	long := strings.Repeat("a", auth.MaxTokenBytes+1)
	tests := []struct {
		name, file string
		want       int    // tokens, when no error
		err        string // part of the error, "" for none
	}{
		{"three with comments and blanks", tokensFile, 3, ""},
		{"empty", "", 0, ""},
		{"padding allowed (RFC 6750 b64token)", "abcdefghijklmnop==,a,read\n", 1, ""},
		{"quoted field (CSV)", "\"abcdefghijklmnop\",\"a, b\",read\n", 1, ""},
		{"two fields", "abcdefghijklmnop,a\n", 0, "wrong number of fields"},
		{"four fields", "abcdefghijklmnop,a,read,x\n", 0, "wrong number of fields"},
		{"unknown role", "abcdefghijklmnop,a,root\n", 0, "unknown role"},
		{"short token", "abcdef,a,read\n", 0, "shorter than 16"},
		{"oversized token", long + ",a,read\n", 0, "longer than 512"},
		{"space inside token", "abcdefgh ijklmnop,a,read\n", 0, "malformed"},
		{"padding inside token", "abcdefgh=ijklmnop,a,read\n", 0, "malformed"},
		{"non-ASCII token", "abcdefghijklmnopé,a,read\n", 0, "malformed"},
		{"empty name", "abcdefghijklmnop,,read\n", 0, "empty name"},
		{"token twice", "abcdefghijklmnop,a,read\nabcdefghijklmnop,b,admin\n", 0, "token given twice"},
		{"name twice", "abcdefghijklmnop,a,read\nabcdefghijklmnoq,a,admin\n", 0, "name \"a\" given twice"},
		{"bare quote", "abc\"defghijklmnop,a,read\n", 0, "bare \""},
		{"larger than 1 MiB", strings.Repeat("#\n", 1<<19+1), 0, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := auth.ParseTokens(strings.NewReader(tt.file))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseTokens = %v, want an error with %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "abcdefgh") {
					t.Fatalf("error %q shows the token", err)
				}
				return
			}
			if err != nil || got.Len() != tt.want {
				t.Fatalf("ParseTokens = %d tokens, %v, want %d", got.Len(), err, tt.want)
			}
		})
	}
}

func TestParseIdentities(t *testing.T) {
	ids, err := auth.ParseIdentities([]string{"fetcher-1=crawl", "spiffe://sieve/ops=admin", " dash = read"})
	if err != nil {
		t.Fatal(err)
	}
	want := auth.Identities{"fetcher-1": auth.Crawl, "spiffe://sieve/ops": auth.Admin, "dash": auth.Read}
	if len(ids) != len(want) {
		t.Fatalf("ParseIdentities = %v, want %v", ids, want)
	}
	for k, v := range want {
		if ids[k] != v {
			t.Errorf("ParseIdentities[%q] = %v, want %v", k, ids[k], v)
		}
	}
	for _, bad := range [][]string{{"fetcher"}, {"=read"}, {"a=root"}, {"a=read", "a=admin"}} {
		if _, err := auth.ParseIdentities(bad); err == nil {
			t.Errorf("ParseIdentities(%q) succeeded", bad)
		}
	}
}

// cert returns a certificate (not signed by anything: Identities reads
// names, crypto/tls verifies) with the given names.
func cert(t testing.TB, cn string, dns []string, uri string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	if uri != "" {
		u, _ := url.Parse(uri)
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeFile(t testing.TB, path, s string) {
	t.Helper()
	// Write beside, then rename: a reader sees the old or the new file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func openTokens(t testing.TB, contents string, o auth.FileOptions) (*auth.TokenFile, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.csv")
	writeFile(t, path, contents)
	f, err := auth.OpenTokenFile(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, path
}

func TestAuthorize(t *testing.T) {
	tokens, _ := openTokens(t, tokensFile, auth.FileOptions{})
	ids := auth.Identities{"fetcher-2": auth.Crawl, "ops.example": auth.Admin, "spiffe://sieve/dash": auth.Read}
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	a := auth.New(auth.Options{Server: "urlfrontier", Tokens: tokens, Identities: ids, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	bearer := func(tok string) []string { return []string{"Bearer " + tok} }
	crawlCert := cert(t, "fetcher-2", nil, "")
	adminCert := cert(t, "someone", []string{"ops.example"}, "")
	readCert := cert(t, "x", nil, "spiffe://sieve/dash")
	strangerCert := cert(t, "stranger", nil, "")
	tests := []struct {
		name   string
		c      auth.Credentials
		need   auth.Role
		who    string
		reason auth.Reason // "" when allowed
	}{
		{"read token reads", auth.Credentials{Authorization: bearer(readToken)}, auth.Read, "dashboard", ""},
		{"read token may not crawl", auth.Credentials{Authorization: bearer(readToken)}, auth.Crawl, "dashboard", auth.ReasonForbidden},
		{"crawl token reads", auth.Credentials{Authorization: bearer(crawlToken)}, auth.Read, "fetcher-1", ""},
		{"crawl token crawls", auth.Credentials{Authorization: bearer(crawlToken)}, auth.Crawl, "fetcher-1", ""},
		{"crawl token may not administer", auth.Credentials{Authorization: bearer(crawlToken)}, auth.Admin, "fetcher-1", auth.ReasonForbidden},
		{"admin token administers", auth.Credentials{Authorization: bearer(adminToken)}, auth.Admin, "ops", ""},
		{"scheme in any case (RFC 7235 2.1)", auth.Credentials{Authorization: []string{"bearer " + adminToken}}, auth.Admin, "ops", ""},
		{"nothing", auth.Credentials{}, auth.Read, "", auth.ReasonMissing},
		{"basic scheme", auth.Credentials{Authorization: []string{"Basic YTpi"}}, auth.Read, "", auth.ReasonMalformed},
		{"no scheme", auth.Credentials{Authorization: []string{readToken}}, auth.Read, "", auth.ReasonMalformed},
		{"two headers", auth.Credentials{Authorization: []string{"Bearer " + readToken, "Bearer " + adminToken}}, auth.Read, "", auth.ReasonMalformed},
		{"token with a quote", auth.Credentials{Authorization: bearer(`abc"def`)}, auth.Read, "", auth.ReasonMalformed},
		{"empty token", auth.Credentials{Authorization: bearer("")}, auth.Read, "", auth.ReasonMalformed},
		{"oversized token", auth.Credentials{Authorization: bearer(strings.Repeat("A", 1<<20))}, auth.Read, "", auth.ReasonOversized},
		{"unknown token", auth.Credentials{Authorization: bearer("no-such-token-0123456789")}, auth.Read, "", auth.ReasonUnknownToken},
		{"token's prefix", auth.Credentials{Authorization: bearer(adminToken[:20])}, auth.Read, "", auth.ReasonUnknownToken},
		{"crawl certificate by CN", auth.Credentials{Certificate: crawlCert}, auth.Crawl, "fetcher-2", ""},
		{"admin certificate by DNS SAN", auth.Credentials{Certificate: adminCert}, auth.Admin, "ops.example", ""},
		{"read certificate by URI SAN", auth.Credentials{Certificate: readCert}, auth.Read, "spiffe://sieve/dash", ""},
		{"read certificate may not crawl", auth.Credentials{Certificate: readCert}, auth.Crawl, "spiffe://sieve/dash", auth.ReasonForbidden},
		{"certificate of no role", auth.Credentials{Certificate: strangerCert}, auth.Read, "stranger", auth.ReasonNoRole},
		{"certificate and a higher token", auth.Credentials{Certificate: readCert, Authorization: bearer(adminToken)}, auth.Admin, "ops", ""},
		{"token and a higher certificate", auth.Credentials{Certificate: adminCert, Authorization: bearer(readToken)}, auth.Admin, "ops.example", ""},
		{"good certificate, bad token", auth.Credentials{Certificate: adminCert, Authorization: bearer("no-such-token-0123456789")}, auth.Read, "", auth.ReasonUnknownToken},
		{"call of no role", auth.Credentials{Authorization: bearer(adminToken)}, auth.None, "ops", auth.ReasonUnmapped},
	}
	want := map[auth.Reason]float64{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := a.Authorize(tt.c, "/test/Call", tt.need)
			if tt.reason == "" {
				if err != nil || id.Name != tt.who {
					t.Fatalf("Authorize = %+v, %v, want %s allowed", id, err, tt.who)
				}
				return
			}
			want[tt.reason]++
			var r *auth.Refusal
			if !errors.As(err, &r) || r.Reason != tt.reason {
				t.Fatalf("Authorize = %+v, %v, want refused for %s", id, err, tt.reason)
			}
			wantErr := auth.ErrUnauthenticated
			if tt.reason == auth.ReasonForbidden || tt.reason == auth.ReasonNoRole || tt.reason == auth.ReasonUnmapped {
				wantErr = auth.ErrForbidden
			}
			if !errors.Is(err, wantErr) {
				t.Fatalf("Authorize = %v, want it to match %v", err, wantErr)
			}
			if tt.who != "" && r.Name != tt.who {
				t.Fatalf("refusal names %q, want %q", r.Name, tt.who)
			}
		})
	}
	for _, reason := range auth.Reasons {
		got := testutil.ToFloat64(a.Refusals().WithLabelValues("urlfrontier", string(reason)))
		if got != want[reason] {
			t.Errorf("sieve_auth_refusals_total{reason=%q} = %v, want %v", reason, got, want[reason])
		}
	}
	if n, err := testutil.GatherAndCount(reg, "sieve_auth_refusals_total"); err != nil || n != len(auth.Reasons) {
		t.Errorf("registered series = %d, %v, want %d", n, err, len(auth.Reasons))
	}
	for _, secret := range []string{readToken, crawlToken, adminToken, "no-such-token", "AAAA"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the logs show a token (%s):\n%s", secret, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "reason=forbidden") || !strings.Contains(logs.String(), "name=fetcher-1") {
		t.Errorf("the logs do not say who was refused and why:\n%s", logs.String())
	}
}

// TestAuthenticatorsShareRegistry: the API's and the HTTP surface's
// Authenticators register one counter on the process's registry.
func TestAuthenticatorsShareRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := auth.New(auth.Options{Server: "urlfrontier", Registerer: reg})
	b := auth.New(auth.Options{Server: "http", Registerer: reg})
	a.Authorize(auth.Credentials{}, "x", auth.Read)
	b.Authorize(auth.Credentials{}, "y", auth.Read)
	b.Authorize(auth.Credentials{}, "y", auth.Read)
	if n, err := testutil.GatherAndCount(reg, "sieve_auth_refusals_total"); err != nil || n != 2*len(auth.Reasons) {
		t.Fatalf("series = %d, %v, want %d", n, err, 2*len(auth.Reasons))
	}
	if got := testutil.ToFloat64(a.Refusals().WithLabelValues("http", "missing")); got != 2 {
		t.Fatalf("http missing = %v, want 2", got)
	}
	if a.Enabled() {
		t.Fatal("an Authenticator without credentials says it is enabled")
	}
}

// TestTokenFileRotation: a token rewritten in the file is taken within the
// interval, the old one refused; a broken file keeps the last good set.
func TestTokenFileRotation(t *testing.T) {
	defer leaktest.Check(t)()
	failed := make(chan struct{}, 10)
	f, path := openTokens(t, tokensFile, auth.FileOptions{Interval: 10 * time.Millisecond,
		Failed: func() { failed <- struct{}{} }})
	a := auth.New(auth.Options{Tokens: f})
	use := func(tok string) error {
		_, err := a.Authorize(auth.Credentials{Authorization: []string{"Bearer " + tok}}, "x", auth.Read)
		return err
	}
	if err := use(readToken); err != nil {
		t.Fatal(err)
	}
	const rotated = "read-token-rotated-0123456789"
	writeFile(t, path, strings.Replace(tokensFile, readToken, rotated, 1))
	waitFor(t, "the rotated token", func() bool { return use(rotated) == nil })
	if err := use(readToken); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("the old token after rotation: %v, want refused", err)
	}
	writeFile(t, path, "not,a,valid,file\n")
	select {
	case <-failed:
	case <-time.After(10 * time.Second):
		t.Fatal("a broken file was not reported")
	}
	if err := use(rotated); err != nil {
		t.Fatalf("a broken file dropped the last good set: %v", err)
	}
	writeFile(t, path, "# none left\n")
	select {
	case <-failed: // a file with no token is refused too: nobody could call
	case <-time.After(10 * time.Second):
		t.Fatal("an empty file was not reported")
	}
	if err := use(rotated); err != nil {
		t.Fatalf("an empty file dropped the last good set: %v", err)
	}
	f.Close()
	f.Close() // idempotent
}

func TestOpenTokenFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := auth.OpenTokenFile(filepath.Join(dir, "missing"), auth.FileOptions{}); err == nil {
		t.Error("a missing file opened")
	}
	empty := filepath.Join(dir, "empty")
	writeFile(t, empty, "# nothing\n")
	if _, err := auth.OpenTokenFile(empty, auth.FileOptions{}); err == nil {
		t.Error("a file of no token opened")
	}
}

func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReloadFailures: a tokens file that stops parsing is counted in
// sieve_auth_reload_failures_total under its setting, once per change.
func TestReloadFailures(t *testing.T) {
	reg := prometheus.NewRegistry()
	failed := auth.ReloadFailures(reg, "urlfrontier.tokens_file")
	auth.ReloadFailures(reg, "http.tokens_file") // shares the registered counter
	_, path := openTokens(t, tokensFile, auth.FileOptions{Interval: 10 * time.Millisecond, Failed: failed})
	writeFile(t, path, "broken\n")
	value := func(setting string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if mf.GetName() == "sieve_auth_reload_failures_total" && m.GetLabel()[0].GetValue() == setting {
					return m.GetCounter().GetValue()
				}
			}
		}
		return -1
	}
	waitFor(t, "the failed reload counted", func() bool { return value("urlfrontier.tokens_file") == 1 })
	// Another broken file: counted once more, however many intervals
	// each stayed (the poll reads every 10 ms).
	writeFile(t, path, "broken, again\n")
	waitFor(t, "the second failed reload counted", func() bool { return value("urlfrontier.tokens_file") >= 2 })
	if got := value("urlfrontier.tokens_file"); got != 2 {
		t.Errorf("failures = %v after two broken files, want 2", got)
	}
	if got := value("http.tokens_file"); got != 0 {
		t.Errorf("http.tokens_file failures = %v, want 0 (shown from the start)", got)
	}
}
