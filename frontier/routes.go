package frontier

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/internal/lograte"
)

// DefaultRouteLeaseTTL is WorkerOptions.RouteLeaseTTL's default.
const DefaultRouteLeaseTTL = 10 * time.Second

// routeLeases holds a worker's route partitions (Topology.Routes > 0).
//
// Every worker keeps a member key (MemberKey(id)) in WorkersBucket and, every
// TTL/3, lists the live members and computes each partition's wanted owner
// by rendezvous hashing: the member whose FNV-1a of "id/route" is highest.
// Members that see the same list want the same owners, a member joining or
// leaving moves only its share, and nothing needs electing. Wanting is not
// owning: a worker owns a partition while it holds RouteKey(route), created
// only if absent (Create) and refreshed by revision (Update), so that at
// most one worker holds it at a time even while members disagree about the
// list. The bucket's TTL ends the keys of a worker that died.
//
// A worker that holds a partition it no longer wants (another member
// joined) stops fetching it, finishes the batches in hand, and only then
// deletes the key, which the wanted owner then creates: the two never hold
// the partition's messages at once. A worker that cannot refresh its key
// for a TTL stops as if it had released it. What a dead owner had fetched
// and not acknowledged is redelivered to the next owner after AckWait, and
// whatever two owners might both publish in a handover that went wrong (a
// refresh lost, the key expired while the old owner still worked) the
// frontier's duplicate window stores once.
type routeLeases struct {
	kv    jetstream.KeyValue
	topo  Topology
	id    string
	ttl   time.Duration
	log   *slog.Logger
	lines *lograte.Limiter // failures: each at once, then once a minute
	start func(route int) (stop func())

	mu   sync.Mutex
	held map[int]*routeLease
}

type routeLease struct {
	rev       uint64
	refreshed time.Time
	stop      func()
}

// openRouteLeases creates or opens the workers' bucket (memory storage,
// Topology.Replicas, TTL ttl).
func openRouteLeases(ctx context.Context, js jetstream.JetStream, topo Topology, id string, ttl time.Duration, log *slog.Logger, start func(int) func()) (*routeLeases, error) {
	kv, err := Provision(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      topo.WorkersBucket(),
			Description: "Sieve: dedup workers' heartbeats and route leases",
			History:     1,
			TTL:         ttl,
			Storage:     jetstream.MemoryStorage,
			Replicas:    topo.Replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("frontier: workers bucket: %w", err)
	}
	return &routeLeases{kv: kv, topo: topo, id: id, ttl: ttl, log: log, lines: lograte.New(time.Minute), start: start, held: map[int]*routeLease{}}, nil
}

// run keeps the worker's membership and leases until ctx ends, then
// releases every partition (each stopped first) and leaves.
func (l *routeLeases) run(ctx context.Context) {
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		l.tick(ctx)
		select {
		case <-ctx.Done():
			l.leave()
			return
		case <-t.C:
		}
	}
}

// holds reports whether the worker holds route.
func (l *routeLeases) holds(route int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[route] != nil
}

// owned returns the partitions the worker holds, sorted.
func (l *routeLeases) owned() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for r := 0; r < l.topo.Routes; r++ {
		if l.held[r] != nil {
			out = append(out, r)
		}
	}
	return out
}

// tick refreshes the worker's member key, then claims, refreshes or
// releases each partition as the live members' rendezvous says.
func (l *routeLeases) tick(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, l.ttl/3)
	defer cancel()
	if _, err := l.kv.Put(cctx, l.topo.MemberKey(l.id), []byte(time.Now().UTC().Format(time.RFC3339))); err != nil {
		l.lines.Log(l.log, slog.LevelWarn, "heartbeat", "route lease heartbeat failed", "error", err)
	}
	members, err := l.members(cctx)
	if err != nil {
		// Without the list, keep what is held and change nothing.
		l.lines.Log(l.log, slog.LevelWarn, "members", "route lease: listing workers failed", "error", err)
	}
	for r := 0; r < l.topo.Routes; r++ {
		want := err == nil && wantedOwner(members, r) == l.id
		l.mu.Lock()
		h := l.held[r]
		l.mu.Unlock()
		switch {
		case h != nil && (want || err != nil):
			l.refresh(cctx, r, h)
		case h != nil:
			l.release(r, h)
		case want:
			l.claim(cctx, r)
		}
	}
}

// members lists the live workers' ids (their member keys not expired),
// with this worker's always among them.
func (l *routeLeases) members(ctx context.Context) ([]string, error) {
	keys, err := l.kv.ListKeysFiltered(ctx, l.topo.MemberKeys())
	if err != nil {
		return nil, err
	}
	out := []string{l.id}
	for k := range keys.Keys() {
		if id, ok := strings.CutPrefix(k, "member."); ok && id != l.id {
			out = append(out, id)
		}
	}
	return out, nil
}

// wantedOwner returns the member that rendezvous hashing gives route to:
// the highest score, the first 8 bytes of SHA-256("member/route"). (FNV-1a
// barely moves its high bits when ids differ in one early byte, so one
// member would win every route; this runs a few times a second.)
func wantedOwner(members []string, route int) string {
	var best string
	var bestH uint64
	for _, m := range members {
		sum := sha256.Sum256([]byte(m + "/" + strconv.Itoa(route)))
		if v := binary.BigEndian.Uint64(sum[:8]); best == "" || v > bestH || (v == bestH && m < best) {
			best, bestH = m, v
		}
	}
	return best
}

func (l *routeLeases) claim(ctx context.Context, r int) {
	key := l.topo.RouteKey(r)
	rev, err := l.kv.Create(ctx, key, []byte(l.id))
	if errors.Is(err, jetstream.ErrKeyExists) {
		// Our own key, left by a run that stopped without releasing
		// it, is ours to take over; anyone else's we wait out.
		e, gerr := l.kv.Get(ctx, key)
		if gerr != nil || string(e.Value()) != l.id {
			return
		}
		rev, err = l.kv.Update(ctx, key, []byte(l.id), e.Revision())
	}
	if err != nil {
		return
	}
	l.log.Info("route partition owned", "route", r)
	h := &routeLease{rev: rev, refreshed: time.Now()}
	l.mu.Lock()
	l.held[r] = h
	l.mu.Unlock()
	h.stop = l.start(r)
}

func (l *routeLeases) refresh(ctx context.Context, r int, h *routeLease) {
	rev, err := l.kv.Update(ctx, l.topo.RouteKey(r), []byte(l.id), h.rev)
	if err == nil {
		h.rev, h.refreshed = rev, time.Now()
		return
	}
	var apiErr *jetstream.APIError
	lost := errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
	if lost || time.Since(h.refreshed) >= l.ttl {
		l.lines.Log(l.log, slog.LevelWarn, "lost", "route partition lost", "route", r, "error", err)
		l.drop(r, h)
	}
}

// release stops the partition's consumption, then deletes its key so that
// its wanted owner can take it.
func (l *routeLeases) release(r int, h *routeLease) {
	l.drop(r, h)
	ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
	defer cancel()
	if err := l.kv.Delete(ctx, l.topo.RouteKey(r), jetstream.LastRevision(h.rev)); err != nil {
		l.lines.Log(l.log, slog.LevelWarn, "release", "route partition release failed (it expires)", "route", r, "error", err)
		return
	}
	l.log.Info("route partition released", "route", r)
}

// drop stops consuming the partition and forgets it.
func (l *routeLeases) drop(r int, h *routeLease) {
	h.stop()
	l.mu.Lock()
	delete(l.held, r)
	l.mu.Unlock()
}

// leave releases every partition and deletes the member key.
func (l *routeLeases) leave() {
	l.mu.Lock()
	held := make(map[int]*routeLease, len(l.held))
	for r, h := range l.held {
		held[r] = h
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for r, h := range held {
		wg.Go(func() { l.release(r, h) })
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
	defer cancel()
	_ = l.kv.Delete(ctx, l.topo.MemberKey(l.id))
}
