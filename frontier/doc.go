// Package frontier is Sieve's pipeline between crawlers and the URL
// frontier: the NATS JetStream streams, subjects and message formats, and
// the dedup Worker that lets each URL through once.
//
// See the design notes in the README section "Pipeline" and the comments on
// Worker for the exactly-once protocol.
package frontier
