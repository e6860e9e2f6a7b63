package credentials_test

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/sievecrawl/sieve/auth"
	"github.com/sievecrawl/sieve/credentials"
)

var names = []string{"dedup-worker", "crawler", "localhost", "127.0.0.1"}

func options(dir string) credentials.Options {
	return credentials.Options{Dir: dir, Names: names, Tokens: []credentials.Token{
		{Name: "prometheus", Role: auth.Read}, {Name: "ops", Role: auth.Admin}}}
}

// readAll returns every file of dir by name.
func readAll(tb testing.TB, dir string) map[string][]byte {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		files[e.Name()] = b
	}
	return files
}

func parseCert(tb testing.TB, path string) *x509.Certificate {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	p, _ := pem.Decode(b)
	if p == nil {
		tb.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(p.Bytes)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// TestGenerate: the files are written with the documented modes, the
// server certificate verifies against the CA for each name, the tokens
// file parses and each token file holds its line's token; a second run
// keeps every file byte for byte (compose runs it at every `up`).
func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	written, err := credentials.Generate(options(dir))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ca-key.pem", "ca.pem", "server-key.pem", "server.pem", "tokens.csv", "token-prometheus", "token-ops", "web.yml"}
	if !slices.Equal(written, want) {
		t.Errorf("written %q, want %q", written, want)
	}
	modes := map[string]os.FileMode{"ca.pem": 0o644, "ca-key.pem": 0o600, "server.pem": 0o644, "server-key.pem": 0o600,
		"tokens.csv": 0o600, "token-prometheus": 0o600, "token-ops": 0o600, "web.yml": 0o644}
	for name, mode := range modes {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s mode %v, want %v", name, st.Mode().Perm(), mode)
		}
	}
	ca := parseCert(t, filepath.Join(dir, "ca.pem"))
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	cert := parseCert(t, filepath.Join(dir, "server.pem"))
	for _, n := range names {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: n, Roots: roots}); err != nil {
			t.Errorf("server certificate for %q: %v", n, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "other", Roots: roots}); err == nil {
		t.Error("server certificate verifies for a name not given")
	}
	files := readAll(t, dir)
	tokens, err := auth.ParseTokens(bytes.NewReader(files["tokens.csv"]))
	if err != nil || tokens.Len() != 2 {
		t.Fatalf("tokens.csv: %v, %d tokens; want 2", err, tokens.Len())
	}
	for _, name := range []string{"prometheus", "ops"} {
		tok := files["token-"+name]
		if len(tok) != 44 || !bytes.Contains(files["tokens.csv"], []byte(string(tok)+","+name+",")) {
			t.Errorf("token-%s %q: want a 44-character token of tokens.csv's line %s", name, tok, name)
		}
	}

	again, err := credentials.Generate(options(dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 0 {
		t.Errorf("second run wrote %q, want nothing", again)
	}
	for name, b := range readAll(t, dir) {
		if !bytes.Equal(b, files[name]) {
			t.Errorf("second run changed %s", name)
		}
	}
}

// TestGenerateRenews: what is kept and what is made again when the names,
// the clock, the tokens or a file change.
func TestGenerateRenews(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(o *credentials.Options, dir string)
		want   []string // written by the second run
	}{
		{"a name added", func(o *credentials.Options, _ string) { o.Names = append(o.Names, "cluster-crawler") },
			[]string{"server-key.pem", "server.pem"}},
		{"renew asked", func(o *credentials.Options, _ string) { o.Renew = true },
			[]string{"server-key.pem", "server.pem"}},
		{"within RenewBefore of the end", func(o *credentials.Options, _ string) {
			o.Now = func() time.Time {
				return time.Now().Add(credentials.ServerValidity - credentials.RenewBefore + time.Hour)
			}
		}, []string{"server-key.pem", "server.pem"}},
		{"server key lost", func(_ *credentials.Options, dir string) { os.Remove(filepath.Join(dir, "server-key.pem")) },
			[]string{"server-key.pem", "server.pem"}},
		{"CA key of another CA", func(_ *credentials.Options, dir string) {
			other := t.TempDir()
			credentials.Generate(options(other))
			b, _ := os.ReadFile(filepath.Join(other, "ca-key.pem"))
			os.WriteFile(filepath.Join(dir, "ca-key.pem"), b, 0o600)
		}, []string{"ca-key.pem", "ca.pem", "server-key.pem", "server.pem"}},
		{"a token added", func(o *credentials.Options, _ string) {
			o.Tokens = append(o.Tokens, credentials.Token{Name: "grafana", Role: auth.Read})
		}, []string{"tokens.csv", "token-grafana"}},
		{"a token file edited", func(_ *credentials.Options, dir string) {
			os.WriteFile(filepath.Join(dir, "token-ops"), []byte("x"), 0o600)
		}, []string{"token-ops"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := options(dir)
			if _, err := credentials.Generate(o); err != nil {
				t.Fatal(err)
			}
			before := readAll(t, dir)
			tc.change(&o, dir)
			written, err := credentials.Generate(o)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(written, tc.want) {
				t.Errorf("written %q, want %q", written, tc.want)
			}
			// Tokens are kept, an edited token file restored from tokens.csv.
			after := readAll(t, dir)
			for _, name := range []string{"token-prometheus", "token-ops"} {
				if !bytes.Equal(before[name], after[name]) {
					t.Errorf("%s changed: tokens are kept", name)
				}
			}
		})
	}
}

// TestGenerateRefuses: options Generate cannot use are ErrOptions.
func TestGenerateRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    credentials.Options
	}{
		{"no dir", credentials.Options{Names: names}},
		{"no names", credentials.Options{Dir: t.TempDir()}},
		{"token name with a slash", credentials.Options{Dir: t.TempDir(), Names: names, Tokens: []credentials.Token{{Name: "../x", Role: auth.Read}}}},
		{"token twice", credentials.Options{Dir: t.TempDir(), Names: names, Tokens: []credentials.Token{{Name: "a", Role: auth.Read}, {Name: "a", Role: auth.Admin}}}},
		{"token without role", credentials.Options{Dir: t.TempDir(), Names: names, Tokens: []credentials.Token{{Name: "a"}}}},
	} {
		if _, err := credentials.Generate(tc.o); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// TestGenerateUsers: a user gets a random password in its file and the
// bcrypt hash of it in web.yml, which exporter-toolkit's own validation
// accepts and Sieve reads as a user (0600: the hashes are for the serving
// process only); a second run keeps every byte (bcrypt's salt would
// change a hash made again), and a password edited by hand is hashed
// anew.
func TestGenerateUsers(t *testing.T) {
	dir := t.TempDir()
	o := options(dir)
	o.Users = []string{"operator"}
	if _, err := credentials.Generate(o); err != nil {
		t.Fatal(err)
	}
	first := readAll(t, dir)
	password := string(bytes.TrimSpace(first["password-operator"]))
	if len(password) < 20 {
		t.Fatalf("password %q: too short", password)
	}
	path := filepath.Join(dir, credentials.WebConfigFile)
	checkUser := func(password string) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		c, err := auth.ParseWebConfig(path, b)
		if err != nil {
			t.Fatalf("web.yml with a user: %v", err)
		}
		if err := bcrypt.CompareHashAndPassword([]byte(c.Users["operator"]), []byte(password)); err != nil {
			t.Fatalf("the hash in web.yml is not the password's: %v", err)
		}
	}
	checkUser(password)
	for _, name := range []string{"web.yml", "password-operator"} {
		if st, _ := os.Stat(filepath.Join(dir, name)); st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", name, st.Mode().Perm())
		}
	}
	written, err := credentials.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 0 {
		t.Errorf("a second run wrote %q", written)
	}
	if err := os.WriteFile(filepath.Join(dir, "password-operator"), []byte("chosen-by-hand-0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if written, err = credentials.Generate(o); err != nil || !slices.Equal(written, []string{"web.yml"}) {
		t.Fatalf("after a password edited: wrote %q, %v; want web.yml", written, err)
	}
	checkUser("chosen-by-hand-0123")
}
