// Package crawls is the one home of a crawl's lifecycle: a Store creates,
// seeds, lists, describes and deletes crawls, with everything a crawl
// owns across Sieve's services:
//
//   - its record: the seeds, the targets they redirected to and the
//     settings it was created with (frontier.CrawlRecord), kept in the
//     registry, the key-value bucket <PREFIX>_CRAWLS (frontier.Crawls);
//   - its queues: its admitted URLs on the frontier stream and its
//     discovered messages not yet deduplicated, found and purged by the
//     subjects frontier.Topology builds (JetStreamQueues);
//   - its filter: in Redis "<filter.name>:<crawl>", or an in-memory filter's
//     snapshot file "<stem>.<crawl>.<kind>" (in an embedded run's data
//     directory), named as the dedup workers name it (pipeline.CrawlFilter)
//     and read without writing (DedupFilters);
//   - its counts: the dedup workers' per-crawl counts, in Redis
//     (RedisCounts) or, for an embedded run without Redis, in the report the
//     last run left in its data directory (Report).
//
// The Store depends on small interfaces it declares: a Registry, Queues,
// Filters and Counts. Open builds one on JetStream; package crawlstest has
// in-memory fakes of the Registry and the Queues, so the lifecycle's rules
// are unit tests. The crawler CLI (seed, crawls, delete-crawl, with or
// without --data-dir), the embedded mode and the API server use it, and
// the watch page lists the crawls with IDs, which creates nothing. Dedup
// workers and crawlers only read records (frontier.Crawls); the workers
// drop a deleted crawl's open filter when they see its record go
// (frontier.Crawls.WatchDeletes), so a new crawl may take the id at once,
// within the limit below.
//
// One limit remains, and it loses URLs: JetStream keeps the message IDs of
// its duplicate windows across a purge. A new crawl under a deleted crawl's
// id that is seeded with the same seeds within the discovered stream's
// window (2 minutes) has its seed message dropped, so nothing is crawled;
// and a URL the deleted crawl admitted within the frontier's window
// (frontier.duplicate_window) is taken for a republished one
// (frontier.EntryID covers the crawl id, not the crawl's creation): the
// worker marks it in the new crawl's filter without its being on the
// frontier, so the new crawl never fetches it. A restart of the NATS server
// forgets those IDs; until the IDs cover the crawl's creation, wait out the
// window or use another id.
//
// # Rules
//
// A crawl is created by the first Create (or a Seed with settings): the
// settings given over the defaults, stamped with the time. Concurrent
// creators agree on one record (compare-and-set); a later Create that
// gives a setting other than the stored one is an error naming both
// values, and changes nothing. Seed merges its URLs into the record (they
// set the crawl's scope) and then publishes them as one seed message to the
// discovered stream, so they reach the frontier through dedup like any
// other URL. Delete removes, in this order, the crawl's frontier messages,
// its discovered messages, its filter, its counts and last its record, so
// a Delete that fails part way can be run again; deleting a crawl that has
// no record removes whatever else it left and reports no record.
package crawls
