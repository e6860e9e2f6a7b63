package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sievecrawl/sieve/auth/authtest"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/redistest"
)

// python is Debian's interpreter, which python3-grpcio installs into (not
// a pyenv one that may come first on PATH).
const python = "/usr/bin/python3"

// TestURLFrontierConformance runs the Python conformance suite
// (urlfrontier/conformance) against `crawler serve`: the embedded mode,
// SIGKILL and restart, and two serve processes on one NATS and Redis
// started here. It needs protoc, grpc_python_plugin and python3-grpcio
// (test.sh installs them): without them it skips, and fails under CI=true.
func TestURLFrontierConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve processes")
	}
	missing := ""
	for _, bin := range []string{"protoc", "grpc_python_plugin"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing += " " + bin
		}
	}
	if err := exec.Command(python, "-c", "import grpc, google.protobuf").Run(); err != nil {
		missing += " python3-grpcio"
	}
	if missing != "" {
		msg := "missing" + missing + " (apt-get install protobuf-compiler protobuf-compiler-grpc python3-grpcio python3-protobuf; test.sh does)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ns := natstest.Start(t, natstest.Options{})
	rs := redistest.Start(t, redistest.Options{})
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, filepath.Join(root, "urlfrontier/conformance/conformance.py"))
	cmd.Env = append(os.Environ(),
		"SIEVE_CRAWLER="+crawlerBinary(t),
		"SIEVE_PROTO="+filepath.Join(root, "urlfrontier/urlfrontierpb/urlfrontier.proto"),
		"SIEVE_NATS="+ns.URL(),
		"SIEVE_REDIS="+rs.URL(),
		"TMPDIR="+t.TempDir(),
		"SIEVE_TLS="+conformanceTLS(t),
	)
	out, err := cmd.CombinedOutput()
	t.Logf("conformance suite:\n%s", out)
	if err != nil {
		t.Fatalf("conformance suite failed: %v", err)
	}
	if bytes.Contains(out, []byte("skipped=")) {
		t.Fatal("the conformance suite skipped tests: every one must run")
	}
}

// conformanceTLS writes the files of the suite's Secured tests and a JSON
// file naming them (SIEVE_TLS): a CA, serve's certificate, a client
// certificate of the CA for fetcher-2, a client certificate of another CA,
// and a tokens file with a token per role.
func conformanceTLS(t *testing.T) string {
	ca, foreign := authtest.NewCA(t, "conformance CA"), authtest.NewCA(t, "another CA")
	server, client, stranger := ca.Server(t, "serve"), ca.Client(t, "fetcher-2"), foreign.Client(t, "fetcher-2")
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	authtest.WriteFile(t, tokens, []byte(testTokens))
	files := map[string]string{
		"ca": ca.CertFile, "cert": server.CertFile, "key": server.KeyFile, "tokens": tokens,
		"client_cert": client.CertFile, "client_key": client.KeyFile,
		"foreign_cert": stranger.CertFile, "foreign_key": stranger.KeyFile, "foreign_ca": foreign.CertFile,
		"read": testReadToken, "crawl": testCrawlToken, "admin": testAdminToken,
	}
	b, err := json.Marshal(files)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tls.json")
	authtest.WriteFile(t, path, b)
	return path
}
