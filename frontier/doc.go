// Package frontier is Sieve's pipeline between crawlers and the URL
// frontier: the NATS JetStream streams, subjects and message formats (all
// versioned), and the dedup Worker that lets each URL through once. The
// Worker is the JetStream adapter around package admit's Core, which holds
// the admission protocol (Contains, publish, mark, acknowledge), why it
// marks after publishing, and the two claims it keeps (nothing lost,
// nothing enqueued twice): read admit's documentation for those.
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
//	    (JSON, "v":2; see Entry), with Nats-Msg-Id = EntryIDIn(crawl,
//	    the crawl's incarnation, URL) (EntryID(crawl, URL) for a crawl
//	    recorded without one).
//	    partition = FNV-1a(host of the queue key) mod Partitions
//	    (Topology.EntryPartition; the queue key defaults to the URL's host),
//	    so a crawler that owns a partition owns its queues and can be polite
//	    to them. Work-queue retention, DiscardNew at
//	    FrontierMaxMsgs/FrontierMaxBytes.
//
// With Topology.Routes > 0 (one owner per URL, below) a third stream
// carries each page's canonical links to the worker that owns them:
//
//	stream SIEVE_ROUTED      subjects sieve.routed.<crawl>.<route>
//	    Discovered messages (JSON, "v":2) whose links are canonical URLs,
//	    each with its kind, queue key and metadata, grouped by
//	    route = FNV-1a 64(crawl "\n" URL) mod Routes (Topology.Route).
//	    Work-queue retention; one durable consumer per route,
//	    sieve-route-<route>, fetched by the worker leasing
//	    route.<route> in the bucket <PREFIX>_WORKERS.
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
// error wraps ErrFilterUnusable) is parked, not poison (admit, "Parking"):
// the worker hands that crawl's messages back with a redelivery delay
// (ParkDelay), counts them (sieve_dedup_parked_total), reports the crawl
// and the cause in Status.Parked and goes on with the other crawls of the
// batch. Nothing of the crawl is acknowledged or counted; once its filter
// opens, its messages are processed as usual.
//
// # The worker, the adapter
//
// A Worker's goroutines each fetch a batch from the shared consumer
// (WorkerOptions.Batch messages), decode it (poison is terminated at once),
// canonicalize every link and drop repeats within the batch, and hand the
// batch's URLs to admit.Core.Admit, the batch standing for its messages:
// the Core touches them (InProgress, at most every AckWait/3) while it
// works or waits, and parks a crawl with NakWithDelay. The Worker
// acknowledges the batch's messages only when Admit returns nil; otherwise
// (the shutdown grace ran out, Close) it acknowledges nothing and
// JetStream redelivers. What the Core reports goes to health (Status,
// Ready: a failing filter call marks the filter down; a publish refused
// for room marks the frontier full, which is backpressure and keeps the
// worker ready; any other failed publish marks NATS down) and to metrics
// (retries by operation, parked messages, seen-cache hits).
//
// The claims need nats-server 2.10 or newer (MinServerVersion): an older
// server ignores the terminate-with-reason a worker sends for a poison
// message, which then comes back every AckWait. CheckServer refuses one;
// Worker.Run stops with its error.
//
// # One owner per URL
//
// Without routes, any worker may take any page, so two workers can hold the
// same new URL at once: both find it absent and both publish it, and only
// the frontier's duplicate window stores one (in the pipeline benchmark,
// 30 % of the new URLs with 2 workers). With Topology.Routes > 0 a worker
// that takes a page from the shared consumer canonicalizes it, admits the
// links of the routes it holds itself, and forwards the others, grouped by
// route partition, to the routed stream (Worker.forward): it acknowledges
// the page once every part is stored and its own links admitted, and
// counts the page, its links, rejections and repeats within the page.
// Each route partition is leased to one worker at a time (routeLeases:
// rendezvous hashing over the live workers, a lease key created only if
// absent), and only that worker fetches it and runs admit.Core on it. So a
// URL is held by one worker's Core at a time, where the Core's flights
// keep its own batches from racing, and each worker's seen cache holds
// only its routes' URLs: with n workers, each caches a 1/n share of the URL
// space. So do the bits a Redis Bloom filter's mirror learns from the
// worker's own marks; the whole layers a mirror copies from Redis are bit
// arrays, which no URL split can share out. A worker that joins takes its share from the others, which stop
// fetching it, finish their batches and only then release it; one that
// leaves releases its routes the same way, and one that dies loses them
// when its lease expires (WorkerOptions.RouteLeaseTTL), its unacknowledged
// messages then redelivered to the new owner. A route that changes hands
// while a forwarding batch admits its links directly may have two holders
// for that moment; the duplicate window catches what both publish. The
// cost is one more JetStream round trip per page (the forward) and one
// more stored message per page and other worker's route; the benchmark
// prints the rates with and without routes. The claims hold
// whether routes are on or not, and workers that disagree only race.
//
// # Counts
//
// Counts (stats.Delta) add up per batch: Links = Admitted + Duplicates +
// Σ Rejected, where Admitted counts publishes JetStream stored as new.
// Republished (part of Duplicates) counts publishes JetStream's window
// caught: crash recovery, and two worker processes that held the same new
// URL at once (admit, "Racing batches"; routes end those). With one worker,
// or with routes, and no faults it is 0,
// which the tests check: a filter that held nothing would otherwise pass
// them, the window doing its work.
// A worker hands them to a Recorder (Redis for a deployment) once per
// StatsInterval.
package frontier
