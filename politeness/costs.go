package politeness

// RAMBytesPerQueue is what a queue costs a Scheduler in RAM, for
// `dedup-worker plan`: the live heap per host with one item buffered, the
// host's key (a name of 23 to 27 bytes) included and the item itself not.
// From BenchmarkBroadMemory at 1,000,000 hosts (B/host-1item, medians of
// 3 runs on a 2-core box, go1.26: 264.8; 252.7 at 10,000 hosts): the
// queue's struct (160 B), its map entry and its place in the ready heap.
// A queue with nothing to do is forgotten a second after its turns, so
// this is the cost of a host with work in hand or a backlog handed back.
const RAMBytesPerQueue = 265
