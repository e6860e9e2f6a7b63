package frontier

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// The URLFrontier API server (package urlfrontier) keeps its queues and
// URLs in a per-URL store (the log's subjects <prefix>.store.queues.<n> in
// the stores' stream, StoreSubject) and its nodes in two key-value buckets,
// named here like every other NATS name:
//
//	<PREFIX>_UF_STATE   the active flag of each node: active.<node hash>
//	<PREFIX>_UF_NODES   live nodes (TTL): node.<node hash>, the address
//	                    ListNodes shows; server.<instance>, one per running
//	                    server process (two may share an address)
//	<PREFIX>_UF_QUEUES  earlier versions' queues, one key per queued or
//	                    in-process URL: <crawl>.<queue hash>.<URL hash>;
//	                    one per queue with state: <crawl>.<queue hash>; a
//	                    crawl's default delay: <crawl>._default. A server
//	                    that finds it moves it into the store and deletes it.
//
// Hashes are hex SHA-256 prefixes: 16 characters for a queue key or a node
// address, 32 for a canonical URL. Crawl ids are subject tokens
// (ValidCrawl), so a crawl's keys are the filter <crawl>.>.

// URLFrontierQueuesBucket is the bucket where earlier versions of the
// URLFrontier server kept their queues and URLs: <PREFIX>_UF_QUEUES.
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

// URLFrontierActiveKey is the key of a node's active flag in the state
// bucket; URLFrontierNodeKey its liveness in the nodes bucket.
func (t Topology) URLFrontierActiveKey(node string) string { return "active." + hexHash(node, 16) }

// URLFrontierNodeKey is the key of a live node in the nodes bucket.
func (t Topology) URLFrontierNodeKey(node string) string { return "node." + hexHash(node, 16) }

// URLFrontierServerKey is the key of a running server process in the nodes
// bucket; instance is a token unique to the process.
func (t Topology) URLFrontierServerKey(instance string) string { return "server." + instance }

// IsURLFrontierNodeKey reports whether a key of the nodes bucket is a
// node address's (ListNodes), not a server process's.
func (t Topology) IsURLFrontierNodeKey(key string) bool { return strings.HasPrefix(key, "node.") }
