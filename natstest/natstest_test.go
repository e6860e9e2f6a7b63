package natstest_test

import (
	"context"
	"testing"
	"time"

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
