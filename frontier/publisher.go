package frontier

import (
	"context"
	"errors"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/admit"
)

// Publisher puts admitted URLs on the frontier stream: it is the JetStream
// side of admit.Publisher. Each URL goes to its crawl's partition subject
// (Topology.EntrySubject, the partition of its queue key) as an Entry, with
// Nats-Msg-Id = EntryIDIn(crawl, its incarnation, URL), so that the
// stream's duplicate window stores a URL published twice once. Publish sends every URL
// asynchronously, then waits for each acknowledgement; the JetStream
// context's PublishAsyncTimeout bounds that wait (a timed-out publish is a
// failure the Core retries). It is safe for concurrent use.
type Publisher struct {
	js   jetstream.JetStream
	topo Topology
}

var _ admit.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher to the frontier stream of topo over js.
func NewPublisher(js jetstream.JetStream, topo Topology) *Publisher {
	return &Publisher{js: js, topo: topo.WithDefaults()}
}

// Publish puts urls on the frontier and reports each one's outcome: stored,
// a duplicate (JetStream's window held its ID), or the error (the stream
// full, NATS away, no acknowledgement in time). It returns an error only if
// ctx ended first.
func (p *Publisher) Publish(ctx context.Context, urls []admit.URL) ([]admit.Ack, error) {
	msgs := make([]outMsg, len(urls))
	for i, u := range urls {
		msgs[i] = outMsg{msg: p.entryMsg(u), id: EntryIDIn(u.Crawl, u.Incarnation, u.URL)}
	}
	return publishAll(ctx, p.js, msgs)
}

// outMsg is a message to publish with its Nats-Msg-Id.
type outMsg struct {
	msg *nats.Msg
	id  string
}

// publishAll publishes every message asynchronously, then waits for each
// acknowledgement: acks[i] is msgs[i]'s outcome (stored, a duplicate, or
// the error). It returns an error only if ctx ended first.
func publishAll(ctx context.Context, js jetstream.JetStream, msgs []outMsg) ([]admit.Ack, error) {
	acks := make([]admit.Ack, len(msgs))
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for i, m := range msgs {
		f, err := js.PublishMsgAsync(m.msg, jetstream.WithMsgID(m.id))
		if err != nil {
			acks[i].Err = err
			continue
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			acks[i].Duplicate = ack.Duplicate
		case err := <-f.Err():
			acks[i].Err = err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return acks, nil
}

// isFull reports whether a publish failed because the frontier stream is at
// its limits (JetStream error 10077, "maximum messages/bytes exceeded").
func isFull(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrStoreFailed
}

// jsErrStoreFailed is JSStreamStoreFailedF: the stream refused to store a
// message, which with DiscardNew means it is at MaxMsgs or MaxBytes.
const jsErrStoreFailed jetstream.ErrorCode = 10077

func (p *Publisher) entryMsg(u admit.URL) *nats.Msg {
	e := Entry{Crawl: u.Crawl, URL: u.URL, Depth: u.Depth, From: u.From, Kind: LinkKind(u.Kind), Key: u.Key, Meta: u.Meta}
	if u.Fetch != "" {
		e.URL = u.Fetch
	}
	data, _ := e.Encode() // strings, ints and string lists: cannot fail
	return &nats.Msg{
		Subject: p.topo.EntrySubject(e),
		Data:    data,
		Header:  nats.Header{},
	}
}

// hostOf returns the host name of a canonical URL (no port, no brackets).
func hostOf(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return ""
	}
	rest := u[i+3:]
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
		rest = rest[:j]
	}
	if strings.HasPrefix(rest, "[") {
		if j := strings.IndexByte(rest, ']'); j > 0 {
			return rest[1:j]
		}
		return rest
	}
	if j := strings.LastIndexByte(rest, ':'); j >= 0 {
		return rest[:j]
	}
	return rest
}
