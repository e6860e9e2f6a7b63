// Package captures keeps, per crawl, the last capture of every URL and the
// first capture of every payload digest (warc.Captures): what a revisit
// needs to ask the server whether a page changed and to point a revisit
// record at the record holding the payload. The record must be exact (a
// revisit that refers to a payload never stored loses the page), so these
// are stores, not filters, deleted with the crawl:
//
//   - Disk, on disk in bounded memory: a urlstore.Store in the crawler's
//     data dir, shared by every crawler through its log in the stream
//     <PREFIX>_STORE (64 partitions by host; a digest's first capture in
//     the partition of the digest). A capture is a compact binary value of
//     about 120 bytes before Pebble's compression. Commands that run
//     beside crawlers use Unindexed, which reads and writes the log alone.
//   - Redis (a JSON value in hashes: ~1,000 bytes of RAM per URL, measured
//     by TestRedisBytesPerURL) and KV (a JetStream bucket, whose server
//     keeps an entry in memory per key): what deployments used before
//     Disk, kept so their captures stay readable.
package captures
