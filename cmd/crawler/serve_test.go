package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

var (
	listening = regexp.MustCompile(`urlfrontier listening on (\S+)`)
	watchAt   = regexp.MustCompile(`watch it at (\S+)`)
)

// TestServeEmbedded boots `crawler serve --embedded` in this process, puts
// and gets URLs over gRPC, and stops it with its context.
func TestServeEmbedded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--embedded", "--data-dir", t.TempDir(), "--urlfrontier-addr", "127.0.0.1:0",
			"--urlfrontier-default-delay", "0s", "--http-addr", "127.0.0.1:0"}, io.Discard, &stderr)
	}()
	var addr string
	deadline := time.Now().Add(30 * time.Second)
	for addr == "" {
		select {
		case code := <-done:
			t.Fatalf("serve exited with %d: %s", code, stderr.String())
		default:
		}
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("serve did not listen within 30s: %s", stderr.String())
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewURLFrontierClient(conn)
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	b, err := c.PutDiscovered(cctx)
	if err != nil {
		t.Fatal(err)
	}
	urls := []*pb.URLInfo{{Url: "https://example.com/"}, {Url: "https://example.com/a"}, {Url: "https://EXAMPLE.com:443/"}}
	if err := b.Send(&pb.DiscoveredBatch{ID: "page", Items: urls}); err != nil {
		t.Fatal(err)
	}
	ack, err := b.Recv()
	if err != nil {
		t.Fatal(err)
	}
	want := []pb.AckMessage_Status{pb.AckMessage_OK, pb.AckMessage_OK, pb.AckMessage_SKIPPED}
	if ack.GetID() != "page" || len(ack.GetStatuses()) != 3 || ack.GetStatuses()[2] != want[2] || ack.GetStatuses()[0] != want[0] {
		t.Fatalf("BatchAck = %v, want ID page, %v", ack, want)
	}
	b.CloseSend()
	g, err := c.GetURLs(cctx, &pb.GetParams{Item: &pb.GetParams_AnyCrawlID{AnyCrawlID: &pb.AnyCrawlID{}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		u, err := g.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, u.GetUrl())
	}
	if len(got) != 2 {
		t.Fatalf("GetURLs = %v, want the 2 URLs put", got)
	}
	// /metrics counts the calls by RPC and status.
	page := watchAt.FindStringSubmatch(stderr.String())
	if page == nil {
		t.Fatalf("no watch page announced: %s", stderr.String())
	}
	resp, err := http.Get(strings.TrimSuffix(page[1], "/") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`sieve_urlfrontier_calls_total{code="OK",rpc="PutDiscovered"} 1`, `sieve_urlfrontier_call_seconds_count{rpc="GetURLs"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited with %d: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30s of its context")
	}
}

// TestServeNeedsRedisOrEmbedded: serve against a deployment shares the
// crawls' filters in Redis; without one it refuses to start.
func TestServeNeedsRedisOrEmbedded(t *testing.T) {
	code, _, stderr := runCLI(t, context.Background(), "serve", "--nats-url", "nats://127.0.0.1:1")
	if code != 2 || !strings.Contains(stderr, "redis.url") {
		t.Fatalf("serve without redis: exit %d, %q", code, stderr)
	}
}
