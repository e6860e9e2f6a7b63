package dedup

import (
	"fmt"
	"math"
	"time"
)

// PlanOptions describes a filter to size before it is created. Zero fields
// mean the defaults of the filter they describe.
type PlanOptions struct {
	// URLs is N, the number of distinct keys the crawl will admit.
	URLs int64
	// TargetFPP bounds the false-positive rate; 0 means 0.001.
	TargetFPP float64
	// Window is the revisit window D (0: none); it needs Rate.
	Window time.Duration
	// Granularity is the window's g; 0 means DefaultWindowGranularity.
	Granularity int
	// Rate is R, the keys new to the window admitted per second.
	Rate float64
	// Kind is "bloom" (the default) or "cuckoo".
	Kind string
	// InitialCapacity is the first layer's capacity (of each generation,
	// with a window); 0 means one layer for what the filter must hold: N,
	// or a generation's R·D/g.
	InitialCapacity int64
	// Factor and Tightening are the growth schedule's (0: the defaults).
	Factor, Tightening float64
	// Shards is the Redis filter's shard count; 0 means the kind's default.
	Shards int
	// NodeMemory is the memory each Redis Cluster node can give the filter
	// (its maxmemory less room for forks and buffers); 0: no node count.
	NodeMemory int64
}

// FilterPlan is what a filter of one kind needs to hold PlanOptions.URLs.
type FilterPlan struct {
	Kind        string        `json:"kind"`
	URLs        int64         `json:"urls"`
	TargetFPP   float64       `json:"target_fpp"`
	Window      time.Duration `json:"window_ns,omitempty"`
	Granularity int           `json:"granularity,omitempty"`
	Rate        float64       `json:"rate,omitempty"`
	// Generations counts the filters that hold keys: 1 without a window,
	// up to g+1 with one.
	Generations int `json:"generations"`
	// KeysPerGeneration is what the fullest generation holds: N without a
	// window, R·L with one.
	KeysPerGeneration int64 `json:"keys_per_generation"`
	// Growth is each generation's schedule, its TargetFPP the generation's
	// share of the bound.
	Growth Growth `json:"growth"`
	// Memory is the filter in this process's memory (the embedded mode),
	// Redis the filter sharded in Redis.
	Memory PlanPlace `json:"memory"`
	Redis  PlanPlace `json:"redis"`
	// Nodes is how many Redis Cluster nodes of NodeMemory bytes hold the
	// Redis filter with its shards spread evenly (0 without NodeMemory; −1
	// when one shard alone does not fit a node: raise Shards).
	Nodes      int   `json:"nodes,omitempty"`
	NodeMemory int64 `json:"node_memory,omitempty"`
}

// PlanPlace sizes a filter in one place: in memory (one shard) or in Redis.
type PlanPlace struct {
	Shards int `json:"shards"`
	// Layers are the fullest generation's layers, each of one shard.
	Layers []PlanLayer `json:"layers"`
	// ShardBytes is one shard of the fullest generation.
	ShardBytes uint64 `json:"shard_bytes"`
	// Bytes is the whole filter, every shard and generation: what its
	// Stats().MemoryBytes reports once it holds N keys (Redis adds a few
	// dozen bytes a key and its allocator's rounding).
	Bytes uint64 `json:"bytes"`
	// FPP is the estimated false-positive rate when the filter holds N.
	FPP float64 `json:"fpp"`
}

// PlanLayer is one layer of one shard.
type PlanLayer struct {
	Capacity int64   `json:"capacity"` // keys the schedule sizes it for
	FPP      float64 `json:"fpp"`      // its share of the bound
	Hashes   int     `json:"hashes"`   // k (Bloom) or fingerprint bits (cuckoo)
	Bits     uint64  `json:"bits"`     // bits, or slots × fingerprint bits
	Bytes    uint64  `json:"bytes"`    // memory it occupies
	Keys     int64   `json:"keys"`     // keys it holds when the filter holds N
}

// Plan sizes the filter o describes and the same filter of the other kind,
// in that order, with the functions the filters size themselves with
// (Growth.Layer, Guava's OptimalBits and OptimalHashes, the cuckoo geometry,
// the Redis filters' shard schedules), so a filter created with the same
// options reports the planned memory once it holds N keys. A Bloom layer
// holds its capacity; a cuckoo layer is taken to hold 95% of its slots
// before an insertion fails and the next layer opens. Keys are assumed
// spread evenly over shards.
func Plan(o PlanOptions) ([]FilterPlan, error) {
	switch o.Kind {
	case "", "bloom":
		o.Kind = "bloom"
	case "cuckoo":
	default:
		return nil, fmt.Errorf("%w: unknown filter kind %q (bloom or cuckoo)", ErrInvalidParams, o.Kind)
	}
	if o.URLs < 1 {
		return nil, fmt.Errorf("%w: URLs %d must be positive", ErrInvalidParams, o.URLs)
	}
	if o.NodeMemory < 0 {
		return nil, fmt.Errorf("%w: node memory %d must not be negative", ErrInvalidParams, o.NodeMemory)
	}
	other := o
	other.Kind = map[string]string{"bloom": "cuckoo", "cuckoo": "bloom"}[o.Kind]
	if o.Shards == 0 {
		other.Shards = 0 // each kind's own default
	}
	var out []FilterPlan
	for _, o := range []PlanOptions{o, other} {
		p, err := plan(o)
		if err != nil {
			return nil, fmt.Errorf("plan %s: %w", o.Kind, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// plan sizes one kind.
func plan(o PlanOptions) (FilterPlan, error) {
	if o.TargetFPP == 0 {
		o.TargetFPP = defaultTargetFPP
	}
	p := FilterPlan{Kind: o.Kind, URLs: o.URLs, TargetFPP: o.TargetFPP, Generations: 1, KeysPerGeneration: o.URLs, NodeMemory: o.NodeMemory}
	genFPP := o.TargetFPP
	gens := []int64{o.URLs} // keys each generation holds
	if o.Window != 0 || o.Rate != 0 {
		w, err := WindowOptions{After: o.Window, Granularity: o.Granularity}.prepare(localClock)
		if err != nil {
			return p, err
		}
		if !(o.Rate > 0) || math.IsInf(o.Rate, 0) {
			return p, fmt.Errorf("%w: a revisit window needs a positive rate of new keys, not %v", ErrInvalidParams, o.Rate)
		}
		p.Window, p.Granularity, p.Rate = w.After, w.Granularity, o.Rate
		genFPP = w.generationFPP(o.TargetFPP)
		per := int64(math.Ceil(o.Rate * float64(w.period()) / float64(time.Second)))
		held := min(o.URLs, int64(w.Granularity+1)*per)
		gens = gens[:0]
		for ; held > 0; held -= per {
			gens = append(gens, min(held, per))
		}
		p.Generations, p.KeysPerGeneration = len(gens), per
	}
	if o.InitialCapacity == 0 {
		o.InitialCapacity = p.KeysPerGeneration
	}
	p.Growth = Growth{InitialCapacity: o.InitialCapacity, TargetFPP: genFPP, Factor: o.Factor, Tightening: o.Tightening}.WithDefaults()
	if err := p.Growth.Validate(); err != nil {
		return p, err
	}
	var err error
	if o.Kind == "bloom" {
		err = p.planBloom(o, gens)
	} else {
		err = p.planCuckoo(o, gens)
	}
	if err != nil {
		return p, err
	}
	if o.NodeMemory > 0 {
		p.Nodes = -1
		if u := p.Redis.ShardBytes; u <= uint64(o.NodeMemory) {
			perNode := uint64(o.NodeMemory) / u
			units := uint64(p.Redis.Shards * p.Generations)
			p.Nodes = int((units + perNode - 1) / perNode)
		}
	}
	return p, nil
}

// planBloom sizes ScalableBloom generations in memory and RedisBloom ones
// in Redis.
func (p *FilterPlan) planBloom(o PlanOptions, gens []int64) error {
	rate := func(l PlanLayer) float64 {
		return math.Pow(-math.Expm1(-float64(l.Hashes)*float64(l.Keys)/float64(l.Bits)), float64(l.Hashes))
	}
	mem := func(i int) (PlanLayer, int64, error) {
		lp, err := p.Growth.Layer(i)
		if err != nil {
			return PlanLayer{}, 0, err
		}
		sz, err := newLayerParams(lp.Capacity, lp.FPP)
		if err != nil {
			return PlanLayer{}, 0, err
		}
		return PlanLayer{Capacity: lp.Capacity, FPP: lp.FPP, Hashes: sz.k, Bits: uint64(sz.words) * 64, Bytes: uint64(sz.words) * 8}, lp.Capacity, nil
	}
	if err := p.Memory.fill(1, gens, mem, rate); err != nil {
		return fmt.Errorf("in memory: %w", err)
	}
	ro := RedisBloomOptions{InitialCapacity: p.Growth.InitialCapacity, TargetFPP: p.Growth.TargetFPP,
		Factor: p.Growth.Factor, Tightening: p.Growth.Tightening, Shards: o.Shards}.withDefaults()
	rb, err := newRedisBloom(nil, "plan", ro, redisBloomLayout)
	if err != nil {
		return fmt.Errorf("in redis: %w", err)
	}
	red := func(i int) (PlanLayer, int64, error) {
		if i >= len(rb.layers) {
			return PlanLayer{}, 0, fmt.Errorf("%w: layer %d cannot be sized", ErrInvalidParams, i)
		}
		l := rb.layers[i]
		return PlanLayer{Capacity: l.capacity, FPP: l.fpp, Hashes: l.k, Bits: l.bits, Bytes: l.bits / 8}, l.capacity, nil
	}
	if err := p.Redis.fill(ro.Shards, gens, red, rate); err != nil {
		return fmt.Errorf("in redis: %w", err)
	}
	return nil
}

// planCuckoo sizes Cuckoo generations in memory and RedisCuckoo ones in
// Redis.
func (p *FilterPlan) planCuckoo(o PlanOptions, gens []int64) error {
	co := CuckooOptions{Growth: p.Growth}.withDefaults()
	b := co.BucketSize
	rate := func(l PlanLayer) float64 {
		return cuckooLoadFPP(b, l.Hashes, float64(l.Keys)/float64(l.Bits/uint64(l.Hashes)))
	}
	layer := func(lp cuckooLayerParams, bytes uint64) (PlanLayer, int64, error) {
		slots := lp.Buckets * uint64(b)
		return PlanLayer{Capacity: lp.Capacity, FPP: lp.FPP, Hashes: lp.Bits, Bits: slots * uint64(lp.Bits), Bytes: bytes},
			int64(float64(slots) * cuckooSizingLoad), nil
	}
	mem := func(i int) (PlanLayer, int64, error) {
		lp, err := co.layer(i)
		if err != nil {
			return PlanLayer{}, 0, err
		}
		return layer(lp, 8*cuckooWords(lp.Buckets, b, lp.Bits))
	}
	if err := p.Memory.fill(1, gens, mem, rate); err != nil {
		return fmt.Errorf("in memory: %w", err)
	}
	rc, err := newRedisCuckoo(nil, "plan", RedisCuckooOptions{CuckooOptions: co, Shards: o.Shards}.withDefaults())
	if err != nil {
		return fmt.Errorf("in redis: %w", err)
	}
	red := func(i int) (PlanLayer, int64, error) {
		if i >= len(rc.layers) {
			return PlanLayer{}, 0, fmt.Errorf("%w: layer %d cannot be sized", ErrInvalidParams, i)
		}
		lp := rc.layers[i]
		return layer(lp, (lp.Buckets*uint64(b)*uint64(lp.Bits)+7)/8) // the slot string's length
	}
	if err := p.Redis.fill(rc.opts.Shards, gens, red, rate); err != nil {
		return fmt.Errorf("in redis: %w", err)
	}
	return nil
}

// fill sizes the generations, each holding gens[i] keys spread over shards:
// layer(i) gives layer i of a shard and how many keys it holds before the
// next opens, rate a layer's false-positive rate at its Keys.
func (pl *PlanPlace) fill(shards int, gens []int64, layer func(i int) (PlanLayer, int64, error), rate func(PlanLayer) float64) error {
	pl.Shards = shards
	pass := 1.0
	for g, keys := range gens {
		left := (keys + int64(shards) - 1) / int64(shards)
		var layers []PlanLayer
		var bytes uint64
		genPass := 1.0
		for i := 0; i == 0 || left > 0; i++ {
			l, holds, err := layer(i)
			if err != nil {
				return err
			}
			l.Keys = min(left, holds)
			left -= l.Keys
			layers = append(layers, l)
			bytes += l.Bytes
			genPass *= 1 - rate(l)
		}
		pl.Bytes += bytes * uint64(shards)
		pass *= genPass
		if g == 0 {
			pl.Layers, pl.ShardBytes = layers, bytes
		}
	}
	pl.FPP = 1 - pass
	return nil
}
