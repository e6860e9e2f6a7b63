package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/auth/authtest"
	"github.com/sievecrawl/sieve/dust"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/redistest"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// TestServeLearnedRules: serve, embedded and deployed, admits what its
// clients put by the crawls' learned rules (issue 37, item 4). A crawl
// whose crawlers learned, before serve started, that h.example's zsid does
// not matter gets one of two spellings of a page; a crawl without rules
// gets both.
func TestServeLearnedRules(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve")
	}
	zsid := dust.HostRules{Host: "h.example", Revision: 1, Rules: []dust.Learned{
		{Rule: dust.Rule{Kind: dust.KindParam, Arg: "zsid"}, State: dust.Active}}}
	putRule := func(t *testing.T, js jetstream.JetStream) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := frontier.OpenRules(ctx, js, frontier.Topology{})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Put(ctx, "c1", zsid); err != nil {
			t.Fatal(err)
		}
	}
	modes := []struct {
		name  string
		setup func(t *testing.T, dir string) []string // serve's arguments
	}{
		{"embedded", func(t *testing.T, dir string) []string {
			args := []string{"--embedded", "--data-dir", dir}
			js, closeDir, err := openDataDir(loadSettings(t, args...), "sieve-test", true)
			if err != nil {
				t.Fatal(err)
			}
			putRule(t, js)
			closeDir()
			return args
		}},
		{"deployed", func(t *testing.T, dir string) []string {
			ns := natstest.Start(t, natstest.Options{})
			rs := redistest.Start(t, redistest.Options{})
			putRule(t, ns.JetStream())
			return []string{"--nats-url", ns.URL(), "--redis-url", rs.URL(), "--data-dir", dir}
		}},
	}
	const (
		a = "https://h.example/p?id=1&zsid=a"
		b = "https://h.example/p?id=1&zsid=b"
	)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			args := m.setup(t, t.TempDir())
			c := pb.NewURLFrontierClient(authtest.Dial(t, startServe(t, args...), nil))
			cases := []struct {
				crawl, url string
				want       pb.AckMessage_Status
			}{
				{"c1", a, pb.AckMessage_OK},
				{"c1", b, pb.AckMessage_SKIPPED}, // a's page under c1's rule
				{"c2", a, pb.AckMessage_OK},
				{"c2", b, pb.AckMessage_OK}, // c2 learned nothing
			}
			for _, tc := range cases {
				if got := putOne(t, c, tc.crawl, tc.url); got != tc.want {
					t.Errorf("PutURLs(%s, %q) = %v, want %v", tc.crawl, tc.url, got, tc.want)
				}
			}
		})
	}
}

// startServe runs `crawler serve` with args (and a loopback API, no
// delay, the watch page on a free port) in this process until the test ends, and returns
// the API's address.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--urlfrontier-addr", "127.0.0.1:0", "--urlfrontier-default-delay", "0s", "--http-addr", "127.0.0.1:0"}, args...), io.Discard, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop within 30s of its context")
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case code := <-done:
			t.Fatalf("serve exited with %d: %s", code, stderr.String())
		default:
		}
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not listen within 30s: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// putOne puts one discovered URL of crawl on its own PutURLs stream and
// returns its status.
func putOne(t *testing.T, c pb.URLFrontierClient, crawl, url string) pb.AckMessage_Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := c.PutURLs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	item := &pb.URLItem{Item: &pb.URLItem_Discovered{Discovered: &pb.DiscoveredURLItem{Info: &pb.URLInfo{Url: url, CrawlID: crawl}}}}
	if err := st.Send(item); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	ack, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return ack.GetStatus()
}
