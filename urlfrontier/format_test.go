package urlfrontier_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/urlfrontier"
	"github.com/sievecrawl/sieve/urlstore"
)

// TestServeFormatGate is a rolling upgrade of serve: a newer build's queue
// state in the log stops a running server of this build (serve exits
// with the versions, and is not left skipping what the newer one wrote),
// and once a newer build has opened the queues' store, this build
// refuses to start, naming both versions.
func TestServeFormatGate(t *testing.T) {
	v := urlfrontier.FormatVersion
	e := newEnv(t)
	n := e.start("a")
	if st := n.put(t, disc("c1", "http://x.test/a", "x.test")); st["http://x.test/a"] != pb.AckMessage_OK {
		t.Fatalf("put: %v", st)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	js, topo := e.nats.JetStream(), frontier.Topology{}
	log, err := frontier.OpenStoreLog(ctx, js, topo, urlfrontier.StoreName)
	if err != nil {
		t.Fatal(err)
	}
	part, b := urlfrontier.NewerQueueState("c1", "y.test")
	if err := urlstore.Append(ctx, log, part, b); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.srv.Stopped():
	case <-ctx.Done():
		t.Fatal("the server went on past a queue state of a newer format")
	}
	if err := n.srv.Err(); !errors.Is(err, urlstore.ErrNewerFormat) || !strings.Contains(err.Error(), fmt.Sprintf("format %d, this build reads up to %d", v+1, v)) {
		t.Fatalf("the server stopped with %v; want ErrNewerFormat naming %d and %d", err, v+1, v)
	}
	t.Logf("stopped: %v", n.srv.Err())

	// A newer build opens the queues' store: its format is recorded.
	snaps, err := frontier.OpenStoreSnapshots(ctx, js, topo, urlfrontier.StoreName)
	if err != nil {
		t.Fatal(err)
	}
	newer, err := urlstore.Open(ctx, t.TempDir(), log, urlstore.Options{Snapshots: snaps,
		Formats: map[string]int{urlfrontier.StoreName: urlfrontier.FormatVersion + 1}})
	if err != nil {
		t.Fatal(err)
	}
	newer.Close()
	_, err = urlfrontier.Open(ctx, e.options(ctx, "b"))
	if !errors.Is(err, urlstore.ErrNewerFormat) || !strings.Contains(err.Error(), fmt.Sprintf("queues format is %d", v+1)) || !strings.Contains(err.Error(), fmt.Sprintf("this build's is %d", v)) {
		t.Fatalf("this build starting after a newer one: %v; want ErrNewerFormat naming %d and %d", err, v+1, v)
	}
	t.Logf("refused: %v", err)
}
