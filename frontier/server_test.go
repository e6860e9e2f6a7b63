package frontier_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/stats"
)

// serverTooOld reports whether a nats-server version is older than 2.10.
func serverTooOld(version string) bool {
	var major, minor int
	if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil {
		return true
	}
	return major < 2 || major == 2 && minor < 10
}

// TestCheckServer pins issue 10 item 7: the embedded (current) server
// passes; an installed nats-server binary older than 2.10 (Debian 12 ships
// 2.9.10) is refused with an error naming its version and the minimum.
func TestCheckServer(t *testing.T) {
	current := natstest.Start(t, natstest.Options{})
	if err := frontier.CheckServer(current.Conn()); err != nil {
		t.Errorf("CheckServer(embedded server) = %v, want nil", err)
	}

	old := natstest.StartExternal(t, natstest.ExternalBinary(t))
	nc, err := nats.Connect(old.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	err = frontier.CheckServer(nc)
	if !serverTooOld(old.Version) {
		t.Logf("installed nats-server %s is recent enough: the refusal is not exercised", old.Version)
		if err != nil {
			t.Errorf("CheckServer(nats-server %s) = %v, want nil", old.Version, err)
		}
		return
	}
	var ve *frontier.ServerVersionError
	if !errors.Is(err, frontier.ErrServerTooOld) || !errors.As(err, &ve) {
		t.Fatalf("CheckServer(nats-server %s) = %v, want a ServerVersionError", old.Version, err)
	}
	if msg := err.Error(); !strings.Contains(msg, old.Version) || !strings.Contains(msg, frontier.MinServerVersion) || !strings.Contains(msg, old.URL()) {
		t.Errorf("error %q does not name the version %s, the minimum %s and the server %s", msg, old.Version, frontier.MinServerVersion, old.URL())
	}

	// A worker refuses it at once instead of retrying.
	w, err := frontier.NewWorker(nc, newMemoryFilter(t), newNormalizer(t), stats.NewMemory(), frontier.WorkerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- w.Run(t.Context()) }()
	select {
	case err := <-errc:
		if !errors.Is(err, frontier.ErrServerTooOld) {
			t.Errorf("Worker.Run on nats-server %s = %v, want ErrServerTooOld", old.Version, err)
		}
	case <-time.After(30 * time.Second):
		w.Close()
		t.Fatal("Worker.Run kept running on a server that is too old")
	}
	if err := frontier.CheckServer(nil); !errors.Is(err, frontier.ErrNotConnected) {
		t.Errorf("CheckServer(nil) = %v, want ErrNotConnected", err)
	}
}

// TestWaitingForNATS pins issue 10 item 5 for long-running processes: with
// NATS down at start, WaitServer logs which server it waits for and why
// ("connection refused"), a worker is not ready and its Status says the
// same (so /readyz does), and both carry on once the server is up.
func TestWaitingForNATS(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	addr := strings.TrimPrefix(srv.URL(), "nats://")
	srv.Shutdown()
	nc, err := config.NATS{URL: srv.URL(), ReconnectWait: 50 * time.Millisecond}.Connect("test")
	if err != nil {
		t.Fatalf("Connect with the server down = %v, want a client that keeps trying", err)
	}
	defer nc.Close()
	logs := &logBuffer{}
	waited := make(chan error, 1)
	go func() { waited <- frontier.WaitServer(t.Context(), nc, slog.New(slog.NewTextHandler(logs, nil))) }()
	w, err := frontier.NewWorker(nc, newMemoryFilter(t), newNormalizer(t), stats.NewMemory(), frontier.WorkerOptions{
		BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)

	deadline := time.Now().Add(20 * time.Second)
	for len(logs.lines("waiting for NATS", addr, "connection refused")) == 0 || w.Ready() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no log line naming %s and the cause (%q), or Ready() = %v", addr, logs.lines(""), w.Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Status is what /readyz shows with its 503.
	if msg := w.Status().Dependencies[frontier.DepNATS].Error; !strings.Contains(msg, addr) || !strings.Contains(msg, "connection refused") {
		t.Errorf("nats dependency error %q, want it to name %s and the cause", msg, addr)
	}

	if err := frontier.Connected(nc); !errors.Is(err, frontier.ErrNotConnected) || !strings.Contains(err.Error(), addr) {
		t.Errorf("Connected() = %v, want ErrNotConnected naming %s", err, addr)
	}

	srv.StartAgain()
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("WaitServer after the server came up = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("WaitServer still waiting after the server came up")
	}
	for deadline := time.Now().Add(20 * time.Second); w.Ready() != nil; {
		if time.Now().After(deadline) {
			t.Fatalf("Ready() = %v after the server came up", w.Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := frontier.Connected(nc); err != nil {
		t.Errorf("Connected() = %v once the server is up", err)
	}
	if err := stop(); err != nil {
		t.Errorf("worker stop: %v", err)
	}
}

// TestWaitingForNATSRefused pins issue 39 item 10: a server that answers
// but refuses the client (here: it accepts only NKey users) leaves no dial
// error, and a long-running process used to wait without a reason. Its
// refusal now names the cause in the log, Connected and a worker's Status
// (what /readyz shows).
func TestWaitingForNATSRefused(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := user.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t, natstest.Options{NKeys: []string{pub}})
	nc, err := config.NATS{URL: srv.URL(), ReconnectWait: 50 * time.Millisecond}.Connect("test")
	if err != nil {
		t.Fatalf("Connect to a server that refuses it = %v, want a client that keeps trying", err)
	}
	defer nc.Close()
	logs := &logBuffer{}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	var waitErr atomic.Value // WaitServer's error: the client gives up after repeated refusals
	go func() {
		if err := frontier.WaitServer(ctx, nc, slog.New(slog.NewTextHandler(logs, nil))); err != nil {
			waitErr.Store(err.Error())
		}
	}()
	w, err := frontier.NewWorker(nc, newMemoryFilter(t), newNormalizer(t), stats.NewMemory(), frontier.WorkerOptions{
		BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := frontier.Connected(nc)
		msg := w.Status().Dependencies[frontier.DepNATS].Error
		waited, _ := waitErr.Load().(string)
		said := len(logs.lines("waiting for NATS", "uthorization")) > 0 || strings.Contains(strings.ToLower(waited), "authorization")
		if err != nil && strings.Contains(strings.ToLower(err.Error()), "authorization") &&
			strings.Contains(strings.ToLower(msg), "authorization") && said {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Connected() = %v, nats dependency %q, log %q, WaitServer %q: want each to say the server refused the client (authorization)", err, msg, logs.lines(""), waited)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
