package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/natstest"
)

func runCLI(t *testing.T, stdin string, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli(context.Background(), args, env2(stdin, &out, &errb, env))
	return code, out.String(), errb.String()
}

func env2(stdin string, out, errb *bytes.Buffer, vars map[string]string) env {
	return env{stdin: strings.NewReader(stdin), stdout: out, stderr: errb, lookupEnv: func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}}
}

func TestNormalizeCommand(t *testing.T) {
	tests := []struct {
		name     string
		stdin    string
		env      map[string]string
		args     []string
		wantCode int
		wantOut  string
	}{
		{name: "arguments", args: []string{"HTTP://Example.COM:80/a/./b/../c?utm_source=x#frag"},
			wantOut: "http://example.com/a/c\n"},
		{name: "stdin", stdin: "https://example.com\n\n  https://EXAMPLE.com/%7euser \n",
			wantOut: "https://example.com/\nhttps://example.com/~user\n"},
		{name: "base", args: []string{"--base", "https://example.com/dir/page", "../up", "same#x"},
			wantOut: "https://example.com/up\nhttps://example.com/dir/same\n"},
		{name: "rejected", args: []string{"mailto:someone@example.com", "https://example.com/"}, wantCode: exitFail,
			wantOut: "rejected scheme: "},
		{name: "policy from the environment", env: map[string]string{"SIEVE_NORMALIZE_STRIP_PARAMS": "none"},
			args: []string{"https://example.com/?utm_source=x"}, wantOut: "https://example.com/?utm_source=x\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tt.stdin, tt.env, append([]string{"normalize"}, tt.args...)...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d (stderr %s)", code, tt.wantCode, errOut)
			}
			if !strings.HasPrefix(out, tt.wantOut) {
				t.Errorf("output %q, want it to start with %q", out, tt.wantOut)
			}
		})
	}
}

func TestCLIUsage(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		wantCode  int
		wantInOut string
		wantInErr string
		short     bool // stderr: the error and a line of help
	}{
		{name: "no command", wantCode: exitUsage, wantInErr: "Commands:"},
		{name: "help", args: []string{"help"}, wantCode: exitOK, wantInOut: "import"},
		{name: "unknown", args: []string{"frobnicate"}, wantCode: exitUsage, wantInErr: `unknown command "frobnicate"`},
		{name: "command help", args: []string{"run", "--help"}, wantCode: exitOK, wantInOut: "SIEVE_FRONTIER_DUPLICATE_WINDOW"},
		{name: "stats help has its flags", args: []string{"stats", "-h"}, wantCode: exitOK, wantInOut: "--json"},
		{name: "bad flag", args: []string{"run", "--worker-batch", "x"}, wantCode: exitUsage, wantInErr: "worker-batch", short: true},
		// Issue 10 item 6: a mistyped flag printed every setting.
		{name: "mistyped flag", args: []string{"run", "--worker-bach", "5"}, wantCode: exitUsage,
			wantInErr: "flag provided but not defined: -worker-bach\nRun 'dedup-worker run --help' for every setting.\n", short: true},
		// Issue 10 item 6: a file holding the crawler's settings too is
		// read, a typo in it still is an error.
		{name: "config file shared with the crawler", args: []string{"normalize", "https://example.com/"},
			env: map[string]string{"SIEVE_CONFIG": "../../config/testdata/shared.yaml"}, wantCode: exitOK, wantInOut: "https://example.com/"},
		{name: "invalid config names the field", args: []string{"run"}, env: map[string]string{"SIEVE_FILTER_FPP": "2"},
			wantCode: exitUsage, wantInErr: "filter.fpp"},
		{name: "import needs a file", args: []string{"import"}, wantCode: exitUsage, wantInErr: "FILE"},
		// It printed nothing and exited 0, as if every URL had been
		// answered.
		{name: "check without URLs", args: []string{"check", "--crawl", "a"}, env: map[string]string{"SIEVE_REDIS_URL": "redis://127.0.0.1:1"},
			wantCode: exitUsage, wantInErr: "no URLs given"},
		{name: "forget without URLs", args: []string{"forget", "--crawl", "a"}, wantCode: exitUsage, wantInErr: "no URLs given"},
		{name: "stats --crawl with --url", args: []string{"stats", "--crawl", "a", "--url", "http://127.0.0.1:1/stats"},
			wantCode: exitUsage, wantInErr: "does not go with --url"},
		{name: "check in memory mode without a snapshot", args: []string{"check", "https://example.com/"},
			wantCode: exitFail, wantInErr: "redis.url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "", tt.env, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstdout %s\nstderr %s", code, tt.wantCode, out, errOut)
			}
			if !strings.Contains(out, tt.wantInOut) {
				t.Errorf("stdout lacks %q:\n%s", tt.wantInOut, out)
			}
			if lines := strings.Count(errOut, "\n"); tt.short && lines > 2 {
				t.Errorf("stderr has %d lines, want the error and a line of help:\n%s", lines, errOut)
			}
			if !strings.Contains(errOut, tt.wantInErr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantInErr, errOut)
			}
		})
	}
}

// TestRedisUnreachable runs every one-shot command against a closed Redis
// port: each fails at once with one line naming the server (its password
// hidden) and the cause, and exit status 1.
func TestRedisUnreachable(t *testing.T) {
	addr := natstest.ClosedAddr(t)
	vars := map[string]string{"SIEVE_REDIS_URL": "redis://:hunter2@" + addr, "SIEVE_NATS_URL": "nats://" + natstest.ClosedAddr(t)}
	for _, args := range [][]string{
		{"check", "https://a.example/"},
		{"stats"},
		{"import", "-"},
		{"forget", "https://a.example/"},
	} {
		t.Run(args[0], func(t *testing.T) {
			start := time.Now()
			code, _, errOut := runCLI(t, "https://a.example/\n", vars, args...)
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			if code != exitFail || len(lines) != 1 || !strings.Contains(errOut, "connect to redis") || !strings.Contains(errOut, addr) ||
				!strings.Contains(errOut, "connection refused") || strings.Contains(errOut, "hunter2") {
				t.Errorf("exit %d, stderr %q: want 1 and one line naming the server, without its password, and the cause", code, errOut)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v to fail", d)
			}
		})
	}
}
