package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sievecrawl/sieve/auth/authtest"
)

// stoppableServe is a secured `crawler serve --embedded` in this process
// (as startSecuredServe's) that the test stops itself.
type stoppableServe struct {
	securedServe
	stop   func()        // cancels serve's context
	exited chan struct{} // closed when serve returned, its exit code in code
	code   int
}

func startStoppableServe(t *testing.T, args ...string) *stoppableServe {
	t.Helper()
	ca := authtest.NewCA(t, "serve test CA")
	cert := ca.Server(t, "serve")
	s := &stoppableServe{securedServe: securedServe{ca: ca, tokens: filepath.Join(t.TempDir(), "tokens.csv"), stderr: &syncBuffer{}},
		exited: make(chan struct{})}
	authtest.WriteFile(t, s.tokens, []byte(testTokens))
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go func() {
		defer close(s.exited)
		s.code = run(ctx, append([]string{"serve", "--embedded", "--data-dir", t.TempDir(), "--urlfrontier-addr", "127.0.0.1:0",
			"--urlfrontier-default-delay", "0s", "--http-addr", "",
			"--urlfrontier-tls-cert", cert.CertFile, "--urlfrontier-tls-key", cert.KeyFile,
			"--urlfrontier-tls-client-ca", ca.CertFile, "--urlfrontier-tokens-file", s.tokens}, args...), io.Discard, s.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop within 30s of its context")
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-s.exited:
			t.Fatalf("serve exited with %d: %s", s.code, s.stderr.String())
		default:
		}
		if m := listening.FindStringSubmatch(s.stderr.String()); m != nil {
			s.addr = m[1]
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not listen within 30s: %s", s.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServeStopsBesideStalledHandshakes pins issue 39's item 5: ten
// sockets that sent a TLS handshake's first byte and stalled held serve's
// stop for 120 s (grpc's handshake timeout: its Stop and GracefulStop
// wait for every handshake under way), past compose's stop_grace_period
// of 20 s. Serve stops within 5 s whatever they do, and the calls in hand
// are still answered.
func TestServeStopsBesideStalledHandshakes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve")
	}
	s := startStoppableServe(t)
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for range 10 {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte{0x16}); err != nil { // a handshake record's first byte, then nothing
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for range 5 { // TLS done, HTTP/2's preface never sent
		c, err := tls.Dial("tcp", s.addr, s.ca.ClientTLS(t, authtest.Pair{}))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// Accepted in order: once a later client is answered, the stalled
	// ones are in their handshakes.
	c := frontierClient(t, s.addr, s.ca.ClientTLS(t, authtest.Pair{}))
	if got := frontierCalls(t, c, testAdminToken); got != [3]codes.Code{codes.OK, codes.OK, codes.OK} {
		t.Fatalf("a good client beside 15 stalled ones: %v", got)
	}
	start := time.Now()
	s.stop()
	select {
	case <-s.exited:
		if s.code != 0 {
			t.Fatalf("serve exited with %d: %s", s.code, s.stderr.String())
		}
		t.Logf("serve stopped in %v beside 15 stalled handshakes", time.Since(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatalf("serve did not stop within 5s of its context beside 15 stalled handshakes")
	}
}
