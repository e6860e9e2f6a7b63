package auth

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"
)

// ClientOptions are the credentials a client of Sieve's own servers
// presents, from files: the CAs it trusts besides the system's, a client
// certificate for mutual TLS, a bearer token. The zero value presents
// none and trusts the system's CAs.
type ClientOptions struct {
	// CAFile is a PEM file of CAs to trust (the deployment's own).
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key.
	CertFile, KeyFile string
	// TokenFile holds one bearer token and nothing else (whitespace
	// around it is ignored), as Prometheus' credentials_file: read at
	// every request, so a token rotated in the file is sent at once.
	TokenFile string
}

// TLS returns the client's tls.Config: the system's CAs and CAFile's, and
// the client certificate if any.
func (o ClientOptions) TLS() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("client.ca_file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if err := AppendCAs(pool, o.CAFile, pem); err != nil {
			return nil, fmt.Errorf("client.ca_file: %w", err)
		}
		cfg.RootCAs = pool
	}
	if o.CertFile != "" || o.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client.cert_file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// HTTPClient returns an http.Client presenting the options' credentials,
// its requests bounded by timeout (0: none).
func (o ClientOptions) HTTPClient(timeout time.Duration) (*http.Client, error) {
	cfg, err := o.TLS()
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = cfg
	var rt http.RoundTripper = t
	if o.TokenFile != "" {
		rt = BearerFile{Path: o.TokenFile, Next: t}
	}
	return &http.Client{Transport: rt, Timeout: timeout}, nil
}

// BearerFile is an http.RoundTripper that sends each request with
// "Authorization: Bearer <token>", the token read from Path at every
// request, then passes it to Next: middleware, as promhttp's are. A file
// that cannot be read, or whose token is not RFC 6750's b64token, fails
// the request with an error naming the file, never sending it.
type BearerFile struct {
	Path string
	Next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (b BearerFile) RoundTrip(r *http.Request) (*http.Response, error) {
	token, err := ReadTokenFile(b.Path)
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	next := b.Next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}

// ReadTokenFile returns the one token the file at path holds, checked as
// a server checks it (length, characters) so that a bad file is named
// here rather than refused there.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("client.token_file: %w", err)
	}
	token := string(bytes.TrimSpace(b))
	switch reason := checkToken(token); {
	case token == "":
		return "", fmt.Errorf("client.token_file %s: empty", path)
	case reason != "":
		return "", fmt.Errorf("client.token_file %s: the token is %s", path, reasonText(reason))
	}
	return token, nil
}

// ExplainHTTP adds to err, an error of a request to a Sieve server, the
// client setting that answers it: a certificate of an unknown authority
// names client.ca_file. It returns err unchanged otherwise.
func ExplainHTTP(err error) error {
	if Untrusted(err) {
		return fmt.Errorf("%w (set client.ca_file to the CA that signed the server's certificate)", err)
	}
	return err
}

// ExplainStatus describes an HTTP refusal of a Sieve server with the
// client setting that answers it, or "" for another status.
func ExplainStatus(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "the server wants a credential: set client.token_file (a file holding a token of tokens_file) or client.cert_file and client.key_file"
	case http.StatusForbidden:
		return "the credential has no role that reads the surface"
	}
	return ""
}

// Untrusted reports whether err is a TLS handshake's refusal of the
// server's certificate: something serves there, with a certificate the
// client does not trust.
func Untrusted(err error) bool {
	var unknown x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	return errors.As(err, &unknown) || errors.As(err, &verify)
}
