package dedup

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	mbits "math/bits"
	"math/rand"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sievecrawl/sieve/redistest"
)

// urlKeys returns n URL-like keys "https://<set>.example/<i>/page" from i =
// from on; different sets never share a key.
func urlKeys(set string, from, n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("https://%s.example/%d/page", set, from+i))
	}
	return keys
}

func openRedisBloom(tb testing.TB, c redis.UniversalClient, name string, opts RedisBloomOptions) *RedisBloom {
	tb.Helper()
	f, err := OpenRedisBloom(context.Background(), c, name, opts)
	if err != nil {
		tb.Fatalf("OpenRedisBloom(%q): %v", name, err)
	}
	tb.Cleanup(func() { _ = f.Close() })
	return f
}

// addAll adds keys in batches of size batch and returns how many were new.
func addAll(tb testing.TB, f *RedisBloom, keys [][]byte, batch int) int {
	tb.Helper()
	news := 0
	for i := 0; i < len(keys); i += batch {
		got, err := f.TestAndAdd(context.Background(), keys[i:min(i+batch, len(keys))])
		if err != nil {
			tb.Fatalf("TestAndAdd: %v", err)
		}
		for _, g := range got {
			if g {
				news++
			}
		}
	}
	return news
}

// countPresent returns how many of keys the filter reports present.
func countPresent(tb testing.TB, f *RedisBloom, keys [][]byte, batch int) int {
	tb.Helper()
	n := 0
	for i := 0; i < len(keys); i += batch {
		got, err := f.Contains(context.Background(), keys[i:min(i+batch, len(keys))])
		if err != nil {
			tb.Fatalf("Contains: %v", err)
		}
		for _, g := range got {
			if g {
				n++
			}
		}
	}
	return n
}

// fppUpperBound is the 4-sigma binomial upper bound on the number of false
// positives among n probes at rate p: the test fails by chance with
// probability about 3e-5.
func fppUpperBound(n int, p float64) int {
	return int(math.Ceil(float64(n)*p + 4*math.Sqrt(float64(n)*p*(1-p))))
}

func TestRedisBloomSemantics(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	f := openRedisBloom(t, c, "sem", RedisBloomOptions{InitialCapacity: 1000, Shards: 4})
	a, b, d := []byte("https://a.example/"), []byte("https://b.example/"), []byte("https://d.example/")

	cases := []struct {
		name string
		op   string // "add" or "has"
		keys [][]byte
		want []bool
	}{
		{"empty filter holds nothing", "has", [][]byte{a, b}, []bool{false, false}},
		{"new keys are new; a repeat in the batch is not", "add", [][]byte{a, b, a}, []bool{true, true, false}},
		{"added keys are present", "has", [][]byte{a, b, d}, []bool{true, true, false}},
		{"added keys are not new again", "add", [][]byte{b, d, a, d}, []bool{false, true, false, false}},
		{"empty batch", "add", nil, []bool{}},
		{"empty key is a key", "add", [][]byte{{}, {}}, []bool{true, false}},
	}
	for _, tc := range cases {
		var got []bool
		var err error
		if tc.op == "add" {
			got, err = f.TestAndAdd(ctx, tc.keys)
		} else {
			got, err = f.Contains(ctx, tc.keys)
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %s(%q) = %v, want %v", tc.name, tc.op, tc.keys, got, tc.want)
		}
	}
	st, err := f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Items != 4 || st.Kind != "bloom" || len(st.Layers) != 1 {
		t.Errorf("Stats = %+v, want 4 items in 1 layer", st)
	}
}

// TestRedisBloomGrowthKeepsFPP fills a filter of initial capacity 2,000 to
// 100 times that and measures the false-positive rate on keys never added at
// 1x, 10x and 100x. The bound is the target (1%) plus 4 binomial sigmas.
func TestRedisBloomGrowthKeepsFPP(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	const capacity, target, probes = 2000, 0.01, 20000
	f := openRedisBloom(t, c, "grow", RedisBloomOptions{InitialCapacity: capacity, TargetFPP: target})
	added := 0
	for _, mult := range []int{1, 10, 100} {
		keys := urlKeys("in", added, mult*capacity-added)
		news := addAll(t, f, keys, 1000)
		added = mult * capacity
		// A key added once is new unless it was a false positive: at most
		// the target rate of them, within the margin.
		if fp, limit := len(keys)-news, fppUpperBound(len(keys), target); fp > limit {
			t.Errorf("at %dx: %d of %d fresh keys reported not new, want ≤ %d", mult, fp, len(keys), limit)
		}
		if got := countPresent(t, f, urlKeys("in", 0, added), 1000); got != added {
			t.Errorf("at %dx: %d of %d added keys present, want all", mult, got, added)
		}
		fp := countPresent(t, f, urlKeys("out", mult*probes, probes), 1000)
		limit := fppUpperBound(probes, target)
		st, err := f.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("at %3dx: FPP %.4f (%d/%d, limit %d), estimated %.4f, %d layers, %.2f bytes/key",
			mult, float64(fp)/probes, fp, probes, limit, st.EstimatedFPP, len(st.Layers), st.BytesPerItem)
		if fp > limit {
			t.Errorf("at %dx: %d false positives in %d probes, want ≤ %d (target %v)", mult, fp, probes, limit, target)
		}
		if mult == 1 && len(st.Layers) != 1 {
			// Shards are sized with slack for the binomial spread of keys.
			t.Errorf("at 1x: %d layers, want 1: a shard grew before the filter held its capacity", len(st.Layers))
		}
		if st.EstimatedFPP >= target {
			t.Errorf("at %dx: estimated FPP %v ≥ target %v", mult, st.EstimatedFPP, target)
		}
		var items uint64
		for i, l := range st.Layers {
			items += l.Items
			if l.Items > l.Capacity {
				t.Errorf("at %dx: layer %d holds %d items over its capacity %d", mult, i, l.Items, l.Capacity)
			}
		}
		if items != st.Items || st.Items > uint64(added) || st.Items < uint64(added)-uint64(fppUpperBound(added, target)) {
			t.Errorf("at %dx: stats count %d items (layers %d) after %d distinct keys", mult, st.Items, items, added)
		}
	}
}

// raceAdders runs clients RedisBloom instances, each on its own connection,
// that all add every key of keys, each in its own random order and batch
// size, at the same time. It returns how many clients were told each key was
// new.
func raceAdders(t *testing.T, open func(i int) *RedisBloom, clients int, keys [][]byte) map[string]int {
	t.Helper()
	news := make([][]bool, clients)
	orders := make([][]int, clients)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	filters := make([]*RedisBloom, clients)
	for i := range filters {
		filters[i] = open(i)
	}
	start := make(chan struct{})
	for i := 0; i < clients; i++ {
		rng := rand.New(rand.NewSource(int64(i)))
		orders[i] = rng.Perm(len(keys))
		news[i] = make([]bool, len(keys))
		batch := []int{1, 7, 100, 500}[i%4]
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			for at := 0; at < len(keys); at += batch {
				idx := orders[i][at:min(at+batch, len(keys))]
				b := make([][]byte, len(idx))
				for x, q := range idx {
					b[x] = keys[q]
				}
				got, err := filters[i].TestAndAdd(context.Background(), b)
				if err != nil {
					errs <- err
					return
				}
				for x, q := range idx {
					news[i][q] = got[x]
				}
			}
		}(i)
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent TestAndAdd: %v", err)
	}
	count := make(map[string]int, len(keys))
	for q, k := range keys {
		for i := 0; i < clients; i++ {
			if news[i][q] {
				count[string(k)]++
			}
		}
	}
	return count
}

// TestRedisBloomRacingAddersOneNew has four processes' worth of clients add
// the same 8,000 keys at once. Each key must be reported new to exactly one
// of them, except keys the filter already (falsely) held before the race,
// found with Contains first. The filter is sized so that the race itself
// cannot make a key a false positive except with probability below 1e-5
// (each shard's layer is 9% full at the end: 0.09^9 per key).
func TestRedisBloomRacingAddersOneNew(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	opts := RedisBloomOptions{InitialCapacity: 100_000, TargetFPP: 0.01}
	pre := openRedisBloom(t, srv.Client(), "race", opts)
	addAll(t, pre, urlKeys("pre", 0, 5000), 1000)
	keys := urlKeys("race", 0, 8000)
	before, err := pre.Contains(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	count := raceAdders(t, func(int) *RedisBloom { return openRedisBloom(t, srv.Client(), "race", opts) }, 4, keys)
	wasFP := 0
	for q, k := range keys {
		want := 1
		if before[q] {
			want, wasFP = 0, wasFP+1
		}
		if got := count[string(k)]; got != want {
			t.Errorf("key %q reported new to %d clients, want %d (false positive before: %v)", k, got, want, before[q])
		}
	}
	t.Logf("%d keys, %d false positives before the race", len(keys), wasFP)
}

// TestRedisBloomRacingAddersWhileGrowing races four clients through a filter
// that grows 16-fold meanwhile, so their cached layer counts go stale. No key
// may be new to two clients; keys new to none are false positives, within
// the target rate's 4-sigma bound; the filter's item count is the number of
// "new" answers, and every key is present afterwards.
func TestRedisBloomRacingAddersWhileGrowing(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	for _, fetch := range []int{redisBloomFetch, 0} {
		for _, mirror := range []int64{0, -1} {
			t.Run(fmt.Sprintf("fetch=%d,mirror=%d", fetch, mirror), func(t *testing.T) {
				raceWhileGrowing(t, srv.Client(), fmt.Sprintf("racegrow%d:%d", fetch, mirror), fetch, mirror)
			})
		}
	}
}

func raceWhileGrowing(t *testing.T, c *redis.Client, name string, fetch int, mirror int64) {
	ctx := context.Background()
	opts := RedisBloomOptions{InitialCapacity: 500, TargetFPP: 0.01, Shards: 4, MirrorBytes: mirror}
	keys := urlKeys("grow", 0, 8000)
	count := raceAdders(t, func(int) *RedisBloom {
		f := openRedisBloom(t, c, name, opts)
		f.fetch = fetch
		return f
	}, 4, keys)
	total, none := 0, 0
	for _, k := range keys {
		switch n := count[string(k)]; n {
		case 0:
			none++
		case 1:
			total++
		default:
			t.Errorf("key %q reported new to %d clients", k, n)
		}
	}
	if limit := fppUpperBound(len(keys), opts.TargetFPP); none > limit {
		t.Errorf("%d keys new to no client, want ≤ %d", none, limit)
	}
	f := openRedisBloom(t, c, name, opts)
	st, err := f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Items != uint64(total) {
		t.Errorf("Stats.Items = %d, want %d (the new answers)", st.Items, total)
	}
	if len(st.Layers) < 4 {
		t.Errorf("filter has %d layers after 16x its capacity, want ≥ 4", len(st.Layers))
	}
	if got := countPresent(t, f, keys, 1000); got != len(keys) {
		t.Errorf("%d of %d keys present after the race", got, len(keys))
	}
}

// TestRedisBloomCluster runs the filter on a three-master Redis Cluster:
// shards spread over the masters, growth, batch answers and Stats.
func TestRedisBloomCluster(t *testing.T) {
	ctx := context.Background()
	cl := redistest.StartCluster(t, 3)
	opts := RedisBloomOptions{InitialCapacity: 1000, TargetFPP: 0.01}
	f := openRedisBloom(t, cl.Client(), "cl", opts)
	keys := urlKeys("cl", 0, 10_000)
	news := addAll(t, f, keys, 500)
	if limit := fppUpperBound(len(keys), opts.TargetFPP); len(keys)-news > limit {
		t.Errorf("%d of %d fresh keys not new, want ≤ %d", len(keys)-news, len(keys), limit)
	}
	if got := countPresent(t, f, keys, 500); got != len(keys) {
		t.Errorf("%d of %d added keys present", got, len(keys))
	}
	again, err := f.TestAndAdd(ctx, keys[:1000])
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range again {
		if g {
			t.Errorf("key %q new twice", keys[i])
		}
	}
	probes := 10_000
	if fp, limit := countPresent(t, f, urlKeys("absent", 0, probes), 1000), fppUpperBound(probes, opts.TargetFPP); fp > limit {
		t.Errorf("%d false positives in %d probes, want ≤ %d", fp, probes, limit)
	}
	st, err := f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Items != uint64(news) || len(st.Layers) < 3 {
		t.Errorf("Stats: %d items in %d layers, want %d items in ≥ 3 layers", st.Items, len(st.Layers), news)
	}
	// Every master holds some shards.
	for _, s := range cl.Servers {
		n, err := s.Client().DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Errorf("master %s holds none of the filter's keys", s.Addr)
		}
	}
	// Racing adders on the cluster too.
	race := urlKeys("clrace", 0, 2000)
	count := raceAdders(t, func(int) *RedisBloom { return openRedisBloom(t, cl.Client(), "cl", opts) }, 3, race)
	for _, k := range race {
		if count[string(k)] > 1 {
			t.Errorf("key %q new to %d clients", k, count[string(k)])
		}
	}
}

// TestRedisBloomReopenMismatch reopens a filter with each stored parameter
// changed: each must fail with a *MismatchError naming the field, except a
// new Policy with Force, which is adopted.
func TestRedisBloomReopenMismatch(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	base := RedisBloomOptions{InitialCapacity: 1000, TargetFPP: 0.01, Shards: 4, Policy: "v1"}
	openRedisBloom(t, c, "mm", base)
	cases := []struct {
		name  string
		edit  func(o *RedisBloomOptions)
		field string // "" = opens
	}{
		{"same parameters", func(o *RedisBloomOptions) {}, ""},
		{"defaults spelled out", func(o *RedisBloomOptions) { o.Factor, o.Tightening, o.ChunkBytes, o.MaxWriters = 2, 0.8, 64<<20, 64 }, ""},
		{"other max writers", func(o *RedisBloomOptions) { o.MaxWriters = 8 }, "max_writers"},
		{"other target FPP", func(o *RedisBloomOptions) { o.TargetFPP = 0.001 }, "target_fpp"},
		{"other capacity", func(o *RedisBloomOptions) { o.InitialCapacity = 2000 }, "initial_capacity"},
		{"other growth factor", func(o *RedisBloomOptions) { o.Factor = 4 }, "growth_factor"},
		{"other tightening", func(o *RedisBloomOptions) { o.Tightening = 0.5 }, "tightening"},
		{"other shard count", func(o *RedisBloomOptions) { o.Shards = 8 }, "shards"},
		{"other chunk size", func(o *RedisBloomOptions) { o.ChunkBytes = 1 << 20 }, "chunk_bytes"},
		{"other policy", func(o *RedisBloomOptions) { o.Policy = "v2" }, "policy"},
		{"force does not cover other parameters", func(o *RedisBloomOptions) { o.Policy, o.Force, o.Shards = "v2", true, 8 }, "shards"},
		{"other policy, forced", func(o *RedisBloomOptions) { o.Policy, o.Force = "v2", true }, ""},
		{"the forced policy is now stored", func(o *RedisBloomOptions) { o.Policy = "v2" }, ""},
		{"and the old one is refused", func(o *RedisBloomOptions) {}, "policy"},
	}
	for _, tc := range cases {
		o := base
		tc.edit(&o)
		f, err := OpenRedisBloom(ctx, c, "mm", o)
		var me *MismatchError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: OpenRedisBloom: %v, want success", tc.name, err)
		case tc.field == "":
			f.Close()
		case !errors.As(err, &me) || !errors.Is(err, ErrMismatch):
			t.Errorf("%s: OpenRedisBloom error = %v, want a *MismatchError", tc.name, err)
		case me.Field != tc.field || me.Name != "mm":
			t.Errorf("%s: mismatch on %q of %q, want %q", tc.name, me.Field, me.Name, tc.field)
		}
	}
	// Another kind of filter under the same name.
	if err := c.HSet(ctx, "other:meta", "kind", "cuckoo").Err(); err != nil {
		t.Fatal(err)
	}
	var me *MismatchError
	if _, err := OpenRedisBloom(ctx, c, "other", base); !errors.As(err, &me) || me.Field != "kind" {
		t.Errorf("opening a cuckoo filter's name: %v, want a mismatch on kind", err)
	}
}

func TestRedisBloomInvalidOptions(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	cases := []struct {
		name string
		fn   string
		opts RedisBloomOptions
	}{
		{"empty name", "", RedisBloomOptions{}},
		{"name with a brace breaks hash tags", "a{b", RedisBloomOptions{}},
		{"negative shards", "x", RedisBloomOptions{Shards: -1}},
		{"too many shards", "x", RedisBloomOptions{Shards: 20000}},
		{"FPP of 1", "x", RedisBloomOptions{TargetFPP: 1}},
		{"negative capacity", "x", RedisBloomOptions{InitialCapacity: -5}},
		{"shrinking growth", "x", RedisBloomOptions{Factor: 0.5}},
		{"tightening of 1", "x", RedisBloomOptions{Tightening: 1}},
		{"tiny chunks", "x", RedisBloomOptions{ChunkBytes: 4}},
		{"chunks past Redis's string limit", "x", RedisBloomOptions{ChunkBytes: 1 << 30}},
	}
	for _, tc := range cases {
		if _, err := OpenRedisBloom(ctx, c, tc.fn, tc.opts); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%s: OpenRedisBloom(%q, %+v) = %v, want ErrInvalidParams", tc.name, tc.fn, tc.opts, err)
		}
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Errorf("invalid opens wrote %d keys (%v), want none", n, err)
	}
}

// TestRedisBloomLayoutPinned pins the Redis layout, a storage format: key
// names, the metadata and state fields, the shard of a key and the bits it
// sets. If this test fails, filters already in Redis no longer read right:
// bump redisBloomLayout instead of editing the expectations.
func TestRedisBloomLayoutPinned(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	f := openRedisBloom(t, c, "pin", RedisBloomOptions{InitialCapacity: 1600, TargetFPP: 0.01, Shards: 4, ChunkBytes: 1 << 20, Policy: "p1", MaxWriters: 4})
	key := []byte("https://example.com/")
	if _, err := f.TestAndAdd(ctx, [][]byte{key}); err != nil {
		t.Fatal(err)
	}
	names, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	if want := []string{"pin:meta", "{pin:3}:bits:0:0", "{pin:3}:state"}; fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("keys = %q, want %q", names, want)
	}
	meta := c.HGetAll(ctx, "pin:meta").Val()
	wantMeta := map[string]string{
		"kind": "bloom", "layout": "3", "hash": "murmur3_x64_128/guava_mitz64",
		"target_fpp": "0.01", "initial_capacity": "1600", "growth_factor": "2", "tightening": "0.8",
		"shards": "4", "chunk_bytes": "1048576", "policy": "p1", "max_writers": "4",
	}
	if fmt.Sprint(meta) != fmt.Sprint(wantMeta) {
		t.Errorf("metadata = %v, want %v", meta, wantMeta)
	}
	if st := c.HGetAll(ctx, "{pin:3}:state").Val(); fmt.Sprint(st) != fmt.Sprint(map[string]string{"n0": "1"}) {
		t.Errorf("state = %v, want n0 1 (no layers field before the first growth)", st)
	}
	// Layer 0 of a shard: 400 keys plus 4σ = 4·√(1600·¼·¾) → 470 keys,
	// whose guard batch is 7 (470/64), and a reserve of 3·7 keys for the
	// other 3 writers: sized for 491 keys at 0.01·0.2 → m = 6351 bits, 6400
	// in words, k = 9; the bits are Guava's (H1 + i·H2 & MaxInt64) mod 6400;
	// 8 bytes more hold the admission counter, whose first bit, 6400, is the
	// frozen flag: 0 while the layer takes keys. The counter counts
	// floor(2⁶²/(470−7)) per key.
	bits := c.Get(ctx, "{pin:3}:bits:0:0").Val()
	if len(bits) != 6400/8+8 {
		t.Fatalf("layer 0 is %d bytes, want %d", len(bits), 6400/8+8)
	}
	counter := func(bits string) uint64 { return binary.BigEndian.Uint64([]byte(bits[800:])) >> 1 }
	if got, want := counter(bits), uint64(1<<62)/463; got != want {
		t.Errorf("counter = %d, want %d", got, want)
	}
	bits = bits[:800]
	ones := func(bits string) []int {
		var set []int
		for i := 0; i < 8*len(bits); i++ {
			if bits[i/8]&(0x80>>(i%8)) != 0 { // Redis numbers bits from the most significant
				set = append(set, i)
			}
		}
		return set
	}
	if want := "[647 848 1049 4109 4310 4511 5578 5779 5980]"; fmt.Sprint(ones(bits)) != want {
		t.Errorf("bits set = %v, want %s", ones(bits), want)
	}
	// Past its capacity the shard freezes layer 0 (flag bit 6400 set), and
	// the state records 2 layers and the keys admitted into each.
	var more [][]byte
	for i := 0; len(more) < 480; i++ {
		k := []byte(fmt.Sprintf("https://example.com/%d", i))
		if f.shards.shard(HashKey(k)) == 3 {
			more = append(more, k)
		}
	}
	news := addAll(t, f, more, 100)
	bits = c.Get(ctx, "{pin:3}:bits:0:0").Val()
	if bits[800]&0x80 == 0 {
		t.Errorf("layer 0's frozen flag is 0 after %d keys", news+1)
	}
	st := c.HGetAll(ctx, "{pin:3}:state").Val()
	n0, n1 := st["n0"], st["n1"]
	var a0, a1 int
	fmt.Sscan(n0, &a0)
	fmt.Sscan(n1, &a1)
	if st["layers"] != "2" || a0 < 463 || a0 > 470 || a0+a1 != news+1 {
		t.Errorf("state = %v, want 2 layers, 463 to 470 keys in layer 0, %d in all", st, news+1)
	}
	if n := c.StrLen(ctx, "{pin:3}:bits:1:0").Val(); n != 13184/8+8 { // 940 + 3·14 keys at 0.0016: m = 13158 → 13184
		t.Errorf("layer 1 is %d bytes, want %d", n, 13184/8+8)
	}
}

// TestRedisBloomLayouts opens filters stored under each layout: a layout-1
// filter (written by the script protocol) is still served, with that
// protocol, by a process that would create layout 3, and answers as
// before; an unknown layout is refused with a *MismatchError naming it,
// never read.
func TestRedisBloomLayouts(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	opts := RedisBloomOptions{InitialCapacity: 500, Shards: 2}
	old, err := openRedisBloomLayout(ctx, c, "old", opts, redisBloomLayoutScript)
	if err != nil {
		t.Fatal(err)
	}
	keys := urlKeys("old", 0, 3000) // grows to 3 layers
	news := addAll(t, old, keys, 250)
	reopened := openRedisBloom(t, c, "old", opts)
	if reopened.layout != redisBloomLayoutScript {
		t.Errorf("layout-1 filter reopened under layout %s", reopened.layout)
	}
	if got := countPresent(t, reopened, keys, 1000); got != len(keys) {
		t.Errorf("%d of %d keys present after reopening", got, len(keys))
	}
	more := urlKeys("old-more", 0, 1000)
	n := addAll(t, reopened, append(more, keys...), 500)
	if n < len(more)-fppUpperBound(len(more), 0.01) || n > len(more) {
		t.Errorf("%d of %d fresh keys new after reopening", n, len(more))
	}
	if st, err := reopened.Stats(ctx); err != nil || st.Items != uint64(news+n) || len(st.Layers) < 3 {
		t.Errorf("Stats after reopening: %d items in %d layers (%v), want %d", st.Items, len(st.Layers), err, news+n)
	}
	if err := c.HSet(ctx, "future:meta", "kind", "bloom", "layout", "4").Err(); err != nil {
		t.Fatal(err)
	}
	var me *MismatchError
	if _, err := OpenRedisBloom(ctx, c, "future", opts); !errors.As(err, &me) || me.Field != "layout" || me.Stored != "4" {
		t.Errorf("opening a layout-4 filter = %v, want a mismatch on layout", err)
	}
	// Layout 2, the native protocol before MaxWriters, is refused with an
	// error naming it, under both ways of opening.
	if err := c.HSet(ctx, "nobound:meta", "kind", "bloom", "layout", "2", "hash", redisBloomHash, "target_fpp", "0.01",
		"initial_capacity", "500", "growth_factor", "2", "tightening", "0.8", "shards", "2", "chunk_bytes", "67108864", "policy", "").Err(); err != nil {
		t.Fatal(err)
	}
	for _, existing := range []bool{false, true} {
		o := opts
		o.Existing = existing
		if _, err := OpenRedisBloom(ctx, c, "nobound", o); !errors.Is(err, ErrInvalidParams) || !strings.Contains(err.Error(), "layout 2") {
			t.Errorf("opening a layout-2 filter (existing %v) = %v, want an error naming layout 2", existing, err)
		}
	}
}

// TestRedisBloomSurvivesRestart adds keys to a Redis with the append-only
// file on, kills the server as a crash would, starts it again and finds
// every key still present and not new.
func TestRedisBloomSurvivesRestart(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{AOF: true})
	c := srv.Client()
	opts := RedisBloomOptions{InitialCapacity: 1000, Shards: 4}
	f := openRedisBloom(t, c, "aof", opts)
	keys := urlKeys("aof", 0, 5000) // grows to 3 layers
	addAll(t, f, keys, 250)
	srv.Kill()
	srv.StartAgain()
	f2 := openRedisBloom(t, c, "aof", opts) // the metadata survived too
	if got := countPresent(t, f2, keys, 1000); got != len(keys) {
		t.Errorf("%d of %d keys present after the restart", got, len(keys))
	}
	if news := addAll(t, f, keys, 1000); news != 0 {
		t.Errorf("%d keys new again after the restart", news)
	}
}

// TestRedisBloomRecoversFromOutage kills Redis under a filter: calls fail
// with an error naming the filter, nothing panics, and once Redis is back
// the same filter works again on its own.
func TestRedisBloomRecoversFromOutage(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{AOF: true})
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: 200 * time.Millisecond, MaxRetries: 1})
	t.Cleanup(func() { c.Close() })
	f := openRedisBloom(t, c, "down", RedisBloomOptions{InitialCapacity: 1000, Shards: 4})
	keys := urlKeys("down", 0, 100)
	addAll(t, f, keys, 100)

	srv.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Keys this process added are answered from its mirror (their bits
	// never go back to 0); keys it does not know need Redis.
	if got, err := f.TestAndAdd(ctx, keys); err != nil || slices.Contains(got, true) {
		t.Errorf("known keys with Redis down: %v, %v; want all present, from the mirror", got, err)
	}
	unknown := append(urlKeys("down-new", 0, 10), keys...)
	for name, call := range map[string]func(context.Context, [][]byte) ([]bool, error){"TestAndAdd": f.TestAndAdd, "Contains": f.Contains} {
		got, err := call(ctx, unknown)
		if err == nil || got != nil {
			t.Fatalf("%s with Redis down = %v, %v; want an error", name, got, err)
		}
		if !strings.Contains(err.Error(), `redis bloom "down"`) {
			t.Errorf("%s error %q does not name the filter", name, err)
		}
	}
	if _, err := f.Stats(ctx); err == nil {
		t.Errorf("Stats with Redis down: no error")
	}

	srv.StartAgain()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		got, err := f.TestAndAdd(ctx, keys)
		cancel()
		if err == nil {
			for i, g := range got {
				if g {
					t.Errorf("key %q new after the outage", keys[i])
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("filter still failing 10s after Redis came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRedisBloomScriptFlush empties Redis's script cache under a filter, as
// SCRIPT FLUSH or a restart without the script would: the filter reloads its
// script and the caller sees nothing.
func TestRedisBloomScriptFlush(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	f := openRedisBloom(t, c, "flush", RedisBloomOptions{InitialCapacity: 1000, Shards: 4})
	keys := urlKeys("flush", 0, 200)
	addAll(t, f, keys[:100], 100)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := f.TestAndAdd(ctx, keys)
	if err != nil {
		t.Fatalf("TestAndAdd after SCRIPT FLUSH: %v", err)
	}
	news := 0
	for _, g := range got {
		if g {
			news++
		}
	}
	if news < 95 || news > 100 {
		t.Errorf("%d of 100 fresh keys new after SCRIPT FLUSH", news)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n := countPresent(t, f, keys, 200); n != 200 {
		t.Errorf("Contains after SCRIPT FLUSH: %d of 200 present", n)
	}
	// The NOSCRIPT path really ran.
	if stats := c.Info(ctx, "commandstats").Val(); !strings.Contains(stats, "cmdstat_eval:") {
		t.Errorf("no EVAL after SCRIPT FLUSH in commandstats:\n%s", stats)
	}
}

func TestRedisBloomCanceledAndClosed(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	f := openRedisBloom(t, c, "cc", RedisBloomOptions{InitialCapacity: 1000})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.TestAndAdd(ctx, urlKeys("cc", 0, 10)); !errors.Is(err, context.Canceled) {
		t.Errorf("TestAndAdd with a canceled context = %v, want context.Canceled", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	bg := context.Background()
	if _, err := f.TestAndAdd(bg, urlKeys("cc", 0, 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("TestAndAdd after Close = %v, want ErrClosed", err)
	}
	if _, err := f.Contains(bg, urlKeys("cc", 0, 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Contains after Close = %v, want ErrClosed", err)
	}
	if _, err := f.Stats(bg); !errors.Is(err, ErrClosed) {
		t.Errorf("Stats after Close = %v, want ErrClosed", err)
	}
}

// TestRedisBloomChunks runs the same stream through a filter whose layers
// fit one Redis string and are read whole by the script, one that probes
// them with BITFIELD only, and one whose layers are cut into 64-byte chunks
// (BITFIELD too): the answers must be the same and the chunks, concatenated,
// the same bits.
func TestRedisBloomChunks(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	opts := RedisBloomOptions{InitialCapacity: 800, Shards: 2}
	open := func(name, layout string, chunk int64, fetch int) *RedisBloom {
		o := opts
		o.ChunkBytes = chunk
		f, err := openRedisBloomLayout(ctx, c, name, o, layout)
		if err != nil {
			t.Fatal(err)
		}
		f.fetch = fetch
		return f
	}
	type filter struct {
		f    *RedisBloom
		name string
		flag int // bytes after each chunk's filter bits: the tail's
	}
	filters := []filter{
		{open("whole", redisBloomLayoutScript, 0, redisBloomFetch), "whole", 0},
		{open("probed", redisBloomLayoutScript, 0, 0), "probed", 0},
		{open("cut", redisBloomLayoutScript, 64, redisBloomFetch), "cut", 0},
		{open("native", redisBloomLayout, 0, 0), "native", redisTailBytes},
		{open("nativecut", redisBloomLayout, 64, 0), "nativecut", redisTailBytes},
	}
	// Filters of one layout answer alike and hold the same bits; the two
	// layouts may grow at different points (layout 2 closes a layer up to
	// a guard batch short of its capacity), so their bits differ.
	first := func(f filter) int {
		if f.f.layout == redisBloomLayoutScript {
			return 0
		}
		return 3
	}
	rng := rand.New(rand.NewSource(7))
	for round := 0; round < 40; round++ {
		keys := make([][]byte, 250)
		for i := range keys { // repeats within and across batches
			keys[i] = []byte(fmt.Sprintf("https://chunk.example/%d", rng.Intn(6000)))
		}
		var answers []string
		for _, f := range filters {
			got, err := f.f.TestAndAdd(ctx, keys)
			if err != nil {
				t.Fatal(err)
			}
			answers = append(answers, fmt.Sprint(got))
			if got, err = f.f.Contains(ctx, keys); err != nil || numTrue(got) != len(keys) {
				t.Fatalf("round %d: %s: Contains after TestAndAdd: %d of %d present, %v", round, f.name, numTrue(got), len(keys), err)
			}
		}
		for x, f := range filters {
			if y := first(f); answers[x] != answers[y] {
				t.Fatalf("round %d: answers differ:\n%s %s\n%s %s", round, filters[y].name, answers[y], f.name, answers[x])
			}
		}
	}
	st, err := filters[2].f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Layers) < 3 {
		t.Errorf("only %d layers; the test should grow the filter", len(st.Layers))
	}
	for _, f := range filters {
		st, err := f.f.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 2; j++ {
			for i := range st.Layers {
				want := c.Get(ctx, fmt.Sprintf("{%s:%d}:bits:%d:0", filters[first(f)].name, j, i)).Val()
				want = want[:len(want)-f.flag]
				var got strings.Builder
				chunk := 1 << 30
				if strings.HasSuffix(f.name, "cut") {
					chunk = 64
				}
				for ch := 0; ch*chunk < len(want); ch++ {
					part := c.Get(ctx, fmt.Sprintf("{%s:%d}:bits:%d:%d", f.name, j, i, ch)).Val()
					if n := min(chunk, len(want)-ch*chunk) + f.flag; len(part) != n {
						t.Errorf("%s: chunk %d of layer %d is %d bytes, want %d", f.name, ch, i, len(part), n)
						continue
					}
					got.WriteString(part[:len(part)-f.flag])
				}
				if got.String() != want {
					t.Errorf("%s: shard %d layer %d: bits differ from the whole layer's", f.name, j, i)
				}
			}
		}
	}
}

// TestRedisBloomLargeBatch sends batches larger than one script call takes
// (redisBloomCallKeys), to one shard, while the filter grows: the parts must
// keep the batch's order, so a key's second copy, 1,300 keys later (in a
// later part), is never new.
func TestRedisBloomLargeBatch(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	cl := redistest.StartCluster(t, 3)
	for name, c := range map[string]redis.UniversalClient{"single": srv.Client(), "cluster": cl.Client()} {
		opts := RedisBloomOptions{InitialCapacity: 500, TargetFPP: 0.01, Shards: 1}
		f := openRedisBloom(t, c, "large", opts)
		distinct := urlKeys("large", 0, 2600)
		var batch [][]byte
		for i := 0; i < len(distinct); i += 1300 {
			part := distinct[i:min(i+1300, len(distinct))]
			batch = append(append(batch, part...), part...)
		}
		got, err := f.TestAndAdd(ctx, batch)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		notNew := 0
		for i := 0; i < len(batch); i += 2600 {
			for x := 0; x < 1300; x++ {
				if got[i+1300+x] {
					t.Errorf("%s: second copy of %q new", name, batch[i+x])
				}
				if !got[i+x] {
					notNew++
				}
			}
		}
		if limit := fppUpperBound(len(distinct), opts.TargetFPP); notNew > limit {
			t.Errorf("%s: %d of %d first copies not new, want ≤ %d", name, notNew, len(distinct), limit)
		}
		if st, err := f.Stats(ctx); err != nil || len(st.Layers) < 3 {
			t.Errorf("%s: the batch should grow the filter to ≥ 3 layers: %d, %v", name, len(st.Layers), err)
		}
	}
}

// checkMirrorInRedis checks every mirrored layer of f against Redis: each
// bit the mirror holds is 1 in Redis, and a complete copy equals the layer.
func checkMirrorInRedis(t *testing.T, f *RedisBloom) {
	t.Helper()
	for j := range f.mirror.shards {
		s := &f.mirror.shards[j]
		s.mu.Lock()
		layers := slices.Clone(s.layers)
		complete := make([]bool, len(layers))
		for i, l := range layers {
			complete[i] = l != nil && l.complete
		}
		s.mu.Unlock()
		for i, l := range layers {
			if l == nil {
				continue
			}
			redis := &mirrorLayer{words: make([]uint64, len(l.words))}
			if err := f.readLayer(context.Background(), j, i, redis); err != nil {
				t.Fatal(err)
			}
			for w := range l.words {
				mine := atomic.LoadUint64(&l.words[w])
				if mine&^redis.words[w] != 0 {
					t.Fatalf("shard %d layer %d: the mirror holds bits Redis does not (word %d)", j, i, w)
				}
				if complete[i] && mine != redis.words[w] {
					t.Fatalf("shard %d layer %d: a complete copy differs from Redis (word %d)", j, i, w)
				}
			}
		}
	}
}

// TestRedisBloomMirror checks the local mirror against Redis alone. A
// filter is grown 10-fold by a process with a mirror (learning as it adds).
// Contains must answer alike from the writer, from a fresh process (whose
// mirror reads the layers from Redis) and from a process without a mirror,
// on keys added and never added. Then the fresh process adds never-added
// keys in batches, growing the filter further: it may call a key not new
// only if Redis alone held it before the batch (a false positive) or if it
// became a false positive of the batch's earlier keys (within the
// false-positive bound), and every bit its mirror holds must be 1 in
// Redis, every complete copy equal to Redis's layer. Over chunk sizes that
// do and do not fill whole 64-bit words, and a budget that mirrors only the
// oldest layers.
func TestRedisBloomMirror(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	tests := []struct {
		name   string
		chunk  int64 // ChunkBytes
		budget int64 // MirrorBytes
	}{
		{"one chunk a layer", 0, 0},
		{"chunks of 64 bits", 8, 0},
		{"chunks of 72 bits", 9, 0},
		{"budget for two layers", 0, 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "mirror:" + tt.name
			base := RedisBloomOptions{InitialCapacity: 500, TargetFPP: 0.01, Shards: 2, ChunkBytes: tt.chunk}
			with, without := base, base
			with.MirrorBytes, without.MirrorBytes = tt.budget, -1
			writer := openRedisBloom(t, srv.Client(), name, with)
			added := urlKeys("mirror-in", 0, 5000)
			addAll(t, writer, added, 250)
			st, err := writer.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Layers) < 3 {
				t.Fatalf("%d layers after 10x the capacity, want ≥ 3", len(st.Layers))
			}
			plain := openRedisBloom(t, srv.Client(), name, without)
			fresh := openRedisBloom(t, srv.Client(), name, with)
			probe := append(urlKeys("mirror-out", 0, 20_000), added...)
			want, err := plain.Contains(ctx, probe)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []*RedisBloom{writer, fresh} {
				got, err := f.Contains(ctx, probe)
				if err != nil {
					t.Fatal(err)
				}
				for q := range probe {
					if got[q] != want[q] {
						t.Fatalf("Contains(%q) = %v with a mirror, %v without", probe[q], got[q], want[q])
					}
				}
			}
			fp := 0
			for _, w := range want[:20_000] {
				if w {
					fp++
				}
			}
			if limit := fppUpperBound(20_000, base.TargetFPP); fp > limit {
				t.Errorf("%d false positives in 20,000 never-added keys, want ≤ %d", fp, limit)
			}
			for _, w := range want[20_000:] {
				if !w {
					t.Fatal("an added key is absent")
				}
			}
			late := 0
			for at := 0; at < 20_000; at += 1000 {
				batch := probe[at : at+1000]
				before, err := plain.Contains(ctx, batch)
				if err != nil {
					t.Fatal(err)
				}
				got, err := fresh.TestAndAdd(ctx, batch)
				if err != nil {
					t.Fatal(err)
				}
				for q := range batch {
					switch {
					case got[q] && before[q]:
						t.Fatalf("TestAndAdd(%q) new with a mirror, but Redis held it before", batch[q])
					case !got[q] && !before[q]:
						late++
					}
				}
			}
			if limit := fppUpperBound(20_000, base.TargetFPP); late > limit {
				t.Errorf("%d keys not new that Redis did not hold before their batch, want ≤ %d", late, limit)
			}
			checkMirrorInRedis(t, fresh)
			if tt.budget == 0 {
				// By now the fresh process has met every layer: all but
				// the newest are complete copies, which the script skips.
				if _, complete, err := fresh.mirror.layersFor(ctx, fresh, 0, int(fresh.seen[0].Load())); err != nil || complete < 2 {
					t.Errorf("fresh mirror: %d complete layers, %v; want ≥ 2", complete, err)
				}
			}
			if tt.budget > 0 {
				s := &fresh.mirror.shards[0]
				s.mu.Lock()
				n, mirrored := len(s.layers), 0
				for _, l := range s.layers {
					if l != nil {
						mirrored++
					}
				}
				s.mu.Unlock()
				if mirrored == 0 || mirrored == n {
					t.Errorf("budget %d bytes: %d of %d layers mirrored, want some but not all", tt.budget, mirrored, n)
				}
			}
		})
	}
}

// TestRedisBloomLastLayerFull fills a filter whose schedule can size only
// two layers: once the second is full, TestAndAdd fails with an error
// saying so, and never panics; what was added stays present.
func TestRedisBloomLastLayerFull(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	for _, mirror := range []int64{0, -1} {
		f := openRedisBloom(t, c, fmt.Sprintf("last%d", mirror), RedisBloomOptions{InitialCapacity: 200, Shards: 1, MirrorBytes: mirror})
		f.layers, f.guards = f.layers[:2], f.guards[:2] // 200 + 400 keys
		keys := urlKeys("last", 0, 1000)
		var err error
		added := 0
		for at := 0; at < len(keys) && err == nil; at += 50 {
			if _, err = f.TestAndAdd(ctx, keys[at:at+50]); err == nil {
				added = at + 50
			}
		}
		if err == nil || !strings.Contains(err.Error(), "all the 2 layers") {
			t.Fatalf("mirror %d: TestAndAdd past the last layer: %v, want an error naming the 2 layers", mirror, err)
		}
		if added < 550 || added > 650 {
			t.Errorf("mirror %d: %d keys added before the error, want about 600", mirror, added)
		}
		if got := countPresent(t, f, keys[:added], 50); got != added {
			t.Errorf("mirror %d: %d of %d added keys present", mirror, got, added)
		}
	}
}

// TestRedisBloomGuardReserve checks the guard's sizing for many writers:
// one writer keeps the batch of capacity/64 (at most 128) and no reserve;
// with W writers the reserve (W−1)·batch stays within capacity/32 once the
// layer holds at least 512·(W−1) keys, and a call still counts at least
// minGuardBatch keys (or capacity/64, when smaller).
func TestRedisBloomGuardReserve(t *testing.T) {
	for _, tc := range []struct {
		capacity      int64
		writers       int
		batch         uint64
		reserveAtMost int64
	}{
		{capacity: 63_468, writers: 1, batch: 128, reserveAtMost: 0},
		{capacity: 63_468, writers: 16, batch: 128, reserveAtMost: 63_468 / 32},
		{capacity: 63_468, writers: 64, batch: 31, reserveAtMost: 63_468 / 32},
		{capacity: 6_556, writers: 64, batch: 16, reserveAtMost: 63 * 16},
		{capacity: 470, writers: 4, batch: 7, reserveAtMost: 21},
		{capacity: 2_000_000, writers: 64, batch: 128, reserveAtMost: 63 * 128},
	} {
		g := newLayerGuard(tc.capacity, tc.writers)
		if g.batch != tc.batch || g.reserve != int64(tc.writers-1)*int64(g.batch) || g.reserve > tc.reserveAtMost {
			t.Errorf("guard(%d keys, %d writers) = batch %d, reserve %d; want batch %d, reserve (W−1)·batch ≤ %d",
				tc.capacity, tc.writers, g.batch, g.reserve, tc.batch, tc.reserveAtMost)
		}
		if tc.capacity >= 512*int64(tc.writers-1) && g.reserve > tc.capacity/32 {
			t.Errorf("guard(%d keys, %d writers): reserve %d over capacity/32", tc.capacity, tc.writers, g.reserve)
		}
	}
}

// TestRedisBloomRacingWritersAtFreeze has MaxWriters processes (a client
// and a filter each) add distinct keys to a one-shard filter at once, in
// calls of a full guard batch, across three times its first layer's
// capacity. Calls in flight when layer 0 freezes still set their keys'
// bits there; the keys layer 0 holds (all of their bits set, read from
// Redis) must stay within the keys its bits were sized for, capacity +
// (MaxWriters−1)·batch, plus the layer's own false positives among the
// keys it does not hold, and its fill within that of the sized count. No
// key is lost: each is new exactly once (but false positives), and every
// key reported new is present, to a writer and to a fresh process. (A key
// answered "not new" because late writes had set all its bits in the
// frozen layer is a false positive that a writer whose mirror copied the
// layer before those writes does not see: it was never admitted, so
// nothing is lost.)
func TestRedisBloomRacingWritersAtFreeze(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	const writers = 8
	opts := RedisBloomOptions{InitialCapacity: 2000, Shards: 1, MaxWriters: writers}
	fs := make([]*RedisBloom, writers)
	for i := range fs {
		fs[i] = openRedisBloom(t, srv.Client(), "freeze", opts)
	}
	l, g := fs[0].layers[0], fs[0].guards[0]
	sized := l.capacity + g.reserve
	per := int(3 * l.capacity / writers)
	keys := make([][][]byte, writers)
	news := make([]int, writers)
	isNew := make([][]bool, writers)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	start := make(chan struct{})
	for i := range fs {
		keys[i] = urlKeys(fmt.Sprintf("freeze%d", i), 0, per)
		isNew[i] = make([]bool, per)
		wg.Go(func() {
			<-start
			for at := 0; at < per; at += int(g.batch) {
				got, err := fs[i].TestAndAdd(ctx, keys[i][at:min(at+int(g.batch), per)])
				if err != nil {
					errs <- err
					return
				}
				for x, n := range got {
					if n {
						news[i]++
					}
					isNew[i][at+x] = n
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent TestAndAdd: %v", err)
	}
	var all [][]byte
	total := 0
	for i := range keys {
		all = append(all, keys[i]...)
		total += news[i]
	}
	if fp := len(all) - total; fp < 0 || fp > fppUpperBound(len(all), opts.withDefaults().TargetFPP) {
		t.Errorf("%d of %d distinct keys new", total, len(all))
	}
	var admitted [][]byte
	for i := range keys {
		for x, n := range isNew[i] {
			if n {
				admitted = append(admitted, keys[i][x])
			}
		}
	}
	fresh := openRedisBloom(t, srv.Client(), "freeze", RedisBloomOptions{})
	for name, f := range map[string]*RedisBloom{"a writer": fs[0], "a fresh process": fresh} {
		if got := countPresent(t, f, admitted, 500); got != len(admitted) {
			t.Errorf("%s finds %d of the %d keys reported new", name, got, len(admitted))
		}
		if got := countPresent(t, f, all, 500); got < len(admitted) {
			t.Errorf("%s finds %d of all %d keys, fewer than the %d reported new", name, got, len(all), len(admitted))
		}
	}
	bits := []byte(srv.Client().Get(ctx, fs[0].chunkKey(0, 0, 0)).Val())
	if uint64(len(bits)) != l.bits/8+redisTailBytes || bits[l.bits/8]&0x80 == 0 {
		t.Fatalf("layer 0 is %d bytes (want %d), frozen flag %v", len(bits), l.bits/8+redisTailBytes, len(bits) > int(l.bits/8) && bits[l.bits/8]&0x80 != 0)
	}
	held := 0
	for _, k := range all {
		h := HashKey([]byte(k))
		in := true
		for i := 0; i < l.k && in; i++ {
			p := h.BitIndex(i, l.bits)
			in = bits[p/8]&(0x80>>(p%8)) != 0
		}
		if in {
			held++
		}
	}
	counted, _ := strconv.Atoi(srv.Client().HGet(ctx, fs[0].shards.key(0, "state"), countField(0)).Val())
	t.Logf("layer 0: capacity %d, sized for %d (batch %d), counted %d, holds %d of the %d keys", l.capacity, sized, g.batch, counted, held, len(all))
	if limit := int(sized) + fppUpperBound(len(all), l.fpp); held > limit {
		t.Errorf("layer 0 holds %d keys, more than the %d it was sized for (with its false positives: %d)", held, sized, limit)
	}
	ones := 0
	for _, b := range bits[:l.bits/8] {
		ones += mbits.OnesCount8(b)
	}
	m := float64(l.bits)
	if want := m * (1 - math.Exp(-float64(l.k)*float64(sized)/m)); float64(ones) > want+4*math.Sqrt(m) {
		t.Errorf("layer 0 has %d of %d bits set, more than the %.0f of %d keys", ones, l.bits, want, sized)
	}
}

// TestRedisBloomAdoptsMaxWriters opens a filter made for 8 writers without
// saying how many: it adopts the stored count, and with it every layer's
// size.
func TestRedisBloomAdoptsMaxWriters(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	made := openRedisBloom(t, c, "writers", RedisBloomOptions{InitialCapacity: 5000, Shards: 2, MaxWriters: 8})
	opened := openRedisBloom(t, c, "writers", RedisBloomOptions{})
	if opened.opts.MaxWriters != 8 || fmt.Sprint(opened.layers) != fmt.Sprint(made.layers) {
		t.Errorf("reopened with %d writers, layers %v; want 8, %v", opened.opts.MaxWriters, opened.layers, made.layers)
	}
	if dflt := openRedisBloom(t, c, "writers-default", RedisBloomOptions{InitialCapacity: 5000, Shards: 2}); dflt.opts.MaxWriters != DefaultRedisBloomMaxWriters {
		t.Errorf("a new filter has %d writers, want the default %d", dflt.opts.MaxWriters, DefaultRedisBloomMaxWriters)
	}
}
