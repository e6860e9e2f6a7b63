package urlfrontier

// What a serve costs per URL, measured by TestServeScale (./bench.sh
// scale), for `dedup-worker plan`: on disk, each serve's index
// (data_dir/urlfrontier) and each NATS replica's log, per queued URL; in
// RAM, a serve with its NATS server, a fixed part (caches, buffers, the
// runtime) and a part per queue (its state in every serve's summaries).
//
// From the run at 20 M URLs over 20,000 queues (a URL never fetched is
// one key): index 323.7 MB (16 B a URL), NATS 422.9 MB (21 B a URL, the
// log's share of it); RSS after handing out and completing 200,000 URLs
// 586 MB, of which the embedded Bloom filter (in Redis on a deployment)
// is 111 MB: ~460 MiB fixed with 1 KiB a queue. RSS at rest is lower
// (372 MB after the fill, 98 MB restarted); the figure is a serve at
// work, what a node must hold.
const (
	DiskIndexBytesPerURL = 16
	DiskLogBytesPerURL   = 21
	RAMBytesFixed        = 460 << 20
	RAMBytesPerQueue     = 1 << 10
)
