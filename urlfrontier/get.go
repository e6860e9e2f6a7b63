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
// each URL in its own record (until now + delay_requestable: its ready
// key moves to the lease's end), counts the
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
	maxQueues, budget := int(req.GetMaxQueues()), s.o.MaxHandOut
	if crawls == nil {
		crawls = s.q.crawlIDs()
	}
	var chunks []turn
	err := s.q.st.Read(func(r urlstore.Reader) error {
		want := budget // queues to find: each hands out one URL at least
		if maxQueues > 0 {
			want = min(maxQueues, budget)
		}
		cands, err := s.dueQueues(r, crawls, req.GetKey(), perQueue, now, want)
		if err != nil {
			return err
		}
		// Read the ready URLs of the queues in turn order until max_queues
		// have some or the budget is spent: a hint, from the local index,
		// of what the updates will take.
		served := 0
		for _, v := range cands {
			if served == want || budget == 0 {
				break
			}
			n := s.allowance(v.state, v.inProcess, v.queued, perQueue, now)
			items, _, err := ready(r, v.crawl, v.key, now, min(n, budget))
			if err != nil {
				return err
			}
			if len(items) == 0 {
				continue
			}
			served++
			budget -= len(items)
			chunks = append(chunks, chunked(v, items)...)
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
	until := now + lease.Milliseconds()
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

// dueQueues reads the ready queues' index of crawls: the queues whose
// turn has come by now and which may hand out a URL (their states read
// and checked: not blocked, under their limits and perQueue), up to want,
// earliest turn first (then by crawl and key). With key, the one queue of
// each crawl. Its cost follows what it hands out, not the number of
// queues: it reads, in each partition holding queues of the crawls, the
// first index keys due by now (twice its share of want, and 16), merges
// them by turn and reads states in that order until want are found; a queue it passes
// over is one whose turn has come but whose URLs are all in process
// (perQueue). Only when those run out does it read further.
func (s *Server) dueQueues(r urlstore.Reader, crawls []string, key string, perQueue int, now int64, want int) ([]*queueView, error) {
	var out []*queueView
	consider := func(crawl, key string) error {
		s.m.examined.Inc()
		st, err := readQueue(r, crawl, key)
		if err != nil || !st.stored() {
			return err
		}
		v := s.q.view(st, now)
		if s.allowance(v.state, v.inProcess, v.queued, perQueue, now) > 0 {
			out = append(out, v)
		}
		return nil
	}
	if key != "" {
		for _, c := range crawls {
			if err := consider(c, key); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	type due struct {
		turn         int64
		crawl, queue string
	}
	var scanned [][]byte // the index prefixes read, by crawl and partition
	for _, c := range crawls {
		parts := s.q.crawlParts(c)
		for p := range Partitions {
			if parts&(1<<p) != 0 {
				scanned = append(scanned, crawlPrefix(kindTurn, c, p))
			}
		}
	}
	// Queues spread over partitions by a hash: each is read for twice its
	// share first, and further only if those run out.
	done := 0 // index keys already considered, per prefix (the same for each)
	for limit := 2*want/max(len(scanned), 1) + 16; ; limit *= 2 {
		var dues []due
		more := false
		for _, prefix := range scanned {
			crawl := string(prefix[1 : len(prefix)-3])
			n := 0
			err := r.Scan(prefix, func(k, _ []byte) bool {
				turn, q, ok := parseTurn(k[len(prefix):])
				if turn > now {
					return false
				}
				if n++; n > limit {
					more = true
					return false
				}
				if ok && n > done {
					dues = append(dues, due{turn, crawl, q})
				}
				return true
			})
			if err != nil {
				return nil, err
			}
		}
		slices.SortFunc(dues, func(a, b due) int {
			return cmp.Or(cmp.Compare(a.turn, b.turn), strings.Compare(a.crawl, b.crawl), strings.Compare(a.queue, b.queue))
		})
		for _, d := range dues {
			if len(out) == want {
				return out, nil
			}
			if err := consider(d.crawl, d.queue); err != nil {
				return nil, err
			}
		}
		if len(out) >= want || !more {
			return out, nil
		}
		done = limit
	}
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
