package urlfrontier

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
	"github.com/sievecrawl/sieve/urlstore"
)

// MaxLease is the longest lease GetURLs grants: a delay_requestable
// beyond it is refused with INVALID_ARGUMENT. A day is far more than any
// fetch takes, and short enough that URLs leased by a client that
// vanished come back the next day.
const MaxLease = 24 * time.Hour

// GetURLs hands out ready URLs and streams them: up to max_urls_per_queue
// from each of up to max_queues queues (0: no limit; Options.MaxHandOut in
// all), of one crawl or of any, of one queue if key is set. A queue is
// served when it is not blocked, its turn has come (its delay has passed
// since it was last served), it has fewer than max_urls_per_queue URLs in
// process and it is under its crawl limit; the queues that waited longest
// go first.
//
// The queues are chosen from the summaries in RAM and their ready URLs
// read from the local index; then each partition's turns are taken with
// one read-modify-write of the partition (urlstore.Update), which reads
// the queues' states and ready URLs again as the log leaves them, leases
// each URL in its own record (until now + delay_requestable, rounded up
// to the second: its ready key moves to the lease's end), counts the
// leases in the queue's state and sets its next turn. So two servers
// never hand out one URL or serve one queue twice within its delay, a
// hand-out costs one log entry per partition (a queue's turn larger than
// an entry is written in chunks, one entry each), and a lease that ends
// without an update makes the URL ready again with no timer anywhere.
// Nothing is handed out while the node is inactive. A lease longer than
// MaxLease is refused.
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
	lease := s.o.DefaultLease
	if d := req.GetDelayRequestable(); d > 0 {
		lease = time.Duration(d) * time.Second
		if lease > MaxLease {
			return status.Errorf(codes.InvalidArgument, "delay_requestable %d s: at most %d s (a day)", d,
				int64(MaxLease/time.Second))
		}
	}
	if !s.isActive() {
		return nil
	}
	perQueue := int(req.GetMaxUrlsPerQueue())
	now := s.now()
	views := s.q.views(now, crawls, req.GetKey())
	var turns []turn
	for i := range views {
		v := &views[i]
		if v.queued == 0 || v.idle > now {
			continue
		}
		if n := s.allowance(v.state, v.inProcess, v.queued, perQueue, now); n > 0 {
			turns = append(turns, turn{v: v, n: n})
		}
	}
	slices.SortFunc(turns, func(a, b turn) int {
		return cmp.Or(cmp.Compare(a.v.state.Next, b.v.state.Next), strings.Compare(a.v.crawl, b.v.crawl),
			strings.Compare(a.v.key, b.v.key))
	})
	// Read the ready URLs of the queues in that order until max_queues
	// have some (a queue may hold only URLs due later) or the budget is
	// spent: a hint, from the local index, of what the updates will take.
	maxQueues, budget := int(req.GetMaxQueues()), s.o.MaxHandOut
	var chunks []turn
	served := 0
	err := s.q.st.Read(func(r urlstore.Reader) error {
		for _, t := range turns {
			if (maxQueues > 0 && served == maxQueues) || budget == 0 {
				break
			}
			items, next, err := ready(r, t.v.crawl, t.v.key, now, min(t.n, budget))
			if err != nil {
				return err
			}
			if len(items) == 0 {
				if next == 0 {
					next = now + time.Hour.Milliseconds() // none queued: until its state changes
				}
				s.q.setIdle(t.v, next)
				continue
			}
			served++
			budget -= len(items)
			chunks = append(chunks, chunked(t.v, items)...)
		}
		return nil
	})
	if err != nil {
		return errStatus(err)
	}
	parts, groups, sizes := byPartition(chunks, func(t turn) int { return partOf(t.v.crawl, t.v.key) },
		func(t turn) int { return t.size })
	// A partition's entries are written in order (a queue's chunks after
	// its first), partitions in parallel.
	order := map[int][]int{}
	var ps []int
	for g, p := range parts {
		if order[p] == nil {
			ps = append(ps, p)
		}
		order[p] = append(order[p], g)
	}
	handed := make([][]readyItem, len(groups))
	until := leaseEnd(now, lease)
	err = parallel(len(ps), func(i int) error {
		took := map[*queueView]bool{} // queues whose first chunk handed out
		for _, g := range order[ps[i]] {
			var got []readyItem
			err := s.q.update(ctx, parts[g], sizes[g], func(u *updateTx) error {
				got = got[:0]
				for _, t := range groups[g] {
					if t.cont && !took[t.v] {
						continue
					}
					items, err := s.takeTurn(u, t, perQueue, now, until)
					if err != nil {
						return err
					}
					got = append(got, items...)
				}
				return nil
			})
			if err != nil {
				return err
			}
			for _, t := range groups[g] {
				if !t.cont {
					took[t.v] = true
				}
			}
			handed[g] = got
		}
		return nil
	})
	// What was leased is sent even if another partition failed; what
	// was leased and not sent is handed out again when its lease ends.
	for _, items := range handed {
		for _, it := range items {
			e := it.e
			if err := stream.Send(&pb.URLInfo{Url: e.URL, Key: e.Key, CrawlID: e.Crawl, Metadata: toPB(e.Meta)}); err != nil {
				return err
			}
			s.m.handed.Inc()
			s.m.work.Add(1)
		}
	}
	return errStatus(err)
}

// leaseEnd is the end of a lease of d taken at now (Unix ms), rounded up
// to a whole second, so that the hand-outs of one second share one count
// in their queue's state (QueueState.Leases).
func leaseEnd(now int64, d time.Duration) int64 {
	return (now + d.Milliseconds() + 999) / 1000 * 1000
}

// turn is a queue chosen to be served and how many URLs it may hand out,
// or a chunk of them: a turn that would write more than an entry carries
// is cut into chunks, the first taking the queue's turn and each other
// (cont) continuing it in a later entry of the partition.
type turn struct {
	v    *queueView
	n    int
	size int  // the bytes its hand-out writes, about
	cont bool // continues the turn taken by the queue's chunk before
}

// chunked cuts a queue's turn of the ready URLs items into chunks of at
// most handOutBytes each.
func chunked(v *queueView, items []readyItem) []turn {
	var out []turn
	t := turn{v: v, size: smallUpdate}
	for _, it := range items {
		// A hand-out moves the URL's ready key and writes its record.
		n := 3*(len(it.e.Crawl)+len(it.e.Key)+len(it.e.URL)+24) + 2*(metaSize(it.e.Meta)+24)
		if t.n > 0 && t.size+n > handOutBytes {
			out = append(out, t)
			t = turn{v: v, size: smallUpdate, cont: true}
		}
		t.n++
		t.size += n
	}
	out = append(out, t)
	if len(out) > 1 {
		for i := range out {
			out[i].size = maxEntryBytes // an entry each: a chunk reads what the one before wrote
		}
	}
	return out
}

// handOutBytes bounds a chunk of a queue's turn.
const handOutBytes = maxEntryBytes / 2

// allowance is how many URLs a queue in state st may hand out at now.
func (s *Server) allowance(st QueueState, inProcess, queued, perQueue int, now int64) int {
	if queued == 0 || st.Blocked > now || st.Next > now {
		return 0
	}
	n := queued
	if perQueue > 0 {
		n = min(n, perQueue-inProcess)
	}
	if l := int64(st.Limit); l > 0 {
		n = int(min(int64(n), l-int64(st.Fetched)-int64(inProcess)))
	}
	return n
}

// takeTurn takes one queue's turn (or a chunk of it) inside its
// partition's update: its state and ready URLs read again as the log
// leaves them, up to t.n of them leased until until, each URL's ready key
// moved to the lease's end and the lease counted in the state.
func (s *Server) takeTurn(u *updateTx, t turn, perQueue int, now, until int64) ([]readyItem, error) {
	st, err := u.queue(t.v.crawl, t.v.key)
	if err != nil {
		return nil, err
	}
	inProcess := st.inProcess(now)
	check := *st
	if t.cont {
		check.Next = 0 // the turn is this one's, taken by its first chunk
	}
	n := min(t.n, s.allowance(check, inProcess, max(int(st.Queued)-inProcess, 0), perQueue, now))
	if n <= 0 {
		return nil, nil // served by another server meanwhile
	}
	items, _, err := ready(u.r, t.v.crawl, t.v.key, now, n)
	if err != nil || len(items) == 0 {
		return nil, err
	}
	out := items[:0]
	for _, it := range items {
		if _, changed := u.entries[string(entryKey(it.e.Crawl, it.e.Key, it.e.URL))]; changed {
			continue // updated earlier in this entry: not as the index read it
		}
		next := it.e
		next.Until = until
		u.putEntry(&it.e, &next)
		out = append(out, it)
	}
	if len(out) == 0 {
		return nil, nil
	}
	v := *t.v
	v.state = *st
	st.Next = now + s.delayOf(&v).Milliseconds()
	st.lease(until, len(out), now)
	u.set(st)
	return out, nil
}

// delayOf is a queue's delay: its own, its crawl's default, or the
// server's.
func (s *Server) delayOf(v *queueView) time.Duration {
	switch {
	case v.state.HasDelay:
		return time.Duration(v.state.Delay) * time.Millisecond
	case v.hasDelay:
		return time.Duration(v.delay) * time.Millisecond
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
