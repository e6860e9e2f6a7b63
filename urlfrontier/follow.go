package urlfrontier

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A server keeps its index of the queues bucket by applying its own writes
// as their acknowledgements arrive, and by watching the bucket for the
// writes of the other servers that share it. A watch delivers every write,
// its own included, so for a server alone it is pure cost: in the ingest
// benchmark the watch took 30 % of a PutDiscovered (every admitted URL came
// back to the server that wrote it). So a server watches the bucket only
// while another server is live, and once at start to load the bucket:
//
//   - Each server announces its process (URLFrontierServerKey, a random
//     instance token: two servers may share an address) in the nodes
//     bucket before Open returns, and renews it every nodeTTL/3; Close
//     deletes it.
//   - Each server watches those keys. A put from another instance starts
//     the bucket's watch at once, from the revision after the last one
//     the previous watch delivered: everything the bucket changed since
//     (the server's own writes among them, which it holds and skips), so
//     whatever the other server wrote before is in the index within
//     milliseconds, as it would be had the watch run all along, without
//     reading the whole bucket again. Until then the compare-and-sets keep
//     hand-outs exact, as they do for any server whose watch lags.
//   - The watch stops once no other instance was heard for nodeTTL (a
//     server killed leaves no delete; its key expires), after delivering
//     what that server wrote while it lived.
//
// Nothing else writes the bucket (the package is its only writer), so a
// server alone holds in its index exactly what the bucket holds, but for a
// write whose outcome it does not know (a timeout, a connection lost before
// the acknowledgement): store.unsure then loads the bucket again.

// followCheck is how often a watching server checks whether it is alone.
var followCheck = nodeTTL / 3

// peers tracks the other live server processes from their heartbeats.
type peers struct {
	self string // this process's key

	mu       sync.Mutex
	last     map[string]time.Time // other instances' keys: last heard
	appeared chan struct{}        // signalled when an instance is first heard
}

func newPeers(self string) *peers {
	return &peers{self: self, last: map[string]time.Time{}, appeared: make(chan struct{}, 1)}
}

// heard records a heartbeat (or, with gone, the delete) of key at now.
func (p *peers) heard(key string, now time.Time, gone bool) {
	if key == p.self {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if gone {
		delete(p.last, key)
		return
	}
	if _, ok := p.last[key]; !ok {
		select {
		case p.appeared <- struct{}{}:
		default:
		}
	}
	p.last[key] = now
}

// shared reports whether another server was heard within ttl of now,
// forgetting the ones that were not.
func (p *peers) shared(now time.Time, ttl time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, t := range p.last {
		if now.Sub(t) > ttl {
			delete(p.last, k)
		}
	}
	return len(p.last) > 0
}

// newInstance returns a token unique to this process.
func newInstance() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// watchPeers feeds p from the server keys of the nodes bucket until ctx
// ends, calling known once p holds the servers live when it started.
func (s *Server) watchPeers(ctx context.Context, p *peers, known func()) {
	for ctx.Err() == nil {
		w, err := s.store.nodes.Watch(ctx, s.store.topo.URLFrontierServerKeys())
		if err != nil {
			s.o.Logger.Warn("urlfrontier: watch servers", "error", err)
			pause(ctx, time.Second)
			continue
		}
		for e := range w.Updates() {
			if e == nil {
				known()
				continue
			}
			p.heard(e.Key(), time.Now(), e.Operation() != jetstream.KeyValuePut)
		}
		_ = w.Stop()
	}
}

// follow loads the bucket into the index (calling loaded once it holds
// every value the bucket held at start), then watches it while another
// server shares it, until ctx ends. p must know the servers that were live
// at start (watchPeers called known).
func (s *Server) follow(ctx context.Context, p *peers, loaded func()) {
	check := time.NewTicker(followCheck)
	defer check.Stop()
	// from is where the next watch starts: the first delivers the whole
	// bucket, the next ones what changed since the last one stopped.
	var from uint64
	for ctx.Err() == nil {
		wctx, stop := context.WithCancel(ctx)
		ready := make(chan struct{})
		var once sync.Once
		errc := make(chan error, 1)
		go func() { errc <- s.store.watch(wctx, from, func() { once.Do(func() { close(ready) }) }) }()
		s.watching.Store(true)
	watch:
		for {
			select {
			case <-ctx.Done():
				stop()
				<-errc
				return
			case err := <-errc:
				// A watch that ends is started again from the last
				// change it delivered (the whole bucket again if it
				// ended before it was loaded).
				s.o.Logger.Warn("urlfrontier: watch", "error", err)
				stop()
				if ready == nil { // loaded
					from = s.store.x.watched() + 1
				}
				pause(ctx, time.Second)
				break watch
			case <-ready:
				loaded()
				ready = nil // loaded: a nil channel is never ready again
			case <-check.C:
			}
			if ready != nil {
				continue // still loading
			}
			// A server that appeared before this check is one it sees.
			drain(p.appeared)
			if p.shared(time.Now(), nodeTTL) {
				continue
			}
			stop()
			<-errc
			s.watching.Store(false)
			from = s.store.x.watched() + 1
			select {
			case <-p.appeared:
			case <-s.store.unsure:
			case <-ctx.Done():
			}
			break watch
		}
	}
}

// drain empties a signal channel.
func drain(c chan struct{}) {
	select {
	case <-c:
	default:
	}
}
