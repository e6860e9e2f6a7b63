package redistest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/redistest"
)

func TestServerAOFSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t, redistest.Options{AOF: true})
	c := s.Client()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill() // a crash, not a clean shutdown: only the AOF keeps the write
	s.StartAgain()
	got, err := c.Get(ctx, "k").Result()
	if err != nil || got != "v" {
		t.Fatalf("GET k after restart = %q, %v; want \"v\"", got, err)
	}
}

func TestClusterSpreadsSlots(t *testing.T) {
	ctx := context.Background()
	cl := redistest.StartCluster(t, 3)
	c := cl.Client()
	for i := 0; i < 100; i++ {
		if err := c.Set(ctx, fmt.Sprintf("key-%d", i), i, 0).Err(); err != nil {
			t.Fatalf("SET on cluster: %v", err)
		}
	}
	// Every master must own some of the keys: the slots are really split.
	for _, s := range cl.Servers {
		n, err := s.Client().DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Errorf("master %s holds no keys; slots not spread", s.Addr)
		}
	}
}

func TestPauseFreezesTheServer(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	s.Pause()
	var ne net.Error
	if err := c.Ping(ctx).Err(); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("PING to a paused server = %v, want a timeout", err)
	}
	s.Resume()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("PING after Resume = %v", err)
	}
	s.Pause()
	s.Stop() // a paused server still stops
}
