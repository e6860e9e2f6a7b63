package frontier

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// randomID returns a worker id that no other process will use.
func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "w-" + hex.EncodeToString(b[:])
}

// forward handles a batch of pages when Topology.Routes > 0: it
// canonicalizes their links, drops repeats within each page, admits the
// links of the routes this worker holds itself (no hop), and publishes the
// others, each page's grouped by route partition (Topology.Route), to the
// routed stream, where the partition's owner admits them. It counts the
// pages, links, rejections and repeats, and the verdicts on what it
// admits; an owner counts the rest. The pages are acknowledged once every
// part is stored and every own link admitted, so a crash redelivers them,
// and a part forwarded again carries the same Nats-Msg-Id (its bytes, the
// page's stream sequence and its route), which the routed stream's
// duplicate window stores once. Until every part is stored the batch is
// held and retried, as admit.Core holds its publishes. A route handed over
// while a batch admits its links directly can have two holders for that
// moment: the duplicate window stores what both publish once.
func (w *Worker) forward(ctx context.Context, msgs []jetstream.Msg) {
	start := time.Now()
	defer w.begin()()

	b := w.newBatch(start)
	leases := w.leases.Load()
	var out []outMsg
	for _, m := range msgs {
		d, ok := w.decode(b, m)
		if !ok {
			continue
		}
		parts := map[int]*Discovered{}
		seen := map[string]bool{}
		w.canonicalize(d, b.delta(d.Crawl), func(li int, u string) {
			if seen[u] {
				b.duplicateOf(d.Crawl, u)
				return
			}
			seen[u] = true
			r := w.topo.Route(d.Crawl, u)
			if leases != nil && leases.holds(r) {
				b.add(d, li, u)
				return
			}
			p := parts[r]
			if p == nil {
				p = &Discovered{Crawl: d.Crawl, URL: d.URL, Depth: d.Depth, Kind: d.Kind}
				parts[r] = p
			}
			l := d.Link(li)
			l.URL = u
			p.Add(l)
		})
		var seq uint64
		if md, err := m.Metadata(); err == nil {
			seq = md.Sequence.Stream
		}
		for r, p := range parts {
			for i, data := range w.encodeParts(*p) {
				out = append(out, outMsg{
					msg: &nats.Msg{Subject: w.topo.RoutedSubject(d.Crawl, r), Data: data, Header: nats.Header{}},
					id:  contentID(data, "routed:"+strconv.FormatUint(seq, 10)+":"+strconv.Itoa(r)+":"+strconv.Itoa(i)),
				})
			}
		}
	}
	done := true
	if len(b.urls) > 0 {
		verdicts, err := w.core.Admit(ctx, b.urls, b)
		w.count(b, verdicts)
		done = err == nil
	}
	// A lost ack redelivers the page, whose parts the window then drops.
	w.finish(b, start, done && w.publishRouted(ctx, b, out))
}

// encodeParts encodes a routed message, split into as many messages as
// its size needs: absolute canonical links can be longer than the page's
// relative ones.
func (w *Worker) encodeParts(d Discovered) [][]byte {
	n := w.topo.Limits.MaxLinks
	for {
		var out [][]byte
		fits := true
		for _, part := range d.Split(n) {
			data, _ := part.Encode() // strings, ints and string lists: cannot fail
			if len(data) > w.topo.Limits.MaxBytes && len(part.Links) > 1 {
				fits = false
				break
			}
			out = append(out, data)
		}
		if fits {
			return out
		}
		n = max(1, min(n, len(d.Links))/2)
	}
}

// publishRouted publishes msgs and waits until the routed stream stored
// each, retrying failures with backoff; it reports false if ctx ended
// first.
func (w *Worker) publishRouted(ctx context.Context, b *batch, msgs []outMsg) bool {
	bo := w.newBackoff()
	for len(msgs) > 0 {
		b.Touch()
		acks, err := publishAll(ctx, w.js, msgs)
		if err != nil {
			return false
		}
		var failed []outMsg
		var lastErr error
		for i, a := range acks {
			if a.Err != nil {
				failed, lastErr = append(failed, msgs[i]), a.Err
			}
		}
		if len(failed) == 0 {
			w.health.set(DepNATS, nil)
			return true
		}
		w.m.retries.WithLabelValues("forward").Add(float64(len(failed)))
		w.health.set(DepNATS, fmt.Errorf("frontier: forward to routed stream: %w", lastErr))
		w.held.failed("forward", lastErr)
		msgs = failed
		if !sleep(ctx, bo.Next()) {
			return false
		}
	}
	return true
}

// openLeases opens the worker's route leases, retrying while NATS is
// away. Each route partition the worker comes to own is consumed by one
// loop (its batches finished with workCtx) until the lease ends.
func (w *Worker) openLeases(fetchCtx, workCtx context.Context) (*routeLeases, error) {
	start := func(r int) (stop func()) {
		ctx, cancel := context.WithCancel(fetchCtx)
		var wg sync.WaitGroup
		wg.Go(func() {
			reopen := func(ctx context.Context) (jetstream.Consumer, error) {
				return w.js.Consumer(ctx, w.topo.RoutedStream(), w.topo.RouteConsumer(r))
			}
			b := w.newBackoff()
			for ctx.Err() == nil {
				cons, err := reopen(ctx)
				if err == nil {
					w.loop(ctx, workCtx, cons, reopen, w.processRouted)
					return
				}
				w.health.set(DepNATS, err)
				sleep(ctx, b.Next())
			}
		})
		return func() { cancel(); wg.Wait() }
	}
	b := w.newBackoff()
	for {
		cctx, cancel := context.WithTimeout(fetchCtx, 10*time.Second)
		l, err := openRouteLeases(cctx, w.js, w.topo, w.o.ID, w.o.RouteLeaseTTL, w.log, start)
		cancel()
		if err == nil {
			w.leases.Store(l)
			return l, nil
		}
		w.health.set(DepNATS, err)
		if !sleep(fetchCtx, b.Next()) {
			return nil, fetchCtx.Err()
		}
	}
}
