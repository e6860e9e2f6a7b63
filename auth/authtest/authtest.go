// Package authtest makes the credentials tests of Sieve's servers need: a
// certificate authority of their own, server and client certificates it
// signs, written as PEM files in a test's temporary directory, and tokens
// files.
package authtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

var serial atomic.Int64

// CA is a certificate authority of a test. CertFile is its certificate's
// PEM file (a client's root CA, a server's client CA).
type CA struct {
	CertFile string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	dir      string
}

// Pair is a certificate and key signed by a CA, as PEM files.
type Pair struct {
	CertFile, KeyFile string
}

// NewCA makes a CA valid for a day, its files in a temporary directory.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, dir: tb.TempDir()}
	ca.CertFile = filepath.Join(ca.dir, "ca.pem")
	writePEM(tb, ca.CertFile, "CERTIFICATE", der)
	return ca
}

// Server signs a server certificate for localhost, 127.0.0.1 and ::1,
// written under name.
func (ca *CA) Server(tb testing.TB, name string) Pair {
	tb.Helper()
	return ca.sign(tb, name, &x509.Certificate{
		Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// Client signs a client certificate whose subject common name is cn.
func (ca *CA) Client(tb testing.TB, cn string) Pair {
	tb.Helper()
	return ca.sign(tb, cn, &x509.Certificate{Subject: pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

func (ca *CA) sign(tb testing.TB, name string, tmpl *x509.Certificate) Pair {
	key := newKey(tb)
	tmpl.SerialNumber = big.NewInt(serial.Add(1))
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	p := Pair{CertFile: filepath.Join(ca.dir, name+".pem"), KeyFile: filepath.Join(ca.dir, name+"-key.pem")}
	writePEM(tb, p.KeyFile, "PRIVATE KEY", kder)
	writePEM(tb, p.CertFile, "CERTIFICATE", der)
	return p
}

// Pool returns a pool holding the CA, a client's RootCAs.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// ClientTLS returns a client's tls.Config trusting ca, presenting client
// if its files are set.
func (ca *CA) ClientTLS(tb testing.TB, client Pair) *tls.Config {
	tb.Helper()
	cfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if client.CertFile != "" {
		c, err := tls.LoadX509KeyPair(client.CertFile, client.KeyFile)
		if err != nil {
			tb.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg
}

// WriteFile writes contents to path atomically (beside, then renamed),
// as a rotation should: a reader sees the old file or the new one.
func WriteFile(tb testing.TB, path string, contents []byte) {
	tb.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, contents, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

func writePEM(tb testing.TB, path, kind string, der []byte) {
	tb.Helper()
	WriteFile(tb, path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}))
}

// Dial returns a gRPC client connection to addr over TLS with cfg (nil:
// plain text), closed when the test ends.
func Dial(tb testing.TB, addr string, cfg *tls.Config) *grpc.ClientConn {
	tb.Helper()
	creds := insecure.NewCredentials()
	if cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

// Bearer returns a context of 20 seconds (cancelled when the test ends)
// whose calls carry token as "authorization: Bearer <token>" (none if
// token is empty).
func Bearer(tb testing.TB, token string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	tb.Cleanup(cancel)
	if token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// WebConfig writes a Prometheus web configuration file (exporter-toolkit's
// format): TLS with a server certificate of ca, and one basic-auth user
// with password's bcrypt hash (the lowest cost: tests). It returns the
// file's path.
func (ca *CA) WebConfig(tb testing.TB, user, password string) string {
	tb.Helper()
	cert := ca.Server(tb, "web")
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(ca.dir, "web.yml")
	WriteFile(tb, path, fmt.Appendf(nil, "tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  %s: %s\n",
		cert.CertFile, cert.KeyFile, user, hash))
	return path
}
