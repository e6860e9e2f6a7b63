package crawl

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
)

// Frontier partitions are owned through leases in a NATS key-value bucket
// (<PREFIX>_CRAWLERS), so that one host (one partition) is crawled by one
// crawler at a time:
//
//   - every crawler keeps a key member.<id> alive (rewritten every TTL/3; the
//     bucket's TTL removes the keys of a crawler that died);
//   - a crawler owns partition p while it holds the key partition.<p>, taken
//     with an atomic create and renewed with compare-and-set on its revision;
//   - each crawler aims at ⌈partitions / members⌉ partitions: it takes free
//     ones up to that share, and gives back the ones above it (after the
//     messages in hand are done), so a crawler that joins gets work and one
//     that leaves or dies has its partitions taken over within a TTL;
//   - a crawler that fails to renew a lease stops fetching from that
//     partition at once.
//
// A message fetched by a crawler that then dies is redelivered by JetStream
// after the consumer's AckWait to the partition's next owner.

// leaseTable is one crawler's view of the partition leases. It is used by the
// crawler's lease goroutine only.
type leaseTable struct {
	kv         jetstream.KeyValue
	topo       frontier.Topology
	id         string
	partitions int
	owned      map[int]uint64 // partition → revision of our lease key
}

func openLeases(ctx context.Context, js jetstream.JetStream, topo frontier.Topology, ttl time.Duration, id string) (*leaseTable, error) {
	topo = topo.WithDefaults()
	kv, err := frontier.Provision(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      topo.LeaseBucket(),
			Description: "Sieve: live crawlers and the frontier partitions each owns",
			History:     1,
			TTL:         ttl,
			Storage:     jetstream.MemoryStorage,
			Replicas:    topo.Replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("crawl: lease bucket: %w", err)
	}
	return &leaseTable{kv: kv, topo: topo, id: id, partitions: topo.Partitions, owned: map[int]uint64{}}, nil
}

// heartbeat rewrites our member key and returns how many crawlers are alive.
func (l *leaseTable) heartbeat(ctx context.Context) (int, error) {
	if _, err := l.kv.Put(ctx, l.topo.MemberKey(l.id), []byte(time.Now().UTC().Format(time.RFC3339))); err != nil {
		return 0, fmt.Errorf("crawl: heartbeat: %w", err)
	}
	lister, err := l.kv.ListKeysFiltered(ctx, l.topo.MemberKeys())
	if err != nil {
		return 0, fmt.Errorf("crawl: list members: %w", err)
	}
	n := 0
	for range lister.Keys() { // closed after the last key; the lister stops itself
		n++
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return max(n, 1), nil
}

// renew extends every lease held and returns the partitions lost (someone
// else holds the key, or it expired and was taken).
func (l *leaseTable) renew(ctx context.Context) (lost []int, err error) {
	for p, rev := range l.owned {
		newRev, uerr := l.kv.Update(ctx, l.topo.LeaseKey(p), []byte(l.id), rev)
		switch {
		case uerr == nil:
			l.owned[p] = newRev
		case errors.Is(uerr, jetstream.ErrKeyExists), errors.Is(uerr, jetstream.ErrKeyNotFound), frontier.IsWrongSequence(uerr):
			delete(l.owned, p)
			lost = append(lost, p)
		default:
			err = errors.Join(err, fmt.Errorf("crawl: renew lease %d: %w", p, uerr))
		}
	}
	return lost, err
}

// claim takes free partitions until we hold want of them, starting at an
// offset derived from our id so that crawlers starting together collide
// little. It returns the partitions taken.
func (l *leaseTable) claim(ctx context.Context, want int) ([]int, error) {
	var got []int
	h := fnv.New32a()
	h.Write([]byte(l.id))
	start := int(h.Sum32() % uint32(l.partitions))
	for i := 0; i < l.partitions && len(l.owned) < want; i++ {
		p := (start + i) % l.partitions
		if _, ok := l.owned[p]; ok {
			continue
		}
		rev, err := l.kv.Create(ctx, l.topo.LeaseKey(p), []byte(l.id))
		if errors.Is(err, jetstream.ErrKeyExists) || frontier.IsWrongSequence(err) {
			continue
		}
		if err != nil {
			return got, fmt.Errorf("crawl: claim partition %d: %w", p, err)
		}
		l.owned[p] = rev
		got = append(got, p)
	}
	return got, nil
}

// release gives partition p back.
func (l *leaseTable) release(ctx context.Context, p int) error {
	rev, ok := l.owned[p]
	if !ok {
		return nil
	}
	delete(l.owned, p)
	err := l.kv.Delete(ctx, l.topo.LeaseKey(p), jetstream.LastRevision(rev))
	if err != nil && !frontier.IsWrongSequence(err) {
		return fmt.Errorf("crawl: release partition %d: %w", p, err)
	}
	return nil
}

// leave gives back every partition and removes our member key.
func (l *leaseTable) leave(ctx context.Context) error {
	var errs []error
	for p := range l.owned {
		errs = append(errs, l.release(ctx, p))
	}
	if err := l.kv.Delete(ctx, l.topo.MemberKey(l.id)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// share is how many partitions each of n crawlers should own.
func share(partitions, n int) int { return (partitions + n - 1) / n }
