package dedup

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/redistest"
)

var _ cuckooContract = (*RedisCuckoo)(nil)

func openRedisCuckoo(tb testing.TB, c redis.UniversalClient, name string, opts RedisCuckooOptions) *RedisCuckoo {
	tb.Helper()
	f, err := OpenRedisCuckoo(context.Background(), c, name, opts)
	if err != nil {
		tb.Fatalf("OpenRedisCuckoo(%q): %v", name, err)
	}
	tb.Cleanup(func() { _ = f.Close() })
	return f
}

// redisCuckooTargets starts a single server and a 3-master cluster; each
// test runs its cases on both.
func redisCuckooTargets(t *testing.T) map[string]redis.UniversalClient {
	t.Helper()
	return map[string]redis.UniversalClient{
		"single":  redistest.Start(t, redistest.Options{}).Client(),
		"cluster": redistest.StartCluster(t, 3).Client(),
	}
}

// redisSlots decodes slot s of a BITFIELD-laid-out string of f-bit slots
// (big-endian bit order: bit 0 is the high bit of byte 0).
func redisSlot(buf []byte, s uint64, f int) uint32 {
	var v uint32
	for k := range uint64(f) {
		bit := s*uint64(f) + k
		v <<= 1
		if bit/8 < uint64(len(buf)) && buf[bit/8]&(0x80>>(bit%8)) != 0 {
			v |= 1
		}
	}
	return v
}

// TestRedisCuckooLayout reads the shards' slot strings from Go and checks
// them against the Go derivation of fingerprints and buckets: every stored
// key's fingerprint sits in one of its two buckets, the Go decoding answers
// Contains exactly as the script does, and each layer's count is its
// occupied slots. The filters are filled until full, so most fingerprints
// were moved by evictions, whose alternate buckets the script computed (with
// its own fmix32): this pins the Redis layout and the Lua arithmetic.
func TestRedisCuckooLayout(t *testing.T) {
	ctx := context.Background()
	client := redistest.Start(t, redistest.Options{}).Client()
	for _, c := range []struct {
		name string
		opts RedisCuckooOptions
	}{
		{"f=12,b=4", RedisCuckooOptions{CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: 4000, TargetFPP: 0.01}}, Shards: 2}},
		{"f=32,b=4", RedisCuckooOptions{CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: 4000, TargetFPP: 0.01}, FingerprintBits: 32}, Shards: 2}},
		{"f=5,b=2,fixed", RedisCuckooOptions{CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: 2000, TargetFPP: 0.5}, BucketSize: 2, MaxLayers: 1}, Shards: 1}},
		{"f=17,b=8", RedisCuckooOptions{CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: 1 << 13, TargetFPP: 0.0001}, BucketSize: 8}, Shards: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := openRedisCuckoo(t, client, "layout-"+c.name, c.opts)
			keys := cuckooKeys("layout", 0, int(c.opts.Growth.InitialCapacity)*3)
			var stored [][]byte
			for i := 0; i < len(keys); i += 1000 {
				batch := keys[i:min(i+1000, len(keys))]
				res, err := f.TestAndAdd(ctx, batch)
				var be *BatchError
				if err != nil && !(errors.As(err, &be) && errors.Is(err, ErrFull)) {
					t.Fatal(err)
				}
				for x, ok := range res {
					if ok {
						stored = append(stored, batch[x])
					}
				}
			}
			st, _ := f.Stats(ctx)
			t.Logf("%d keys stored, %d layers, load %v", len(stored), len(st.Layers), func() []string {
				var s []string
				for _, l := range st.Layers {
					s = append(s, strconv.FormatFloat(l.Fill, 'f', 3, 64))
				}
				return s
			}())
			if st.Layers[0].Fill < 0.9 {
				t.Errorf("first layer load %.3f, want ≥ 0.9 (filled until it grew)", st.Layers[0].Fill)
			}
			// Read every shard's strings.
			b := f.opts.BucketSize
			slots := make([][][]byte, f.opts.Shards)
			for j := range slots {
				for i, p := range f.layers {
					buf, err := client.Get(ctx, f.shards.key(j, "slots:"+strconv.Itoa(i))).Bytes()
					if errors.Is(err, redis.Nil) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if want := (p.Buckets*uint64(b)*uint64(p.Bits) + 7) / 8; uint64(len(buf)) != want {
						t.Fatalf("shard %d layer %d string is %d bytes, want %d", j, i, len(buf), want)
					}
					slots[j] = append(slots[j], buf)
					occupied := uint64(0)
					for s := range p.Buckets * uint64(b) {
						if redisSlot(buf, s, p.Bits) != 0 {
							occupied++
						}
					}
					n, _ := client.HGet(ctx, f.shards.key(j, "state"), "n"+strconv.Itoa(i)).Uint64()
					if n != occupied {
						t.Errorf("shard %d layer %d counts %d fingerprints, holds %d", j, i, n, occupied)
					}
				}
			}
			goContains := func(k []byte) bool {
				h := HashKey(k)
				j := f.shards.shard(h)
				for i, buf := range slots[j] {
					p := f.layers[i]
					fp := cuckooFingerprint(h, p.Bits)
					i1 := cuckooIndex(h, p.Buckets)
					for _, bkt := range []uint64{i1, cuckooAltIndex(i1, fp, p.Buckets)} {
						for s := range uint64(b) {
							if redisSlot(buf, bkt*uint64(b)+s, p.Bits) == fp {
								return true
							}
						}
					}
				}
				return false
			}
			for _, k := range stored {
				if !goContains(k) {
					t.Fatalf("stored key %q: its fingerprint is in neither of the buckets Go computes", k)
				}
			}
			probe := cuckooKeys("layout-absent", 0, 20000)
			got, err := f.Contains(ctx, probe)
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range probe {
				if goContains(k) != got[i] {
					t.Fatalf("Contains(%q): script says %v, Go decoding of the strings says %v", k, got[i], !got[i])
				}
			}
		})
	}
}

// TestRedisCuckooSemantics runs the filter's operations on a single server
// and on a cluster.
func TestRedisCuckooSemantics(t *testing.T) {
	ctx := context.Background()
	for target, client := range redisCuckooTargets(t) {
		t.Run(target, func(t *testing.T) {
			f := openRedisCuckoo(t, client, "sem", RedisCuckooOptions{CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: 2000, TargetFPP: 0.001}}, Shards: 8})
			a, b := []byte("https://a.example/"), []byte("https://b.example/")
			for _, step := range []struct {
				keys [][]byte
				want []bool
			}{
				{[][]byte{a}, []bool{true}},
				{[][]byte{a}, []bool{false}},
				{[][]byte{b, b, a, b}, []bool{true, false, false, false}}, // sequential within a batch
				{nil, []bool{}},
			} {
				got, err := f.TestAndAdd(ctx, step.keys)
				if err != nil || fmt.Sprint(got) != fmt.Sprint(step.want) {
					t.Errorf("TestAndAdd(%q) = %v, %v; want %v", step.keys, got, err, step.want)
				}
			}
			keys := cuckooKeys("sem", 0, 10000)
			res, err := f.TestAndAdd(ctx, keys)
			if err != nil {
				t.Fatal(err)
			}
			if n := numTrue(res); float64(len(keys)-n) > binomialCountUpper(len(keys), 0.001) {
				t.Errorf("%d of %d distinct keys new, want all but false positives", n, len(keys))
			}
			got, _ := f.Contains(ctx, keys)
			if n := numTrue(got); n != len(keys) {
				t.Errorf("Contains: %d of %d added keys present, want all", n, len(keys))
			}
			if cnt, err := f.Count(ctx); err != nil || cnt != uint64(2+numTrue(res)) {
				t.Errorf("Count = %d, %v; want %d", cnt, err, 2+numTrue(res))
			}
			// Delete: a deleted key reads absent (but for false positives);
			// no kept key is lost.
			del, err := f.Delete(ctx, keys[:5000])
			if err != nil || float64(5000-numTrue(del)) > binomialCountUpper(5000, 0.001) {
				t.Errorf("Delete: %d of 5000 found, %v", numTrue(del), err)
			}
			got, _ = f.Contains(ctx, keys[:5000])
			if n := numTrue(got); float64(n) > binomialCountUpper(5000, 0.001) {
				t.Errorf("%d of 5000 deleted keys still read present", n)
			}
			got, _ = f.Contains(ctx, keys[5000:])
			if n := numTrue(got); float64(5000-n) > binomialCountUpper(5000, 0.001) {
				t.Errorf("%d of 5000 kept keys lost after deleting others", 5000-n)
			}
			// Add stores duplicates; Delete removes one copy, Forget all.
			k := [][]byte{[]byte("https://thrice.example/")}
			if err := f.Add(ctx, [][]byte{k[0], k[0], k[0]}); err != nil {
				t.Fatal(err)
			}
			if d, _ := f.Delete(ctx, k); !d[0] {
				t.Error("Delete(thrice-added) = false")
			}
			if c, _ := f.Contains(ctx, k); !c[0] {
				t.Error("thrice-added key absent after one Delete")
			}
			if fg, _ := f.Forget(ctx, k); !fg[0] {
				t.Error("Forget(thrice-added) = false")
			}
			if c, _ := f.Contains(ctx, k); c[0] {
				t.Error("key present after Forget")
			}
			if fg, _ := f.Forget(ctx, k); fg[0] {
				t.Error("second Forget = true")
			}
			if n, _ := f.TestAndAdd(ctx, k); !n[0] {
				t.Error("TestAndAdd after Forget: not new")
			}
			st, err := f.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cnt, _ := f.Count(ctx)
			if st.Kind != "cuckoo" || st.Items != cnt || st.Deletes != uint64(numTrue(del))+3 || st.MemoryBytes == 0 || st.BytesPerItem != float64(st.MemoryBytes)/float64(st.Items) {
				t.Errorf("Stats = %+v (Count %d, deletes %d+3)", st, cnt, numTrue(del))
			}
			if len(st.Layers) < 2 || st.Layers[0].Capacity != 8*250 || st.Layers[0].Hashes != 16 {
				t.Errorf("Stats layers = %+v, want ≥ 2, the first with capacity 2000 (8 shards × 250) and 16-bit fingerprints", st.Layers)
			}
			if st.EstimatedFPP <= 0 || st.EstimatedFPP > 0.001 {
				t.Errorf("Stats.EstimatedFPP = %v, want in (0, 0.001]", st.EstimatedFPP)
			}
		})
	}
}

// TestRedisCuckooTraps: a key added more than 2b times is refused with
// ErrTooManyCopies; a shard that may not grow reports ErrFull for the keys
// it cannot store, keeping every other result.
func TestRedisCuckooTraps(t *testing.T) {
	ctx := context.Background()
	client := redistest.Start(t, redistest.Options{}).Client()
	f := openRedisCuckoo(t, client, "copies", RedisCuckooOptions{CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: 1000, TargetFPP: 0.01}}, Shards: 2})
	k := []byte("https://same.example/")
	h := HashKey(k)
	p := f.layers[0]
	fp := cuckooFingerprint(h, p.Bits)
	limit := 2 * f.opts.BucketSize
	if i1 := cuckooIndex(h, p.Buckets); cuckooAltIndex(i1, fp, p.Buckets) == i1 {
		limit = f.opts.BucketSize
	}
	batch := make([][]byte, limit+2)
	for i := range limit + 1 {
		batch[i] = k
	}
	batch[limit+1] = []byte("https://other.example/")
	err := f.Add(ctx, batch)
	var be *BatchError
	if !errors.As(err, &be) || !errors.Is(err, ErrTooManyCopies) || fmt.Sprint(be.Keys) != fmt.Sprint([]int{limit}) {
		t.Errorf("Add of %d copies = %v, want *BatchError{Keys: [%d]} wrapping ErrTooManyCopies", limit+1, err, limit)
	}
	if cnt, _ := f.Count(ctx); cnt != uint64(limit+1) {
		t.Errorf("Count = %d, want %d", cnt, limit+1)
	}

	full := openRedisCuckoo(t, client, "full", RedisCuckooOptions{CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: 2000, TargetFPP: 0.01}, MaxLayers: 1}, Shards: 2})
	keys := cuckooKeys("full", 0, 6000)
	res, err := full.TestAndAdd(ctx, keys)
	if !errors.As(err, &be) || !errors.Is(err, ErrFull) {
		t.Fatalf("TestAndAdd over capacity: %v, want *BatchError wrapping ErrFull", err)
	}
	var stored [][]byte
	for i, ok := range res {
		if ok {
			stored = append(stored, keys[i])
		}
	}
	for _, i := range be.Keys {
		if res[i] {
			t.Fatalf("key %d listed as not stored but reported new", i)
		}
	}
	st, _ := full.Stats(ctx)
	if st.Items != uint64(len(stored)) || len(st.Layers) != 1 || st.Layers[0].Fill < 0.93 {
		t.Errorf("full filter: %d reported new, Stats %+v; want equal items, one layer at ≥ 93%% load", len(stored), st)
	}
	got, _ := full.Contains(ctx, stored)
	if n := numTrue(got); n != len(stored) {
		t.Errorf("%d of %d stored keys present after refused insertions, want all (evictions undone)", n, len(stored))
	}
}

// TestRedisCuckooGrowthFPP measures the false-positive rate on keys never
// inserted at 1×, 10× and 50× the initial capacity, against the target with
// a 4-sigma binomial margin and against the Stats estimate.
func TestRedisCuckooGrowthFPP(t *testing.T) {
	const (
		capacity = 2000
		queries  = 100000
		target   = 0.01
	)
	ctx := context.Background()
	client := redistest.Start(t, redistest.Options{}).Client()
	f := openRedisCuckoo(t, client, "fpp", RedisCuckooOptions{CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: capacity, TargetFPP: target}}, Shards: 4})
	absent := cuckooKeys("never", 0, queries)
	added := 0
	for _, mult := range []int{1, 10, 50} {
		for ; added < mult*capacity; added += 1000 {
			if _, err := f.TestAndAdd(ctx, cuckooKeys("inserted", added, 1000)); err != nil {
				t.Fatal(err)
			}
		}
		fp := 0
		for i := 0; i < queries; i += 5000 {
			got, err := f.Contains(ctx, absent[i:i+5000])
			if err != nil {
				t.Fatal(err)
			}
			fp += numTrue(got)
		}
		st, _ := f.Stats(ctx)
		if limit := binomialCountUpper(queries, target); float64(fp) > limit {
			t.Errorf("%d×: %d false positives in %d, want ≤ %.0f (target %v + 4σ)", mult, fp, queries, limit, target)
		}
		est := st.EstimatedFPP
		if lo, hi := float64(queries)*est-4*math.Sqrt(queries*est)-1, binomialCountUpper(queries, est); float64(fp) < lo || float64(fp) > hi {
			t.Errorf("%d×: %d false positives, Stats estimate %v predicts %.0f (4σ: [%.0f, %.0f])", mult, fp, est, est*queries, lo, hi)
		}
		bits := make([]int, len(st.Layers))
		for i, l := range st.Layers {
			bits[i] = l.Hashes
		}
		t.Logf("%d× (%d items): measured FPP %.5f, estimated %.5f, target %v; %d layers, fingerprint bits %v, %.2f bytes/item",
			mult, st.Items, float64(fp)/queries, est, target, len(st.Layers), bits, st.BytesPerItem)
	}
}

// TestRedisCuckooConcurrentClients: several clients (each its own
// connections and RedisCuckoo, as separate processes would have) add
// overlapping keys in different orders. Each key is reported new by at most
// one, and by exactly one unless it was a false positive before the race
// (checked with Contains first; 32-bit fingerprints make a false positive
// arising during the race a ~1e-9 event).
func TestRedisCuckooConcurrentClients(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	cluster := redistest.StartCluster(t, 3)
	for target, newClient := range map[string]func() redis.UniversalClient{
		"single":  func() redis.UniversalClient { return srv.Client() },
		"cluster": func() redis.UniversalClient { return cluster.Client() },
	} {
		t.Run(target, func(t *testing.T) {
			opts := RedisCuckooOptions{CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: 2000, TargetFPP: 0.01}, FingerprintBits: 32}, Shards: 4}
			first := openRedisCuckoo(t, newClient(), "race", opts)
			if _, err := first.TestAndAdd(ctx, cuckooKeys("before", 0, 3000)); err != nil {
				t.Fatal(err)
			}
			keys := cuckooKeys("race", 0, 12000)
			before, err := first.Contains(ctx, keys)
			if err != nil {
				t.Fatal(err)
			}
			const workers = 4
			filters := make([]*RedisCuckoo, workers)
			for w := range filters {
				filters[w] = openRedisCuckoo(t, newClient(), "race", opts)
			}
			wins := raceNewOnce(t, filters, keys, 500, 11, nil)
			if t.Failed() {
				return
			}
			for i, n := range wins {
				if n > 1 || (n == 0 && !before[i]) {
					t.Fatalf("key %q reported new %d times (false positive before the race: %v)", keys[i], n, before[i])
				}
			}
			st, _ := first.Stats(ctx)
			if len(st.Layers) < 2 {
				t.Errorf("the race ran in %d layer(s); want it to span growth", len(st.Layers))
			}
		})
	}
}

func TestRedisCuckooReopen(t *testing.T) {
	ctx := context.Background()
	client := redistest.Start(t, redistest.Options{}).Client()
	base := RedisCuckooOptions{CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: 1000, TargetFPP: 0.01}, Policy: "v1"}, Shards: 4}
	f := openRedisCuckoo(t, client, "reopen", base)
	keys := cuckooKeys("reopen", 0, 3000)
	if _, err := f.TestAndAdd(ctx, keys); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		field  string
		change func(*RedisCuckooOptions)
	}{
		{"target_fpp", func(o *RedisCuckooOptions) { o.Growth.TargetFPP = 0.001 }},
		{"initial_capacity", func(o *RedisCuckooOptions) { o.Growth.InitialCapacity = 2000 }},
		{"growth_factor", func(o *RedisCuckooOptions) { o.Growth.Factor = 3 }},
		{"tightening", func(o *RedisCuckooOptions) { o.Growth.Tightening = 0.5 }},
		{"shards", func(o *RedisCuckooOptions) { o.Shards = 8 }},
		{"bucket_size", func(o *RedisCuckooOptions) { o.BucketSize = 8 }},
		{"fingerprint_bits", func(o *RedisCuckooOptions) { o.FingerprintBits = 16 }},
		{"max_layers", func(o *RedisCuckooOptions) { o.MaxLayers = 5 }},
		{"policy", func(o *RedisCuckooOptions) { o.Policy = "v2" }},
	} {
		opts := base
		tc.change(&opts)
		_, err := OpenRedisCuckoo(ctx, client, "reopen", opts)
		var me *MismatchError
		if !errors.As(err, &me) || me.Field != tc.field || me.Name != "reopen" {
			t.Errorf("reopen with %s changed: %v, want *MismatchError for %s", tc.field, err, tc.field)
		}
	}
	// A Bloom filter's metadata is refused too: another kind.
	if err := client.HSet(ctx, "bloomy:meta", "kind", "bloom").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRedisCuckoo(ctx, client, "bloomy", base); !errors.Is(err, ErrMismatch) {
		t.Errorf("opening a bloom filter's name as cuckoo: %v, want ErrMismatch", err)
	}
	// MaxKicks is not stored; Force accepts another policy.
	opts := base
	opts.MaxKicks, opts.Policy, opts.Force = 100, "v2", true
	g := openRedisCuckoo(t, client, "reopen", opts)
	got, err := g.Contains(ctx, keys)
	if err != nil || numTrue(got) != len(keys) {
		t.Errorf("reopened filter: %d of %d keys present, %v", numTrue(got), len(keys), err)
	}
	opts.Force = false
	if _, err := OpenRedisCuckoo(ctx, client, "reopen", opts); err != nil {
		t.Errorf("reopen with the forced policy: %v", err)
	}
	for _, bad := range []RedisCuckooOptions{
		{Shards: -1},
		{CuckooOptions: CuckooOptions{BucketSize: 40}},
		{CuckooOptions: CuckooOptions{Growth: Growth{TargetFPP: 2}}},
	} {
		if _, err := OpenRedisCuckoo(ctx, client, "bad", bad); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("OpenRedisCuckoo(%+v) = %v, want ErrInvalidParams", bad, err)
		}
	}
	if _, err := OpenRedisCuckoo(ctx, client, "a{b}", base); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("OpenRedisCuckoo with a hash tag in the name = %v, want ErrInvalidParams", err)
	}
}

// TestRedisCuckooRecovery: a flushed script cache is reloaded without the
// caller noticing; with Redis down calls fail, and once it is back (AOF) the
// filter holds what it held and works again.
func TestRedisCuckooRecovery(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{AOF: true})
	client := srv.Client()
	f := openRedisCuckoo(t, client, "recover", RedisCuckooOptions{CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: 1000, TargetFPP: 0.001}}, Shards: 4})
	keys := cuckooKeys("recover", 0, 3000)
	if _, err := f.TestAndAdd(ctx, keys[:1000]); err != nil {
		t.Fatal(err)
	}
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := f.TestAndAdd(ctx, keys[:2000]); err != nil || numTrue(got[:1000]) != 0 {
		t.Fatalf("TestAndAdd after SCRIPT FLUSH: %v (re-added keys new: %d)", err, numTrue(got[:1000]))
	}
	srv.Kill()
	down, cancel := context.WithTimeout(ctx, time.Second) // no waiting out the client's retries
	defer cancel()
	if _, err := f.TestAndAdd(down, keys[2000:]); err == nil {
		t.Fatal("TestAndAdd with Redis down succeeded")
	}
	if _, err := f.Stats(down); err == nil {
		t.Fatal("Stats with Redis down succeeded")
	}
	srv.StartAgain()
	got, err := f.Contains(ctx, keys[:2000])
	if err != nil || numTrue(got) != 2000 {
		t.Fatalf("after restart: %d of 2000 keys present, %v", numTrue(got), err)
	}
	if _, err := f.TestAndAdd(ctx, keys[2000:]); err != nil {
		t.Fatalf("TestAndAdd after restart: %v", err)
	}
	if cnt, _ := f.Count(ctx); cnt < 2990 {
		t.Errorf("Count after restart = %d, want ~3000", cnt)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.TestAndAdd(ctx, keys); !errors.Is(err, ErrClosed) {
		t.Errorf("TestAndAdd after Close: %v, want ErrClosed", err)
	}
}

// TestRedisCuckooFormatPinned pins what a RedisCuckoo leaves in Redis: the
// metadata hash, the key names, the state fields and where a fingerprint
// goes (an empty filter stores a key in its first bucket's first slot).
func TestRedisCuckooFormatPinned(t *testing.T) {
	ctx := context.Background()
	client := redistest.Start(t, redistest.Options{}).Client()
	f := openRedisCuckoo(t, client, "pin", RedisCuckooOptions{CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: 3800, TargetFPP: 0.01}, Policy: "p7"}, Shards: 1})
	meta, err := client.HGetAll(ctx, "pin:meta").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"kind": "cuckoo", "layout": "1", "hash": "murmur3_x64_128/cuckoo_pk1",
		"target_fpp": "0.01", "initial_capacity": "3800", "growth_factor": "2", "tightening": "0.8",
		"shards": "1", "bucket_size": "4", "fingerprint_bits": "0", "max_layers": "64", "policy": "p7",
	}
	if fmt.Sprint(meta) != fmt.Sprint(want) {
		t.Errorf("pin:meta = %v\nwant %v", meta, want)
	}
	key := []byte("https://example.com/")
	if _, err := f.TestAndAdd(ctx, [][]byte{key}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Delete(ctx, [][]byte{[]byte("https://never.example/")}); err != nil {
		t.Fatal(err)
	}
	state, _ := client.HGetAll(ctx, "{pin:0}:state").Result()
	if fmt.Sprint(state) != fmt.Sprint(map[string]string{"layers": "1", "n0": "1"}) {
		t.Errorf("{pin:0}:state = %v, want layers 1, n0 1", state)
	}
	// 3800 keys at 95% load: 1000 → 1024 buckets; the first layer's share
	// of 0.01 is 0.002: 12-bit fingerprints. TestCuckooFormatPinned has
	// this key's fingerprint (1275) and first bucket (159) at that size.
	got, err := client.BitField(ctx, "{pin:0}:slots:0", "GET", "u12", 159*4*12).Result()
	if err != nil || len(got) != 1 || got[0] != 1275 {
		t.Errorf("slot 0 of bucket 159 = %v, %v; want fingerprint 1275", got, err)
	}
	if n, _ := client.StrLen(ctx, "{pin:0}:slots:0").Result(); n != 1024*4*12/8 {
		t.Errorf("layer 0 string is %d bytes, want %d", n, 1024*4*12/8)
	}
}

// TestRedisCuckooLargeBatch sends one shard a batch of 2,600 keys, each
// twice, 1,300 apart: the shared driver cuts it into calls of at most 1,024
// keys (so no script call keeps Redis busy for long) and keeps the batch's
// order across them, so no second copy is new.
func TestRedisCuckooLargeBatch(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client()
	f := openRedisCuckoo(t, c, "large", RedisCuckooOptions{CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: 500, TargetFPP: 0.01}}, Shards: 1})
	distinct := urlKeys("cuckoo-large", 0, 2600)
	var batch [][]byte
	for i := 0; i < len(distinct); i += 1300 {
		part := distinct[i:min(i+1300, len(distinct))]
		batch = append(append(batch, part...), part...)
	}
	// Load the script first: the count below is of EVALSHA calls only.
	if _, err := f.Contains(ctx, distinct[:1]); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := f.TestAndAdd(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	notNew := 0
	for i := 0; i < len(batch); i += 2600 {
		for x := 0; x < 1300; x++ {
			if got[i+1300+x] {
				t.Errorf("second copy of %q new", batch[i+x])
			}
			if !got[i+x] {
				notNew++
			}
		}
	}
	if limit := fppUpperBound(len(distinct), 0.01); notNew > limit {
		t.Errorf("%d of %d first copies not new, want ≤ %d", notNew, len(distinct), limit)
	}
	stats := c.Info(ctx, "commandstats").Val()
	var calls int
	for _, line := range strings.Split(stats, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:"); ok {
			fmt.Sscanf(rest, "calls=%d", &calls)
		}
	}
	if want := (len(batch) + redisCallKeys - 1) / redisCallKeys; calls != want {
		t.Errorf("%d script calls for %d keys of one shard, want %d (at most %d keys a call)", calls, len(batch), want, redisCallKeys)
	}
}
