package jspull_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/internal/jspull"
	"github.com/sievecrawl/sieve/natstest"
)

// ackWait is far longer than any test waits: a message lost by a pull
// would come back only after it.
const ackWait = 5 * time.Minute

func setup(t *testing.T) (jetstream.JetStream, jetstream.Consumer) {
	t.Helper()
	js := natstest.Start(t, natstest.Options{}).JetStream()
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"},
		Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateConsumer(ctx, "S", jetstream.ConsumerConfig{Durable: "c",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait})
	if err != nil {
		t.Fatal(err)
	}
	return js, cons
}

func TestOne(t *testing.T) {
	js, cons := setup(t)
	ctx := t.Context()
	for _, tc := range []struct {
		name    string
		publish bool
		cancel  bool
		want    string
		wantErr error
	}{
		{name: "a message waiting", publish: true, want: "m"},
		{name: "none in time"},
		{name: "stopped", cancel: true, wantErr: context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.publish {
				if _, err := js.Publish(ctx, "s", []byte(tc.want)); err != nil {
					t.Fatal(err)
				}
			}
			wctx, cancel := context.WithCancel(ctx)
			if tc.cancel {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			defer cancel()
			const wait = 2 * time.Second
			start := time.Now()
			msg, err := jspull.One(wctx, cons, wait)
			took := time.Since(start)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("One = %v, want %v", err, tc.wantErr)
			}
			got := ""
			if msg != nil {
				got = string(msg.Data())
				_ = msg.Ack()
			}
			if got != tc.want {
				t.Fatalf("One gave %q, want %q", got, tc.want)
			}
			switch {
			case tc.cancel && took > wait/2:
				t.Errorf("stopped after %v: One waited its %v out", took, wait)
			case !tc.cancel && !tc.publish && took < wait:
				t.Errorf("gave up after %v, want its %v", took, wait)
			}
		})
	}
}

// TestOneHandsBackWhatAStoppedWaitGets stops a wait, then publishes while
// the server still holds its request: the message must be the next
// wait's, not pending until the consumer's AckWait.
func TestOneHandsBackWhatAStoppedWaitGets(t *testing.T) {
	js, cons := setup(t)
	ctx := t.Context()
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := jspull.One(wctx, cons, 3*time.Second)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // the request is at the server
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped wait = %v, want %v", err, context.Canceled)
	}
	if _, err := js.Publish(ctx, "s", []byte("late")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		msg, err := jspull.One(ctx, cons, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if msg != nil {
			if got := string(msg.Data()); got != "late" {
				t.Fatalf("got %q, want %q", got, "late")
			}
			return
		}
	}
	t.Fatalf("the message published during a stopped wait did not come back in 10 s (AckWait %v)", ackWait)
}

// TestOneLosesNothing runs short waits, some of them stopped, on several
// goroutines while messages are published at random moments: every message
// must be taken within seconds, none left pending until AckWait. (Ending
// the wait with a context deadline, as nats.go's FetchContext does, lost
// messages here under load.)
func TestOneLosesNothing(t *testing.T) {
	js, cons := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const n, takers = 400, 4
	var mu sync.Mutex
	got := map[string]bool{}
	var wg sync.WaitGroup
	for i := range takers {
		wg.Go(func() {
			for k := 0; ctx.Err() == nil; k++ {
				wctx, stop := context.WithCancel(ctx)
				if (k+i)%3 == 0 {
					time.AfterFunc(time.Duration(k%7)*time.Millisecond, stop)
				}
				msg, _ := jspull.One(wctx, cons, time.Duration(1+k%5)*time.Millisecond)
				stop()
				if msg == nil {
					continue
				}
				_ = msg.Ack()
				mu.Lock()
				got[string(msg.Data())] = true
				all := len(got) == n
				mu.Unlock()
				if all {
					cancel()
				}
			}
		})
	}
	for i := range n {
		// Not ctx: the takers end it once the last message is taken,
		// which may be before its publish is confirmed.
		if _, err := js.Publish(t.Context(), "s", fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(i%4) * 500 * time.Microsecond)
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Fatalf("%d of %d messages taken in 60 s; the rest wait for AckWait (%v)", len(got), n, ackWait)
	}
}
