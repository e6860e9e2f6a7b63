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
	e.Kill()
	e.Kill() // idempotent
}

// TestClusterMovesLeaderAndKeepsMessages checks the cluster harness: a
// stream with 3 replicas keeps every message and elects another leader
// when its leader is shut down, and the node, started again, catches up.
func TestClusterMovesLeaderAndKeepsMessages(t *testing.T) {
	c := natstest.StartCluster(t, 3, natstest.Options{})
	js := c.JetStream(0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := js.Publish(ctx, "r3.a", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	leader, err := c.Leader(ctx, js, "R3")
	if err != nil {
		t.Fatal(err)
	}
	c.Servers[leader].Shutdown()
	// Ask through a node that is still up.
	other := c.JetStream((leader + 1) % 3)
	var next int
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second) // a request in an election may get no answer
		next, err = c.Leader(actx, other, "R3")
		acancel()
		if err == nil && next != leader {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no new leader after %s's death: %v", c.Servers[leader].Name(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s, err := other.Stream(ctx, "R3")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 10 {
		t.Errorf("stream holds %d messages after its leader's death, want 10", info.State.Msgs)
	}
	c.Servers[leader].StartAgain()
	c.WaitReady()
	if !c.Servers[leader].Running() {
		t.Errorf("%s not running after StartAgain", c.Servers[leader].Name())
	}
}

// TestProcessCluster checks the process cluster harness on go.mod's
// nats-server, built: a node killed with SIGKILL and started again comes
// back with its name and its replica of an R3 stream, current, and its
// server reports the version the tests embed.
func TestProcessCluster(t *testing.T) {
	c := natstest.StartProcessCluster(t, natstest.ModuleBinary(t), 3)
	if v := c.Nodes[0].Version; v != natstest.ModuleVersion() {
		t.Errorf("the built server is %s, the embedded one %s", v, natstest.ModuleVersion())
	}
	js := c.JetStream(0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	meta, err := c.MetaLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := c.Nodes[(meta+1)%3]
	n.Kill()
	if n.Running() {
		t.Fatal("Running() = true after Kill")
	}
	// The node killed may have led R3: until its peers elect another
	// leader the publish has no answer, so it is sent again, with a
	// message ID so that a retry whose first try was stored adds nothing.
	for {
		_, err := js.Publish(ctx, "r3.a", []byte("while it was away"), jetstream.WithMsgID("away"))
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.StartAgain()
	for {
		info, err := n.Jsz(ctx)
		if err == nil && len(info.AccountDetails) == 1 && len(info.AccountDetails[0].Streams) == 1 {
			if sd := info.AccountDetails[0].Streams[0]; sd.Name == "R3" && sd.State.Msgs == 1 {
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%s after its restart: jsz %v, %v; want its replica of R3 with the message sent while it was away\n%s", n.Name(), info, err, n.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
