package frontier

// StreamBytesPerURL is what a waiting URL costs the frontier stream on
// disk, S2-compressed, measured by TestFrontierStreamBytes (./bench.sh
// scale): 75 B at 1 M (81 at 200,000). It is per replica of the stream;
// `dedup-worker plan` sizes the stream with it.
const StreamBytesPerURL = 80
