// Package jspull waits for one JetStream message without ever losing one.
//
// A pull request has two clocks: the server's, which answers 408 when the
// request expires, and the client's, which stops listening. When the
// client stops first, a message the server sends in between reaches no
// one and stays pending until the consumer's AckWait. nats.go's
// FetchContext sets the server's expiry 10 % before the context's deadline;
// a request that reaches a loaded server more than that late (10 ms of a
// 100 ms wait) expires after its client stopped, and a message that comes
// then waited a minute: a crawl of 30 pages ran its whole test out.
//
// One therefore lets the server end the wait (FetchMaxWait: the client
// listens a second longer than the expiry), and when the caller's context
// ends first it returns at once and leaves a goroutine to hand back, with
// Nak, whatever the abandoned request still delivers until its expiry.
package jspull

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// One waits up to wait for one message of cons. It returns nil and no
// error when none came in time, and ctx's error, at once, when ctx ends
// first (a message the wait still receives is handed back for redelivery).
func One(ctx context.Context, cons jetstream.Consumer, wait time.Duration) (jetstream.Msg, error) {
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		return nil, err
	}
	select {
	case msg, ok := <-batch.Messages():
		if ok {
			return msg, nil
		}
		return nil, batch.Error()
	case <-ctx.Done():
		go func() {
			for msg := range batch.Messages() {
				_ = msg.Nak()
			}
		}()
		return nil, ctx.Err()
	}
}
