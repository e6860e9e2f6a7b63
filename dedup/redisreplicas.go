package dedup

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated is wrapped by ReplicaWait.Wait's error when fewer
// replicas than asked acknowledged the writes in time.
var ErrNotReplicated = errors.New("dedup: writes not on enough redis replicas")

// ReplicaWait waits until a Redis master's replicas hold what it
// acknowledged, so that a failover to one of them forgets no mark.
//
// Redis replicates asynchronously: a master answers a write before any
// replica has it, and if it dies then, the replica promoted in its place
// never had the write. For a filter that is a mark lost: a URL on the
// frontier that the filter no longer holds, admitted again the next time a
// page links to it after the duplicate window. WAIT n timeout blocks until n
// replicas acknowledged every write the calling connection made before it.
// Wait therefore sends, on one connection to each master (a pipeline), a
// small write of its own (SET of a key in a slot the master serves,
// expiring after a minute) followed by WAIT: the replication stream is one
// ordered log per master, so once the replicas hold that write they hold
// every write the master acknowledged before it, marks from any
// connection included. With a Redis Cluster every master is waited on, in
// parallel. It is safe for concurrent use.
type ReplicaWait struct {
	c        redis.UniversalClient
	replicas int
	timeout  time.Duration
	keys     sync.Map // master address → a key in one of its slots
}

// NewReplicaWait returns a ReplicaWait for the client's masters, asking for
// replicas acknowledgements within timeout each time.
func NewReplicaWait(c redis.UniversalClient, replicas int, timeout time.Duration) *ReplicaWait {
	return &ReplicaWait{c: c, replicas: replicas, timeout: timeout}
}

// Wait returns nil once, on every master, replicas replicas acknowledged
// everything the master acknowledged before the call; an error wrapping
// ErrNotReplicated if some master had fewer within the timeout (or no
// replica at all: it waits the timeout), or the error of the call.
func (w *ReplicaWait) Wait(ctx context.Context) error {
	switch c := w.c.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			key, err := w.keyOn(ctx, c, node.Options().Addr)
			if err != nil {
				return err
			}
			return w.waitOn(ctx, node, key)
		})
	case *redis.Client:
		return w.waitOn(ctx, c, "sieve:wait")
	default:
		return fmt.Errorf("dedup: wait for replicas: unsupported client %T", w.c)
	}
}

func (w *ReplicaWait) waitOn(ctx context.Context, node *redis.Client, key string) error {
	var wait *redis.Cmd
	_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, key, "1", time.Minute)
		// The reply comes after the timeout at worst: the client's read
		// timeout must be longer (config checks redis.timeout).
		wait = p.Do(ctx, "wait", w.replicas, w.timeout.Milliseconds())
		return nil
	})
	addr := node.Options().Addr
	if err != nil {
		w.keys.Delete(addr) // the slot may have moved
		return fmt.Errorf("dedup: wait for replicas of %s: %w", addr, err)
	}
	got, err := wait.Int64()
	if err != nil {
		return fmt.Errorf("dedup: wait for replicas of %s: %w", addr, err)
	}
	if got < int64(w.replicas) {
		return &ReplicaError{Addr: addr, Got: int(got), Want: w.replicas, Timeout: w.timeout}
	}
	return nil
}

// ReplicaError is ReplicaWait.Wait's error when a master had fewer
// replicas acknowledge its writes than asked, within the timeout. It
// matches ErrNotReplicated.
type ReplicaError struct {
	Addr      string        // the master
	Got, Want int           // replicas that acknowledged, replicas asked
	Timeout   time.Duration // how long WAIT waited
}

func (e *ReplicaError) Error() string {
	return fmt.Sprintf("%v: %d of %d replicas of %s acknowledged within %v", ErrNotReplicated, e.Got, e.Want, e.Addr, e.Timeout)
}

// Unwrap returns ErrNotReplicated.
func (e *ReplicaError) Unwrap() error { return ErrNotReplicated }

// Cause says in a few words what holds the writes: "redis WAIT 0/1
// replicas".
func (e *ReplicaError) Cause() string {
	return fmt.Sprintf("redis WAIT %d/%d replicas", e.Got, e.Want)
}

// keyOn returns a key that the master at addr serves: the first
// sieve:wait:{i} whose slot is the master's, by the client's slot map.
func (w *ReplicaWait) keyOn(ctx context.Context, c *redis.ClusterClient, addr string) (string, error) {
	if k, ok := w.keys.Load(addr); ok {
		return k.(string), nil
	}
	for i := 0; i < 1<<16; i++ {
		key := "sieve:wait:{" + strconv.Itoa(i) + "}"
		m, err := c.MasterForKey(ctx, key)
		if err != nil {
			return "", fmt.Errorf("dedup: wait for replicas: %w", err)
		}
		if m.Options().Addr == addr {
			w.keys.Store(addr, key)
			return key, nil
		}
	}
	return "", fmt.Errorf("dedup: wait for replicas: no key served by %s", addr)
}
