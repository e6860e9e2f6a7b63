// Package crawl is Sieve's crawler: it takes URLs from the frontier, fetches
// them with colly politely and safely, and reports what each page links to.
//
// # Fetching
//
// A Fetcher fetches one URL at a time per call and is shared by all of a
// crawler's goroutines:
//
//   - robots.txt is honoured (RFC 9309): fetched once per origin, cached (LRU,
//     at most 24 hours), 4xx read as "allow all", 5xx/429/network errors as
//     "disallow for now" (the page is retried later), Crawl-delay obeyed up
//     to a bound;
//   - per host, at most HostParallel requests run at once and their starts
//     are HostDelay apart (defaults: one at a time, one second apart);
//     Retry-After of a 429 or 503 pushes the host's next request back;
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
// The Fetcher builds its colly collector without colly.NewCollector, which
// would read COLLY_* environment variables, and its transport ignores
// HTTP_PROXY: configuration comes only from FetcherOptions.
package crawl
