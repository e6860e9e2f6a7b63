package frontier

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Topology names and shapes the pipeline's streams, subjects, consumers and
// key-value buckets: every NATS name Sieve uses comes from its methods.
// Every process of one deployment (workers, crawlers, the CLI) must use the
// same Prefix and Partitions; the other fields are applied by whichever
// process calls Ensure. The zero value of a field means its default. A
// Topology is a value; it is safe for concurrent use.
type Topology struct {
	// Prefix starts every subject and stream name (default "sieve").
	Prefix string
	// Partitions is the number of frontier partitions (default 16).
	Partitions int
	// DuplicateWindow is how long the frontier stream remembers message
	// IDs (default 10 minutes); see the package doc for what it bounds.
	DuplicateWindow time.Duration
	// Limits bounds discovered messages; it is also the discovered stream's
	// largest message.
	Limits Limits
	// FrontierMaxMsgs and FrontierMaxBytes cap the frontier stream; at a
	// cap, publishes fail and workers wait (backpressure). 0 or -1: no cap.
	FrontierMaxMsgs, FrontierMaxBytes int64
	// DiscoveredMaxBytes caps the discovered stream. 0 or -1: no cap.
	DiscoveredMaxBytes int64
	// Replicas of each stream, and so of its consumers, and of every KV
	// bucket Sieve creates (default 1; 3 or 5 in a NATS cluster, where a
	// stream then survives the loss of 1 or 2 servers).
	Replicas int
	// Storage of the streams (default file).
	Storage jetstream.StorageType
	// AckWait is how long a fetched discovered message may stay
	// unacknowledged before redelivery (default 30 s).
	AckWait time.Duration
	// MaxAckPending bounds discovered messages in flight over all workers
	// (default 10,000).
	MaxAckPending int
	// Routes is the number of route partitions that give each URL one
	// owner among the workers (0: none, every worker admits any URL). With
	// Routes > 0 workers forward each page's canonical links to the
	// partition Route(crawl, URL) on the routed stream, and each partition
	// is admitted by the one worker that leases it (see the package doc,
	// "One owner per URL"). All workers of a deployment must agree on it.
	Routes int
}

// Defaults of Topology.
const (
	DefaultPrefix          = "sieve"
	DefaultPartitions      = 16
	DefaultDuplicateWindow = 10 * time.Minute
	DefaultAckWait         = 30 * time.Second
	DefaultMaxAckPending   = 10_000
	// discoveredWindow is the discovered stream's duplicate window, which
	// only absorbs a crawler's retried publishes.
	discoveredWindow = 2 * time.Minute
)

// WithDefaults returns t with zero fields set to their defaults.
func (t Topology) WithDefaults() Topology {
	if t.Prefix == "" {
		t.Prefix = DefaultPrefix
	}
	if t.Partitions <= 0 {
		t.Partitions = DefaultPartitions
	}
	if t.DuplicateWindow <= 0 {
		t.DuplicateWindow = DefaultDuplicateWindow
	}
	t.Limits = t.Limits.withDefaults()
	if t.Replicas <= 0 {
		t.Replicas = 1
	}
	if t.AckWait <= 0 {
		t.AckWait = DefaultAckWait
	}
	if t.MaxAckPending <= 0 {
		t.MaxAckPending = DefaultMaxAckPending
	}
	return t
}

func (t Topology) upperPrefix() string {
	return strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(t.WithDefaults().Prefix))
}

// DiscoveredStream is the name of the stream crawlers publish pages to:
// <PREFIX>_DISCOVERED.
func (t Topology) DiscoveredStream() string { return t.upperPrefix() + "_DISCOVERED" }

// FrontierStream is the name of the stream of admitted URLs:
// <PREFIX>_FRONTIER.
func (t Topology) FrontierStream() string { return t.upperPrefix() + "_FRONTIER" }

// Consumer is the name of the durable pull consumer all dedup workers
// share: <prefix>-dedup.
func (t Topology) Consumer() string { return t.WithDefaults().Prefix + "-dedup" }

// PartitionConsumer is the durable consumer name of the crawler that owns a
// frontier partition: <prefix>-crawl-<partition>.
func (t Topology) PartitionConsumer(partition int) string {
	return t.WithDefaults().Prefix + "-crawl-" + strconv.Itoa(partition)
}

// LeaseBucket is the key-value bucket in which crawlers hold their
// partition leases and heartbeats: <PREFIX>_CRAWLERS.
func (t Topology) LeaseBucket() string { return t.upperPrefix() + "_CRAWLERS" }

// CrawlsBucket is the key-value bucket holding each crawl's seeds:
// <PREFIX>_CRAWLS.
func (t Topology) CrawlsBucket() string { return t.upperPrefix() + "_CRAWLS" }

// RedirectsBucket is the key-value bucket counting the redirects that led to
// each redirect target: <PREFIX>_REDIRECTS.
func (t Topology) RedirectsBucket() string { return t.upperPrefix() + "_REDIRECTS" }

// LeaseKey is the key, in LeaseBucket, that the crawler owning a frontier
// partition holds: partition.<partition>.
func (t Topology) LeaseKey(partition int) string { return "partition." + strconv.Itoa(partition) }

// MemberKey is the key, in LeaseBucket, that a live crawler keeps:
// member.<id>. An id may hold dots (a host name).
func (t Topology) MemberKey(id string) string { return "member." + id }

// MemberKeys is the filter of every MemberKey: member.>.
func (t Topology) MemberKeys() string { return "member.>" }

// AttemptsBucket is the key-value bucket counting the fetch attempts of
// frontier messages that failed temporarily: <PREFIX>_ATTEMPTS.
func (t Topology) AttemptsBucket() string { return t.upperPrefix() + "_ATTEMPTS" }

// CapturesBucket is the key-value bucket of the crawls' last captures in
// the embedded mode (deployments keep them in Redis).
func (t Topology) CapturesBucket() string { return t.upperPrefix() + "_CAPTURES" }

// WatchBucket is the key-value bucket in which every process's watch server
// announces itself (package watch): <PREFIX>_WATCH.
func (t Topology) WatchBucket() string { return t.upperPrefix() + "_WATCH" }

// RoutedStream is the name of the stream of canonical links forwarded to
// their owners: <PREFIX>_ROUTED.
func (t Topology) RoutedStream() string { return t.upperPrefix() + "_ROUTED" }

// WorkersBucket is the key-value bucket in which dedup workers hold their
// route leases and heartbeats: <PREFIX>_WORKERS.
func (t Topology) WorkersBucket() string { return t.upperPrefix() + "_WORKERS" }

// RouteKey is the key, in WorkersBucket, that the worker owning a route
// partition holds: route.<route>.
func (t Topology) RouteKey(route int) string { return "route." + strconv.Itoa(route) }

// RouteConsumer is the durable consumer name of the worker that owns a
// route partition: <prefix>-route-<route>.
func (t Topology) RouteConsumer(route int) string {
	return t.WithDefaults().Prefix + "-route-" + strconv.Itoa(route)
}

// RoutedSubject is the subject of a crawl's links forwarded to a route
// partition: <prefix>.routed.<crawl>.<route>.
func (t Topology) RoutedSubject(crawl string, route int) string {
	return t.WithDefaults().Prefix + ".routed." + crawl + "." + strconv.Itoa(route)
}

// RoutedFilter is the subject filter of every forwarded link:
// <prefix>.routed.>.
func (t Topology) RoutedFilter() string { return t.WithDefaults().Prefix + ".routed.>" }

// RouteFilter is the subject filter of one route partition over all
// crawls: <prefix>.routed.*.<route>.
func (t Topology) RouteFilter(route int) string {
	return t.WithDefaults().Prefix + ".routed.*." + strconv.Itoa(route)
}

// Route returns the route partition of a crawl's canonical URL: FNV-1a 64
// of crawl, a newline and the URL, modulo Routes (0 when Routes is 0). It
// is part of the wire format: all workers must agree on it.
func (t Topology) Route(crawl, canonicalURL string) int {
	if t.Routes <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(crawl))
	_, _ = h.Write([]byte{'\n'})
	_, _ = h.Write([]byte(canonicalURL))
	return int(h.Sum64() % uint64(t.Routes))
}

// DiscoveredSubject is the subject a crawler publishes a crawl's pages to:
// <prefix>.discovered.<crawl>.
func (t Topology) DiscoveredSubject(crawl string) string {
	return t.WithDefaults().Prefix + ".discovered." + crawl
}

// FrontierSubject is the subject of the crawl's admitted URLs in a
// partition: <prefix>.frontier.<crawl>.<partition>.
func (t Topology) FrontierSubject(crawl string, partition int) string {
	return t.WithDefaults().Prefix + ".frontier." + crawl + "." + strconv.Itoa(partition)
}

// PartitionFilter is the subject filter of one partition over all crawls:
// <prefix>.frontier.*.<partition>. A crawler that owns a partition
// consumes it with a durable consumer of its own (the frontier stream is a
// work queue, so partitions' consumers must not overlap).
func (t Topology) PartitionFilter(partition int) string {
	return t.WithDefaults().Prefix + ".frontier.*." + strconv.Itoa(partition)
}

// DiscoveredFilter is the subject filter of every crawl's discovered
// messages: <prefix>.discovered.>.
func (t Topology) DiscoveredFilter() string { return t.WithDefaults().Prefix + ".discovered.>" }

// FrontierFilter is the subject filter of every crawl's admitted URLs:
// <prefix>.frontier.>.
func (t Topology) FrontierFilter() string { return t.WithDefaults().Prefix + ".frontier.>" }

// CrawlFrontierFilter is the subject filter of one crawl's admitted URLs
// over all partitions: <prefix>.frontier.<crawl>.>.
func (t Topology) CrawlFrontierFilter(crawl string) string {
	return t.WithDefaults().Prefix + ".frontier." + crawl + ".>"
}

// ParseDiscoveredSubject returns the crawl of a subject DiscoveredSubject
// made, and false for any other subject (another prefix, an invalid crawl
// id, more tokens).
func (t Topology) ParseDiscoveredSubject(subject string) (crawl string, ok bool) {
	crawl, ok = strings.CutPrefix(subject, t.WithDefaults().Prefix+".discovered.")
	if !ok || !ValidCrawl(crawl) {
		return "", false
	}
	return crawl, true
}

// ParseFrontierSubject returns the crawl and partition of a subject
// FrontierSubject made, and false for any other subject (another prefix,
// an invalid crawl id, a partition out of [0, Partitions) or not written
// as FrontierSubject writes it).
func (t Topology) ParseFrontierSubject(subject string) (crawl string, partition int, ok bool) {
	t = t.WithDefaults()
	rest, ok := strings.CutPrefix(subject, t.Prefix+".frontier.")
	if !ok {
		return "", 0, false
	}
	crawl, p, ok := strings.Cut(rest, ".")
	if !ok || !ValidCrawl(crawl) {
		return "", 0, false
	}
	if partition, ok = t.parsePartition(p); !ok {
		return "", 0, false
	}
	return crawl, partition, true
}

// ParsePartitionConsumer returns the partition of a consumer name
// PartitionConsumer made, and false for any other name.
func (t Topology) ParsePartitionConsumer(name string) (partition int, ok bool) {
	p, ok := strings.CutPrefix(name, t.WithDefaults().Prefix+"-crawl-")
	if !ok {
		return 0, false
	}
	return t.parsePartition(p)
}

// parsePartition parses a partition number as strconv.Itoa writes it, in
// [0, Partitions).
func (t Topology) parsePartition(s string) (int, bool) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 0 || p >= t.WithDefaults().Partitions || strconv.Itoa(p) != s {
		return 0, false
	}
	return p, true
}

// Partition returns the frontier partition of a host: FNV-1a 32 of the
// lowercased host name (no port) modulo Partitions. It is part of the wire
// format: all processes must agree on it.
func (t Topology) Partition(host string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(strings.ToLower(host)))
	return int(h.Sum32() % uint32(t.WithDefaults().Partitions))
}

// EntryPartition returns the frontier partition of an entry: Partition of
// its queue key (Entry.QueueKey) without a port or IPv6 brackets. An entry
// without Key lands where version 1 put it (the partition of its URL's
// host name), and all entries of one queue key land in one partition,
// whether the key was given or defaulted, so that the crawler that owns
// the partition owns the queue.
func (t Topology) EntryPartition(e Entry) int { return t.Partition(keyHost(e.QueueKey())) }

// EntrySubject is the frontier subject an entry is published to:
// FrontierSubject(e.Crawl, EntryPartition(e)).
func (t Topology) EntrySubject(e Entry) string {
	return t.FrontierSubject(e.Crawl, t.EntryPartition(e))
}

// keyHost returns a queue key without a trailing :port (digits) or the
// brackets of an IPv6 address: the host name of a key HostKey made.
func keyHost(key string) string {
	if strings.HasPrefix(key, "[") {
		if j := strings.IndexByte(key, ']'); j > 0 {
			return key[1:j]
		}
		return key
	}
	if j := strings.LastIndexByte(key, ':'); j >= 0 && j+1 < len(key) && strings.Trim(key[j+1:], "0123456789") == "" {
		return key[:j]
	}
	return key
}

// Metadata keys stored on the streams, checked by Ensure.
const (
	metaFormat     = "sieve_format"
	metaPartitions = "sieve_partitions"
	metaRoutes     = "sieve_routes"
)

// ErrTopologyMismatch is returned (wrapped) by Ensure when existing streams
// were created with another partition count or format version.
var ErrTopologyMismatch = errors.New("frontier: streams exist with another topology")

func limit(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// DiscoveredConfig is the discovered stream's configuration: a work queue
// (a message is deleted once a worker acknowledges it), DiscardNew at its
// byte cap so crawlers see the backpressure, and the message size limit.
func (t Topology) DiscoveredConfig() jetstream.StreamConfig {
	t = t.WithDefaults()
	return jetstream.StreamConfig{
		Name:        t.DiscoveredStream(),
		Description: "Sieve: pages crawled, with their raw links (one message per page)",
		Subjects:    []string{t.DiscoveredFilter()},
		Retention:   jetstream.WorkQueuePolicy,
		Discard:     jetstream.DiscardNew,
		MaxMsgs:     -1,
		MaxBytes:    limit(t.DiscoveredMaxBytes),
		MaxMsgSize:  int32(min(t.Limits.MaxBytes, 1<<31-1)),
		Storage:     t.Storage,
		Replicas:    t.Replicas,
		Duplicates:  discoveredWindow,
		Metadata:    map[string]string{metaFormat: strconv.Itoa(Version)},
	}
}

// FrontierConfig is the frontier stream's configuration: a work queue
// partitioned by subject, DiscardNew at its caps (workers wait, nothing is
// dropped) and the duplicate window that absorbs republished URLs.
func (t Topology) FrontierConfig() jetstream.StreamConfig {
	t = t.WithDefaults()
	return jetstream.StreamConfig{
		Name:        t.FrontierStream(),
		Description: "Sieve: admitted URLs, each once, partitioned by host",
		Subjects:    []string{t.FrontierFilter()},
		Retention:   jetstream.WorkQueuePolicy,
		Discard:     jetstream.DiscardNew,
		MaxMsgs:     limit(t.FrontierMaxMsgs),
		MaxBytes:    limit(t.FrontierMaxBytes),
		Storage:     t.Storage,
		Replicas:    t.Replicas,
		Duplicates:  t.DuplicateWindow,
		Compression: jetstream.S2Compression,
		Metadata: map[string]string{
			metaFormat:     strconv.Itoa(Version),
			metaPartitions: strconv.Itoa(t.Partitions),
		},
	}
}

// RoutedConfig is the routed stream's configuration: a work queue of
// forwarded links, one subject per crawl and route partition, capped like
// the discovered stream (DiscardNew: forwarding workers wait) but apart
// from it, so that a full discovered stream never blocks the owners that
// drain this one.
func (t Topology) RoutedConfig() jetstream.StreamConfig {
	c := t.DiscoveredConfig()
	c.Name = t.RoutedStream()
	c.Description = "Sieve: canonical links forwarded to the worker that owns them"
	c.Subjects = []string{t.RoutedFilter()}
	c.Metadata = map[string]string{metaFormat: strconv.Itoa(Version), metaRoutes: strconv.Itoa(t.Routes)}
	return c
}

// RouteConsumerConfig is the configuration of a route partition's durable
// pull consumer, which the partition's owner fetches from: as the shared
// consumer's, over one partition's subjects.
func (t Topology) RouteConsumerConfig(route int) jetstream.ConsumerConfig {
	c := t.ConsumerConfig()
	c.Durable = t.RouteConsumer(route)
	c.Description = "Sieve dedup worker owning route " + strconv.Itoa(route)
	c.FilterSubject = t.RouteFilter(route)
	return c
}

// ConsumerConfig is the configuration of the workers' shared durable pull
// consumer: explicit acks, redelivery after AckWait, never given up on
// (poison messages are terminated by the worker instead).
func (t Topology) ConsumerConfig() jetstream.ConsumerConfig {
	t = t.WithDefaults()
	return jetstream.ConsumerConfig{
		Durable:       t.Consumer(),
		Description:   "Sieve dedup workers",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       t.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: t.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		FilterSubject: t.DiscoveredFilter(),
	}
}

// Ensure creates the two streams and the workers' consumer, or updates
// them to t's settings. It fails with ErrTopologyMismatch if the frontier
// stream exists with another partition count, since crawlers would then
// disagree on who owns a host, or holds a format newer than Version, which
// this build cannot read. Streams of an older format (MinVersion or later)
// are updated to Version: this build reads their messages as they are.
func (t Topology) Ensure(ctx context.Context, js jetstream.JetStream) error {
	t = t.WithDefaults()
	if err := t.check(ctx, js); err != nil {
		return err
	}
	if _, err := Provision(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, t.DiscoveredConfig())
	}); err != nil {
		return fmt.Errorf("frontier: ensure stream %s: %w", t.DiscoveredStream(), err)
	}
	if _, err := Provision(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, t.FrontierConfig())
	}); err != nil {
		return fmt.Errorf("frontier: ensure stream %s: %w", t.FrontierStream(), err)
	}
	if _, err := Provision(ctx, func(ctx context.Context) (jetstream.Consumer, error) {
		return js.CreateOrUpdateConsumer(ctx, t.DiscoveredStream(), t.ConsumerConfig())
	}); err != nil {
		return fmt.Errorf("frontier: ensure consumer %s: %w", t.Consumer(), err)
	}
	if t.Routes <= 0 {
		return nil
	}
	if _, err := Provision(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, t.RoutedConfig())
	}); err != nil {
		return fmt.Errorf("frontier: ensure stream %s: %w", t.RoutedStream(), err)
	}
	for r := 0; r < t.Routes; r++ {
		if _, err := Provision(ctx, func(ctx context.Context) (jetstream.Consumer, error) {
			return js.CreateOrUpdateConsumer(ctx, t.RoutedStream(), t.RouteConsumerConfig(r))
		}); err != nil {
			return fmt.Errorf("frontier: ensure consumer %s: %w", t.RouteConsumer(r), err)
		}
	}
	return nil
}

func (t Topology) check(ctx context.Context, js jetstream.JetStream) error {
	if t.Routes > 0 {
		s, err := js.Stream(ctx, t.RoutedStream())
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
		case err != nil:
			return fmt.Errorf("frontier: look up stream %s: %w", t.RoutedStream(), err)
		default:
			if got := s.CachedInfo().Config.Metadata[metaRoutes]; got != "" && got != strconv.Itoa(t.Routes) {
				return fmt.Errorf("%w: %s has %s routes, configured %d", ErrTopologyMismatch, t.RoutedStream(), got, t.Routes)
			}
		}
	}
	s, err := js.Stream(ctx, t.FrontierStream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("frontier: look up stream %s: %w", t.FrontierStream(), err)
	}
	meta := s.CachedInfo().Config.Metadata
	if got := meta[metaPartitions]; got != "" && got != strconv.Itoa(t.Partitions) {
		return fmt.Errorf("%w: %s has %s partitions, configured %d", ErrTopologyMismatch, t.FrontierStream(), got, t.Partitions)
	}
	if got := meta[metaFormat]; got != "" {
		if v, err := strconv.Atoi(got); err != nil || v < MinVersion || v > Version {
			return fmt.Errorf("%w: %s holds format %s, this build reads %d to %d", ErrTopologyMismatch, t.FrontierStream(), got, MinVersion, Version)
		}
	}
	return nil
}

// PublishDiscovered publishes d (split into messages of at most
// Limits.MaxLinks links) to the crawl's discovered subject and waits for
// JetStream to store each part. Each part carries a Nats-Msg-Id digest of
// its bytes, so retrying a publish that timed out stores it once. An
// invalid d is a *PoisonError and nothing is published.
func (t Topology) PublishDiscovered(ctx context.Context, js jetstream.JetStream, d Discovered) error {
	return t.PublishDiscoveredIn(ctx, js, d, "")
}

// PublishDiscoveredIn publishes d as PublishDiscovered does, for the
// crawl's incarnation (CrawlRecord.Incarnation): each part's Nats-Msg-Id
// digests the incarnation with its bytes, so that the same seeds given to
// a crawl created again under a deleted crawl's id are not dropped as the
// deleted crawl's, while a retried publish is still stored once.
func (t Topology) PublishDiscoveredIn(ctx context.Context, js jetstream.JetStream, d Discovered, incarnation string) error {
	t = t.WithDefaults()
	d.V = Version
	for _, part := range d.Split(t.Limits.MaxLinks) {
		if err := part.check(t.Limits); err != nil {
			return err
		}
		data, err := part.Encode()
		if err != nil {
			return fmt.Errorf("frontier: encode discovered: %w", err)
		}
		if len(data) > t.Limits.MaxBytes {
			return poison(PoisonTooLarge, "%d bytes, limit %d (fewer links per message would fit)", len(data), t.Limits.MaxBytes)
		}
		msg := &nats.Msg{Subject: t.DiscoveredSubject(d.Crawl), Data: data, Header: nats.Header{}}
		if _, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(contentID(data, incarnation))); err != nil {
			return fmt.Errorf("frontier: publish discovered: %w", err)
		}
	}
	return nil
}
