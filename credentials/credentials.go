package credentials

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/csv"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"

	"github.com/sievecrawl/sieve/auth"
)

// The files Generate writes in Options.Dir.
const (
	CAFile        = "ca.pem"
	CAKeyFile     = "ca-key.pem"
	ServerFile    = "server.pem"
	ServerKeyFile = "server-key.pem"
	TokensFile    = "tokens.csv"
	WebConfigFile = "web.yml"
)

// TokenFile is the name of the file holding token name alone.
func TokenFile(name string) string { return "token-" + name }

// PasswordFile is the name of the file holding user name's password.
func PasswordFile(name string) string { return "password-" + name }

// PasswordBytes is the number of random bytes of a user's password.
const PasswordBytes = 18

// Lifetimes of what Generate signs, and how long before its end the
// server certificate is signed again.
const (
	CAValidity     = 10 * 365 * 24 * time.Hour
	ServerValidity = 365 * 24 * time.Hour
	RenewBefore    = 30 * 24 * time.Hour
)

// TokenBytes is the number of random bytes of a token.
const TokenBytes = 32

// ErrOptions is wrapped by the errors of options Generate cannot use.
var ErrOptions = errors.New("credentials")

// Token is a bearer token to make: its holder's name (also its file's,
// token-NAME), its role, and the uid owning its file (0: Options.Owner).
type Token struct {
	Name  string
	Role  auth.Role
	Owner int
}

// Options says what Generate makes. Dir and Names are required.
type Options struct {
	Dir    string   // where the files are; made if missing
	Names  []string // the server certificate's names: DNS names or IP addresses
	Tokens []Token
	// Users are basic-auth users to make, for people's browsers: each
	// gets a random password in password-NAME and its bcrypt hash in
	// web.yml's basic_auth_users (the read role, as every user has).
	Users []string
	// Owner is the uid of the process serving: it owns server-key.pem,
	// tokens.csv and the token files of no Owner of their own. 0 leaves
	// them with the user running Generate.
	Owner int
	// Renew signs the server certificate again even if it is valid (the
	// CA and tokens stay).
	Renew bool
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// tokenName is what a token's name may be: it names a file.
var tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func (o *Options) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrOptions, fmt.Sprintf(format, args...))
	}
	if o.Dir == "" {
		return bad("no directory")
	}
	if len(o.Names) == 0 {
		return bad("no name for the server certificate")
	}
	for _, n := range o.Names {
		if n == "" || strings.ContainsAny(n, " ,/:") && net.ParseIP(n) == nil {
			return bad("server name %q: want a DNS name or an IP address", n)
		}
	}
	seen := map[string]bool{}
	for _, t := range o.Tokens {
		if !tokenName.MatchString(t.Name) {
			return bad("token name %q: want letters, digits, '.', '_' or '-'", t.Name)
		}
		if seen[t.Name] {
			return bad("token %q given twice", t.Name)
		}
		seen[t.Name] = true
		if t.Role < auth.Read || t.Role > auth.Admin {
			return bad("token %q has no role", t.Name)
		}
	}
	seenUser := map[string]bool{}
	for _, u := range o.Users {
		if !tokenName.MatchString(u) {
			return bad("user name %q: want letters, digits, '.', '_' or '-'", u)
		}
		if seenUser[u] {
			return bad("user %q given twice", u)
		}
		seenUser[u] = true
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Generate makes in o.Dir what is missing or invalid of the deployment's
// credentials (see the package documentation), keeps the rest, and sets
// every file's mode and owner. It returns the names of the files it
// wrote, in the order written.
func Generate(o Options) (written []string, err error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	// Every user reading a file must reach it.
	if err := os.Chmod(o.Dir, 0o755); err != nil {
		return nil, err
	}
	g := &generator{Options: o}
	steps := []func() error{g.ca, g.server, g.tokens, g.passwords, g.webConfig, g.owners}
	for _, step := range steps {
		if err := step(); err != nil {
			return g.written, err
		}
	}
	return g.written, nil
}

type generator struct {
	Options
	caCert  *x509.Certificate
	caKey   *ecdsa.PrivateKey
	newCA   bool
	written []string
	values  map[string]string // token name → token
	pass    map[string]string // user → password
}

func (g *generator) path(name string) string { return filepath.Join(g.Dir, name) }

// ca loads the CA, or makes one if it is missing or invalid.
func (g *generator) ca() error {
	cert, key, err := g.loadPair(CAFile, CAKeyFile)
	if err == nil && cert.IsCA && g.Now().Before(cert.NotAfter) {
		g.caCert, g.caKey = cert, key
		return nil
	}
	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := g.Now()
	tmpl := &x509.Certificate{
		Subject:   pkix.Name{CommonName: "Sieve deployment CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(CAValidity),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	if g.caCert, err = g.sign(tmpl, key, nil, nil); err != nil {
		return err
	}
	g.caKey, g.newCA = key, true
	return g.writePair(CAFile, CAKeyFile, g.caCert, key)
}

// server keeps the server certificate if it verifies against the CA,
// covers every name and is not near its end; else signs a new one.
func (g *generator) server() error {
	if !g.newCA && !g.Renew {
		cert, _, err := g.loadPair(ServerFile, ServerKeyFile)
		if err == nil && g.serverValid(cert) {
			return nil
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := g.Now()
	tmpl := &x509.Certificate{
		Subject:   pkix.Name{CommonName: g.Names[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(ServerValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range g.Names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	cert, err := g.sign(tmpl, key, g.caCert, g.caKey)
	if err != nil {
		return err
	}
	return g.writePair(ServerFile, ServerKeyFile, cert, key)
}

func (g *generator) serverValid(cert *x509.Certificate) bool {
	roots := x509.NewCertPool()
	roots.AddCert(g.caCert)
	_, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: g.Now().Add(RenewBefore),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return false
	}
	for _, n := range g.Names {
		if cert.VerifyHostname(n) != nil {
			return false
		}
	}
	return true
}

// sign signs tmpl's certificate for key's public half with parent and
// parentKey (nil: self-signed).
func (g *generator) sign(tmpl *x509.Certificate, key *ecdsa.PrivateKey, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// loadPair reads a certificate and its key, and checks they match.
func (g *generator) loadPair(certName, keyName string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, err := os.ReadFile(g.path(certName))
	if err != nil {
		return nil, nil, err
	}
	kb, err := os.ReadFile(g.path(keyName))
	if err != nil {
		return nil, nil, err
	}
	cp, _ := pem.Decode(cb)
	kp, _ := pem.Decode(kb)
	if cp == nil || kp == nil || cp.Type != "CERTIFICATE" || kp.Type != "PRIVATE KEY" {
		return nil, nil, errors.New("not PEM")
	}
	cert, err := x509.ParseCertificate(cp.Bytes)
	if err != nil {
		return nil, nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(kp.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, nil, errors.New("key does not match its certificate")
	}
	return cert, key, nil
}

// writePair writes a key, then its certificate.
func (g *generator) writePair(certName, keyName string, cert *x509.Certificate, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := g.write(keyName, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return g.write(certName, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o644)
}

// tokens keeps the tokens of tokens.csv, adds the requested ones it
// lacks (or gives one its requested role), and writes each requested
// token's file.
func (g *generator) tokens() error {
	lines := readTokens(g.path(TokensFile))
	g.values = map[string]string{}
	index := map[string]int{}
	for i, l := range lines {
		g.values[l[1]], index[l[1]] = l[0], i
	}
	changed := false
	for _, t := range g.Tokens {
		i, ok := index[t.Name]
		switch {
		case !ok:
			b := make([]byte, TokenBytes)
			if _, err := rand.Read(b); err != nil {
				return err
			}
			tok := base64.StdEncoding.EncodeToString(b)
			lines = append(lines, [3]string{tok, t.Name, t.Role.String()})
			g.values[t.Name], changed = tok, true
		case lines[i][2] != t.Role.String():
			lines[i][2], changed = t.Role.String(), true
		}
	}
	if changed {
		var b bytes.Buffer
		b.WriteString("# token,name,role: Sieve's http.tokens_file (crawler credentials)\n")
		w := csv.NewWriter(&b)
		for _, l := range lines {
			w.Write(l[:])
		}
		w.Flush()
		if _, err := auth.ParseTokens(bytes.NewReader(b.Bytes())); err != nil {
			return fmt.Errorf("tokens file made: %w", err) // a bug
		}
		if err := g.write(TokensFile, b.Bytes(), 0o600); err != nil {
			return err
		}
	}
	for _, t := range g.Tokens {
		name := TokenFile(t.Name)
		if b, err := os.ReadFile(g.path(name)); err == nil && string(b) == g.values[t.Name] {
			continue
		}
		if err := g.write(name, []byte(g.values[t.Name]), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// readTokens returns the lines of a tokens file that auth.ParseTokens
// accepts, or none if it does not (or is missing): tokens are then made
// anew.
func readTokens(path string) [][3]string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	if _, err := auth.ParseTokens(bytes.NewReader(b)); err != nil {
		return nil
	}
	r := csv.NewReader(bytes.NewReader(b))
	r.Comment, r.FieldsPerRecord, r.TrimLeadingSpace = '#', 3, true
	recs, err := r.ReadAll()
	if err != nil {
		return nil
	}
	lines := make([][3]string, len(recs))
	for i, rec := range recs {
		lines[i] = [3]string{strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1]), strings.TrimSpace(rec[2])}
	}
	return lines
}

// webConfig is web.yml's contents without users: paths relative to it,
// which exporter-toolkit resolves from the file's directory.
var webConfig = fmt.Sprintf(`# Sieve's http.web_config_file (crawler credentials): TLS with the
# deployment's server certificate. Tokens (http.tokens_file) authenticate.
tls_server_config:
  cert_file: %s
  key_file: %s
`, ServerFile, ServerKeyFile)

// passwords keeps each user's password file, making a random password
// for a user that has none (or an empty one).
func (g *generator) passwords() error {
	g.pass = map[string]string{}
	for _, u := range g.Users {
		if b, err := os.ReadFile(g.path(PasswordFile(u))); err == nil && len(bytes.TrimSpace(b)) > 0 {
			g.pass[u] = string(bytes.TrimSpace(b))
			continue
		}
		b := make([]byte, PasswordBytes)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		g.pass[u] = base64.RawURLEncoding.EncodeToString(b)
		if err := g.write(PasswordFile(u), []byte(g.pass[u]+"\n"), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// webConfig writes web.yml: TLS, and with users their bcrypt hashes. A
// hash already in the file that matches its user's password is kept (a
// new one would differ by its salt), so a run that changes nothing
// rewrites nothing.
func (g *generator) webConfig() error {
	old, _ := os.ReadFile(g.path(WebConfigFile))
	var prev struct {
		Users map[string]string `yaml:"basic_auth_users"`
	}
	_ = yaml.Unmarshal(old, &prev)
	var b strings.Builder
	b.WriteString(webConfig)
	if len(g.Users) > 0 {
		b.WriteString("# People's users (the read role): the password of NAME is in password-NAME.\nbasic_auth_users:\n")
		for _, u := range g.Users {
			hash := prev.Users[u]
			if hash == "" || bcrypt.CompareHashAndPassword([]byte(hash), []byte(g.pass[u])) != nil {
				h, err := bcrypt.GenerateFromPassword([]byte(g.pass[u]), bcrypt.DefaultCost)
				if err != nil {
					return err
				}
				hash = string(h)
			}
			fmt.Fprintf(&b, "  %s: %s\n", u, hash)
		}
	}
	if string(old) == b.String() {
		return nil
	}
	mode := fs.FileMode(0o644)
	if len(g.Users) > 0 {
		mode = 0o600
	}
	return g.write(WebConfigFile, []byte(b.String()), mode)
}

// owners sets every file's mode and owner (see the package doc).
func (g *generator) owners() error {
	type file struct {
		name  string
		mode  fs.FileMode
		owner int
	}
	files := []file{
		{CAFile, 0o644, 0}, {CAKeyFile, 0o600, 0},
		{ServerFile, 0o644, 0}, {ServerKeyFile, 0o600, g.Owner},
		{TokensFile, 0o600, g.Owner},
	}
	if len(g.Users) > 0 { // the hashes are for the serving process only
		files = append(files, file{WebConfigFile, 0o600, g.Owner})
	} else {
		files = append(files, file{WebConfigFile, 0o644, 0})
	}
	for _, u := range g.Users {
		files = append(files, file{PasswordFile(u), 0o600, g.Owner})
	}
	for _, t := range g.Tokens {
		owner := t.Owner
		if owner == 0 {
			owner = g.Owner
		}
		files = append(files, file{TokenFile(t.Name), 0o600, owner})
	}
	for _, f := range files {
		p := g.path(f.name)
		if err := os.Chmod(p, f.mode); err != nil {
			return err
		}
		if f.owner != 0 {
			if err := os.Chown(p, f.owner, f.owner); err != nil {
				return err
			}
		}
	}
	return nil
}

// write writes name atomically: a file beside it, renamed over it.
func (g *generator) write(name string, data []byte, mode fs.FileMode) error {
	f, err := os.CreateTemp(g.Dir, "."+name+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, g.path(name))
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	g.written = append(g.written, name)
	return nil
}
