// Package frontier is Sieve's pipeline between crawlers and the URL
// frontier: the NATS JetStream streams, subjects and message formats (all
// versioned), and the dedup Worker that lets each URL through once.
//
// # Streams and subjects
//
// With the default prefix "sieve" (Topology.Prefix):
//
//	stream SIEVE_DISCOVERED  subjects sieve.discovered.<crawl>
//	    One Discovered message per crawled page: page URL, depth, crawl id,
//	    optional <base href>, and every raw link, each with its kind,
//	    queue key and metadata when they are not the defaults (JSON,
//	    "v":2; see Discovered). Work-queue retention: a message is deleted
//	    once a worker acknowledges it.
//	    Consumed by the durable pull consumer "sieve-dedup", shared by all
//	    workers: N workers split the messages with no coordination.
//	stream SIEVE_FRONTIER    subjects sieve.frontier.<crawl>.<partition>
//	    One Entry message per admitted URL: canonical URL, depth, crawl, the
//	    page it was found on, and its link's kind, queue key and metadata
//	    (JSON, "v":2; see Entry), with Nats-Msg-Id = EntryID(crawl, URL).
//	    partition = FNV-1a(host of the queue key) mod Partitions
//	    (Topology.EntryPartition; the queue key defaults to the URL's host),
//	    so a crawler that owns a partition owns its queues and can be polite
//	    to them. Work-queue retention, DiscardNew at
//	    FrontierMaxMsgs/FrontierMaxBytes.
//
// A crawl is recorded in the bucket <PREFIX>_CRAWLS (Crawls): its seeds and
// the settings it was created with. A URL is unique within a crawl: with
// WorkerOptions.Filters each crawl has its own filter, and the frontier's
// message ID (EntryID) covers the crawl, so the same URL is admitted once
// in each crawl. Everything below holds per crawl.
//
// A reader rejects a message whose "v" it does not know; a format change
// bumps Version. Readers still accept format 1 (MinVersion), and Ensure
// moves streams marked with format 1 to the current one. Messages that can
// never be processed (not JSON, too large, unknown version, bad crawl id,
// kind or depth, too many links, a queue key or metadata out of bounds) are
// poison: the worker terminates them (no redelivery) and counts them by
// reason, so they never block the queue.
//
// A crawl whose filter cannot be opened until someone acts (a corrupt
// snapshot, parameters that conflict with the stored ones: the FilterSet's
// error wraps ErrFilterUnusable) is parked, not poison: the worker hands
// that crawl's messages back with a redelivery delay (ParkDelay), counts
// them (sieve_dedup_parked_total), reports the crawl and the cause in
// Status.Parked and goes on with the other crawls of the batch. Nothing of
// the crawl is acknowledged or counted; once its filter opens, its messages
// are processed as usual.
//
// # The protocol: publish, then mark
//
// For each batch a worker runs, in this order:
//
//  1. C: Contains(keys) on the filter, keys = the batch's distinct
//     canonical URLs, less those in the worker's seen cache (below) and
//     those another of its batches is admitting (Racing batches: this batch
//     waits for that one's verdict).
//  2. P: publish every key the filter does not hold to the frontier, with
//     Nats-Msg-Id = EntryID(crawl, key), and wait for JetStream to acknowledge each
//     (retrying failures with the same ID, forever, with backoff).
//  3. M: TestAndAdd(published keys) on the filter.
//  4. A: acknowledge the batch's discovered messages.
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
// Config requires W ≥ 2·AckWait; the default W is 10 minutes with AckWait
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
// not yet received the last writes loses marks the same way.
//
// The claims need nats-server 2.10 or newer (MinServerVersion): an older
// server ignores the terminate-with-reason a worker sends for a poison
// message, which then comes back every AckWait. CheckServer refuses one;
// Worker.Run stops with its error.
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
// benchmark prints it per row).
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
// Each worker remembers (as 64-bit hashes, two generations, default one
// million) the URLs it knows the filter holds: those Contains reported and
// those it marked itself. Repeated links found there skip the filter call.
// This keeps both claims: the cache only ever says "in the filter", which
// implies "already enqueued". A hash collision acts as one more false
// positive, at most capacity/2^64 per lookup. In a crawl most links are
// repeats of navigation and popular pages, so most of them never reach
// Redis; the benchmark (TestPipelineThroughput) shows the rate with and
// without it.
//
// Counts (stats.Delta) add up per batch: Links = Admitted + Duplicates +
// Σ Rejected, where Admitted counts publishes JetStream stored as new.
// Republished (part of Duplicates) counts publishes JetStream's window
// caught: crash recovery, and two worker processes that held the same new
// URL at once (see Racing batches). With one worker and no faults it is 0,
// which the tests check: a filter that held nothing would otherwise pass
// them, the window doing its work.
// A worker hands them to a Recorder (Redis for a deployment) once per
// StatsInterval.
package frontier
