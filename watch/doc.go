// Package watch serves the HTTP surface every long-running Sieve process
// shares: the live page at /, its time series at /series, the report at
// /stats (JSON), Prometheus metrics at /metrics, /healthz and /readyz, and
// POST /contains (which canonical URLs the filter holds).
//
// A Server is built from Sources, small interfaces over what the process
// holds: the seen-URL counters (stats.Memory, stats.Redis), the filter (any
// dedup filter), the queues (JetStream, see NewJetStreamQueues), a dedup
// worker (pipeline.Worker) and a crawler (crawl.Crawler). Any of them may be
// nil: a crawler talking to remote workers has no filter of its own.
//
// The Server samples its sources every Options.Interval (one second) into a
// fixed ring that keeps Options.History (one hour): the counters as they
// stand (the page turns them into rates), the queue depths and the filter's
// fill. The history therefore lives in the process, survives a page reload,
// and costs a fixed amount of memory: at most maxKeys series of
// History/Interval float64 values. /stats and /metrics answer from the last
// sample, so a scrape or a page costs the sources nothing, however many
// watch; the filter, whose statistics may cost a round trip per shard, can be
// read less often (FilterEvery).
//
// With Sources.Rules the report lists each crawl's learned rewrite rules
// (package dust; the most useful MaxRulesShown, for at most MaxRuleCrawls
// crawls), read every Options.RulesEvery (5s) in the sampling loop: the
// rules store is asked once per period, never once per page or poll.
//
// Processes find each other through Sources.Peers (JetStreamPeers): each
// announces its role, id, page and rates every AnnounceEvery in a key-value
// bucket whose entries expire, and the page lists the deployment's live
// workers and crawlers. With Options.Dir (an embedded crawl's data
// directory) the Server writes its page URL there while it runs and its last
// report when it closes, so ReadDir can answer from the directory alone;
// POST /contains answers membership from the running filter.
//
// The page is one HTML file with a small script and uPlot (ui/uplot, its
// version and license beside it), all embedded: it needs no network access
// beyond the process it watches.
package watch
