package auth

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// CertFile is a server certificate and its key read from PEM files, read
// again every interval and swapped when either file changed, so a renewed
// certificate is served to the next handshake without a restart (the
// connections open keep theirs). A pair that does not load (a certificate
// written before its key) keeps the last good one until both match. Close
// stops it. It is safe for concurrent use.
type CertFile struct {
	r *reloader[tls.Certificate]
}

// OpenCertFile loads the certificate and key at certPath and keyPath and
// keeps them current until Close.
func OpenCertFile(certPath, keyPath string, o FileOptions) (*CertFile, error) {
	o = o.withDefaults()
	r := &reloader[tls.Certificate]{
		paths: []string{certPath, keyPath}, logger: o.Logger, what: "certificate", failed: o.Failed,
		parse: func(c [][]byte) (tls.Certificate, error) { return tls.X509KeyPair(c[0], c[1]) },
	}
	if err := r.start(o.Interval); err != nil {
		return nil, err
	}
	return &CertFile{r: r}, nil
}

// GetCertificate returns the current certificate: tls.Config's
// GetCertificate.
func (f *CertFile) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return f.r.cur.Load(), nil
}

// Close stops reading the files. It is idempotent.
func (f *CertFile) Close() error {
	f.r.close()
	return nil
}

// CAFile is a PEM file of CA certificates, read again every interval and
// swapped when it changed, as a CertFile is: a client CA added (or a
// compromised one removed) applies to the next handshake without a
// restart. A file with no certificate keeps the last good pool. Close
// stops it.
type CAFile struct {
	r *reloader[*x509.CertPool]
}

// OpenCAFile loads the CAs at path and keeps them current until Close.
func OpenCAFile(path string, o FileOptions) (*CAFile, error) {
	o = o.withDefaults()
	r := &reloader[*x509.CertPool]{
		paths: []string{path}, logger: o.Logger, what: "client CA", failed: o.Failed,
		parse: func(c [][]byte) (*x509.CertPool, error) {
			pool := x509.NewCertPool()
			return pool, AppendCAs(pool, path, c[0])
		},
	}
	if err := r.start(o.Interval); err != nil {
		return nil, fmt.Errorf("client CA: %w", err)
	}
	return &CAFile{r: r}, nil
}

// AppendCAs adds the certificates of pem, the contents of the file at
// path, to pool; a file with none is an error naming it.
func AppendCAs(pool *x509.CertPool, path string, pem []byte) error {
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("no PEM certificate in %s", path)
	}
	return nil
}

// LoadCAs returns a pool of the CA certificates in the PEM file at path.
func LoadCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	return pool, AppendCAs(pool, path, pem)
}

// Pool returns the current CAs.
func (f *CAFile) Pool() *x509.CertPool { return *f.r.cur.Load() }

// Close stops reading the file. It is idempotent.
func (f *CAFile) Close() error {
	f.r.close()
	return nil
}

// TLSOptions configures ServerTLS.
type TLSOptions struct {
	// Cert is the server's certificate (required).
	Cert *CertFile
	// ClientCA holds the CAs client certificates are verified against
	// (nil: clients are not asked for one).
	ClientCA *CAFile
	// RequireClientCert refuses, in the handshake, a client without a
	// certificate of ClientCA; otherwise such a client may still
	// authenticate with a token.
	RequireClientCert bool
}

// ServerTLS returns the tls.Config of a server: TLS 1.2 at least, the
// certificate of o.Cert, and with o.ClientCA, client certificates
// verified against its current CAs (a certificate of another CA fails the
// handshake): each handshake gets a config of the pool of the moment.
func ServerTLS(o TLSOptions) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: o.Cert.GetCertificate}
	if o.ClientCA == nil {
		return cfg
	}
	cfg.ClientCAs = o.ClientCA.Pool()
	cfg.ClientAuth = tls.VerifyClientCertIfGiven
	if o.RequireClientCert {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	base := cfg.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := base.Clone()
		c.ClientCAs = o.ClientCA.Pool()
		return c, nil
	}
	return cfg
}
