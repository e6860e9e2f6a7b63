// Package urlfrontier serves the crawler-commons URLFrontier API 2.6 (gRPC,
// package urlfrontier, service URLFrontier; the .proto and its generated
// code are in urlfrontierpb) on Sieve: any crawler that speaks it
// (StormCrawler, the Java and Python clients, Scrapy schedulers) uses
// Sieve as its frontier, with its clients doing the fetching. `crawler
// serve` runs a Server.
//
// # The API on Sieve's pipeline
//
//   - A discovered URL (PutURLs, PutDiscovered) goes the way a crawler's
//     link goes through a dedup worker: canonicalized (normalize, the
//     policy the workers use), then admitted by an admit.Core over the
//     crawl's own filter (the dedup workers' filters: in Redis for a
//     deployment, in memory in the embedded mode, where `serve` runs the
//     worker whose filters it shares). The Core's publisher stores the
//     URL in the bucket <PREFIX>_UF_QUEUES instead of the frontier stream: a
//     create that finds the key taken is the duplicate the protocol
//     expects of a frontier (admit: "publish, then mark"), so a URL is
//     queued once per crawl whatever servers, clients or retries race.
//     Admitted is OK; held by the filter (any spelling that canonicalizes
//     alike) is SKIPPED, as is an invalid item (bad crawl id, a URL the
//     policy rejects, a queue key over 255 bytes, metadata out of bounds),
//     counted by reason in sieve_urlfrontier_rejected_total; FAIL means
//     the admission did not finish (Options.AdmitTimeout: the filter or
//     NATS away) and the item may be resent: nothing is admitted twice.
//     Calling the Core directly, rather than publishing discovered messages
//     and waiting for a worker, is what lets each item have its status.
//   - A known URL is a fetched one: with refetchable_from_date 0 it is
//     completed (its key purged, marked in the filter, counted in its
//     queue's state), otherwise stored again due at that date, so it is
//     handed out again from then, the earliest date first.
//   - Queues are keyed by the item's key, or by the URL's host
//     (frontier.HostKey). A queue's delay, block, crawl limit, next turn,
//     counts and leases (each handed-out URL's hash and the end of its
//     lease) are one value in <PREFIX>_UF_QUEUES, beside its URLs; a
//     crawl's default delay another. GetURLs takes a queue's turn and
//     leases its URLs with one compare-and-set of that value: two servers
//     never hand out one URL at once or serve a queue twice within its
//     delay, a hand-out costs one write per queue, and a lease that ends
//     without an update makes the URL ready again with no timer anywhere.
//     A known update writes the URL, then its queue (the lease removed,
//     the counts): the bucket's one watch delivers them in that order, so
//     no server sees the queue's new state with the completed URL still
//     ready, and one that has not seen the URL's change fails its
//     compare-and-set on the queue.
//   - The active flag of each node is in <PREFIX>_UF_STATE, live nodes in
//     <PREFIX>_UF_NODES (entries expire 15 s after a node stops). So
//     leases, delays, blocks, limits, refetch dates and the active flag
//     survive restarts and hold across every server of a deployment.
//   - crawlID "" is DEFAULT. Puts record a crawl (package crawls) on first
//     use, so its filter opens from its record; DeleteCrawl purges its
//     URLs and queues here, then deletes its filter, counts, record and
//     pipeline messages (crawls.Store.Delete), so the id is free at once.
//
// # Reads
//
// Each server keeps an index of the bucket (index.go): ListQueues,
// GetStats, ListURLs and CountURLs read it, and GetURLs chooses from it what
// to lease. It applies its own writes as they are acknowledged and watches
// the bucket for the other servers' only while another server is live
// (follow.go: a watch also brings back every write of its own, which cost
// a server alone a third of its ingest rate). A change made by another
// server reaches it in milliseconds; the compare-and-sets make hand-outs
// exact regardless.
// GetURLStatus reads the bucket itself, so it is exact for queued and
// in-process URLs. A completed URL is no longer stored: the crawl's filter
// answers for it, which holds every completed URL but may also hold, at
// its false-positive rate, one never seen. Such a URL is "probably seen":
// a known item without a refetch date; one the filter does not hold is
// NotFound.
//
// # Limits and bad input
//
// Every bad request gets a gRPC status and changes nothing: an invalid
// crawl id, a missing or oversized key, a block time past year 9999 are
// InvalidArgument; a crawl that does not exist (other than DEFAULT) is
// NotFound for the calls that read or delete one; a DiscoveredBatch over
// Options.MaxBatch ends its stream with InvalidArgument; a message over
// the server's size limit is refused by gRPC with ResourceExhausted. A
// client that disconnects mid-stream loses the acks of the items in
// hand; those it resends are known and SKIPPED, never admitted twice.
//
// Each index holds every queued URL of every crawl in memory, and GetURLs
// looks at every queue of the crawls it serves: fine for millions of URLs
// and thousands of queues per server. BenchmarkIndexMemory measures 288
// bytes per URL of the form https://www.siteN.example/articles/N.html (a
// bare map of each key to its URL takes 165): 10 million queued URLs need
// about 3 GB in each server.
package urlfrontier
