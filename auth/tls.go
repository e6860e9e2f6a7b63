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

// TLSOptions configures ServerTLS.
type TLSOptions struct {
	// Cert is the server's certificate (required).
	Cert *CertFile
	// ClientCA is a PEM file of the CAs client certificates are verified
	// against (empty: clients are not asked for one).
	ClientCA string
	// RequireClientCert refuses, in the handshake, a client without a
	// certificate of ClientCA; otherwise such a client may still
	// authenticate with a token.
	RequireClientCert bool
}

// ServerTLS returns the tls.Config of a server: TLS 1.2 at least, the
// certificate of o.Cert, and with o.ClientCA, client certificates
// verified against it (a certificate of another CA fails the handshake).
func ServerTLS(o TLSOptions) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: o.Cert.GetCertificate}
	if o.ClientCA == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(o.ClientCA)
	if err != nil {
		return nil, fmt.Errorf("client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("client CA: no PEM certificate in %s", o.ClientCA)
	}
	cfg.ClientCAs = pool
	cfg.ClientAuth = tls.VerifyClientCertIfGiven
	if o.RequireClientCert {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
