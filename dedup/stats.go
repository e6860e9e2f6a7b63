package dedup

// Stats describes a filter's state. Every filter kind in this package reports
// it, so callers (the stats endpoint, the CLI) need not know which kind they
// hold.
type Stats struct {
	// Kind names the filter: "bloom" or "cuckoo".
	Kind string `json:"kind"`
	// Items counts keys the filter has admitted as new.
	Items uint64 `json:"items"`
	// Deletes counts keys removed (cuckoo filters only).
	Deletes uint64 `json:"deletes,omitempty"`
	// TargetFPP is the configured bound on the false-positive rate.
	TargetFPP float64 `json:"target_fpp"`
	// EstimatedFPP is the current false-positive rate estimated from the
	// layers' fill: 1 − Π(1 − fpp_i).
	EstimatedFPP float64 `json:"estimated_fpp"`
	// MemoryBytes is the memory the filter's bits (or slots) occupy.
	MemoryBytes uint64 `json:"memory_bytes"`
	// BytesPerItem is MemoryBytes / Items (0 while empty).
	BytesPerItem float64 `json:"bytes_per_item"`
	// Layers lists the layers (sub-filters), oldest first.
	Layers []LayerStats `json:"layers"`
	// NextLayerCapacity is the capacity of the layer the filter will add
	// when the newest one is full (0 for a filter that does not grow).
	NextLayerCapacity uint64 `json:"next_layer_capacity,omitempty"`
}

// LayerStats describes one layer of a growing filter (for a sharded filter,
// the layer summed over its shards).
type LayerStats struct {
	// Capacity is the number of items the layer was sized for.
	Capacity uint64 `json:"capacity"`
	// Items counts the keys added to this layer.
	Items uint64 `json:"items"`
	// Bits is the layer's size in bits (Bloom) or slots × fingerprint bits
	// (cuckoo).
	Bits uint64 `json:"bits"`
	// Hashes is the number of hash functions k (Bloom) or the fingerprint
	// size in bits (cuckoo).
	Hashes int `json:"hashes"`
	// FPP is the layer's design false-positive rate when full.
	FPP float64 `json:"fpp"`
	// Fill is the fraction of bits set (Bloom) or slots used (cuckoo).
	Fill float64 `json:"fill"`
	// EstimatedFPP is the layer's current false-positive rate from its fill.
	EstimatedFPP float64 `json:"estimated_fpp"`
}
