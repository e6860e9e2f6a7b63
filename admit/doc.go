// Package admit is the admission core of Sieve's dedup workers: the
// protocol that lets each discovered URL onto the frontier once — Contains,
// publish, mark, then acknowledge — with the coordination of a worker's
// concurrent batches (flights), the seen cache, and the parking of a crawl
// whose filter is unusable.
//
// The core knows nothing of NATS or Redis. It depends on small interfaces
// it declares: a Filter (Contains and TestAndAdd on batches of keys; every
// dedup filter is one) and Filters (each crawl's own), a Publisher (the
// frontier, which stores a URL published twice within its duplicate window
// once), the Messages a batch came from (kept alive, or handed back when
// parked), an Observer (health and metrics) and a Clock. frontier.Worker
// is its JetStream adapter: it consumes and decodes discovered messages,
// hands their canonical URLs to Core.Admit, and acknowledges a batch once
// Admit returns nil; frontier.Publisher publishes to the frontier stream.
// Package admittest has in-memory fakes of every dependency, so the
// protocol's hard cases (a publish that fails after the filter said "new",
// a batch whose context ends while another waits for it) are unit tests.
//
// Verdicts (Admitted, Republished, Held, Cached, Undecided) say what
// happened to each URL; the caller counts with them.
//
// # Parking
//
// A crawl whose filter cannot be opened until someone acts (Filters'
// error wraps ErrFilterUnusable: a corrupt snapshot, parameters that
// conflict with the stored ones) is parked, not retried: the Core hands
// that crawl's messages back (Messages.Park, with ParkDelay), leaves its
// URLs Undecided, reports it in Parked (with the cause and a running count
// of messages) and goes on with the other crawls of the batch. Once its
// filter opens, the crawl is unparked and its messages processed as usual.
//
// # Ordering
//
// Within one Admit call, crawls are processed in the order of their first
// URL, each in its own filter; for every URL, P happens after a C that did
// not find it, and M after P stored it (or the frontier reported it a
// duplicate). Admit returns nil only once every URL of every crawl not
// parked is on the frontier and in its filter. A URL given twice in one
// batch is published once (the second copy is Held). Nothing is promised
// about the order of entries on the frontier.
//
// # The protocol: publish, then mark
//
// For each batch (Core.Admit) a worker runs, in this order:
//
//  1. C: Contains(keys) on the filter, keys = the batch's distinct
//     canonical URLs, less those in the worker's seen cache (below) and
//     those another of its batches is admitting (Racing batches: this batch
//     waits for that one's verdict).
//  2. P: publish every key the filter does not hold to the frontier
//     (Publisher), with an ID derived from crawl, key and the crawl's
//     incarnation (Incarnated; JetStream: Nats-Msg-Id =
//     frontier.EntryIDIn(crawl, incarnation, key)), and wait for the
//     frontier to acknowledge each (retrying failures with the same ID,
//     forever, with backoff).
//  3. M: TestAndAdd(published keys) on the filter.
//  4. A: acknowledge the batch's discovered messages: Admit returned nil,
//     and the caller (frontier.Worker) acknowledges them.
//
// Claim 1, nothing is lost (seen ⇒ enqueued): a key enters the filter only
// in step M, which runs only after step P stored it on the frontier (or
// JetStream reported it a duplicate of a stored message). So every key in
// the filter was on the frontier first, except a key the filter reports by
// a false positive — the filter's error rate, and the only loss. And a
// discovered message is acknowledged only after all of its keys went
// through P and M (in its batch, or in the batch of the same worker that
// owned the key and reported it marked); if a worker dies anywhere before A, JetStream redelivers
// the message after AckWait to some worker, which runs C again: every key
// not yet marked is published again. A worker never acknowledges what it
// has not finished, whether Redis or NATS fails or hangs or the frontier is
// full: it holds the batch, backs off, and retries, extending AckWait
// meanwhile. A hung Redis shows as timeouts: config's client bounds every
// call by redis.timeout and leaves retrying to the worker, which counts the
// retries, logs the outage once and reports itself unready.
//
// Claim 2, nothing is enqueued twice: a key is published in step P only if
// step C did not find it. Once any worker completes M for a key, every
// later C finds it, so later publishes of that key can only come from a C
// that ran before that M. JetStream drops a second publish with the same
// Nats-Msg-Id within the frontier stream's duplicate window W. Two
// publishes of one key therefore both store only if they are more than W
// apart while the key is still unmarked, which needs either
//
//   - a worker to hold an unseen-verdict for longer than W: prevented, since
//     a worker re-runs C before publishing a verdict older than W/2 (this
//     covers a worker stuck in backpressure while another publishes and
//     marks the same URL); or
//   - the first publisher to die between P and M, and the key to stay
//     unmarked for W: the message is redelivered after AckWait and
//     republished and marked by the next worker, so this needs the
//     redelivery to take longer than W − AckWait — all workers down, or NATS
//     or Redis unreachable, for that long, at the moment of a crash.
//
// Options.Recheck is W/2. Config requires W ≥ 2·AckWait; the default W is 10 minutes with AckWait
// 30 s. JetStream keeps a window's IDs in memory (about 100 bytes per
// admitted URL), which is the cost of a longer W. One more case weakens the
// bound: a NATS server restart rebuilds the window only from messages still
// in the stream, so a URL already consumed by a crawler is forgotten early;
// a duplicate then also needs a worker crash between P and M in the same
// window. Both exceptions produce a duplicate fetch, never a loss.
//
// Both claims also assume that Redis keeps what it acknowledged. The one
// duplicate that no protocol can prevent comes from Redis losing writes:
// with the AOF fsynced once a second (appendfsync everysec, the AOF's
// default and compose.yaml's), a host crash (power loss, kernel panic; not a crash
// of the Redis process, whose writes are already in the kernel) loses up to
// the last second of marks. Those URLs are on the frontier, or fetched, but
// no longer in the filter, so the next time a page links to one of them
// after the duplicate window it is admitted again. In a fault test of
// 300,000 URLs, rolling the AOF back by one second left 3,801 frontier URLs
// out of the filter, and 3,618 of them were admitted a second time. appendfsync always
// avoids it (Redis writes every mark to disk before it answers), at a cost:
// on a 2-vCPU VM with a virtual disk, marking new URLs (TestAndAdd, 4
// callers, 64-key batches, no local mirror) went from 22,700 to 12,600
// keys/s (0.55×), and redis-benchmark SET (50 clients) from 39,200 to 7,100
// requests/s with the median latency from 0.6 to 4.4 ms (medians of 3 runs
// each, everysec measured in the same run). Only marks pay: a repeated URL
// is a read, which writes nothing. A failover to a Redis replica that had
// not yet received the last writes loses marks the same way: Redis
// replicates asynchronously, so a master acknowledges a mark before any
// replica has it. In frontier's failover test (Redis Cluster, 3 masters
// with a replica each, a master killed while its replica lagged about a
// second behind) 17 to 24 frontier URLs were out of the filter afterwards,
// each to be admitted again once the duplicate window is past.
// Options.Replicas (config: redis.wait_replicas, dedup.ReplicaWait) closes
// it: after each mark the worker runs WAIT on every master and counts the
// mark done only once enough replicas hold it, marking again otherwise;
// the same test then left 0 URLs out of the filter. While a master has
// fewer replicas than asked, its batches wait. The cost is a round trip
// per master and the replication delay, paid per batch (see the README
// for the measured rates); a Bloom filter's local mirror is turned off
// with it, since it would answer for marks a failover lost.
//
// # Racing batches
//
// Two batches that hold the same new URL at once would both find it absent
// (neither has marked it yet) and both publish it; JetStream's window would
// store one. Within a worker this cannot happen: the first batch to ask about
// a URL owns it until it has published and marked it, and a later batch that
// holds the URL waits for that verdict instead of asking the filter (an
// owner that gives up, its context ended, hands the URL back to the
// waiters). A batch waits only after landing every URL it owns, so waits
// form no cycle. Between worker processes the race remains: it needs two
// workers to hold the same new URL between one's Contains and its mark,
// and the window catches it (Republished counts it; the pipeline
// benchmark prints it per row). frontier's route partitions remove it:
// each URL then reaches one Core only (frontier, "One owner per URL").
//
// # Why not mark first
//
// Marking first — one TestAndAdd per batch, then publish what it reported
// new, as scrapy-redis and colly do — would spare the Contains call on new
// URLs and stop racing publishes between processes too. Its problem is the
// worker that marks and dies before publishing: its URLs are in the filter
// but not on the frontier, and on redelivery the filter calls them seen.
// Recovering them needs a record, durable from the moment of the mark, of
// which URLs that mark found new. On plain Redis, without a script, no such
// record can be written in the step that marks:
//
//   - a command's writes cannot depend on another command's result (MULTI
//     queues commands, it does not chain them), and the one result that says
//     which keys were new — BITFIELD's old bits — goes to the caller only;
//   - a record written with the mark (MULTI with a per-message key) can hold
//     the URLs asked, not the URLs that were new. On redelivery a URL of that
//     record that the filter holds was either new at that mark (and perhaps
//     never published) or added long before (and long since consumed):
//     nothing left in Redis or NATS tells them apart;
//   - a record of the new URLs written after the reply leaves a gap of one
//     round trip in which a crash leaves the same ambiguity.
//
// In the ambiguous case the redelivered attempt can only skip those URLs (a
// loss: no other page may ever link to them) or publish them all (a
// duplicate fetch of every old URL on the page that the dead worker did not
// have in its cache, outside the duplicate window). Publishing first needs
// no record: the filter is only ever a promise that the frontier already
// holds the URL. Closing the gap needs a conditional write on the server —
// "set these bits and record the keys that were new", one script, function
// or module call — the kind of script the Lua layout ran, at 7.7 µs of Redis
// CPU per new key against 1.4–1.8 µs for the native layout. The price of
// publishing first is the second call, on unseen URLs only (about a tenth of
// a crawl's links), and racing publishes between processes, which cost a
// publish each and are caught by the window.
//
// # The seen cache
//
// Each Core remembers (as 64-bit hashes, two generations, default one
// million: Options.SeenCache) the URLs it knows the filter holds: those
// Contains reported and those it marked itself. The cache lives in the
// Core, not in the adapter, because it is part of the protocol: it stands
// in for step C, and only a Core knows which of its verdicts mean "in the
// filter". A filter whose keys expire (Expiring: a revisit window) is not
// cached, since the cache would outlive its keys. Repeated links found there skip the filter call.
// This keeps both claims: the cache only ever says "in the filter", which
// implies "already enqueued". A hash collision acts as one more false
// positive, at most capacity/2^64 per lookup. In a crawl most links are
// repeats of navigation and popular pages, so most of them never reach
// Redis; the benchmark (frontier's TestPipelineThroughput) shows the rate
// with and without it.
package admit
