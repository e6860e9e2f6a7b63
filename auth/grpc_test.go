package auth_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sievecrawl/sieve/auth"
	"github.com/sievecrawl/sieve/auth/authtest"
	"github.com/sievecrawl/sieve/internal/leaktest"
)

// healthRoles gives grpc's own health service's calls roles, so that a
// real server and client carry the interceptors' cases: Check is read,
// Watch (a stream) crawl, List admin.
var healthRoles = map[string]auth.Role{
	healthpb.Health_Check_FullMethodName: auth.Read,
	healthpb.Health_Watch_FullMethodName: auth.Crawl,
	healthpb.Health_List_FullMethodName:  auth.Admin,
}

type grpcServer struct {
	addr     string
	ca       *authtest.CA
	tokens   string // the tokens file
	clientCA string // the client CA file, a copy of ca's
	cert     authtest.Pair
	auth     *auth.Authenticator
	health   *health.Server
}

// startGRPC serves grpc's health service over TLS (a certificate of a new
// CA, reloaded every 10 ms), with client certificates of that CA verified
// if given, the tokens of tokensFile and the identity "fetcher-2" as
// crawl, on a free loopback port until the test ends.
func startGRPC(t *testing.T) *grpcServer {
	t.Helper()
	ca := authtest.NewCA(t, "sieve test CA")
	s := &grpcServer{ca: ca, cert: ca.Server(t, "server"), tokens: filepath.Join(t.TempDir(), "tokens.csv")}
	authtest.WriteFile(t, s.tokens, []byte(tokensFile))
	fo := auth.FileOptions{Interval: 10 * time.Millisecond}
	tokens, err := auth.OpenTokenFile(s.tokens, fo)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := auth.OpenCertFile(s.cert.CertFile, s.cert.KeyFile, fo)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	s.clientCA = filepath.Join(t.TempDir(), "client-ca.pem")
	authtest.WriteFile(t, s.clientCA, caPEM)
	clientCA, err := auth.OpenCAFile(s.clientCA, fo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clientCA.Close() })
	cfg := auth.ServerTLS(auth.TLSOptions{Cert: certs, ClientCA: clientCA})
	s.auth = auth.New(auth.Options{Server: "test", Tokens: tokens, Identities: auth.Identities{"fetcher-2": auth.Crawl}})
	g := grpc.NewServer(append(s.auth.GRPCOptions(healthRoles), grpc.Creds(credentials.NewTLS(cfg)))...)
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(g, s.health)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = lis.Addr().String()
	done := make(chan struct{})
	go func() { defer close(done); g.Serve(lis) }()
	t.Cleanup(func() { g.Stop(); <-done; certs.Close(); tokens.Close() })
	return s
}

func dial(t *testing.T, addr string, cfg *tls.Config) healthpb.HealthClient {
	t.Helper()
	return healthpb.NewHealthClient(authtest.Dial(t, addr, cfg))
}

// call makes the call that needs role need and returns its code.
func call(c healthpb.HealthClient, ctx context.Context, need auth.Role) codes.Code {
	var err error
	switch need {
	case auth.Read:
		_, err = c.Check(ctx, &healthpb.HealthCheckRequest{})
	case auth.Crawl:
		var w grpc.ServerStreamingClient[healthpb.HealthCheckResponse]
		if w, err = c.Watch(ctx, &healthpb.HealthCheckRequest{}); err == nil {
			_, err = w.Recv()
		}
	case auth.Admin:
		_, err = c.List(ctx, &healthpb.HealthListRequest{})
	}
	return status.Code(err)
}

func TestGRPCRoles(t *testing.T) {
	t.Cleanup(leaktest.Check(t)) // after the server's and clients' cleanups
	s := startGRPC(t)
	plain := dial(t, s.addr, s.ca.ClientTLS(t, authtest.Pair{}))
	withCert := dial(t, s.addr, s.ca.ClientTLS(t, s.ca.Client(t, "fetcher-2")))
	stranger := dial(t, s.addr, s.ca.ClientTLS(t, s.ca.Client(t, "stranger")))
	const ok, unauth, denied = codes.OK, codes.Unauthenticated, codes.PermissionDenied
	tests := []struct {
		name   string
		client healthpb.HealthClient
		token  string
		want   [3]codes.Code // read, crawl (a stream), admin
	}{
		{"no credential", plain, "", [3]codes.Code{unauth, unauth, unauth}},
		{"read token", plain, readToken, [3]codes.Code{ok, denied, denied}},
		{"crawl token", plain, crawlToken, [3]codes.Code{ok, ok, denied}},
		{"admin token", plain, adminToken, [3]codes.Code{ok, ok, ok}},
		{"unknown token", plain, "no-such-token-0123456789", [3]codes.Code{unauth, unauth, unauth}},
		{"malformed token", plain, "a b", [3]codes.Code{unauth, unauth, unauth}},
		{"oversized token (4 KiB)", plain, strings.Repeat("A", 4096), [3]codes.Code{unauth, unauth, unauth}},
		{"crawl certificate", withCert, "", [3]codes.Code{ok, ok, denied}},
		{"crawl certificate and admin token", withCert, adminToken, [3]codes.Code{ok, ok, ok}},
		{"certificate of no role", stranger, "", [3]codes.Code{denied, denied, denied}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, need := range []auth.Role{auth.Read, auth.Crawl, auth.Admin} {
				if got := call(tt.client, authtest.Bearer(t, tt.token), need); got != tt.want[i] {
					t.Errorf("a %s call: %v, want %v", need, got, tt.want[i])
				}
			}
		})
	}
	if got := call(plain, authtest.Bearer(t, readToken), auth.Read); got != ok {
		t.Fatalf("after the refusals, a good call: %v", got)
	}
}

// TestGRPCTLSRefusals: a client that does not trust the server's CA, and a
// client certificate of another CA, fail in the handshake; the server
// goes on serving others.
func TestGRPCTLSRefusals(t *testing.T) {
	s := startGRPC(t)
	other := authtest.NewCA(t, "another CA")
	wrongCA := dial(t, s.addr, other.ClientTLS(t, authtest.Pair{}))
	if got := call(wrongCA, authtest.Bearer(t, readToken), auth.Read); got != codes.Unavailable {
		t.Errorf("a client trusting another CA: %v, want UNAVAILABLE (handshake refused)", got)
	}
	cfg := s.ca.ClientTLS(t, authtest.Pair{})
	// Sent whatever the server asks for: crypto/tls's client would
	// otherwise send none, not being of a CA the server names.
	foreignCert := other.ClientTLS(t, other.Client(t, "fetcher-2")).Certificates[0]
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &foreignCert, nil }
	foreign := dial(t, s.addr, cfg)
	if got := call(foreign, authtest.Bearer(t, readToken), auth.Read); got != codes.Unavailable {
		t.Errorf("a client certificate of another CA: %v, want UNAVAILABLE (handshake refused)", got)
	}
	good := dial(t, s.addr, s.ca.ClientTLS(t, authtest.Pair{}))
	if got := call(good, authtest.Bearer(t, readToken), auth.Read); got != codes.OK {
		t.Errorf("a good client after them: %v", got)
	}
}

// TestGRPCRotation: a token rotated in its file while a client is
// connected (on the same connection) and a certificate renewed under
// another CA are used without a restart.
func TestGRPCRotation(t *testing.T) {
	s := startGRPC(t)
	c := dial(t, s.addr, s.ca.ClientTLS(t, authtest.Pair{}))
	stream, err := c.Watch(authtest.Bearer(t, crawlToken), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	const rotated = "crawl-token-rotated-0123456789"
	authtest.WriteFile(t, s.tokens, []byte(strings.Replace(tokensFile, crawlToken, rotated, 1)))
	waitFor(t, "the rotated token", func() bool { return call(c, authtest.Bearer(t, rotated), auth.Crawl) == codes.OK })
	if got := call(c, authtest.Bearer(t, crawlToken), auth.Crawl); got != codes.Unauthenticated {
		t.Fatalf("the old token: %v, want UNAUTHENTICATED", got)
	}
	// Renew the server's certificate under another CA: new connections
	// get it, without a restart.
	next := authtest.NewCA(t, "next CA")
	renewed := next.Server(t, "server")
	for _, f := range [][2]string{{renewed.KeyFile, s.cert.KeyFile}, {renewed.CertFile, s.cert.CertFile}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		authtest.WriteFile(t, f[1], b)
	}
	waitFor(t, "the renewed certificate", func() bool {
		conn, err := tls.Dial("tcp", s.addr, next.ClientTLS(t, authtest.Pair{}))
		if err != nil {
			return false
		}
		conn.Close()
		return true
	})
	renewedClient := dial(t, s.addr, next.ClientTLS(t, authtest.Pair{}))
	if got := call(renewedClient, authtest.Bearer(t, rotated), auth.Read); got != codes.OK {
		t.Fatalf("a client of the renewed certificate: %v", got)
	}
}

// TestRequireClientCert: with RequireClientCert, a client without a
// certificate fails in the handshake whatever token it carries; one with
// a certificate of the CA gets its role.
func TestRequireClientCert(t *testing.T) {
	ca := authtest.NewCA(t, "required CA")
	pair := ca.Server(t, "server")
	certs, err := auth.OpenCertFile(pair.CertFile, pair.KeyFile, auth.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { certs.Close() })
	clientCA, err := auth.OpenCAFile(ca.CertFile, auth.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clientCA.Close() })
	cfg := auth.ServerTLS(auth.TLSOptions{Cert: certs, ClientCA: clientCA, RequireClientCert: true})
	a := auth.New(auth.Options{Identities: auth.Identities{"fetcher-2": auth.Crawl}})
	g := grpc.NewServer(append(a.GRPCOptions(healthRoles), grpc.Creds(credentials.NewTLS(cfg)))...)
	healthpb.RegisterHealthServer(g, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); g.Serve(lis) }()
	t.Cleanup(func() { g.Stop(); <-done })
	without := dial(t, lis.Addr().String(), ca.ClientTLS(t, authtest.Pair{}))
	if got := call(without, authtest.Bearer(t, adminToken), auth.Read); got != codes.Unavailable {
		t.Errorf("a client without a certificate: %v, want UNAVAILABLE (handshake refused)", got)
	}
	with := dial(t, lis.Addr().String(), ca.ClientTLS(t, ca.Client(t, "fetcher-2")))
	if got := call(with, authtest.Bearer(t, ""), auth.Crawl); got != codes.OK {
		t.Errorf("a client with a crawl certificate: %v, want OK", got)
	}
	if _, err := auth.OpenCAFile(filepath.Join(t.TempDir(), "none.pem"), auth.FileOptions{}); err == nil {
		t.Error("OpenCAFile of a missing file succeeded")
	}
	empty := filepath.Join(t.TempDir(), "empty.pem")
	authtest.WriteFile(t, empty, []byte("not a certificate\n"))
	if _, err := auth.OpenCAFile(empty, auth.FileOptions{}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("OpenCAFile of a file without a certificate: %v", err)
	}
}

// TestClientCARotated: a CA added to the client CA file is trusted at the
// next handshake without a restart, and one removed no longer is; a file
// broken meanwhile keeps the last good CAs.
func TestClientCARotated(t *testing.T) {
	s := startGRPC(t)
	other := authtest.NewCA(t, "next CA")
	cert := other.Client(t, "fetcher-2")
	attempt := func() codes.Code {
		return call(dial(t, s.addr, s.ca.ClientTLS(t, cert)), authtest.Bearer(t, ""), auth.Crawl)
	}
	// Go's client sends no certificate of a CA the server does not name
	// in its request: the call comes without a credential.
	if got := attempt(); got != codes.Unauthenticated {
		t.Fatalf("a certificate of a CA not yet trusted: %v, want UNAUTHENTICATED", got)
	}
	first, err := os.ReadFile(s.ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	next, err := os.ReadFile(other.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	rotate := func(contents []byte) {
		authtest.WriteFile(t, s.clientCA+".new", contents)
		if err := os.Rename(s.clientCA+".new", s.clientCA); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(want codes.Code, what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for attempt() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: never %v", what, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	rotate(append(append([]byte{}, first...), next...))
	waitFor(codes.OK, "the next CA added")
	rotate([]byte("-----BEGIN garbage"))
	time.Sleep(100 * time.Millisecond) // ten reload intervals
	if got := attempt(); got != codes.OK {
		t.Fatalf("a broken client CA file: %v, want the last good CAs kept (OK)", got)
	}
	rotate(first)
	waitFor(codes.Unauthenticated, "the next CA removed")
}

// TestGRPCRefusesBeforeReading pins issue 39's item 7: a call was
// authorized by the interceptors, after grpc had read and decoded its
// message, so an anonymous 20 MiB call was answered RESOURCE_EXHAUSTED
// (160 of 15 MiB took a server from 143 to 367 MB) and 8 MiB of metadata
// was read. Calls are now refused before any message is read, and
// metadata beyond auth.MaxMetadataBytes is refused.
func TestGRPCRefusesBeforeReading(t *testing.T) {
	s := startGRPC(t)
	c := dial(t, s.addr, s.ca.ClientTLS(t, authtest.Pair{}))
	check := func(ctx context.Context, service string) codes.Code {
		_, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		return status.Code(err)
	}
	huge := strings.Repeat("u", 20<<20) // beyond grpc's 4 MiB a message
	pad := func(ctx context.Context, n int) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "x-pad", strings.Repeat("p", n))
	}
	tests := []struct {
		name string
		ctx  context.Context
		msg  string
		want codes.Code
	}{
		{"anonymous, 20 MiB message", authtest.Bearer(t, ""), huge, codes.Unauthenticated},
		{"unknown token, 20 MiB message", authtest.Bearer(t, "no-such-token-0123456789"), huge, codes.Unauthenticated},
		{"read token, 20 MiB message (as before)", authtest.Bearer(t, readToken), huge, codes.ResourceExhausted},
		{"read token, 1 KiB of metadata", pad(authtest.Bearer(t, readToken), 1<<10), "", codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := check(tt.ctx, tt.msg); got != tt.want {
				t.Fatalf("Check = %v, want %v", got, tt.want)
			}
		})
	}
	// grpc-go's client honours the server's SETTINGS_MAX_HEADER_LIST_SIZE
	// and refuses to send more; before, the server took 8 MiB.
	if got := check(pad(authtest.Bearer(t, adminToken), 8<<20), ""); got == codes.OK {
		t.Errorf("8 MiB of metadata with an admin token: OK, want it refused (metadata beyond %d bytes)", auth.MaxMetadataBytes)
	}
	// A client that sends them anyway, on HTTP/2 frames of its own: the
	// server answered them (grpc-status 0) before; now it resets the
	// stream or closes the connection (grpc's framer, as it reads).
	cfg := s.ca.ClientTLS(t, authtest.Pair{})
	cfg.NextProtos = []string{"h2"}
	many := make([][2]string, 1024)
	for i := range many {
		many[i] = [2]string{fmt.Sprintf("x-pad-%d", i), strings.Repeat("p", 8<<10)}
	}
	raw := []struct {
		name string
		md   [][2]string
		want string // "grpc-status 0", or "refused": any other answer
	}{
		{"one value of 8 MiB", [][2]string{{"x-pad", strings.Repeat("p", 8<<20)}}, "refused"},
		{"1024 values of 8 KiB", many, "refused"},
		{"1 KiB (as before)", [][2]string{{"x-pad", strings.Repeat("p", 1<<10)}}, "grpc-status 0"},
	}
	for _, tt := range raw {
		t.Run("raw HTTP/2, admin token, "+tt.name, func(t *testing.T) {
			answer := rawCall(t, s.addr, cfg, healthpb.Health_Check_FullMethodName, adminToken, tt.md)
			got := answer
			if !strings.HasPrefix(answer, "grpc-status") {
				got = "refused"
			}
			if got != tt.want {
				t.Fatalf("the server's answer: %s, want %s", answer, tt.want)
			}
			t.Logf("the server's answer: %s", answer)
		})
	}
	if got := check(authtest.Bearer(t, readToken), ""); got != codes.OK {
		t.Fatalf("a good call after them: %v", got)
	}
}

// rawCall makes a unary call of method with an empty message and the
// metadata md on HTTP/2 frames written by hand over TLS, as a client that
// ignores the server's SETTINGS_MAX_HEADER_LIST_SIZE would, and returns
// how the server answered: "grpc-status N", "RST_STREAM CODE", "GOAWAY
// CODE" or "closed" (the connection, without a word).
func rawCall(t *testing.T, addr string, cfg *tls.Config, method, token string, md [][2]string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	fields := append([][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", method}, {":authority", "localhost"},
		{"content-type", "application/grpc"}, {"te", "trailers"}, {"authorization", "Bearer " + token}}, md...)
	for _, f := range fields {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	// Written beside the reading: a server that stops reading must not
	// block the test.
	go func() {
		const frame = 16 << 10 // HTTP/2's default SETTINGS_MAX_FRAME_SIZE
		b := block.Bytes()
		first := b[:min(frame, len(b))]
		b = b[len(first):]
		if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndHeaders: len(b) == 0}) != nil {
			return
		}
		for len(b) > 0 {
			chunk := b[:min(frame, len(b))]
			b = b[len(chunk):]
			if fr.WriteContinuation(1, len(b) == 0, chunk) != nil {
				return
			}
		}
		fr.WriteData(1, true, []byte{0, 0, 0, 0, 0}) // an empty message
	}()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return "closed"
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			return "RST_STREAM " + f.ErrCode.String()
		case *http2.MetaHeadersFrame:
			for _, h := range f.RegularFields() {
				if h.Name == "grpc-status" {
					return "grpc-status " + h.Value
				}
			}
		case *http2.GoAwayFrame:
			return "GOAWAY " + f.ErrCode.String()
		}
	}
}

// TestGRPCStreamEndsWithItsToken pins issue 39's item 11: a stream was
// authorized when it opened only, so a token removed from the tokens file
// kept its open streams for as long as the client held them. A stream
// that came with a token now ends UNAUTHENTICATED once the file without
// it is read (every 10 ms here), and one whose token's role no longer
// allows the call ends PERMISSION_DENIED; the streams of other tokens and
// of a client certificate go on.
func TestGRPCStreamEndsWithItsToken(t *testing.T) {
	t.Cleanup(leaktest.Check(t)) // the streams' watchers end with them
	s := startGRPC(t)
	plain := dial(t, s.addr, s.ca.ClientTLS(t, authtest.Pair{}))
	withCert := dial(t, s.addr, s.ca.ClientTLS(t, s.ca.Client(t, "fetcher-2")))
	type stream = grpc.ServerStreamingClient[healthpb.HealthCheckResponse]
	watch := func(c healthpb.HealthClient, token string) stream {
		t.Helper()
		w, err := c.Watch(authtest.Bearer(t, token), &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Recv(); err != nil { // the current status
			t.Fatal(err)
		}
		return w
	}
	// ended returns the code a stream ends with, or fails the test after
	// 5 s (500 reload intervals).
	ended := func(w stream) codes.Code {
		t.Helper()
		errc := make(chan error, 1)
		go func() {
			for {
				if _, err := w.Recv(); err != nil {
					errc <- err
					return
				}
			}
		}()
		select {
		case err := <-errc:
			return status.Code(err)
		case <-time.After(5 * time.Second):
			t.Fatal("the stream did not end within 5s of the tokens file's change")
			return codes.OK
		}
	}
	// goesOn checks that each stream gets the next status update.
	serving := healthpb.HealthCheckResponse_SERVING
	goesOn := func(what string, ws ...stream) {
		t.Helper()
		serving = 4 - serving // SERVING (1) and NOT_SERVING (3) in turn
		s.health.SetServingStatus("", serving)
		for _, w := range ws {
			if r, err := w.Recv(); err != nil || r.GetStatus() != serving {
				t.Fatalf("%s: Recv = %v, %v; want the status %v", what, r, err, serving)
			}
		}
	}
	removed, lowered, byCert := watch(plain, crawlToken), watch(plain, adminToken), watch(withCert, "")

	authtest.WriteFile(t, s.tokens, []byte(strings.Replace(tokensFile, crawlToken, "# removed", 1)))
	if got := ended(removed); got != codes.Unauthenticated {
		t.Fatalf("the stream of the token removed ended %v, want UNAUTHENTICATED", got)
	}
	goesOn("after the crawl token was removed", lowered, byCert)

	lowerAdmin := strings.Replace(strings.Replace(tokensFile, crawlToken, "# removed", 1), "ops,admin", "ops,read", 1)
	authtest.WriteFile(t, s.tokens, []byte(lowerAdmin))
	if got := ended(lowered); got != codes.PermissionDenied {
		t.Fatalf("the stream of the token lowered to read ended %v, want PERMISSION_DENIED", got)
	}
	goesOn("after the admin token was lowered", byCert)
	if got := call(plain, authtest.Bearer(t, adminToken), auth.Read); got != codes.OK {
		t.Fatalf("a read call with the token lowered to read: %v", got)
	}
}
