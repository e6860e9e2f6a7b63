// Package captures keeps, per crawl, the last capture of every URL and the
// first capture of every payload digest (warc.Captures): what a revisit
// needs to ask the server whether a page changed and to point a revisit
// record at the record holding the payload. The record must be exact (a
// revisit that refers to a payload never stored loses the page), so these
// are stores, not filters: Redis in a deployment (Redis), a JetStream
// key-value bucket in the embedded mode (KV), both deleted with the crawl.
//
// A capture is a small JSON object (dates, digest, validators, the payload
// record's URL, file and offset); its cost per URL is measured by
// TestRedisBytesPerURL and printed by `dedup-worker plan`.
package captures
