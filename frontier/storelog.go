package frontier

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/urlstore"
)

// The per-URL stores (package urlstore) keep their log in one stream:
//
//	<PREFIX>_STORE   subject <prefix>.store.<name>.<partition>: each entry
//	                 a batch of changes of store <name> (captures, …) in
//	                 one of its partitions
//
// Subjects are per partition, never per URL, so what NATS keeps in memory
// per subject stays a constant whatever the number of URLs. Entries are
// compressed (zstd; S2 before) one by one by package urlstore, and the
// stream stores its blocks as they come: NATS rebuilds a stream's state
// from every block after an unclean stop (SIGKILL, a crash) when its
// state file, written every 2 minutes, is older than the last write, and
// decompressing the blocks was most of that: 4.7 s for the log of 5 M
// URLs, so 10 s at 20 M, before anything could be served. What is left
// of that rebuild reads the log's bytes, which the entries' compression
// keeps down.

// StoreStream is the stream of the per-URL stores' logs: <PREFIX>_STORE.
func (t Topology) StoreStream() string { return t.upperPrefix() + "_STORE" }

// StoreSubject is the subject of partition part of store name.
func (t Topology) StoreSubject(name string, part int) string {
	return t.WithDefaults().Prefix + ".store." + name + "." + strconv.Itoa(part)
}

// StoreFilter is the filter of every partition of store name.
func (t Topology) StoreFilter(name string) string {
	return t.WithDefaults().Prefix + ".store." + name + ".>"
}

// StoreConfig is the configuration of the stores' stream: a log kept in
// full (limits retention without limits: an entry leaves only with its
// store's data), of entries compressed by their writers (the stream's own
// compression off, see above), replicated like the other streams. A
// stream made compressed by an earlier version is updated to this, and
// nats-server applies it when it next opens the stream's store (at its
// restart): the blocks written from then on are stored as they come, the
// older ones stay compressed until the log's compaction trims them.
func (t Topology) StoreConfig() jetstream.StreamConfig {
	t = t.WithDefaults()
	return jetstream.StreamConfig{
		Name:        t.StoreStream(),
		Description: "Sieve: the logs of its per-URL stores (captures, …), one subject per store and partition",
		Subjects:    []string{t.Prefix + ".store.>"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		MaxAge:      0,
		Storage:     t.Storage,
		Replicas:    t.Replicas,
		Compression: jetstream.NoCompression,
		Metadata:    map[string]string{metaFormat: strconv.Itoa(Version)},
	}
}

// StoreLog is the log of one per-URL store in the stores' stream: a
// urlstore.Log on JetStream. Appends are publishes with the expected last
// sequence of the partition's subject, so two writers of a partition never
// interleave unseen; reads are an ordered consumer over the store's
// subjects. It is safe for concurrent use.
type StoreLog struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	topo   Topology
	name   string
	prefix string // subject prefix of the store's partitions
}

var _ urlstore.Log = (*StoreLog)(nil)

// OpenStoreLog opens the log of store name, creating the stores' stream if
// needed. name is a subject token.
func OpenStoreLog(ctx context.Context, js jetstream.JetStream, topo Topology, name string) (*StoreLog, error) {
	topo = topo.WithDefaults()
	if !ValidCrawl(name) {
		return nil, fmt.Errorf("frontier: store name %q is not a subject token", name)
	}
	st, err := Provision(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, topo.StoreConfig())
	})
	if err != nil {
		return nil, fmt.Errorf("frontier: ensure stream %s: %w", topo.StoreStream(), err)
	}
	return &StoreLog{js: js, stream: st, topo: topo, name: name,
		prefix: strings.TrimSuffix(topo.StoreFilter(name), ">")}, nil
}

// subject is the subject of partition part (StoreSubject, from the
// prefix computed once).
func (l *StoreLog) subject(part int) string { return l.prefix + strconv.Itoa(part) }

// Append implements urlstore.Log.
func (l *StoreLog) Append(ctx context.Context, part int, last uint64, data []byte) (uint64, error) {
	m := &nats.Msg{Subject: l.subject(part), Data: data,
		Header: nats.Header{jetstream.ExpectedLastSubjSeqHeader: {strconv.FormatUint(last, 10)}}}
	ack, err := l.js.PublishMsg(ctx, m)
	if err != nil {
		if IsWrongSequence(err) {
			return 0, urlstore.ErrConflict
		}
		return 0, fmt.Errorf("frontier: append to %s: %w", m.Subject, err)
	}
	return ack.Sequence, nil
}

// Last implements urlstore.Log.
func (l *StoreLog) Last(ctx context.Context, part int) (uint64, error) {
	subject := l.subject(part)
	m, err := l.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("frontier: last entry of %s: %w", subject, err)
	}
	return m.Sequence, nil
}

// Read implements urlstore.Log.
func (l *StoreLog) Read(ctx context.Context, after uint64, caughtUp func(), fn func(urlstore.Entry) error) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{l.topo.StoreFilter(l.name)}}
	if after > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = after + 1
	}
	c, err := l.stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("frontier: read %s: %w", cfg.FilterSubjects[0], err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return fmt.Errorf("frontier: read %s: %w", cfg.FilterSubjects[0], err)
	}
	once := false
	up := func() {
		if !once {
			once = true
			caughtUp()
		}
	}
	if info.NumPending == 0 {
		up()
	}
	it, err := c.Messages()
	if err != nil {
		return fmt.Errorf("frontier: read %s: %w", cfg.FilterSubjects[0], err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("frontier: read %s: %w", cfg.FilterSubjects[0], err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("frontier: read %s: %w", m.Subject(), err)
		}
		part, err := strconv.Atoi(strings.TrimPrefix(m.Subject(), l.prefix))
		if err != nil || part < 0 {
			continue // not a partition's subject: not this store's entry
		}
		if err := fn(storeEntry(m, meta, part)); err != nil {
			return err
		}
		if meta.NumPending == 0 {
			up()
		}
	}
}

// storeEntry is the log entry m of partition part. Its Prev is the
// compare-and-append's expected last subject sequence, a header JetStream
// stores with the message as it was published (every entry Append ever
// wrote has it).
func storeEntry(m jetstream.Msg, meta *jetstream.MsgMetadata, part int) urlstore.Entry {
	e := urlstore.Entry{Seq: meta.Sequence.Stream, Part: part, Data: m.Data(), Time: meta.Timestamp, Pending: meta.NumPending}
	if v := m.Headers().Get(jetstream.ExpectedLastSubjSeqHeader); v != "" {
		if prev, err := strconv.ParseUint(v, 10, 64); err == nil {
			e.Prev, e.Chained = prev, true
		}
	}
	return e
}

// ReadPart implements urlstore.Log.
func (l *StoreLog) ReadPart(ctx context.Context, part int, fn func(urlstore.Entry) error) error {
	subject := l.subject(part)
	c, err := l.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return fmt.Errorf("frontier: read %s: %w", subject, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return fmt.Errorf("frontier: read %s: %w", subject, err)
	}
	for left := info.NumPending; left > 0; {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, err := c.Fetch(int(min(left, 1000)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return fmt.Errorf("frontier: read %s: %w", subject, err)
		}
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("frontier: read %s: %w", subject, err)
			}
			if err := fn(storeEntry(m, meta, part)); err != nil {
				return err
			}
			left = meta.NumPending
		}
		if err := batch.Error(); err != nil {
			return fmt.Errorf("frontier: read %s: %w", subject, err)
		}
	}
	return nil
}

// Trim implements urlstore.Log: a purge of the partition's subject below
// before, which keeps the entry at before and every later one.
func (l *StoreLog) Trim(ctx context.Context, part int, before uint64) error {
	if before <= 1 {
		return nil
	}
	subject := l.subject(part)
	if err := l.stream.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(before)); err != nil {
		return fmt.Errorf("frontier: trim %s below %d: %w", subject, before, err)
	}
	return nil
}
