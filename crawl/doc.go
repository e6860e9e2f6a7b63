// Package crawl is Sieve's crawler: it takes admitted URLs from the
// frontier, fetches them with colly politely and safely, and publishes what
// each page links to for the dedup workers.
//
// # Fetching
//
// A Fetcher fetches one URL per call and is shared by all of a crawler's
// goroutines:
//
//   - robots.txt is honoured (RFC 9309): fetched once per origin, cached (LRU,
//     at most 24 hours), 4xx read as "allow all", 5xx/429/network errors as
//     "disallow for now" (the page is retried later), Crawl-delay obeyed up
//     to a bound;
//   - politeness is not the Fetcher's: Fetch makes one exchange at once;
//     the Crawler spaces them per host (see Scheduling);
//   - no connection goes to a loopback, private, link-local (cloud metadata),
//     shared, multicast or reserved address: the check runs in the dialer,
//     after DNS resolution, on every connection. A seed on such a host is
//     allowed by Fetcher.AllowHost, other addresses by
//     FetcherOptions.AllowAddresses;
//   - redirects are not followed: a 3xx Page carries the target in Redirect,
//     and the crawler publishes it as a link, so it goes through dedup and a
//     page reached by several redirecting URLs is fetched once;
//   - only HTML (text/html, application/xhtml+xml) is read for links: a[href],
//     area[href], optionally link rel=canonical and frames, resolved against
//     <base href>, fragments dropped, nofollow (meta robots, X-Robots-Tag)
//     obeyed; other bodies are not even downloaded;
//   - failures are *FetchError values with a Reason and Temporary: timeouts,
//     network errors, 5xx, 429 and an unavailable robots.txt are worth
//     retrying; 4xx, robots.txt disallows, forbidden addresses and DNS
//     names that do not exist are not.
//
// net/http makes each exchange, and colly only parses: the Fetcher's
// http.Transport dials through the address guard, FetcherOptions.RoundTrippers
// wrap it (metrics, tracing, recording) and FetcherOptions.WrapConn wraps its
// connections once they carry the exchange's bytes (after TLS), for a
// recorder that must keep them as sent and received; with WrapConn set,
// requests go over HTTP/1.1. A 2xx HTML body read by the Fetcher (at most
// MaxBodySize) is handed to the colly collector through a transport that
// serves it from memory. The collector is built without colly.NewCollector,
// which would read COLLY_* environment variables, and the transport ignores
// HTTP_PROXY: configuration comes only from FetcherOptions.
//
// # Scheduling
//
// Politeness is kept by a politeness.Scheduler with one queue per frontier
// entry's queue key (frontier.Entry.QueueKey: its host and port, lower case,
// unless the entry names another key): at most HostParallel requests to a host at
// once, their starts HostDelay apart (defaults: one at a time, one second
// apart; FetcherOptions.Hosts sets other values for named hosts, such as a
// site one owns), a robots.txt Crawl-delay passed back after each request, and
// the Retry-After of a 429 or 503 blocking the host until then.
//
// Each owned partition's puller offers the messages it takes to the
// scheduler, which holds a few per host (2 × the host's parallelism). A
// message whose host's buffer is full is handed straight back to JetStream
// (NakWithDelay) with the delay the scheduler expects its turn to take, and
// counted in Stats.Deferred; when it comes back it goes before the host's new
// URLs, so each host is crawled in the order its URLs were found. Nothing
// waits for a host's turn beyond its buffer, so the hosts behind a backlog in
// the same partition are reached at once, and the messages in hand
// (Options.InFlight, 4,096) bound memory, not speed: Fetcher.MaxParallel
// fetch loops take whichever host's turn comes first. JetStream's delivery
// count then says nothing about failed attempts: those are counted in the
// key-value bucket <PREFIX>_ATTEMPTS (see attempts.go).
//
// # Crawling
//
// A Crawler consumes the frontier stream of package frontier, which is split
// into partitions by host. Each partition is consumed by one crawler at a
// time, so one host is fetched by one crawler and its politeness limits hold
// across a fleet: crawlers lease partitions in the key-value bucket
// <PREFIX>_CRAWLERS (see lease.go), each taking ⌈partitions / crawlers⌉,
// giving back the ones above its share once the messages in hand are done,
// and taking over those of a crawler that stopped renewing them.
//
// For each frontier message: the URL is checked against the crawl's scope
// (ScopeHost by default: the seeds' host names; the seeds are kept in the
// bucket <PREFIX>_CRAWLS by package crawls) and depth; it is fetched; one discovered
// message carries the page's in-scope links (or a redirect's target) to the
// dedup workers; only then is the frontier message acknowledged. A crawler
// killed at any point loses nothing: JetStream delivers an unacknowledged
// message again after AckWait, to the partition's next owner. Messages in a
// host's buffer are kept alive (InProgress) meanwhile.
//
// Temporary failures are handed back with a delay (NakWithDelay: the
// backoff doubles from RetryBackoff, or Retry-After if longer) and given up
// after MaxRetries retries; permanent failures are counted by reason and
// acknowledged. Redirect targets keep their page's depth, so chains of
// redirects are counted instead (bucket <PREFIX>_REDIRECTS) and end after
// MaxRedirects.
//
// # Archiving and revisits
//
// With Options.Archive, every exchange is recorded (package warc) before
// the page's message is acknowledged. A crawl's archive is every WARC
// directory its crawlers have written: each crawler adds its own to the
// crawl's record (frontier.CrawlRecord.Archive) once per crawl and process,
// before any capture of the crawl points into it, and the Recorder looks
// for captures' files there (archiveDirs, newest first). A page whose last
// capture cannot be read is fetched again in full by the Recorder; the
// crawler counts it by reason (Stats.Refetched, sieve_crawl_refetches_total)
// and logs each unreadable file once. The links of a page the server says
// is unchanged (304) are read from the record holding its payload; if that
// record went away since the Recorder checked it, the message is handed
// back and the page fetched in full next time: a revisit never drops a
// page's links.
//
// Run ends when its context does, after IdleExit of an empty pipeline (both
// streams empty, nothing in hand), or after MaxPages fetches.
package crawl
