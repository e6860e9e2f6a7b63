package natstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/natstest"
)

func TestRestartKeepsStreams(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	js := srv.JetStream()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	if _, err := js.Publish(ctx, "t.a", []byte("before")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	port := srv.Port()

	srv.Shutdown()
	if srv.Running() {
		t.Fatal("Running() = true after Shutdown")
	}
	srv.StartAgain()
	if srv.Port() != port {
		t.Fatalf("port after restart = %d, want %d", srv.Port(), port)
	}

	// The old client reconnects by itself and sees the stream's message.
	var got string
	for deadline := time.Now().Add(10 * time.Second); ; {
		stream, err := js.Stream(ctx, "T")
		var msg *jetstream.RawStreamMsg
		if err == nil {
			msg, err = stream.GetLastMsgForSubject(ctx, "t.a")
		}
		if err == nil {
			got = string(msg.Data)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("get message after restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got != "before" {
		t.Fatalf("message after restart = %q, want %q", got, "before")
	}
}

func TestExternalServer(t *testing.T) {
	e := natstest.StartExternal(t, natstest.ExternalBinary(t))
	nc, err := nats.Connect(e.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := nc.ConnectedServerVersion(); got != e.Version {
		t.Errorf("server reports version %q, the binary said %q", got, e.Version)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Errorf("JetStream on the external server: %v", err)
	}
	e.Stop()
	e.Stop() // idempotent
}
