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
//     URL in its queue in the queues' store (below) instead of the frontier
//     stream: a URL that has a record already is the duplicate the
//     protocol expects of a frontier (admit: "publish, then mark"), so a
//     URL is queued once per crawl whatever servers, clients or retries
//     race.
//     Admitted is OK; held by the filter (any spelling that canonicalizes
//     alike) is SKIPPED, as is an invalid item (bad crawl id, a URL the
//     policy rejects, a queue key over 255 bytes, metadata out of bounds),
//     counted by reason in sieve_urlfrontier_rejected_total; FAIL means
//     the admission did not finish (Options.AdmitTimeout: the filter or
//     NATS away) and the item may be resent: nothing is admitted twice.
//     Calling the Core directly, rather than publishing discovered messages
//     and waiting for a worker, is what lets each item have its status.
//   - A crawl whose crawlers learned which spellings of a URL name one
//     page (package dust's rules, kept in <PREFIX>_RULES and followed by
//     `serve` as by the dedup workers: Options.Rules) has its URLs tested
//     and marked in its filter under their page's key (dust.Set.Key), by
//     puts, known updates and GetURLStatus alike: a second spelling of a
//     page already put, fetched by Sieve's crawler or updated as known is
//     SKIPPED (counted "known"), never queued twice, and GetURLStatus
//     answers it as probably seen. The store keeps the spelling put, not
//     the key: it is what the client fetches and names in its known
//     update, and a rule then never sends a client to a spelling that the
//     site may not serve. A crawl without rules is as before (the key is
//     the URL). Per spelling, admission is exact as before (a URL's
//     record); across spellings, as exact as the filter: one server's
//     Core orders two spellings of one page, but two servers putting two
//     spellings of one page in the same instant may both queue them (the
//     store's duplicate check reads the spelling's record): a second
//     fetch, never a page lost. A rule counts from when the server reads
//     it: a page put before is marked under its spelling only, so one
//     more spelling of it may be admitted once, and a spelling SKIPPED
//     under a rule later retired is admitted if put again.
//   - A known URL is a fetched one: with refetchable_from_date 0 it is
//     completed (kept with its metadata, never handed out again, marked in
//     the filter, counted in its queue's state), otherwise due again at
//     that date, so it is handed out again from then, the earliest first.
//   - Queues are keyed by the item's key, or by the URL's host
//     (frontier.HostKey).
//   - The active flag of each node is in <PREFIX>_UF_STATE, live nodes in
//     <PREFIX>_UF_NODES (entries expire 15 s after a node stops). So
//     leases, delays, blocks, limits, refetch dates and the active flag
//     survive restarts and hold across every server of a deployment.
//   - crawlID "" is DEFAULT. Puts record a crawl (package crawls) on first
//     use, so its filter opens from its record; DeleteCrawl purges its
//     URLs and queues here, then deletes its filter, counts, record and
//     pipeline messages (crawls.Store.Delete), so the id is free at once.
//
// # The queues' store: every URL on disk
//
// Every URL's record, queued or completed, lives in a package urlstore
// store: a log in the stores' stream (subjects <prefix>.store.queues.<n>,
// replicated with frontier.replicas) that is the truth, and in each server
// a Pebble index of it in Options.Dir (keys.go has the layout). A queue
// lives in one of Partitions partitions, a hash of its crawl and key; in
// it, the queue's state (delay, block, limit, next turn, counts, lease
// counts), its URLs' records, a ready index of its queued URLs by due time
// (a leased URL's: the end of its lease), and the ready queues' index:
// each queue with URLs not completed, by its turn (the latest of its next
// turn, its block and its first ready URL's time; with a limit reached,
// the end of enough leases), kept by every write of its state.
//
//   - GetURLs reads the queues whose turn has come from the ready queues'
//     index, earliest first, in each partition holding the crawl's
//     queues, and checks their states (blocked, limits, in process), so
//     its cost follows what it hands out, not the number of queues (a
//     queue it passes over is one whose URLs are all in process under
//     max_urls_per_queue); then it takes each partition's turns with one
//     read-modify-write (urlstore.Update, a compare-and-append on the
//     partition's log): read the queue's state and ready URLs as the log
//     leaves them, lease each URL in its own record (its ready key moves
//     to the lease's end), count the leases in the state, set its next
//     turn. Two servers never hand out one URL at once or serve a queue
//     twice within its delay; a hand-out costs one log entry per
//     partition; a lease that ends without an update makes the URL ready
//     again with no timer. A queue's state is counts, whatever its leases
//     (format 2 named each lease in it: every hand-out and
//     acknowledgement rewrote them all, and a queue stopped near 52 k
//     leases, its state over a value's 1 MiB); a known update of a leased
//     URL reads its record and writes it, O(1) per URL.
//   - Puts and known updates are one read-modify-write per partition of a
//     batch, so a batch of 500 items costs tens of log entries, not 500.
//   - A server's RAM is per crawl (its default delay, the partitions
//     holding its queues), not per queue or URL, and Pebble's cache and
//     memtables (fixed); ListQueues, GetStats and CountURLs without a
//     filter read a key per queue. A store of format 2 has its ready
//     queues indexed once, at the first start of a format-3 server
//     (turns.go). A restart reads the log's
//     entries written since it stopped, not the whole state; a server with
//     an empty directory (a new machine, a lost disk) rebuilds its index
//     from the log, logging its progress.
//   - Reads (ListURLs, CountURLs, PurgeURLs) scan the local index, in key
//     order: partition, queue, URL. GetURLStatus first waits for the
//     index to hold its partition's last entry (one round trip), so it is
//     exact across servers, completed URLs included; a URL the store does
//     not hold is answered from the crawl's filter, which may hold, with
//     its false-positive rate, one never seen ("probably seen": a known
//     item without a refetch date); one it does not hold is NotFound.
//   - The queues of earlier versions, a bucket with a key per URL
//     (<PREFIX>_UF_QUEUES), are moved into the store by the first server
//     that starts, then the bucket is deleted (migrate.go).
//
// # Limits and bad input
//
// Every bad request gets a gRPC status and changes nothing: an invalid
// crawl id, a missing or oversized key, a block time past year 9999 are
// InvalidArgument; a crawl that does not exist (never used, or deleted)
// reads as an empty one, as in the reference service (0, stats of zero,
// nothing listed; GetURLStatus NotFound); a DiscoveredBatch over
// Options.MaxBatch ends its stream with InvalidArgument; a message over
// the server's size limit is refused by gRPC with ResourceExhausted. A
// client that disconnects mid-stream loses the acks of the items in
// hand; those it resends are known and SKIPPED, never admitted twice.
//
// RAM does not grow with URLs or queues: ./bench.sh scale measures serve
// with its NATS server at 1 M, 5 M and 20 M queued URLs, and ./bench.sh
// broad at 1 M and 10 M queues and a queue of 1 M URLs (ARCHITECTURE.md
// has the figures).
package urlfrontier
