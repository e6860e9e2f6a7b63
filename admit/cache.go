package admit

import (
	"hash/maphash"
	"sync"
)

// seenCache remembers canonical URLs a Core knows the filter holds — the
// filter said so, or the Core marked them itself — so that repeated links
// (a crawl's navigation, footers, popular pages) skip the filter call. It
// holds 64-bit hashes in two generations: lookups consult both, inserts go
// to the current one, and when that reaches half the capacity the older one
// is dropped, so recently confirmed URLs stay.
//
// A hit means "in the filter", which the protocol only relies on for URLs
// already enqueued, so the cache never loses a URL; a hash collision (at
// most capacity/2^64 per lookup, about 5·10⁻¹⁴ for a million entries) acts
// as one more false positive of the filter. The cache assumes keys are never
// removed from the filter; after deleting from a cuckoo filter, restart the
// workers. A filter whose keys expire (Expiring) is never cached. It is safe for concurrent use.
type seenCache struct {
	mu       sync.Mutex
	seed     maphash.Seed
	cur, old map[uint64]struct{}
	half     int
	epochs   sync.Map // crawl → uint64, bumped when the crawl is deleted
}

func newSeenCache(capacity int) *seenCache {
	if capacity <= 0 {
		return nil
	}
	half := max(capacity/2, 1)
	return &seenCache{seed: maphash.MakeSeed(), cur: make(map[uint64]struct{}, min(half, 1<<16)), half: half}
}

// hash is a URL's key: its crawl, the crawl's epoch and the URL (a
// URL is seen per crawl, and a crawl created again under a deleted one's id
// is another crawl).
func (c *seenCache) hash(u URL) uint64 {
	var epoch uint64
	if v, ok := c.epochs.Load(u.Crawl); ok {
		epoch = v.(uint64)
	}
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(u.Crawl)
	h.WriteByte(0)
	var b [8]byte
	for i := range b {
		b[i] = byte(epoch >> (8 * i))
	}
	h.Write(b[:])
	h.WriteString(u.URL)
	return h.Sum64()
}

// forget makes the cache forget every URL of crawl (it was deleted): the
// crawl's entries are never matched again, and age out.
func (c *seenCache) forget(crawl string) {
	if c == nil {
		return
	}
	for {
		v, loaded := c.epochs.LoadOrStore(crawl, uint64(1))
		if !loaded || c.epochs.CompareAndSwap(crawl, v, v.(uint64)+1) {
			return
		}
	}
}

// known reports, for each index into urls in idx, whether the cache
// holds that URL; a nil cache holds nothing.
func (c *seenCache) known(urls []URL, idx []int) []bool {
	out := make([]bool, len(idx))
	if c == nil {
		return out
	}
	hs := c.hashes(urls, idx)
	c.mu.Lock()
	defer c.mu.Unlock()
	for j, h := range hs {
		if _, ok := c.cur[h]; ok {
			out[j] = true
		} else if _, ok := c.old[h]; ok {
			out[j] = true
			c.insert(h) // keep it young
		}
	}
	return out
}

// add remembers the URLs urls[i] for i in idx.
func (c *seenCache) add(urls []URL, idx []int) {
	if c == nil || len(idx) == 0 {
		return
	}
	hs := c.hashes(urls, idx)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range hs {
		c.insert(h)
	}
}

// hashes returns the hashes of urls[i] for i in idx, computed outside the
// lock.
func (c *seenCache) hashes(urls []URL, idx []int) []uint64 {
	hs := make([]uint64, len(idx))
	for j, i := range idx {
		hs[j] = c.hash(urls[i])
	}
	return hs
}

func (c *seenCache) insert(h uint64) {
	if len(c.cur) >= c.half {
		c.old, c.cur = c.cur, make(map[uint64]struct{}, min(c.half, 1<<16))
	}
	c.cur[h] = struct{}{}
}

// size is the number of hashes held.
func (c *seenCache) size() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.old)
}
