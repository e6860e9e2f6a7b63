package urlfrontier

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
)

// store is the JetStream side of the server: the buckets the topology
// names (frontier/urlfrontier_names.go) and the index their watches keep.
// Every change is a compare-and-set on a key's last revision, sent
// asynchronously in batches (one round trip for a batch), so several
// servers share the buckets without locks: the first write wins and the
// others see a conflict and skip or retry.
type store struct {
	js   jetstream.JetStream
	topo frontier.Topology
	// urls and queues are one bucket (<PREFIX>_UF_QUEUES): its one
	// watch delivers a URL's purge before the queue's change that follows
	// it, so no server sees a queue's new state with a completed URL still
	// in it.
	urls   jetstream.KeyValue
	queues jetstream.KeyValue
	// stream is the queues bucket's stream, read for delete markers.
	stream jetstream.Stream
	state  jetstream.KeyValue
	nodes  jetstream.KeyValue
	x      *index
	// unsure is signalled when a write's outcome is unknown (follow.go).
	unsure chan struct{}
	// delivered counts the values watches delivered.
	delivered atomic.Uint64
}

// nodeTTL is how long a node that stopped renewing stays listed.
const nodeTTL = 15 * time.Second

func openStore(ctx context.Context, js jetstream.JetStream, topo frontier.Topology) (*store, error) {
	topo = topo.WithDefaults()
	s := &store{js: js, topo: topo, x: newIndex(), unsure: make(chan struct{}, 1)}
	for _, b := range []struct {
		kv   *jetstream.KeyValue
		name string
		desc string
		ttl  time.Duration
	}{
		{&s.queues, topo.URLFrontierQueuesBucket(), "Sieve URLFrontier: queues (delays, blocks, limits, turns, leases) and their URLs", 0},
		{&s.state, topo.URLFrontierStateBucket(), "Sieve URLFrontier: nodes' active flags", 0},
		{&s.nodes, topo.URLFrontierNodesBucket(), "Sieve URLFrontier: live nodes", nodeTTL},
	} {
		kv, err := frontier.Provision(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
			return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket: b.name, Description: b.desc, History: 1, TTL: b.ttl,
				Storage: topo.Storage, Replicas: topo.Replicas,
			})
		})
		if err != nil {
			return nil, fmt.Errorf("urlfrontier: bucket %s: %w", b.name, err)
		}
		*b.kv = kv
	}
	s.urls = s.queues
	st, err := js.Stream(ctx, "KV_"+topo.URLFrontierQueuesBucket())
	if err != nil {
		return nil, fmt.Errorf("urlfrontier: bucket %s: %w", topo.URLFrontierQueuesBucket(), err)
	}
	s.stream = st
	return s, nil
}

// markUnsure says a write may have been applied without this server
// learning its revision: the index may lack it until loaded again.
func (s *store) markUnsure() {
	select {
	case s.unsure <- struct{}{}:
	default:
	}
}

// watch keeps the index up to date with the bucket until ctx ends; ready
// is called once the watch delivered every value the bucket held when it
// started. With from > 0 it delivers the changes from that revision on
// instead: an index that holds everything before it need not see the
// whole bucket again.
func (s *store) watch(ctx context.Context, from uint64, ready func()) error {
	var opts []jetstream.WatchOpt
	if from > 0 {
		opts = append(opts, jetstream.ResumeFromRevision(from))
	}
	w, err := s.queues.WatchAll(ctx, opts...)
	if err != nil {
		return fmt.Errorf("urlfrontier: watch: %w", err)
	}
	defer w.Stop()
	for {
		var e jetstream.KeyValueEntry
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case e, ok = <-w.Updates():
		}
		if !ok {
			return errors.New("urlfrontier: watch ended")
		}
		if e != nil {
			s.delivered.Add(1)
		}
		switch {
		case e == nil: // the initial values are in
			ready()
		case s.topo.IsURLFrontierURLKey(e.Key()):
			s.applyURL(e)
		default:
			s.applyQueue(e)
		}
	}
}

func (s *store) applyURL(e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		s.x.deleteEntry(e.Key(), e.Revision(), false)
		return
	}
	if s.x.has(e.Key(), e.Revision()) {
		return // this server's own write, applied already
	}
	en, err := decodeEntry(e.Value())
	if err != nil {
		s.x.deleteEntry(e.Key(), e.Revision(), false) // unreadable: not ours to hand out
		return
	}
	s.x.putEntry(e.Key(), e.Revision(), en, false)
}

func (s *store) applyQueue(e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		s.x.deleteQueueKey(e.Key(), e.Revision(), false)
		return
	}
	q, err := decodeQueue(e.Value())
	if err != nil {
		s.x.deleteQueueKey(e.Key(), e.Revision(), false)
		return
	}
	if strings.HasSuffix(e.Key(), "._default") {
		s.x.putDefault(q.Crawl, e.Revision(), q.Delay, false)
		return
	}
	s.x.putQueue(e.Key(), e.Revision(), q, false)
}

// write is one compare-and-set: value for key if its last revision is rev
// (0: the key has no value).
type write struct {
	key   string
	value []byte
	rev   uint64
}

// result is a write's outcome: the new revision, or err (errConflict when
// the key's revision was not the one expected).
type result struct {
	rev uint64
	err error
}

var errConflict = errors.New("urlfrontier: changed meanwhile")

// createHeader is the header of a write that creates a key, shared by
// every such message: nats.go only reads a header it is given no options
// for. (Building one per message was a tenth of the allocations of a put.)
var createHeader = nats.Header{jetstream.ExpectedLastSubjSeqHeader: {"0"}}

// asyncChunk bounds the writes awaiting acknowledgement at once.
const asyncChunk = 1000

// subject is the stream subject of a key of the queues bucket.
func (s *store) subject(key string) string { return "$KV." + s.queues.Bucket() + "." + key }

// publishAll publishes msgs asynchronously and waits for every
// acknowledgement (or ctx): one round trip per chunk of asyncChunk. Each
// message's outcome is its result: its revision, errConflict when its
// expected revision was not the key's, or another error, whose outcome
// this server cannot know (the index is then marked unsure).
func (s *store) publishAll(ctx context.Context, msgs []*nats.Msg) ([]result, error) {
	res := make([]result, len(msgs))
	for lo := 0; lo < len(msgs); lo += asyncChunk {
		hi := min(lo+asyncChunk, len(msgs))
		futures := make([]jetstream.PubAckFuture, hi-lo)
		for i := lo; i < hi; i++ {
			f, err := s.publishAsync(ctx, msgs[i])
			if err != nil {
				res[i].err = err
				s.markUnsure()
				continue
			}
			futures[i-lo] = f
		}
		for i, f := range futures {
			if f == nil {
				continue
			}
			select {
			case ack := <-f.Ok():
				res[lo+i].rev = ack.Sequence
			case err := <-f.Err():
				if frontier.IsWrongSequence(err) {
					err = errConflict
				} else {
					s.markUnsure()
				}
				res[lo+i].err = err
			case <-ctx.Done():
				s.markUnsure()
				return nil, ctx.Err()
			}
		}
	}
	return res, nil
}

// cas applies writes to the queues bucket, all in one publishAll.
//
// A write that creates a key (rev 0) also succeeds over the key's delete
// or purge marker, as jetstream's Create does: a removed key holds no
// value, but its last revision is the marker's, so the create's first try
// conflicts; cas reads the marker's revision and writes once more over
// it. Without that, a queue deleted (DeleteQueue, DeleteCrawl) and then
// given a URL or a delay could never store its state again.
func (s *store) cas(ctx context.Context, writes []write) ([]result, error) {
	msgs := make([]*nats.Msg, len(writes))
	for i, w := range writes {
		msgs[i] = &nats.Msg{Subject: s.subject(w.key), Data: w.value, Header: createHeader}
		if w.rev != 0 {
			msgs[i].Header = nats.Header{jetstream.ExpectedLastSubjSeqHeader: {strconv.FormatUint(w.rev, 10)}}
		}
	}
	res, err := s.publishAll(ctx, msgs)
	if err != nil {
		return nil, err
	}
	var again []write
	var at []int
	for i, w := range writes {
		if w.rev != 0 || !errors.Is(res[i].err, errConflict) {
			continue
		}
		rev, err := s.markerRev(ctx, msgs[i].Subject)
		if err != nil {
			res[i].err = err
			continue
		}
		if rev != 0 {
			w.rev = rev
			again = append(again, w)
			at = append(at, i)
		}
	}
	if len(again) == 0 {
		return res, nil
	}
	res2, err := s.cas(ctx, again) // rev != 0: no further round
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		res[i] = res2[j]
	}
	return res, nil
}

// markerRev returns the revision of the delete or purge marker that is
// subject's last message, or 0 when its last message is a value or it
// has none.
func (s *store) markerRev(ctx context.Context, subject string) (uint64, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("urlfrontier: read %s: %w", subject, err)
	}
	switch m.Header.Get("KV-Operation") {
	case "DEL", "PURGE":
		return m.Sequence, nil
	}
	return 0, nil
}

// publishAsync publishes m asynchronously, waiting while the connection
// has too many publishes awaiting their acknowledgement (shared by every
// call of the server) rather than failing.
func (s *store) publishAsync(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	for {
		f, err := s.js.PublishMsgAsync(m, opts...)
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return f, err
		}
		select {
		case <-s.js.PublishAsyncComplete():
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// createURLs stores new entries whose keys hold no value: dup[i] is true
// when keys[i] held one already.
func (s *store) createURLs(ctx context.Context, keys []string, entries []*Entry) (dup []bool, errs []error, err error) {
	writes := make([]write, len(keys))
	for i, k := range keys {
		writes[i] = write{key: k, value: encode(entries[i])}
	}
	res, err := s.cas(ctx, writes)
	if err != nil {
		return nil, nil, err
	}
	dup, errs = make([]bool, len(keys)), make([]error, len(keys))
	for i, r := range res {
		switch {
		case r.err == nil:
			s.x.putEntry(keys[i], r.rev, entries[i], true)
		case errors.Is(r.err, errConflict):
			dup[i] = true // the key holds a value
		default:
			errs[i] = r.err
		}
	}
	return dup, errs, nil
}

// getURL reads a URL's entry from the bucket (not the index): exact across
// servers.
func (s *store) getURL(ctx context.Context, key string) (*Entry, uint64, error) {
	e, err := s.urls.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	en, err := decodeEntry(e.Value())
	if err != nil {
		return nil, 0, err
	}
	return en, e.Revision(), nil
}

// getQueue reads a queue's state (or a crawl's default) from the bucket.
func (s *store) getQueue(ctx context.Context, key string) (*QueueState, uint64, error) {
	e, err := s.queues.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	q, err := decodeQueue(e.Value())
	if err != nil {
		return nil, 0, err
	}
	return q, e.Revision(), nil
}

// updateQueue applies change to a queue's state (a new one for a queue
// without), retrying on conflicts with other servers.
func (s *store) updateQueue(ctx context.Context, crawl, key string, change func(*QueueState)) error {
	stateKey := s.topo.URLFrontierQueueKey(crawl, key)
	if key == "" {
		stateKey = s.topo.URLFrontierDefaultKey(crawl)
	}
	for {
		q, rev, err := s.getQueue(ctx, stateKey)
		if err != nil {
			return err
		}
		if q == nil {
			q = &QueueState{V: formatVersion, Crawl: crawl, Key: key}
		}
		change(q)
		res, err := s.cas(ctx, []write{{key: stateKey, value: encode(q), rev: rev}})
		if err != nil {
			return err
		}
		switch r := res[0]; {
		case r.err == nil:
			if key == "" {
				s.x.putDefault(crawl, r.rev, q.Delay, true)
			} else {
				s.x.putQueueFrom(stateKey, rev, r.rev, q)
			}
			return nil
		case errors.Is(r.err, errConflict):
			continue
		default:
			return r.err
		}
	}
}

// purgeKeys removes keys from the queues bucket (markers every watcher
// sees), returning how many it removed: all of them (the caller found
// them).
func (s *store) purgeKeys(ctx context.Context, keys []string) (int, error) {
	// Purges are not compare-and-set: no expected revision header.
	msgs := make([]*nats.Msg, len(keys))
	for i, k := range keys {
		msgs[i] = &nats.Msg{Subject: s.subject(k), Header: nats.Header{
			"KV-Operation":      {"PURGE"},
			jetstream.MsgRollup: {jetstream.MsgRollupSubject},
		}}
	}
	res, err := s.publishAll(ctx, msgs)
	if err != nil {
		return 0, err
	}
	for _, r := range res {
		if r.err != nil {
			return 0, r.err
		}
	}
	for i, r := range res {
		if s.topo.IsURLFrontierURLKey(keys[i]) {
			s.x.deleteEntry(keys[i], r.rev, true)
		} else {
			s.x.deleteQueueKey(keys[i], r.rev, true)
		}
	}
	return len(keys), nil
}
