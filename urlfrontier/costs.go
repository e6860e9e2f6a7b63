package urlfrontier

// What a serve costs per URL, measured by TestServeScale (./bench.sh
// scale), for `dedup-worker plan`: on disk, each serve's index
// (data_dir/urlfrontier) and each NATS replica's log, per queued URL; in
// RAM, a serve with its NATS server, a fixed part (caches, buffers, the
// runtime) and a part per queue (its state in every serve's summaries).
const (
	DiskIndexBytesPerURL = 34
	DiskLogBytesPerURL   = 40
	RAMBytesFixed        = 300 << 20
	RAMBytesPerQueue     = 1 << 10
)
