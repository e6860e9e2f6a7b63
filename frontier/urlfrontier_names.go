package frontier

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// The URLFrontier API server (package urlfrontier) keeps its state in three
// key-value buckets, named here like every other NATS name:
//
//	<PREFIX>_UF_QUEUES  one key per queued or in-process URL:
//	                    <crawl>.<queue hash>.<URL hash>; one per queue with
//	                    state (delay, block, limit, next turn, counts,
//	                    leases): <crawl>.<queue hash>; a crawl's default
//	                    delay: <crawl>._default. One bucket, so that every
//	                    server sees a URL's change before the change of its
//	                    queue that follows it.
//	<PREFIX>_UF_STATE   the active flag of each node: active.<node hash>
//	<PREFIX>_UF_NODES   live nodes (TTL): node.<node hash>, the address
//	                    ListNodes shows; server.<instance>, one per running
//	                    server process (two may share an address), by which
//	                    a server knows whether it shares the buckets
//
// Hashes are hex SHA-256 prefixes: 16 characters for a queue key or a node
// address, 32 for a canonical URL. Crawl ids are subject tokens
// (ValidCrawl), so a crawl's keys are the filter <crawl>.>.

// URLFrontierQueuesBucket is the bucket of the URLFrontier server's queues
// and their queued and in-process URLs: <PREFIX>_UF_QUEUES.
func (t Topology) URLFrontierQueuesBucket() string { return t.upperPrefix() + "_UF_QUEUES" }

// URLFrontierStateBucket is the bucket of its nodes' active flags:
// <PREFIX>_UF_STATE.
func (t Topology) URLFrontierStateBucket() string { return t.upperPrefix() + "_UF_STATE" }

// URLFrontierNodesBucket is the bucket of its live nodes (entries expire):
// <PREFIX>_UF_NODES.
func (t Topology) URLFrontierNodesBucket() string { return t.upperPrefix() + "_UF_NODES" }

func hexHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:n/2])
}

// URLFrontierQueueKey is the key of a queue's state, and the prefix of its
// URLs' keys.
func (t Topology) URLFrontierQueueKey(crawl, queue string) string {
	return crawl + "." + hexHash(queue, 16)
}

// URLFrontierURLKey is the key of a canonical URL of a queue.
func (t Topology) URLFrontierURLKey(crawl, queue, canonicalURL string) string {
	return t.URLFrontierQueueKey(crawl, queue) + "." + hexHash(canonicalURL, 32)
}

// URLFrontierDefaultKey is the key of a crawl's default queue settings.
func (t Topology) URLFrontierDefaultKey(crawl string) string { return crawl + "._default" }

// URLFrontierCrawlKeys is the filter of every key of a crawl: its queues
// and its URLs.
func (t Topology) URLFrontierCrawlKeys(crawl string) string { return crawl + ".>" }

// URLFrontierQueueKeys is the filter of every URL key of a queue.
func (t Topology) URLFrontierQueueKeys(crawl, queue string) string {
	return t.URLFrontierQueueKey(crawl, queue) + ".>"
}

// URLFrontierActiveKey is the key of a node's active flag in the state
// bucket; URLFrontierNodeKey its liveness in the nodes bucket.
func (t Topology) URLFrontierActiveKey(node string) string { return "active." + hexHash(node, 16) }

// URLFrontierNodeKey is the key of a live node in the nodes bucket.
func (t Topology) URLFrontierNodeKey(node string) string { return "node." + hexHash(node, 16) }

// URLFrontierServerKey is the key of a running server process in the nodes
// bucket; instance is a token unique to the process.
func (t Topology) URLFrontierServerKey(instance string) string { return "server." + instance }

// URLFrontierServerKeys is the filter of every running server's key.
func (t Topology) URLFrontierServerKeys() string { return "server.*" }

// IsURLFrontierNodeKey reports whether a key of the nodes bucket is a
// node address's (ListNodes), not a server process's.
func (t Topology) IsURLFrontierNodeKey(key string) bool { return strings.HasPrefix(key, "node.") }

// IsURLFrontierURLKey reports whether a key of the queues bucket is a
// URL's (three tokens) rather than a queue's (two).
func (t Topology) IsURLFrontierURLKey(key string) bool { return strings.Count(key, ".") == 2 }
