package urlfrontier

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// ListNodes lists the addresses of the live servers sharing the buckets.
func (s *Server) ListNodes(ctx context.Context, _ *pb.Empty) (*pb.StringList, error) {
	nodes, err := s.liveNodes(ctx)
	if err != nil {
		return nil, errStatus(err)
	}
	return &pb.StringList{Values: nodes}, nil
}

func (s *Server) liveNodes(ctx context.Context) ([]string, error) {
	lister, err := s.b.nodes.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	var nodes []string
	for k := range lister.Keys() {
		if !s.b.topo.IsURLFrontierNodeKey(k) {
			continue // a server process's key (follow.go)
		}
		e, err := s.b.nodes.Get(ctx, k)
		if err != nil {
			continue // expired meanwhile
		}
		nodes = append(nodes, string(e.Value()))
	}
	if !slices.Contains(nodes, s.o.Node) {
		nodes = append(nodes, s.o.Node)
	}
	slices.Sort(nodes)
	return nodes, nil
}

// ListCrawls lists the crawls with URLs or queues here, and the crawls of
// the pipeline's registry.
func (s *Server) ListCrawls(ctx context.Context, _ *pb.Local) (*pb.StringList, error) {
	ids, err := s.o.Crawls.IDs(ctx)
	if err != nil {
		return nil, errStatus(err)
	}
	ids = append(ids, s.q.crawlIDs()...)
	slices.Sort(ids)
	return &pb.StringList{Values: slices.Compact(ids)}, nil
}

// DeleteCrawl removes a crawl: its URLs and queues here, then (package
// crawls) its filter, counts, record and pipeline messages, so its id may
// be used again at once. It returns the number of URLs removed here
// (those not completed); a crawl that does not exist removes none, as in
// the reference service (its clients delete a crawl before using it).
func (s *Server) DeleteCrawl(ctx context.Context, req *pb.DeleteCrawlMessage) (*pb.Long, error) {
	c, err := crawlArg(req.GetValue())
	if err != nil {
		return nil, err
	}
	if ok, err := s.crawlExists(ctx, c); err != nil {
		return nil, err
	} else if !ok {
		return &pb.Long{}, nil
	}
	n, err := s.deleteCrawlQueues(ctx, c)
	if err != nil {
		return nil, errStatus(err)
	}
	if _, err := s.o.Crawls.Delete(ctx, c); err != nil {
		return nil, errStatus(err)
	}
	s.core.Forget(c)
	s.mu.Lock()
	delete(s.recorded, c)
	s.mu.Unlock()
	return &pb.Long{Value: uint64(n)}, nil
}

// deleteCrawlQueues removes a crawl's queues, URLs and default delay:
// one prefix delete per partition that holds any. It returns how many
// URLs not completed it removed.
func (s *Server) deleteCrawlQueues(ctx context.Context, crawl string) (uint64, error) {
	var counted [Partitions]uint64 // each partition's, set by its update
	err := parallel(Partitions, func(p int) error {
		return s.q.update(ctx, p, smallUpdate, func(u *updateTx) error {
			var queued uint64
			any, found := false, false
			for _, kind := range []byte{kindQueue, kindURL, kindReady, kindTurn, kindCrawl} {
				err := u.r.Scan(crawlPrefix(kind, crawl, p), func(_, v []byte) bool {
					any = true
					if kind == kindQueue {
						if q, err := decodeQueue(v); err == nil {
							queued += q.Queued
						}
						return true
					}
					return false
				})
				if err != nil {
					return err
				}
				if any {
					u.deletePrefix(crawlPrefix(kind, crawl, p))
					found = true
				}
			}
			if p == partOf(crawl, "") {
				if _, ok, err := u.r.Get(defaultKey(crawl)); err != nil {
					return err
				} else if ok {
					u.b.Delete(defaultKey(crawl))
				}
			}
			counted[p] = 0
			if found {
				counted[p] = queued
			}
			return nil
		})
	})
	var n uint64
	for _, c := range counted {
		n += c
	}
	return n, err
}

// purgeBatch bounds the URLs one entry of a purge removes.
const purgeBatch = 1000

// purgeQueued removes a crawl's (one queue's for key != "") queued URLs
// that match (not those in process: their updates are on the way),
// partition by partition, at most purgeBatch per entry; it returns how
// many it removed.
func (s *Server) purgeQueued(ctx context.Context, crawl, key string, match func(*Entry) bool) (uint64, error) {
	parts := make([]int, 0, Partitions)
	if key != "" {
		parts = append(parts, partOf(crawl, key))
	} else {
		for p := range Partitions {
			parts = append(parts, p)
		}
	}
	var total atomic.Uint64
	err := parallel(len(parts), func(i int) error {
		// Every queued URL has a ready key (a fresh one nothing else).
		prefix := crawlPrefix(kindReady, crawl, parts[i])
		if key != "" {
			prefix = queuePrefix(kindReady, crawl, key)
		}
		for {
			var n uint64
			now := s.now()
			err := s.q.update(ctx, parts[i], maxEntryBytes, func(u *updateTx) error {
				n = 0
				var scanErr error
				err := u.r.Scan(prefix, func(k, v []byte) bool {
					e, ok := scannedEntry(crawl, k, v)
					if !ok {
						return true
					}
					if now, err := u.entry(crawl, e.Key, e.URL); err != nil || now == nil {
						return err == nil // removed by an update before in this entry
					} else {
						e = now // as an update before in this entry left it
					}
					if e.Completed || !match(e) {
						return true
					}
					q, err := u.queue(crawl, e.Key)
					if err != nil {
						scanErr = err
						return false
					}
					if e.lease(now) > 0 {
						return true
					}
					u.deleteEntry(e)
					q.Queued--
					u.set(q)
					n++
					return n < purgeBatch
				})
				if err == nil {
					err = scanErr
				}
				return err
			})
			if err != nil {
				return err
			}
			total.Add(n)
			if n < purgeBatch {
				return nil
			}
		}
	})
	return total.Load(), err
}

// ListQueues lists a crawl's queue keys in order, active ones only unless
// include_inactive (a queue is active when it holds URLs not completed and
// is not blocked), from start, at most size (default 100). A crawl that
// does not exist has none.
func (s *Server) ListQueues(ctx context.Context, req *pb.Pagination) (*pb.QueueList, error) {
	c, err := crawlArg(req.GetCrawlID())
	if err != nil {
		return nil, err
	}
	now := s.now()
	var keys []string
	err = s.q.states(c, "", func(st *QueueState) bool {
		if req.GetIncludeInactive() || s.q.view(st, now).active(now) {
			keys = append(keys, st.Key)
		}
		return true
	})
	if err != nil {
		return nil, errStatus(err)
	}
	slices.Sort(keys)
	size := int(req.GetSize())
	if size == 0 {
		size = 100
	}
	start := min(int(req.GetStart()), len(keys))
	page := keys[start:min(start+size, len(keys))]
	return &pb.QueueList{Values: page, Total: uint64(len(keys)), Start: req.GetStart(), Size: uint32(len(page)), CrawlID: c}, nil
}

// GetStats counts a crawl's (or one queue's) URLs: size are those queued,
// inProcess those handed out whose lease runs, counts "completed" the URLs
// completed by known updates and "active_queues" the active queues. A
// crawl (or queue) that does not exist, or no longer does, has stats of
// zero, as in the reference service.
func (s *Server) GetStats(_ context.Context, req *pb.QueueWithinCrawlParams) (*pb.Stats, error) {
	c, err := crawlArg(req.GetCrawlID())
	if err != nil {
		return nil, err
	}
	if err := keyArg(req.GetKey(), false); err != nil {
		return nil, err
	}
	now := s.now()
	st := &pb.Stats{CrawlID: c, Counts: map[string]uint64{"completed": 0, "active_queues": 0}}
	err = s.q.states(c, req.GetKey(), func(q *QueueState) bool {
		v := s.q.view(q, now)
		st.NumberOfQueues++
		st.Size += uint64(v.queued)
		st.InProcess += uint32(v.inProcess)
		st.Counts["completed"] += v.state.Completed
		if v.active(now) {
			st.Counts["active_queues"]++
		}
		return true
	})
	if err != nil {
		return nil, errStatus(err)
	}
	return st, nil
}

// DeleteQueue removes a queue's URLs and state and returns how many URLs
// not completed it removed (0 for a queue or crawl that does not exist).
func (s *Server) DeleteQueue(ctx context.Context, req *pb.QueueWithinCrawlParams) (*pb.Long, error) {
	c, err := crawlArg(req.GetCrawlID())
	if err != nil {
		return nil, err
	}
	if err := keyArg(req.GetKey(), true); err != nil {
		return nil, err
	}
	var n uint64
	err = s.q.update(ctx, partOf(c, req.GetKey()), smallUpdate, func(u *updateTx) error {
		v, ok, err := u.r.Get(queueKey(c, req.GetKey()))
		if err != nil || !ok {
			return err
		}
		n = 0
		if q, err := decodeQueue(v); err == nil {
			n = q.Queued
			if q.Turn != 0 {
				u.b.Delete(turnKey(c, req.GetKey(), q.Turn))
			}
		}
		for _, kind := range []byte{kindQueue, kindURL, kindReady} {
			u.deletePrefix(queuePrefix(kind, c, req.GetKey()))
		}
		return nil
	})
	if err != nil {
		return nil, errStatus(err)
	}
	return &pb.Long{Value: n}, nil
}

// BlockQueueUntil blocks a queue until a time (Unix seconds; 0 unblocks),
// stored in its state: every server honours it, across restarts.
func (s *Server) BlockQueueUntil(ctx context.Context, req *pb.BlockQueueParams) (*pb.Empty, error) {
	c, err := crawlArg(req.GetCrawlID())
	if err != nil {
		return nil, err
	}
	if err := keyArg(req.GetKey(), true); err != nil {
		return nil, err
	}
	if req.GetTime() > maxDate {
		return nil, status.Errorf(codes.InvalidArgument, "time %d: want Unix seconds before year 10000", req.GetTime())
	}
	err = s.updateQueue(ctx, c, req.GetKey(), func(q *QueueState) { q.Blocked = int64(req.GetTime()) * 1000 })
	return &pb.Empty{}, errStatus(err)
}

// SetDelay sets a queue's delay between two turns, or with an empty key
// the default of the crawl's queues.
func (s *Server) SetDelay(ctx context.Context, req *pb.QueueDelayParams) (*pb.Empty, error) {
	c, err := crawlArg(req.GetCrawlID())
	if err != nil {
		return nil, err
	}
	if err := keyArg(req.GetKey(), false); err != nil {
		return nil, err
	}
	d := int64(req.GetDelayRequestable()) * 1000
	err = s.updateQueue(ctx, c, req.GetKey(), func(q *QueueState) { q.Delay, q.HasDelay = d, true })
	return &pb.Empty{}, errStatus(err)
}

// SetCrawlLimit limits the URLs a queue hands out to be fetched: once
// its fetches (known updates) and URLs in process reach limit it is not
// served. 0 removes the limit.
func (s *Server) SetCrawlLimit(ctx context.Context, req *pb.CrawlLimitParams) (*pb.Empty, error) {
	c, err := crawlArg(req.GetCrawlID())
	if err != nil {
		return nil, err
	}
	if err := keyArg(req.GetKey(), true); err != nil {
		return nil, err
	}
	err = s.updateQueue(ctx, c, req.GetKey(), func(q *QueueState) { q.Limit = req.GetLimit() })
	return &pb.Empty{}, errStatus(err)
}

// SetActive stores the active flag of this node (local) or of every live
// node; an inactive node hands nothing out and still takes puts.
func (s *Server) SetActive(ctx context.Context, req *pb.Active) (*pb.Empty, error) {
	nodes := []string{s.o.Node}
	if !req.GetLocal() {
		var err error
		if nodes, err = s.liveNodes(ctx); err != nil {
			return nil, errStatus(err)
		}
	}
	v := "true"
	if !req.GetState() {
		v = "false"
	}
	for _, n := range nodes {
		if _, err := s.b.state.Put(ctx, s.b.topo.URLFrontierActiveKey(n), []byte(v)); err != nil {
			return nil, errStatus(err)
		}
	}
	if slices.Contains(nodes, s.o.Node) {
		s.mu.Lock()
		s.active = req.GetState()
		s.mu.Unlock()
	}
	return &pb.Empty{}, nil
}

// GetActive reports this node's flag (local), or whether every live node
// is active.
func (s *Server) GetActive(ctx context.Context, req *pb.Local) (*pb.Boolean, error) {
	if req.GetLocal() {
		return &pb.Boolean{State: s.isActive()}, nil
	}
	nodes, err := s.liveNodes(ctx)
	if err != nil {
		return nil, errStatus(err)
	}
	for _, n := range nodes {
		e, err := s.b.state.Get(ctx, s.b.topo.URLFrontierActiveKey(n))
		if err == nil && string(e.Value()) == "false" {
			return &pb.Boolean{State: false}, nil
		}
	}
	return &pb.Boolean{State: true}, nil
}

// SetLogLevel sets this process's log level (Sieve has one logger: the
// package named is logged, not used).
func (s *Server) SetLogLevel(_ context.Context, req *pb.LogLevelParams) (*pb.Empty, error) {
	var l slog.Level
	switch req.GetLevel() {
	case pb.LogLevelParams_TRACE, pb.LogLevelParams_DEBUG:
		l = slog.LevelDebug
	case pb.LogLevelParams_INFO:
		l = slog.LevelInfo
	case pb.LogLevelParams_WARN:
		l = slog.LevelWarn
	case pb.LogLevelParams_ERROR:
		l = slog.LevelError
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown log level %d", req.GetLevel())
	}
	if s.o.LogLevel != nil {
		s.o.LogLevel.Set(l)
	}
	s.o.Logger.Info("urlfrontier: log level set", "package", req.GetPackage(), "level", l)
	return &pb.Empty{}, nil
}

// GetURLStatus answers for one URL (canonicalized as puts are): exactly
// for a URL the store holds, queued, in process or completed, as a known
// item (item); for another, from the crawl's filter, which holds the URLs
// Sieve's own crawler saw and may hold, with its false-positive rate, one
// never seen ("probably seen"): a URL it holds is answered as a known item
// without a refetch date, one it does not with NotFound. The filter is
// asked for the URL's page's key under the crawl's learned rules, as a put
// would be: another spelling of a page seen is probably seen.
func (s *Server) GetURLStatus(ctx context.Context, req *pb.URLStatusRequest) (*pb.URLItem, error) {
	c := s.check(&pb.URLInfo{Url: req.GetUrl(), Key: req.GetKey(), CrawlID: req.GetCrawlID()})
	if c.reason != "" {
		return nil, status.Errorf(codes.InvalidArgument, "url %s: %s", quoted(req.GetUrl()), c.reason)
	}
	if _, err := s.existing(ctx, req.GetCrawlID()); err != nil {
		return nil, err
	}
	p := partOf(c.crawl, c.key)
	if err := s.q.st.Sync(ctx, p); err != nil {
		return nil, errStatus(err)
	}
	e, err := readEntry(s.q.st, c.crawl, c.key, c.url)
	if err != nil {
		return nil, errStatus(err)
	}
	if e != nil {
		return s.item(e, e.lease(s.now())), nil
	}
	f, release, err := s.o.Filters.Acquire(ctx, c.crawl)
	if err != nil {
		return nil, errStatus(err)
	}
	held, err := f.Contains(ctx, [][]byte{[]byte(s.pageKey(c.crawl, c.url))})
	release()
	if err != nil {
		return nil, errStatus(err)
	}
	if !held[0] {
		return nil, status.Errorf(codes.NotFound, "url %s is not known in crawl %s", quoted(c.url), c.crawl)
	}
	info := &pb.URLInfo{Url: c.url, Key: c.key, CrawlID: c.crawl}
	return &pb.URLItem{ID: c.url, Item: &pb.URLItem_Known{Known: &pb.KnownURLItem{Info: info}}}, nil
}

// item is an entry as the API shows it, as the reference service does: a
// known item whose refetchable_from_date is when it is handed out next, in
// Unix seconds: for a URL waiting for its first fetch, when it was stored
// (it has been due since); in process, the end of its lease; scheduled,
// its refetch date; completed, 0 (never). So a listing put back with
// PutURLs (the reference client's DumpURLs and PutURLs) restores every
// URL's status, date and metadata.
func (s *Server) item(e *Entry, lease int64) *pb.URLItem {
	info := &pb.URLInfo{Url: e.URL, Key: e.Key, CrawlID: e.Crawl, Metadata: toPB(e.Meta)}
	return &pb.URLItem{ID: e.URL, CreationDate: uint64(max(e.Created, 0)),
		Item: &pb.URLItem_Known{Known: &pb.KnownURLItem{Info: info, RefetchableFromDate: nextFetch(e, lease)}}}
}

// nextFetch is when e is handed out next (Unix seconds; 0: never), given
// its running lease's end (Unix ms; 0: none).
func nextFetch(e *Entry, lease int64) uint64 {
	switch {
	case e.Completed:
		return 0
	case lease > 0:
		return uint64(lease / 1000)
	case e.Due > 0:
		return uint64(e.Due / 1000)
	}
	// Due at once since it was stored; never 0, which would read as
	// completed.
	return uint64(max(e.Created, 1))
}

// matcher is ListURLs' and CountURLs' filter on URLs.
func matcher(filter string, ignoreCase bool) func(*Entry) bool {
	if filter == "" {
		return func(*Entry) bool { return true }
	}
	if ignoreCase {
		f := strings.ToLower(filter)
		return func(e *Entry) bool { return strings.Contains(strings.ToLower(e.URL), f) }
	}
	return func(e *Entry) bool { return strings.Contains(e.URL, filter) }
}

// ListURLs streams a crawl's (or a queue's) URLs, queued, in process and
// completed, as known items with their metadata and the date each is
// handed out next (item), ordered by queue and URL, from start, at most
// size (default 100), those containing filter if set. The items are sent
// as the index is read, not gathered first: the reference client's
// DumpURLs asks for a whole crawl in one call.
func (s *Server) ListURLs(req *pb.ListUrlParams, stream pb.URLFrontier_ListURLsServer) error {
	c, err := crawlArg(req.GetCrawlID())
	if err != nil {
		return err
	}
	match := matcher(req.GetFilter(), req.GetIgnoreCase())
	size := int(req.GetSize())
	if size == 0 {
		size = 100
	}
	skip := int(req.GetStart())
	now := s.now()
	sent := 0
	var sendErr error
	err = s.q.entries(c, req.GetKey(), func(e *Entry) bool {
		if !match(e) {
			return true
		}
		if skip > 0 {
			skip--
			return true
		}
		if sendErr = stream.Send(s.item(e, e.lease(now))); sendErr != nil {
			return false
		}
		sent++
		return sent < size
	})
	if err == nil {
		err = sendErr
	}
	return errStatus(err)
}

// CountURLs counts a crawl's (or a queue's) URLs, queued, in process and
// completed, as the reference does: without a filter from the queues'
// counts (a key per queue), with one by reading the URLs.
func (s *Server) CountURLs(_ context.Context, req *pb.CountUrlParams) (*pb.Long, error) {
	c, err := crawlArg(req.GetCrawlID())
	if err != nil {
		return nil, err
	}
	var n uint64
	if req.GetFilter() == "" {
		// Every URL: the queues' counts, a key per queue, not per URL.
		err := s.q.states(c, req.GetKey(), func(q *QueueState) bool {
			n += q.Queued + q.Completed
			return true
		})
		if err != nil {
			return nil, errStatus(err)
		}
		return &pb.Long{Value: n}, nil
	}
	match := matcher(req.GetFilter(), req.GetIgnoreCase())
	err = s.q.entries(c, req.GetKey(), func(e *Entry) bool {
		if match(e) {
			n++
		}
		return true
	})
	if err != nil {
		return nil, errStatus(err)
	}
	return &pb.Long{Value: n}, nil
}

// PurgeURLs removes a crawl's (or a queue's) queued URLs first stored more
// than days days ago (0: all) and returns how many it removed. URLs in
// process are kept: their updates are on the way.
func (s *Server) PurgeURLs(ctx context.Context, req *pb.PurgeUrlParams) (*pb.Long, error) {
	c, err := crawlArg(req.GetCrawlID())
	if err != nil {
		return nil, err
	}
	if ok, err := s.crawlExists(ctx, c); err != nil {
		return nil, err
	} else if !ok {
		return &pb.Long{}, nil // nothing to remove: no write of 32 partitions
	}
	now := s.o.Now()
	cutoff := now.Add(-time.Duration(req.GetDays()) * 24 * time.Hour).Unix()
	n, err := s.purgeQueued(ctx, c, req.GetKey(), func(e *Entry) bool { return e.Created <= cutoff })
	if err != nil {
		return nil, errStatus(err)
	}
	return &pb.Long{Value: n}, nil
}

// updateQueue applies change to a queue's state (a new one for a queue
// without) in its partition; with an empty key, change sets the crawl's
// default delay (only Delay is read).
func (s *Server) updateQueue(ctx context.Context, crawl, key string, change func(*QueueState)) error {
	return s.q.update(ctx, partOf(crawl, key), smallUpdate, func(u *updateTx) error {
		if key == "" {
			var q QueueState
			change(&q)
			u.b.Set(defaultKey(crawl), []byte(strconv.FormatInt(q.Delay, 10)))
			return nil
		}
		q, err := u.queue(crawl, key)
		if err != nil {
			return err
		}
		change(q)
		u.set(q)
		return nil
	})
}
