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
// (frontier.Crawls.WatchDeletes), so a new crawl may take the id at once.
//
// A purge does not clear the IDs JetStream remembers for its duplicate
// windows, so each crawl Create makes draws an incarnation
// (frontier.CrawlRecord.Incarnation) that its seed messages
// (Topology.PublishDiscoveredIn) and frontier entries (frontier.EntryIDIn)
// are published under: a new crawl under a deleted crawl's id, seeded with
// the same seeds at once, crawls them again, where the old IDs made the
// discovered stream drop its seed message and the frontier its URLs, which
// the worker then marked seen without their being queued. A crawl recorded
// before records had an incarnation keeps the IDs it has.
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
