package urlfrontier

import (
	"cmp"
	"errors"
	"slices"
	"strings"
	"time"

	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// GetURLs hands out ready URLs and streams them: up to max_urls_per_queue
// from each of up to max_queues queues (0: no limit; Options.MaxHandOut in
// all), of one crawl or of any, of one queue if key is set. A queue is
// served when it is not blocked, its turn has come (its delay has passed
// since it was last served), it has fewer than max_urls_per_queue URLs in
// process and it is under its crawl limit; the queues that waited longest
// go first. Each queue's turn is taken, and its URLs leased (until now +
// delay_requestable), with one compare-and-set of its state, so two servers
// never hand out one URL or serve one queue twice within its delay, and a
// hand-out costs one write per queue. Nothing is handed out while the node
// is inactive.
func (s *Server) GetURLs(req *pb.GetParams, stream pb.URLFrontier_GetURLsServer) error {
	ctx := stream.Context()
	var crawls []string
	if req.GetAnyCrawlID() == nil {
		c, err := crawlArg(req.GetCrawlID())
		if err != nil {
			return err
		}
		crawls = []string{c}
	}
	if err := keyArg(req.GetKey(), false); err != nil {
		return err
	}
	if !s.isActive() {
		return nil
	}
	lease := s.o.DefaultLease
	if d := req.GetDelayRequestable(); d > 0 {
		lease = time.Duration(d) * time.Second
	}
	perQueue := int(req.GetMaxUrlsPerQueue())
	now := s.now()
	// Choose the queues on their counts, then read the ready URLs of
	// those chosen only.
	views := s.store.x.queues(now, crawls, req.GetKey(), 0)
	type turn struct {
		v *queueView
		n int // URLs to hand out
	}
	var turns []turn
	for i := range views {
		v := &views[i]
		if v.queued == 0 || v.blocked(now) || v.state.Next > now {
			continue
		}
		n := v.queued
		if perQueue > 0 {
			n = min(n, perQueue-v.inProcess)
		}
		if l := int64(v.state.Limit); l > 0 {
			n = int(min(int64(n), l-int64(v.state.Fetched)-int64(v.inProcess)))
		}
		if n <= 0 {
			continue
		}
		turns = append(turns, turn{v, n})
	}
	slices.SortFunc(turns, func(a, b turn) int {
		return cmp.Or(cmp.Compare(a.v.state.Next, b.v.state.Next), strings.Compare(a.v.stateKey, b.v.stateKey))
	})
	// Read the ready URLs of the queues in that order until max_queues
	// have some (a queue may hold only URLs due later) or the budget is
	// spent.
	maxQueues, budget := int(req.GetMaxQueues()), s.o.MaxHandOut
	chosen := turns[:0]
	for _, t := range turns {
		if (maxQueues > 0 && len(chosen) == maxQueues) || budget == 0 {
			break
		}
		t.v.ready = s.store.x.ready(t.v.stateKey, now, min(t.n, budget))
		if t.n = len(t.v.ready); t.n > 0 {
			chosen = append(chosen, t)
			budget -= t.n
		}
	}
	turns = chosen
	// Take each queue's turn and lease its URLs with one compare-and-set
	// of its state; all the queues in one round trip.
	until := now + lease.Milliseconds()
	qw := make([]write, 0, len(turns))
	qs := make([]*QueueState, 0, len(turns))
	for _, t := range turns {
		q := t.v.state
		if !t.v.hasState {
			q = QueueState{V: formatVersion, Crawl: t.v.crawl, Key: t.v.key}
		}
		q.Next = now + s.delayOf(t.v).Milliseconds()
		leases := make(map[string]int64, len(q.Leases)+len(t.v.ready))
		for h, end := range q.Leases {
			if end > now {
				leases[h] = end // ended leases go: their URLs are ready again
			}
		}
		for _, it := range t.v.ready {
			leases[urlHash(it.key)] = until
		}
		q.Leases = leases
		qw = append(qw, write{key: t.v.stateKey, value: encode(&q), rev: t.v.stateRev})
		qs = append(qs, &q)
	}
	qres, err := s.store.cas(ctx, qw)
	if err != nil {
		return errStatus(err)
	}
	for i, r := range qres {
		if r.err != nil {
			if !errors.Is(r.err, errConflict) {
				s.o.Logger.Warn("urlfrontier: take a queue's turn", "queue", turns[i].v.key, "error", r.err)
			}
			continue // another server serves it, or a URL of it changed
		}
		s.store.x.putQueue(qw[i].key, r.rev, qs[i], true)
		for _, it := range turns[i].v.ready {
			e := it.e
			if err := stream.Send(&pb.URLInfo{Url: e.URL, Key: e.Key, CrawlID: e.Crawl, Metadata: toPB(e.Meta)}); err != nil {
				return err // leased, not sent: handed out again when the lease ends
			}
			s.m.handed.Inc()
		}
	}
	return nil
}

// delayOf is a queue's delay: its own, its crawl's default, or the
// server's.
func (s *Server) delayOf(v *queueView) time.Duration {
	switch {
	case v.state.HasDelay:
		return time.Duration(v.state.Delay) * time.Millisecond
	case v.hasDef:
		return time.Duration(v.defDelay) * time.Millisecond
	}
	return s.o.DefaultDelay
}

func toPB(m map[string][]string) map[string]*pb.StringList {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]*pb.StringList, len(m))
	for k, v := range m {
		out[k] = &pb.StringList{Values: v}
	}
	return out
}
