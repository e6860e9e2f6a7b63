package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCredentialsCommand: `crawler credentials` writes into --dir, keeps
// the files on a second run, and refuses bad flags with exit 2.
func TestCredentialsCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "creds")
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"first run", []string{"--dir", dir, "--names", "crawler,127.0.0.1", "--tokens", "prometheus=read,ops=admin"}, 0, "wrote ca-key.pem, ca.pem, server-key.pem"},
		{"second run", []string{"--dir", dir, "--names", "crawler,127.0.0.1", "--tokens", "prometheus=read,ops=admin"}, 0, "kept as they are"},
		{"renew", []string{"--dir", dir, "--names", "crawler,127.0.0.1", "--tokens", "prometheus=read,ops=admin", "--renew"}, 0, "wrote server-key.pem, server.pem\n"},
		{"help", []string{"--help"}, 0, "Usage: crawler credentials"},
		{"no dir", []string{"--names", "crawler"}, 2, "--dir and --names are required"},
		{"bad role", []string{"--dir", dir, "--names", "crawler", "--tokens", "x=root"}, 2, `--tokens "x=root"`},
		{"owner of no token", []string{"--dir", dir, "--names", "crawler", "--token-owner", "grafana=472"}, 2, `"grafana"`},
		{"bad token name", []string{"--dir", dir, "--names", "crawler", "--tokens", "../x=read"}, 2, `token name "../x"`},
		{"argument", []string{"--dir", dir, "--names", "crawler", "extra"}, 2, "unexpected arguments"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"credentials"}, tc.args...), &stdout, &stderr)
		if out := stdout.String() + stderr.String(); code != tc.code || !strings.Contains(out, tc.contains) {
			t.Errorf("%s: exit %d, %q; want exit %d containing %q", tc.name, code, out, tc.code, tc.contains)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "token-prometheus")); err != nil {
		t.Error(err)
	}
}
