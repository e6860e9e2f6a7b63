package crawl

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
)

// attempts counts the failed fetch attempts of frontier messages, so that a
// URL failing temporarily is tried at most Options.MaxRetries more times.
// JetStream's delivery count cannot say it: a message whose host's buffer is
// full is handed back to wait for its turn (see Crawler), and each such
// deferral is a delivery too.
//
// The counts live in the key-value bucket <PREFIX>_ATTEMPTS under the
// message's frontier stream sequence, which every redelivery keeps and a URL
// admitted again (a revisit window) does not, so they hold across crawlers
// and restarts; entries expire after a day, far beyond the longest retry
// schedule. Only failures touch the bucket. Safe for concurrent use.
type attempts struct {
	kv jetstream.KeyValue
}

func openAttempts(ctx context.Context, js jetstream.JetStream, topo frontier.Topology) (*attempts, error) {
	topo = topo.WithDefaults()
	kv, err := frontier.Provision(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      topo.AttemptsBucket(),
			Description: "Sieve: failed fetch attempts of each frontier message being retried",
			History:     1,
			TTL:         24 * time.Hour,
			Storage:     topo.Storage,
			Replicas:    topo.Replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("crawl: attempts bucket: %w", err)
	}
	return &attempts{kv: kv}, nil
}

// failed records one more failed attempt of msg and returns how many it has
// had, this one included.
func (a *attempts) failed(ctx context.Context, msg jetstream.Msg) (int, error) {
	md, err := msg.Metadata()
	if err != nil {
		return 0, fmt.Errorf("crawl: frontier message metadata: %w", err)
	}
	key := "s" + strconv.FormatUint(md.Sequence.Stream, 10)
	n := 0
	e, err := a.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
	case err != nil:
		return 0, fmt.Errorf("crawl: attempts of message %d: %w", md.Sequence.Stream, err)
	default:
		n, _ = strconv.Atoi(string(e.Value())) // not ours: start over
	}
	n++
	if _, err := a.kv.Put(ctx, key, []byte(strconv.Itoa(n))); err != nil {
		return 0, fmt.Errorf("crawl: record attempts of message %d: %w", md.Sequence.Stream, err)
	}
	return n, nil
}
