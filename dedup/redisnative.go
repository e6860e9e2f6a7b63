package dedup

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// The native protocol (layout 3) of a RedisBloom: plain Redis commands, no
// script. See RedisBloom's documentation for the protocol and its proof;
// this file holds its mechanics.

// chunks returns the number of chunk keys of layer i.
func (f *RedisBloom) chunks(i int) uint64 { return (f.layers[i].bits + f.chunk - 1) / f.chunk }

// chunkBits returns the number of filter bits chunk c of layer i holds, a
// multiple of 8. Under layout 3 each chunk key holds 8 bytes more, its
// tail, at bit offset chunkBits: in chunk 0 the layer's admission counter
// (see layerGuard), and in every chunk a last bit that stays 0, which each
// write sets to 0 so that a chunk is allocated at its full size at once.
func (f *RedisBloom) chunkBits(i int, c uint64) uint64 {
	return min(f.chunk, f.layers[i].bits-c*f.chunk)
}

// chunkKey returns the Redis key of chunk c of layer i of shard j.
func (f *RedisBloom) chunkKey(j, i int, c uint64) string {
	return f.shards.key(j, "bits:"+strconv.Itoa(i)+":"+strconv.FormatUint(c, 10))
}

// redisTailBytes is the length of a layout-3 chunk's tail.
const redisTailBytes = 8

// countField returns the state field counting the keys admitted into
// layer i.
func countField(i int) string { return "n" + strconv.Itoa(i) }

// layerGuard is how a layout-3 layer refuses keys past its capacity
// without a script. Chunk 0's tail holds a 63-bit unsigned counter at bit
// offset chunkBits(i, 0), whose first (most significant) bit is the frozen
// flag. A call that sets n keys' bits in the layer runs, in one BITFIELD
// command on chunk 0 (one MULTI/EXEC with the other chunks' commands):
//
//	GET u1 <flag>                  the flag before this call
//	OVERFLOW SAT INCRBY u63 <flag> n·step
//	SET u1 <tail's last bit> 0     allocation
//	SET u1 <bit> 1 …               the keys' bits
//
// step = floor(2⁶² / threshold), so the flag turns 1 exactly when the
// counter reaches ceil(2⁶²/step) ∈ {threshold, threshold+1} keys, and
// saturation keeps it 1 forever after. A call that read the flag as 0 ran
// while fewer than threshold+1 keys were counted and counts at most batch
// keys, so the layer never holds more than threshold + batch = capacity
// keys, however many processes write at once. A call that read it as 1 ran
// on a frozen layer: its answers for keys whose bits were not all 1 are
// void, and those keys go on to the next layer; but it set their bits in
// the frozen layer, uncounted. Of W writers at most W−1 such calls follow
// the freeze, so the layer's bits are sized for capacity + reserve keys,
// reserve = (W−1)·batch (see RedisBloom, "The bound under concurrent
// writers").
type layerGuard struct {
	batch   uint64 // the most keys one call may count
	step    uint64
	reserve int64 // the keys (MaxWriters−1) late calls may set uncounted
}

// maxGuardBatch bounds the keys one call counts into a layer, and
// minGuardBatch the guard's own bound on it when many writers shrink it.
const (
	maxGuardBatch = 128
	minGuardBatch = 16
)

// guardReserveShare is the share of a layer's capacity its reserve for
// late writers keeps within, while the batch stays at least minGuardBatch.
const guardReserveShare = 32 // 1/32: about 3% more bits

// newLayerGuard sizes the guard of a layer of the given capacity for
// writers calls at once: calls of at most capacity/64 keys (at least 1, at
// most maxGuardBatch), fewer with many writers so that the reserve
// (writers−1)·batch stays within capacity/guardReserveShare (but not below
// minGuardBatch keys a call), and the threshold capacity − batch.
func newLayerGuard(capacity int64, writers int) layerGuard {
	c := uint64(max(capacity, 2))
	batch := min(maxGuardBatch, max(1, c/64))
	if w := uint64(max(writers, 1)) - 1; w > 0 {
		batch = min(batch, max(minGuardBatch, c/(guardReserveShare*w)))
	}
	return layerGuard{batch: batch, step: (1 << 62) / (c - batch), reserve: int64(uint64(max(writers, 1)-1) * batch)}
}

// Constant BITFIELD arguments, boxed once.
var (
	argGET      any = "GET"
	argSET      any = "SET"
	argINCRBY   any = "INCRBY"
	argOVERFLOW any = "OVERFLOW"
	argSAT      any = "SAT"
	argFAIL     any = "FAIL"
	argU1       any = "u1"
	argU62      any = "u62"
	argU63      any = "u63"
	arg1        any = "1"
	arg0        any = "0"
)

// layerCall is one call on one layer of one shard over some keys' bits: a
// BITFIELD per chunk that has any, which GETs each bit, or SETs it to 1
// and answers its old value. Guarded (the newest layer), chunk 0's command
// first reads the frozen flag, and a writing call counts its keys.
type layerCall struct {
	qs     []int                // the keys, as batch indices
	cmds   []*redis.IntSliceCmd // one per chunk with operations; chunk 0's first when guarded
	owners [][]int32            // per command, per bit operation: position in qs
	pos    [][]uint64           // per command, per bit operation: the bit, in the layer
	head   []int                // per command: values before the bits' (flag, counter, allocation)
}

// layerCall builds the commands of a call over the bits of keys qs in layer
// i of shard j. Bits that known (a mirror of the layer, or nil) holds as 1
// are left out: they are 1 in Redis too, so setting or reading them would
// tell nothing. Offsets are passed as *uint64 into one array, which
// go-redis formats without boxing each one.
func (f *RedisBloom) layerCall(ctx context.Context, j, i int, qs []int, hashes []Hash, set, guard bool, known *mirrorLayer) *layerCall {
	l := f.layers[i]
	nch := f.chunks(i)
	per, name := 3, "bitfield_ro"
	if set {
		per, name = 4, "bitfield"
	}
	lc := &layerCall{qs: qs}
	offs := make([]uint64, 0, len(qs)*l.k+3*int(nch))
	args := make([][]any, nch)
	owners := make([][]int32, nch)
	poss := make([][]uint64, nch)
	head := make([]int, nch)
	for c := uint64(0); c < nch; c++ {
		if nch == 1 {
			args[c] = make([]any, 0, 16+per*len(qs)*l.k)
			owners[c] = make([]int32, 0, len(qs)*l.k)
			poss[c] = make([]uint64, 0, len(qs)*l.k)
		}
		args[c] = append(args[c], name, f.chunkKey(j, i, c))
		tail := f.chunkBits(i, c)
		if guard && c == 0 {
			offs = append(offs, tail)
			flag := &offs[len(offs)-1]
			args[c] = append(args[c], argGET, argU1, flag)
			head[c]++
			if set {
				offs = append(offs, uint64(len(qs))*f.guards[i].step)
				args[c] = append(args[c], argOVERFLOW, argSAT, argINCRBY, argU63, flag, &offs[len(offs)-1])
				head[c]++
			}
		}
		if set {
			offs = append(offs, tail+8*redisTailBytes-1)
			args[c] = append(args[c], argSET, argU1, &offs[len(offs)-1], arg0)
			head[c]++
		}
	}
	base := make([]int, nch)
	for c := range args {
		base[c] = len(args[c])
	}
	for x, q := range qs {
		h := hashes[q]
		for t := 0; t < l.k; t++ {
			pos := h.BitIndex(t, l.bits)
			if known != nil && known.bit(pos) {
				continue
			}
			c := pos / f.chunk
			offs = append(offs, pos-c*f.chunk)
			if set {
				args[c] = append(args[c], argSET, argU1, &offs[len(offs)-1], arg1)
			} else {
				args[c] = append(args[c], argGET, argU1, &offs[len(offs)-1])
			}
			owners[c] = append(owners[c], int32(x))
			poss[c] = append(poss[c], pos)
		}
	}
	for c := range args {
		if len(args[c]) == base[c] && !(guard && c == 0) {
			continue // nothing to do in this chunk
		}
		lc.cmds = append(lc.cmds, redis.NewIntSliceCmd(ctx, args[c]...))
		lc.owners = append(lc.owners, owners[c])
		lc.pos = append(lc.pos, poss[c])
		lc.head = append(lc.head, head[c])
	}
	return lc
}

// result returns, per key of the call, whether some bit it read or set was
// 0 (before the set), and for a guarded call whether the layer was frozen
// before it, and for a guarded write whether it is frozen after it (this
// call counted the layer full).
func (lc *layerCall) result(guard bool) (zero []bool, frozen, full bool, err error) {
	zero = make([]bool, len(lc.qs))
	for n, cmd := range lc.cmds {
		vals, err := cmd.Result()
		if err != nil {
			return nil, false, false, err
		}
		if len(vals) != lc.head[n]+len(lc.owners[n]) {
			return nil, false, false, fmt.Errorf("bitfield answered %d values for %d operations", len(vals), lc.head[n]+len(lc.owners[n]))
		}
		if guard && n == 0 {
			frozen = vals[0] == 1
			full = frozen || lc.head[n] == 3 && vals[1] >= 1<<62
		}
		for o, v := range vals[lc.head[n]:] {
			if v == 0 {
				zero[lc.owners[n][o]] = true
			}
		}
	}
	return zero, frozen, full, nil
}

// nativeRun is one TestAndAdd or Contains call under layout 3.
type nativeRun struct {
	f      *RedisBloom
	ctx    context.Context
	hashes []Hash
	out    []bool
	add    bool
	// from[q] is the number of oldest layers known not to hold key q:
	// layers the mirror holds complete copies of, or probed already.
	from []int
}

func (f *RedisBloom) runNative(ctx context.Context, keys [][]byte, add bool) ([]bool, error) {
	r := &nativeRun{f: f, ctx: ctx, hashes: make([]Hash, len(keys)), out: make([]bool, len(keys)), add: add, from: make([]int, len(keys))}
	for i, k := range keys {
		r.hashes[i] = HashKey(k)
	}
	groups := f.shards.group(r.hashes, nil)
	if err := f.loadShards(ctx, groups); err != nil {
		return nil, err
	}
	if f.mirror != nil {
		mode := redisBloomContains
		if add {
			mode = redisBloomAdd
		}
		for j, idx := range groups {
			if len(idx) == 0 {
				continue
			}
			rest, skip, err := f.mirrorAnswers(ctx, j, r.hashes, idx, mode, r.out)
			if err != nil {
				return nil, err
			}
			for _, q := range rest {
				r.from[q] = skip
			}
			groups[j] = rest
		}
	}
	if err := redisRounds(groups, r.round); err != nil {
		return nil, err
	}
	return r.out, nil
}

// loadShards reads the layer count of every shard with keys that this
// process has not met yet: one round trip, once.
func (f *RedisBloom) loadShards(ctx context.Context, groups [][]int) error {
	var shards []int
	for j, idx := range groups {
		if len(idx) > 0 && f.seen[j].Load() == 0 {
			shards = append(shards, j)
		}
	}
	if len(shards) == 0 {
		return nil
	}
	pipe := f.client.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(shards))
	for x, j := range shards {
		cmds[x] = pipe.HGetAll(ctx, f.shards.key(j, "state"))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	for x, j := range shards {
		st, err := f.parseState(j, cmds[x].Val())
		if err != nil {
			return err
		}
		f.raiseLayers(j, st.layers)
	}
	return nil
}

// nativeState is a shard's state hash, parsed.
type nativeState struct {
	layers int     // at least 1; under layout 3 a hint: the layer count is at least this
	counts []int64 // per layer
}

func (f *RedisBloom) parseState(j int, m map[string]string) (nativeState, error) {
	st := nativeState{layers: 1}
	if s, ok := m["layers"]; ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > len(f.layers) {
			return st, fmt.Errorf("shard %d: bad layer count %q", j, s)
		}
		st.layers = n
	}
	st.counts = make([]int64, len(f.layers))
	for i := range st.counts {
		if s, ok := m[countField(i)]; ok {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return st, fmt.Errorf("shard %d: bad item count %q for layer %d", j, s, i)
			}
			if i >= st.layers {
				st.layers = i + 1 // counted before the hint was written
			}
			st.counts[i] = n
		}
	}
	return st, nil
}

// raiseLayers records that shard j has at least n layers.
func (f *RedisBloom) raiseLayers(j, n int) {
	for {
		cur := f.seen[j].Load()
		if int(cur) >= n || f.seen[j].CompareAndSwap(cur, int32(n)) {
			return
		}
	}
}

// exec sends cmds, of the shards shardOf (in shard order), and waits for
// their replies. Without atomic, a large batch goes as redisLanes
// pipelines of whole shards, on as many connections at once, so that Redis
// runs the first while the client still encodes the next (go-redis spends
// about as long encoding a BITFIELD as Redis running it); a shard's
// commands stay in one pipeline, in order. With atomic, each shard's
// commands run as one MULTI/EXEC transaction: on a single server one
// transaction for all, on a cluster one per shard (a transaction may not
// span slots), sent in parallel.
func (f *RedisBloom) exec(ctx context.Context, cmds []redis.Cmder, shardOf []int, atomic bool) error {
	if len(cmds) == 0 {
		return nil
	}
	send := func(pipe redis.Pipeliner, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			_ = pipe.Process(ctx, cmd)
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	_, cluster := f.client.(*redis.ClusterClient)
	switch {
	case !atomic && (shardOf == nil || len(cmds) < redisLaneCmds):
		_ = send(f.client.Pipeline(), cmds)
	case !atomic:
		var wg sync.WaitGroup
		start := 0
		for lane := 1; lane <= redisLanes; lane++ {
			end := len(cmds) * lane / redisLanes
			for end > start && end < len(cmds) && shardOf[end] == shardOf[end-1] {
				end++ // keep a shard's commands together
			}
			if end > start {
				part := cmds[start:end]
				wg.Go(func() { _ = send(f.client.Pipeline(), part) })
			}
			start = end
		}
		wg.Wait()
	case !cluster:
		_ = send(f.client.TxPipeline(), cmds)
	default:
		byShard := map[int][]redis.Cmder{}
		for x, cmd := range cmds {
			byShard[shardOf[x]] = append(byShard[shardOf[x]], cmd)
		}
		var wg sync.WaitGroup
		for _, cs := range byShard {
			wg.Go(func() { _ = send(f.client.TxPipeline(), cs) })
		}
		wg.Wait()
	}
	// A missing hash field (redis.Nil) is an answer, not a failure.
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && err != redis.Nil {
			return err
		}
	}
	return nil
}

// redisLanes is how many pipelines exec sends a batch of at least
// redisLaneCmds commands in.
const (
	redisLanes    = 2
	redisLaneCmds = 16
)

// round serves one round of the driver: answer what the older layers can
// (the mirror's complete copies, else reads in Redis), then set (or read)
// the rest in the newest layer, in guarded calls of at most the layer's
// guard batch, all in one pipeline, and fix the counts of keys that were
// not new.
func (r *nativeRun) round(parts []redisPart) ([][]int, error) {
	f := r.f
	left := make([][]int, len(parts))
	type job struct {
		layers   int
		send     []int          // keys for the newest layer
		ls       []*mirrorLayer // the shard's mirrored layers
		complete int            // leading layers of ls that are complete copies
		calls    []*layerCall
		counts   []*redis.IntCmd
		tail     []int // keys left for the next round
	}
	jobs := make([]job, len(parts))
	// Older layers: present there means not new (or present).
	var olds []*layerCall
	taken := map[int]bool{}
	for p, part := range parts {
		j := part.shard
		jb := &jobs[p]
		jb.layers = int(f.seen[j].Load())
		L := jb.layers
		if L < 1 || L > len(f.layers) {
			return nil, fmt.Errorf("shard %d has %d layers, more than the %d its schedule can size", j, L, len(f.layers))
		}
		idx := part.idx
		if r.add {
			// One write call a shard a round: after the layer freezes,
			// the calls a process has in flight would still set their
			// bits in it (see layerGuard).
			n := 0
			if !taken[j] {
				n = min(len(idx), int(f.guards[L-1].batch))
				taken[j] = true
			}
			idx, jb.tail = idx[:n], idx[n:]
		}
		if f.mirror != nil {
			ls, complete, err := f.mirror.layersFor(r.ctx, f, j, L)
			if err != nil {
				return nil, fmt.Errorf("shard %d: %w", j, err)
			}
			jb.ls, jb.complete = ls, complete
		}
		need := make([][]int, L)
		for _, q := range idx {
			found := false
			for i := r.from[q]; i < L-1 && !found; i++ {
				if i < jb.complete {
					found = jb.ls[i].has(r.hashes[q], f.layers[i].k, f.layers[i].bits)
				} else {
					need[i] = append(need[i], q)
				}
			}
			if found {
				r.out[q] = !r.add
				continue
			}
			jb.send = append(jb.send, q)
		}
		for i, qs := range need {
			if len(qs) > 0 {
				olds = append(olds, f.layerCall(r.ctx, j, i, qs, r.hashes, false, false, nil))
			}
		}
	}
	if len(olds) > 0 {
		var cmds []redis.Cmder
		for _, lc := range olds {
			for _, c := range lc.cmds {
				cmds = append(cmds, c)
			}
		}
		if err := f.exec(r.ctx, cmds, nil, false); err != nil {
			return nil, err
		}
		held := map[int]bool{}
		for _, lc := range olds {
			zero, _, _, err := lc.result(false)
			if err != nil {
				return nil, err
			}
			for x, q := range lc.qs {
				if !zero[x] {
					held[q] = true
				}
			}
		}
		for p := range jobs {
			jb := &jobs[p]
			kept := jb.send[:0]
			for _, q := range jb.send {
				if held[q] {
					r.out[q] = !r.add
					continue
				}
				kept = append(kept, q)
			}
			jb.send = kept
		}
	}
	// The newest layer, guarded: calls of at most the guard's batch, each
	// refused as a whole (frozen) or within the capacity.
	var cmds []redis.Cmder
	var shardOf []int
	atomic := false
	for p := range jobs {
		jb := &jobs[p]
		j, L := parts[p].shard, jb.layers
		for _, q := range jb.send {
			r.from[q] = L - 1
		}
		var known *mirrorLayer
		if jb.ls != nil {
			known = jb.ls[L-1]
		}
		if len(jb.send) > 0 {
			qs := jb.send
			if r.add {
				count := redis.NewIntCmd(r.ctx, "hincrby", f.shards.key(j, "state"), countField(L-1), len(qs))
				jb.counts = append(jb.counts, count)
				cmds, shardOf = append(cmds, count), append(shardOf, j)
			}
			lc := f.layerCall(r.ctx, j, L-1, qs, r.hashes, r.add, true, known)
			jb.calls = append(jb.calls, lc)
			for _, c := range lc.cmds {
				cmds, shardOf = append(cmds, c), append(shardOf, j)
			}
		}
		atomic = atomic || f.chunks(L-1) > 1
	}
	if err := f.exec(r.ctx, cmds, shardOf, atomic); err != nil {
		return nil, err
	}
	var fix []redis.Cmder
	var fixShard []int
	for p := range jobs {
		jb := &jobs[p]
		j, L := parts[p].shard, jb.layers
		for _, lc := range jb.calls {
			zero, frozen, full, err := lc.result(true)
			if err != nil {
				return nil, err
			}
			added := 0
			last := L == len(f.layers)
			for x, q := range lc.qs {
				switch {
				case !zero[x]: // every bit was 1: held by the layer
					r.out[q] = !r.add
				case frozen && last && r.add:
					return nil, fmt.Errorf("shard %d has all the %d layers its schedule can size, and the last is full", j, L)
				case frozen && !last: // absent from the frozen layer: on to the next
					r.from[q] = L
					left[p] = append(left[p], q)
				case r.add:
					r.out[q] = true
					added++
				default:
					r.out[q] = false
				}
			}
			if full && !last && f.seen[j].Load() == int32(L) {
				f.raiseLayers(j, L+1)
				// A hint for processes that open the filter later.
				fix = append(fix, redis.NewIntCmd(r.ctx, "hset", f.shards.key(j, "state"), "layers", L+1))
				fixShard = append(fixShard, j)
			}
			if !r.add {
				continue
			}
			if over := len(lc.qs) - added; over > 0 {
				fix = append(fix, redis.NewIntCmd(r.ctx, "hincrby", f.shards.key(j, "state"), countField(L-1), -over))
				fixShard = append(fixShard, j)
				if !frozen {
					// Take them off the guard's counter too, on its low 62
					// bits only, and not below 0 (FAIL): the flag never
					// goes back to 0.
					fix = append(fix, redis.NewIntSliceCmd(r.ctx, "bitfield", f.chunkKey(j, L-1, 0), argOVERFLOW, argFAIL,
						argINCRBY, argU62, f.chunkBits(L-1, 0)+1, -int64(uint64(over)*f.guards[L-1].step)))
					fixShard = append(fixShard, j)
				}
			}
			if known := jb.ls; known != nil && known[L-1] != nil && !frozen {
				// Every bit of every key sent is 1 in Redis now: those the
				// mirror held, and those the call set.
				for _, ps := range lc.pos {
					for _, p := range ps {
						known[L-1].setBit(p)
					}
				}
			}
		}
	}
	if err := f.exec(r.ctx, fix, fixShard, false); err != nil {
		return nil, err
	}
	for p := range jobs {
		left[p] = append(left[p], jobs[p].tail...)
	}
	return left, nil
}
