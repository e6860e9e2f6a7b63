package frontier

import (
	"context"
	"errors"
	"time"
)

// provisionTry bounds the first request that creates or updates a
// stream, a consumer or a bucket; each next one waits twice as long, up to
// provisionMaxTry (a loaded cluster may take seconds to answer).
const (
	provisionTry    = 500 * time.Millisecond
	provisionMaxTry = 8 * time.Second
)

// Provision runs create (one request creating or updating a stream, a
// consumer or a key-value bucket) until it answers, asking again after
// 0.5 s, then 1, 2, 4 and 8 s, while ctx lasts. When several processes create one replicated
// stream at once (a deployment's workers and crawlers starting together),
// JetStream answers the first and may leave the others' requests without
// an answer (nats-server#3677): each of them waited out its whole timeout
// (10 s for a worker, twice on a fresh 3-node cluster), where asking
// again finds the stream made. Errors other than a request's own timeout
// are returned at once.
func Provision[T any](ctx context.Context, create func(context.Context) (T, error)) (T, error) {
	for try := provisionTry; ; try = min(2*try, provisionMaxTry) {
		tctx, cancel := context.WithTimeout(ctx, try)
		v, err := create(tctx)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return v, err
		}
	}
}
