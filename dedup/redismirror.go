package dedup

import (
	"context"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// DefaultRedisBloomMirrorBytes is RedisBloomOptions.MirrorBytes's default.
const DefaultRedisBloomMirrorBytes = 256 << 20

// bloomMirror is a process's local copy of a RedisBloom's bits, used to
// answer in Go what it can prove without asking Redis.
//
// It rests on one fact: a Bloom filter's bits only ever go from 0 to 1. So a
// bit the mirror holds as 1 is 1 in Redis too, now and forever, and a key
// whose bits are all 1 in some mirrored layer is present in the filter: not
// new, whatever Redis would say. The mirror learns bits two ways:
//
//   - the bits of every key this process added (the script answered "new"
//     after setting them all in the newest layer);
//   - a layer's whole bit array, read from Redis (GET) when the mirror first
//     meets the layer, and read again once the layer is frozen: a shard's
//     layer i takes no write after the shard opened layer i+1 (the script
//     writes the newest layer only, and refuses a caller whose layer count
//     is stale), so a copy read after the mirror saw the shard with more
//     than i+1 layers is complete, and stays so.
//
// A complete layer answers both ways: a key with a 0 bit in it is absent from
// it, so the script need not probe it. Frozen layers hold all but the newest
// layer's keys, so with them complete the script reads nothing but the newest
// layer, and a repeated key that this process (or its complete layers)
// knows costs Redis nothing.
//
// The copy costs memory equal to the mirrored layers' bit arrays; layers are
// mirrored oldest first while they fit in the byte budget, the rest are
// probed in Redis as without a mirror. A bloomMirror is safe for concurrent
// use: words are read and set atomically, layers are added under a lock.
type bloomMirror struct {
	budget atomic.Int64 // bytes the mirror may still allocate
	shards []mirrorShard
}

type mirrorShard struct {
	mu     sync.Mutex
	layers []*mirrorLayer // by layer index; nil where the budget ran out
}

// mirrorLayer is one layer's bits: bit p of the layer's array is bit p&63 of
// words[p>>6].
type mirrorLayer struct {
	words    []uint64
	complete bool // under mirrorShard.mu
}

func newBloomMirror(shards int, budget int64) *bloomMirror {
	m := &bloomMirror{shards: make([]mirrorShard, shards)}
	m.budget.Store(budget)
	return m
}

// has reports whether every one of the k bits of h is 1 in the layer.
func (l *mirrorLayer) has(h Hash, k int, size uint64) bool {
	for t := 0; t < k; t++ {
		p := h.BitIndex(t, size)
		if atomic.LoadUint64(&l.words[p>>6])&(1<<(p&63)) == 0 {
			return false
		}
	}
	return true
}

// bit reports whether bit p of the layer is 1.
func (l *mirrorLayer) bit(p uint64) bool {
	return atomic.LoadUint64(&l.words[p>>6])&(1<<(p&63)) != 0
}

// setBit sets bit p of the layer.
func (l *mirrorLayer) setBit(p uint64) {
	if w, b := &l.words[p>>6], uint64(1)<<(p&63); atomic.LoadUint64(w)&b == 0 {
		atomic.OrUint64(w, b)
	}
}

// set sets the k bits of h in the layer.
func (l *mirrorLayer) set(h Hash, k int, size uint64) {
	for t := 0; t < k; t++ {
		p := h.BitIndex(t, size)
		w := &l.words[p>>6]
		if b := uint64(1) << (p & 63); atomic.LoadUint64(w)&b == 0 {
			atomic.OrUint64(w, b)
		}
	}
}

// orRedis ORs a Redis bit string holding bits [from, from+8·len(b)) of the
// layer into it. Redis numbers a byte's bits from its most significant.
func (l *mirrorLayer) orRedis(b []byte, from uint64) {
	if from&63 != 0 { // a chunk size that is no multiple of 8 bytes
		for i, x := range b {
			for x != 0 {
				t := bits.LeadingZeros8(x)
				p := from + 8*uint64(i) + uint64(t)
				atomic.OrUint64(&l.words[p>>6], 1<<(p&63))
				x &^= 0x80 >> t
			}
		}
		return
	}
	w := from >> 6
	for i := 0; i < len(b) && w < uint64(len(l.words)); i += 8 {
		var x uint64
		for j := 0; j < 8 && i+j < len(b); j++ {
			x |= uint64(bits.Reverse8(b[i+j])) << (8 * j)
		}
		if x != 0 {
			atomic.OrUint64(&l.words[w], x)
		}
		w++
	}
}

// layersFor returns shard j's mirrored layers among its first n (nil where
// not mirrored) and how many leading ones are complete, first reading from
// Redis the layers the mirror has not met yet, and again those frozen since
// (all but the newest of n). n comes from a script's answer, so the shard
// had at least n layers then.
func (m *bloomMirror) layersFor(ctx context.Context, f *RedisBloom, j, n int) ([]*mirrorLayer, int, error) {
	if n < 1 || n > len(f.layers) {
		return nil, 0, fmt.Errorf("shard has %d layers, more than the %d its schedule can size", n, len(f.layers))
	}
	s := &m.shards[j]
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < n; i++ {
		if i == len(s.layers) {
			var l *mirrorLayer
			size := int64(f.layers[i].bits / 8)
			if m.budget.Add(-size) >= 0 {
				l = &mirrorLayer{words: make([]uint64, f.layers[i].bits/64)}
			} else {
				m.budget.Add(size)
			}
			s.layers = append(s.layers, l)
			if l == nil {
				continue
			}
			if err := f.readLayer(ctx, j, i, l); err != nil {
				s.layers = s.layers[:i] // met again next time
				m.budget.Add(size)
				return nil, 0, err
			}
			l.complete = i < n-1
			continue
		}
		if l := s.layers[i]; l != nil && !l.complete && i < n-1 {
			if err := f.readLayer(ctx, j, i, l); err != nil {
				return nil, 0, err
			}
			l.complete = true
		}
	}
	c := 0
	for c < n && s.layers[c] != nil && s.layers[c].complete {
		c++
	}
	return s.layers[:n:n], c, nil
}

// readLayer ORs shard j's layer i, as stored in Redis now, into l.
func (f *RedisBloom) readLayer(ctx context.Context, j, i int, l *mirrorLayer) error {
	pipe := f.client.Pipeline()
	var cmds []*redis.StringCmd
	size := f.layers[i].bits
	for c := uint64(0); c*f.chunk < size; c++ {
		cmds = append(cmds, pipe.Get(ctx, f.chunkKey(j, i, c)))
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return fmt.Errorf("mirror shard %d layer %d: %w", j, i, err)
	}
	for c, cmd := range cmds {
		b, err := cmd.Bytes()
		if err == redis.Nil {
			continue // not allocated yet: no bit set
		}
		if err != nil {
			return fmt.Errorf("mirror shard %d layer %d: %w", j, i, err)
		}
		if n := f.chunkBits(i, uint64(c)) / 8; uint64(len(b)) > n {
			b = b[:n] // native layout: the frozen flag's byte
		}
		l.orRedis(b, uint64(c)*f.chunk)
	}
	return nil
}

// mirrorAnswers answers from the mirror the keys idx of shard j that it can
// (setting out for them) and returns the others, with the number of oldest
// layers the mirror holds complete copies of, which the script need not
// probe for them.
func (f *RedisBloom) mirrorAnswers(ctx context.Context, j int, hashes []Hash, idx []int, mode string, out []bool) ([]int, int, error) {
	ls, complete, err := f.mirror.layersFor(ctx, f, j, int(f.seen[j].Load()))
	if err != nil {
		return nil, 0, fmt.Errorf("shard %d: %w", j, err)
	}
	rest := make([]int, 0, len(idx))
	for _, q := range idx {
		found := false
		for i := len(ls) - 1; i >= 0 && !found; i-- {
			found = ls[i] != nil && ls[i].has(hashes[q], f.layers[i].k, f.layers[i].bits)
		}
		if found {
			out[q] = mode == redisBloomContains // present: not new
			continue
		}
		rest = append(rest, q)
	}
	return rest, complete, nil
}

// mirrorLearn sets in the mirror the bits of the keys the script just
// added: the first done keys of w whose out is true, now all 1 in layer
// w.layers−1 of the shard.
func (f *RedisBloom) mirrorLearn(w redisShardWork, hashes []Hash, out []bool, done int) {
	s := &f.mirror.shards[w.shard]
	i := w.layers - 1
	s.mu.Lock()
	var l *mirrorLayer
	if i < len(s.layers) {
		l = s.layers[i]
	}
	s.mu.Unlock()
	if l == nil {
		return
	}
	k, size := f.layers[i].k, f.layers[i].bits
	for _, q := range w.idx[:done] {
		if out[q] {
			l.set(hashes[q], k, size)
		}
	}
}
