package crawl

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// recorder wraps connections and keeps every byte written and read on them,
// as a WARC writer would.
type recorder struct {
	mu    sync.Mutex
	conns int
	sent  bytes.Buffer
	got   bytes.Buffer
}

func (r *recorder) wrap(c net.Conn) net.Conn {
	r.mu.Lock()
	r.conns++
	r.mu.Unlock()
	return &recordedConn{Conn: c, r: r}
}

func (r *recorder) bytes() (sent, got string, conns int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent.String(), r.got.String(), r.conns
}

type recordedConn struct {
	net.Conn
	r *recorder
}

func (c *recordedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.r.mu.Lock()
	c.r.got.Write(p[:n])
	c.r.mu.Unlock()
	return n, err
}

func (c *recordedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.r.mu.Lock()
	c.r.sent.Write(p[:n])
	c.r.mu.Unlock()
	return n, err
}

// protoSeen is a RoundTripper middleware noting each exchange's URL and
// protocol, as metrics middleware would.
type protoSeen struct {
	mu     sync.Mutex
	protos []string
}

func (p *protoSeen) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err == nil {
			p.mu.Lock()
			p.protos = append(p.protos, req.URL.Path+" "+resp.Proto)
			p.mu.Unlock()
		}
		return resp, err
	})
}

func (p *protoSeen) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.protos...)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestFetchTransportSeam checks the fetch transport as a seam (issue 17 item
// 4): net/http makes the exchange, RoundTripper middleware sees every request
// (robots.txt included) and connection wrappers see the bytes as they cross
// the wire; with a wrapper, an HTTP/2 server is spoken to in HTTP/1.1, whose
// bytes are the exchange; colly still finds the links.
func TestFetchTransportSeam(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "User-agent: *\nAllow: /\n") })
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><body><a href="/a">a</a> <a href="b">b</a></body></html>`)
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	for _, tc := range []struct {
		name      string
		record    bool
		wantProto string
	}{
		{"middleware only: HTTP/2 as the server offers", false, "HTTP/2.0"},
		{"recording: HTTP/1.1 on the wire", true, "HTTP/1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			var ps protoSeen
			opts := FetcherOptions{
				TLSConfig:      &tls.Config{RootCAs: roots},
				AllowAddresses: []string{"127.0.0.1"},
				RoundTrippers:  []func(http.RoundTripper) http.RoundTripper{ps.wrap},
			}
			if tc.record {
				opts.WrapConn = rec.wrap
			}
			f, err := NewFetcher(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			page, err := f.Fetch(t.Context(), srv.URL+"/")
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{srv.URL + "/a", srv.URL + "/b"}; strings.Join(page.Links, " ") != strings.Join(want, " ") {
				t.Errorf("links = %q, want %q", page.Links, want)
			}
			want := []string{"/robots.txt " + tc.wantProto, "/ " + tc.wantProto}
			if got := ps.seen(); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("middleware saw %q, want %q", got, want)
			}
			sent, got, conns := rec.bytes()
			if !tc.record {
				if conns != 0 {
					t.Errorf("%d connections wrapped without a wrapper", conns)
				}
				return
			}
			for _, w := range []string{"GET /robots.txt HTTP/1.1\r\n", "GET / HTTP/1.1\r\n", "User-Agent: " + DefaultUserAgent + "\r\n"} {
				if !strings.Contains(sent, w) {
					t.Errorf("recorded request bytes lack %q:\n%s", w, sent)
				}
			}
			if !strings.HasPrefix(got, "HTTP/1.1 200 OK\r\n") || !strings.Contains(got, `<a href="/a">`) {
				t.Errorf("recorded response bytes are not the HTTP/1.1 exchange:\n%s", got)
			}
		})
	}
}

// TestWrapConnKeepsGuard checks that wrapping connections does not get
// around the address guard: a loopback address is still refused, before
// any connection reaches the wrapper.
func TestWrapConnKeepsGuard(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	var rec recorder
	f, err := NewFetcher(FetcherOptions{WrapConn: rec.wrap, IgnoreRobots: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = f.Fetch(t.Context(), srv.URL+"/")
	var fe *FetchError
	if !errors.As(err, &fe) || fe.Reason != ReasonForbiddenAddress {
		t.Fatalf("Fetch(%s) = %v, want reason %s", srv.URL, err, ReasonForbiddenAddress)
	}
	if _, _, conns := rec.bytes(); conns != 0 {
		t.Errorf("%d connections to a forbidden address reached the wrapper", conns)
	}
}
