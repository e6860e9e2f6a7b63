package urlfrontier

import (
	"context"
	"errors"
	"io"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sievecrawl/sieve/frontier"
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

// putItems handles one batch of PutURLs items.
func (s *Server) putItems(ctx context.Context, batch []*pb.URLItem) []*pb.AckMessage {
	acks := make([]*pb.AckMessage, len(batch))
	var disc []*pb.URLInfo
	var at []int
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
			acks[i].Status = s.known(ctx, it.GetKnown())
		default:
			acks[i].Status = pb.AckMessage_SKIPPED
			s.m.rejected.WithLabelValues(reasonNoInfo).Inc()
		}
	}
	for j, st := range s.discover(ctx, disc) {
		acks[at[j]].Status = st
	}
	for _, a := range acks {
		s.m.urls.WithLabelValues("PutURLs", a.Status.String()).Inc()
	}
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
				j.err = status.Errorf(codes.InvalidArgument, "batch %q has %d URLs: at most %d", b.GetID(), len(b.GetItems()), s.o.MaxBatch)
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
		if err := stream.Send(&pb.BatchAck{ID: j.id, Statuses: st}); err != nil {
			return err
		}
	}
	return nil
}

// known applies the update of a URL that was fetched: with
// refetchable_from_date 0 it is completed (removed from its queue, marked
// in the filter: never handed out again); with a date it is scheduled to
// be handed out again from then. Either counts as a fetch of its queue.
func (s *Server) known(ctx context.Context, k *pb.KnownURLItem) pb.AckMessage_Status {
	c := s.check(k.GetInfo())
	date := k.GetRefetchableFromDate()
	if c.reason == "" && date > maxDate {
		c.reason = reasonDate
	}
	if c.reason != "" {
		s.m.rejected.WithLabelValues(c.reason).Inc()
		return pb.AckMessage_SKIPPED
	}
	if err := s.ensureCrawl(ctx, c.crawl); err != nil {
		return pb.AckMessage_FAIL
	}
	if err := s.applyKnown(ctx, c, date); err != nil {
		s.o.Logger.Warn("urlfrontier: known update", "url", c.url, "error", err)
		return pb.AckMessage_FAIL
	}
	return pb.AckMessage_OK
}

func (s *Server) applyKnown(ctx context.Context, c candidate, date uint64) error {
	key := s.store.topo.URLFrontierURLKey(c.crawl, c.key, c.url)
	// Mark first: a discovered copy arriving meanwhile is known.
	f, release, err := s.o.Filters.Acquire(ctx, c.crawl)
	if err != nil {
		return err
	}
	_, err = f.TestAndAdd(ctx, [][]byte{[]byte(c.url)})
	release()
	if err != nil {
		return err
	}
	for {
		e, rev, err := s.store.getURL(ctx, key)
		if err != nil {
			return err
		}
		if date == 0 {
			if e == nil {
				break // completed already, or never queued: marked
			}
			err := s.store.urls.Purge(ctx, key, jetstream.LastRevision(rev))
			if frontier.IsWrongSequence(err) {
				continue
			}
			if err != nil {
				s.store.markUnsure()
				return err
			}
			s.store.x.deleteEntry(key, rev+1, true) // the watch brings the marker's revision
			break
		}
		next := &Entry{V: formatVersion, Crawl: c.crawl, URL: c.url, Key: c.key, Meta: c.meta,
			Created: s.o.Now().Unix(), Due: int64(date) * 1000, Known: true}
		if e != nil {
			next.Created = e.Created
		}
		var nrev uint64
		if e == nil {
			nrev, err = s.store.urls.Create(ctx, key, encode(next))
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue
			}
		} else {
			nrev, err = s.store.urls.Update(ctx, key, encode(next), rev)
			if frontier.IsWrongSequence(err) {
				continue
			}
		}
		if err != nil {
			s.store.markUnsure()
			return err
		}
		s.store.x.putEntry(key, nrev, next, true)
		break
	}
	return s.store.updateQueue(ctx, c.crawl, c.key, func(q *QueueState) {
		delete(q.Leases, urlHash(key))
		q.Fetched++
		if date == 0 {
			q.Completed++
		}
	})
}
