package urlfrontier

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// putBatch bounds the items of a PutURLs stream answered together: items
// already received are admitted in one batch, like a page's links.
const putBatch = 500

// PutURLs admits discovered items and applies known ones, answering one
// AckMessage per item (its ID, or its URL without one). Items that arrive
// together are handled as one batch; acknowledgements follow the order of
// the items.
func (s *Server) PutURLs(stream pb.URLFrontier_PutURLsServer) error {
	ctx := stream.Context()
	items := make(chan *pb.URLItem, putBatch)
	recvErr := make(chan error, 1)
	go func() {
		defer close(items)
		for {
			it, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case items <- it:
			case <-ctx.Done():
				recvErr <- ctx.Err()
				return
			}
		}
	}()
	for {
		first, ok := <-items
		if !ok {
			break
		}
		batch := []*pb.URLItem{first}
	drain:
		for len(batch) < putBatch {
			select {
			case it, ok := <-items:
				if !ok {
					break drain
				}
				batch = append(batch, it)
			default:
				break drain
			}
		}
		for _, ack := range s.putItems(ctx, batch) {
			if err := stream.Send(ack); err != nil {
				return err
			}
		}
	}
	if err := <-recvErr; !errors.Is(err, io.EOF) {
		return errStatus(err)
	}
	return nil
}

// putItems handles one batch of PutURLs items: the discovered ones
// admitted together, the known ones applied together.
func (s *Server) putItems(ctx context.Context, batch []*pb.URLItem) []*pb.AckMessage {
	acks := make([]*pb.AckMessage, len(batch))
	var disc []*pb.URLInfo
	var at []int
	var kn []*pb.KnownURLItem
	var kat []int
	for i, it := range batch {
		acks[i] = &pb.AckMessage{ID: it.GetID()}
		switch {
		case it.GetDiscovered() != nil:
			if acks[i].ID == "" {
				acks[i].ID = it.GetDiscovered().GetInfo().GetUrl()
			}
			disc = append(disc, it.GetDiscovered().GetInfo())
			at = append(at, i)
		case it.GetKnown() != nil:
			if acks[i].ID == "" {
				acks[i].ID = it.GetKnown().GetInfo().GetUrl()
			}
			kn = append(kn, it.GetKnown())
			kat = append(kat, i)
		default:
			acks[i].Status = pb.AckMessage_SKIPPED
			s.m.rejected.WithLabelValues(reasonNoInfo).Inc()
		}
	}
	for j, st := range s.known(ctx, kn) {
		acks[kat[j]].Status = st
	}
	for j, st := range s.discover(ctx, disc) {
		acks[at[j]].Status = st
	}
	for _, a := range acks {
		s.m.urls.WithLabelValues("PutURLs", a.Status.String()).Inc()
	}
	s.m.work.Add(uint64(len(acks)))
	return acks
}

// putInFlight bounds the batches of one PutDiscovered stream admitted at
// once: a stream is then not bound by one admission's round trips.
const putInFlight = 8

// PutDiscovered admits each batch and answers one BatchAck per batch, its
// statuses in the order of the batch's items, the acks in the order of the
// batches. Up to putInFlight batches of a stream are admitted at once. A
// batch of more than Options.MaxBatch items ends the stream with
// InvalidArgument, after the acks of the batches before it.
func (s *Server) PutDiscovered(stream pb.URLFrontier_PutDiscoveredServer) error {
	ctx := stream.Context()
	type job struct {
		id   string
		done chan []pb.AckMessage_Status
		err  error
	}
	jobs := make(chan *job, putInFlight)
	go func() {
		defer close(jobs)
		for {
			b, err := stream.Recv()
			j := &job{id: b.GetID(), done: make(chan []pb.AckMessage_Status, 1)}
			switch {
			case errors.Is(err, io.EOF):
				return
			case err != nil:
				j.err = errStatus(err)
			case len(b.GetItems()) > s.o.MaxBatch:
				j.err = status.Errorf(codes.InvalidArgument, "batch %s has %d URLs: at most %d", quoted(b.GetID()), len(b.GetItems()), s.o.MaxBatch)
			default:
				go func() { j.done <- s.discover(ctx, b.GetItems()) }()
			}
			select {
			case jobs <- j:
			case <-ctx.Done():
				return
			}
			if j.err != nil {
				return
			}
		}
	}()
	for j := range jobs {
		if j.err != nil {
			return j.err
		}
		var st []pb.AckMessage_Status
		select {
		case st = <-j.done:
		case <-ctx.Done():
			return errStatus(ctx.Err())
		}
		for _, v := range st {
			s.m.urls.WithLabelValues("PutDiscovered", v.String()).Inc()
		}
		s.m.work.Add(uint64(len(st)))
		if err := stream.Send(&pb.BatchAck{ID: j.id, Statuses: st}); err != nil {
			return err
		}
	}
	return nil
}

// known applies the updates of URLs that were fetched: with
// refetchable_from_date 0 a URL is completed (kept with its metadata,
// marked in the filter: never handed out again); with a date it is
// scheduled to be handed out again from then. Either counts as a fetch of
// its queue and ends its lease. The URLs are marked in their crawls'
// filters first, under their pages' keys (a discovered copy, or another
// spelling of the page, arriving meanwhile is known), then each
// partition's updates are one read-modify-write.
func (s *Server) known(ctx context.Context, items []*pb.KnownURLItem) []pb.AckMessage_Status {
	st := make([]pb.AckMessage_Status, len(items))
	type update struct {
		c    candidate
		date uint64
		i    int
	}
	var ups []update
	byCrawl := map[string][]int{}
	for i, k := range items {
		c := s.check(k.GetInfo())
		date := k.GetRefetchableFromDate()
		if c.reason == "" && date > maxDate {
			c.reason = reasonDate
		}
		if c.reason != "" {
			s.m.rejected.WithLabelValues(c.reason).Inc()
			st[i] = pb.AckMessage_SKIPPED
			continue
		}
		if err := s.ensureCrawl(ctx, c.crawl); err != nil {
			st[i] = pb.AckMessage_FAIL
			continue
		}
		byCrawl[c.crawl] = append(byCrawl[c.crawl], len(ups))
		ups = append(ups, update{c: c, date: date, i: i})
	}
	failed := make([]bool, len(ups))
	for crawl, at := range byCrawl {
		urls := make([][]byte, len(at))
		for j, k := range at {
			urls[j] = []byte(s.pageKey(crawl, ups[k].c.url))
		}
		if err := s.mark(ctx, crawl, urls); err != nil {
			s.o.Logger.Warn("urlfrontier: known updates: mark", "crawl", crawl, "error", err)
			for _, k := range at {
				failed[k] = true
			}
		}
	}
	var todo []update
	for k, up := range ups {
		if failed[k] {
			st[up.i] = pb.AckMessage_FAIL
		} else {
			todo = append(todo, up)
		}
	}
	parts, groups, sizes := byPartition(todo, func(up update) int { return partOf(up.c.crawl, up.c.key) },
		func(up update) int { return 2*len(up.c.url) + len(up.c.key) + metaSize(up.c.meta) + 64 })
	now := s.o.Now()
	_ = parallel(len(parts), func(g int) error {
		err := s.q.update(ctx, parts[g], sizes[g], func(u *updateTx) error {
			for _, up := range groups[g] {
				if err := applyKnown(u, up.c, up.date, now); err != nil {
					return err
				}
			}
			return nil
		})
		for _, up := range groups[g] {
			st[up.i] = pb.AckMessage_OK
			if err != nil {
				st[up.i] = pb.AckMessage_FAIL
			}
		}
		if err != nil {
			s.o.Logger.Warn("urlfrontier: known updates", "partition", parts[g], "error", err)
		}
		return nil
	})
	return st
}

// mark adds urls (pages' keys) to crawl's filter.
func (s *Server) mark(ctx context.Context, crawl string, urls [][]byte) error {
	f, release, err := s.o.Filters.Acquire(ctx, crawl)
	if err != nil {
		return err
	}
	defer release()
	_, err = f.TestAndAdd(ctx, urls)
	return err
}

// applyKnown writes one known update inside its partition's update: the
// URL's record (completed, or due at its refetch date), its place in the
// ready index, and its queue's counts and lease.
func applyKnown(u *updateTx, c candidate, date uint64, now time.Time) error {
	q, err := u.queue(c.crawl, c.key)
	if err != nil {
		return err
	}
	e, err := u.entry(c.crawl, c.key, c.url)
	if err != nil {
		return err
	}
	next := &Entry{Crawl: c.crawl, URL: c.url, Key: c.key, Meta: c.meta, Created: now.Unix()}
	if e != nil {
		next.Created = e.Created
		q.release(e.Until, ms(now))
		if e.Completed {
			q.Completed = max(q.Completed, 1) - 1 // completed again, or scheduled: counted below
		} else {
			q.Queued--
		}
	}
	if date == 0 {
		next.Completed = true
		q.Completed++
	} else {
		next.Known, next.Due = true, int64(date)*1000
		q.Queued++
	}
	u.putEntry(e, next)
	q.Fetched++
	u.set(q)
	return nil
}
