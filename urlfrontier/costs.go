package urlfrontier

// What a serve costs per URL, measured by TestServeScale (./bench.sh
// scale) and per queue by TestServeBroad (./bench.sh broad), for
// `dedup-worker plan`: on disk, each serve's index (data_dir/urlfrontier)
// and each NATS replica's log, per queued URL; in RAM, a serve with its
// NATS server, a fixed part (caches, buffers, the runtime) and a part per
// queue.
//
// From the run at 20 M URLs over 20,000 queues (a URL never fetched is
// one key): index 323.7 MB (16 B a URL), NATS 422.9 MB (21 B a URL, the
// log's share of it); RSS after handing out and completing 200,000 URLs
// 586 MB, of which the embedded Bloom filter (in Redis on a deployment)
// is 111 MB: ~460 MiB fixed. A queue's state, its index key and its
// ready URLs are on disk, never in RAM: at 10 M queues of one URL each
// serve's RSS was 41 B a queue more than the empty server's 1 s after the
// fill (21 B 60 s after), what its caches and NATS's buffers grew by;
// the figure per queue is that, rounded up. RSS at rest is lower; the
// figure is a serve at work, what a node must hold.
const (
	DiskIndexBytesPerURL = 16
	DiskLogBytesPerURL   = 21
	RAMBytesFixed        = 460 << 20
	RAMBytesPerQueue     = 48
)
