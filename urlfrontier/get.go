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
// the URLs (until now + delay_requestable) and sets each queue's next
// turn in its state. So two servers never hand out one URL or serve one
// queue twice within its delay, a hand-out costs one log entry per
// partition, and a lease that ends without an update makes the URL ready
// again with no timer anywhere. Nothing is handed out while the node is
// inactive. A lease longer than MaxLease is refused.
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
	chosen := turns[:0]
	err := s.q.st.Read(func(r urlstore.Reader) error {
		for _, t := range turns {
			if (maxQueues > 0 && len(chosen) == maxQueues) || budget == 0 {
				break
			}
			items, next, err := ready(r, t.v.crawl, t.v.key, &t.v.state, now, min(t.n, budget))
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
			t.n = len(items)
			chosen = append(chosen, t)
			budget -= t.n
		}
		return nil
	})
	if err != nil {
		return errStatus(err)
	}
	parts, groups, sizes := byPartition(chosen, func(t turn) int { return partOf(t.v.crawl, t.v.key) },
		func(t turn) int { return 256 + 40*(len(t.v.state.Leases)+t.n) })
	handed := make([][]readyItem, len(parts))
	until := now + lease.Milliseconds()
	err = parallel(len(parts), func(i int) error {
		var got []readyItem
		err := s.q.update(ctx, parts[i], sizes[i], func(u *updateTx) error {
			got = got[:0]
			for _, t := range groups[i] {
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
		handed[i] = got
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

// turn is a queue chosen to be served and how many URLs it may hand out.
type turn struct {
	v *queueView
	n int
}

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

// takeTurn takes one queue's turn inside its partition's update: its
// state and ready URLs read again as the log leaves them, up to t.n of
// them leased until until.
func (s *Server) takeTurn(u *updateTx, t turn, perQueue int, now, until int64) ([]readyItem, error) {
	st, err := u.queue(t.v.crawl, t.v.key)
	if err != nil {
		return nil, err
	}
	inProcess := st.inProcess(now)
	n := min(t.n, s.allowance(*st, inProcess, max(int(st.Queued)-inProcess, 0), perQueue, now))
	if n <= 0 {
		return nil, nil // served by another server meanwhile
	}
	items, _, err := ready(u.r, t.v.crawl, t.v.key, st, now, n)
	if err != nil || len(items) == 0 {
		return nil, err
	}
	v := *t.v
	v.state = *st
	st.Next = now + s.delayOf(&v).Milliseconds()
	leases := make(map[string]Lease, len(st.Leases)+len(items))
	for h, l := range st.Leases {
		if l.Until > now {
			leases[h] = l // ended leases go: their URLs are ready again
		}
	}
	for _, it := range items {
		leases[leaseID(it.e.URL)] = Lease{Until: until, Due: it.e.Due, Created: it.e.Created}
	}
	st.Leases = leases
	u.set(st)
	return items, nil
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
