package natstest

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Drained reports whether consumer has acknowledged every message published
// to stream so far: nothing pending or unacknowledged, and its ack floor at
// the stream's last message. The pending counts alone can read 0 just after
// a publish returned, before the consumer has counted the message. Any
// error reads as not drained, so callers poll it with a deadline.
func Drained(js jetstream.JetStream, stream, consumer string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return false
	}
	last := s.CachedInfo().State.LastSeq
	c, err := s.Consumer(ctx, consumer)
	if err != nil {
		return false
	}
	info, err := c.Info(ctx)
	return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream >= last
}
