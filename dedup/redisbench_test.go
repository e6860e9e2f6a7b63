package dedup

import (
	"context"
	"crypto/sha1"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sievecrawl/sieve/redistest"
)

// The Redis filter benchmark is a test that prints tables; it runs only when
// asked, as it takes several minutes:
//
//	go test ./dedup -run TestRedisFilterStreams -sieve.redisbench -v -timeout 60m
//
// It starts one local redis-server and, for two streams of URL-like keys and
// three batch sizes, measures Sieve's RedisBloom against the two approaches
// it replaces, in the same run: one fixed Bloom bitmap set with pipelined
// SETBIT (a key is new when any of its old bits was 0), and SADD of the
// key's 20-byte SHA-1 (scrapy-redis's dupefilter).
var (
	redisBenchFlag   = flag.Bool("sieve.redisbench", false, "run the Redis filter benchmark tables (TestRedisFilterStreams)")
	redisBenchN      = flag.Int("sieve.redisbench.n", 1_000_000, "keys per stream")
	redisBenchPrefix = flag.Int("sieve.redisbench.batch1", 100_000, "keys of each stream run at batch size 1 (a prefix)")
	redisBenchSweep  = flag.Bool("sieve.redisbench.sweep", true, "also sweep growth factor and tightening")
	redisBenchProbes = flag.Int("sieve.redisbench.probes", 100_000, "never-inserted keys to measure the false-positive rate on")
)

const (
	redisBenchCapacity = 100_000 // Sieve's initial capacity
	redisBenchFPP      = 0.01
)

// redisBenchStream is a sequence of keys: "a" all distinct, "b" crawl-like,
// where each key repeats a uniformly chosen earlier one with probability 0.9.
type redisBenchStream struct {
	name     string
	keys     [][]byte
	distinct int
}

func redisBenchURL(i int) []byte {
	return []byte(fmt.Sprintf("https://www.site%d.example/articles/%d/%x.html", i%5000, i, i*2654435761))
}

func redisBenchStreams(n int) []redisBenchStream {
	a := redisBenchStream{name: "a: all distinct", keys: make([][]byte, n), distinct: n}
	for i := range a.keys {
		a.keys[i] = redisBenchURL(i)
	}
	b := redisBenchStream{name: "b: 90% repeats", keys: make([][]byte, 0, n)}
	r := rand.New(rand.NewPCG(1, 2))
	for len(b.keys) < n {
		if b.distinct > 0 && r.Float64() < 0.9 {
			b.keys = append(b.keys, redisBenchURL(r.IntN(b.distinct)))
		} else {
			b.keys = append(b.keys, redisBenchURL(b.distinct))
			b.distinct++
		}
	}
	return []redisBenchStream{a, b}
}

// redisBenchDedup is one way to deduplicate keys in Redis.
type redisBenchDedup interface {
	// add adds a batch and returns how many keys were new.
	add(ctx context.Context, keys [][]byte) (int, error)
	// contains returns how many keys are (reported) present.
	contains(ctx context.Context, keys [][]byte) (int, error)
	// bytes is the size of the structure's payload (bits or members).
	bytes(ctx context.Context) (uint64, error)
}

type redisBenchSieve struct{ f *RedisBloom }

func (s redisBenchSieve) add(ctx context.Context, keys [][]byte) (int, error) {
	got, err := s.f.TestAndAdd(ctx, keys)
	return numTrue(got), err
}

func (s redisBenchSieve) contains(ctx context.Context, keys [][]byte) (int, error) {
	got, err := s.f.Contains(ctx, keys)
	return numTrue(got), err
}

func (s redisBenchSieve) bytes(ctx context.Context) (uint64, error) {
	st, err := s.f.Stats(ctx)
	return st.MemoryBytes, err
}

// redisBenchSetbit is the seeds' approach: one Bloom bitmap of m bits and k
// hashes (Guava's, for the stream's distinct keys at 1%, preallocated), set
// with one SETBIT per bit, pipelined per batch.
type redisBenchSetbit struct {
	c    *redis.Client
	bits uint64
	k    int
}

func newRedisBenchSetbit(ctx context.Context, c *redis.Client, n int) (*redisBenchSetbit, error) {
	m, err := OptimalBits(int64(n), redisBenchFPP)
	if err != nil {
		return nil, err
	}
	s := &redisBenchSetbit{c: c, bits: uint64(wordsFor(m)) * 64, k: OptimalHashes(int64(n), m)}
	return s, c.SetBit(ctx, "setbit:bitmap", int64(s.bits-1), 0).Err()
}

func (s *redisBenchSetbit) run(ctx context.Context, keys [][]byte, set bool) ([]bool, error) {
	pipe := s.c.Pipeline()
	cmds := make([]*redis.IntCmd, 0, len(keys)*s.k)
	for _, key := range keys {
		h := HashKey(key)
		for i := 0; i < s.k; i++ {
			if set {
				cmds = append(cmds, pipe.SetBit(ctx, "setbit:bitmap", int64(h.BitIndex(i, s.bits)), 1))
			} else {
				cmds = append(cmds, pipe.GetBit(ctx, "setbit:bitmap", int64(h.BitIndex(i, s.bits))))
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	zero := make([]bool, len(keys)) // some bit was 0
	for i, cmd := range cmds {
		if cmd.Val() == 0 {
			zero[i/s.k] = true
		}
	}
	return zero, nil
}

func (s *redisBenchSetbit) add(ctx context.Context, keys [][]byte) (int, error) {
	zero, err := s.run(ctx, keys, true)
	return numTrue(zero), err
}

func (s *redisBenchSetbit) contains(ctx context.Context, keys [][]byte) (int, error) {
	zero, err := s.run(ctx, keys, false)
	return len(keys) - numTrue(zero), err
}

func (s *redisBenchSetbit) bytes(ctx context.Context) (uint64, error) {
	n, err := s.c.StrLen(ctx, "setbit:bitmap").Result()
	return uint64(n), err
}

// redisBenchBitfield is a floor, not a design: the SETBIT baseline's fixed
// bitmap set with native BITFIELD, one command per batch (all k bits of all
// keys, answering the old bits). It is the least Redis work any plain-Redis
// filter with Guava's scattered bit layout can do per new key — no layers,
// no growth, no capacity count, no script — so it bounds how far Sieve's
// script can go past the SETBIT pipeline.
type redisBenchBitfield struct{ *redisBenchSetbit }

// redisBenchBitfieldOps bounds the operations of one BITFIELD command.
const redisBenchBitfieldOps = 8192

func (s redisBenchBitfield) run(ctx context.Context, keys [][]byte, set bool) ([]bool, error) {
	pipe := s.c.Pipeline()
	var cmds []*redis.IntSliceCmd
	args := make([]any, 0, 4*redisBenchBitfieldOps)
	for _, key := range keys {
		h := HashKey(key)
		for i := 0; i < s.k; i++ {
			if set {
				args = append(args, "SET", "u1", h.BitIndex(i, s.bits), 1)
			} else {
				args = append(args, "GET", "u1", h.BitIndex(i, s.bits))
			}
		}
		if len(args) >= cap(args)-4*s.k {
			cmds = append(cmds, pipe.BitField(ctx, "setbit:bitmap", args...))
			args = make([]any, 0, 4*redisBenchBitfieldOps)
		}
	}
	if len(args) > 0 {
		cmds = append(cmds, pipe.BitField(ctx, "setbit:bitmap", args...))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	zero := make([]bool, len(keys)) // some bit was 0
	i := 0
	for _, cmd := range cmds {
		for _, v := range cmd.Val() {
			if v == 0 {
				zero[i/s.k] = true
			}
			i++
		}
	}
	return zero, nil
}

func (s redisBenchBitfield) add(ctx context.Context, keys [][]byte) (int, error) {
	zero, err := s.run(ctx, keys, true)
	return numTrue(zero), err
}

func (s redisBenchBitfield) contains(ctx context.Context, keys [][]byte) (int, error) {
	zero, err := s.run(ctx, keys, false)
	return len(keys) - numTrue(zero), err
}

// redisBenchSadd is scrapy-redis's dupefilter: SADD of the key's SHA-1.
type redisBenchSadd struct{ c *redis.Client }

func (s redisBenchSadd) add(ctx context.Context, keys [][]byte) (int, error) {
	pipe := s.c.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, key := range keys {
		sum := sha1.Sum(key)
		cmds[i] = pipe.SAdd(ctx, "sadd:set", sum[:])
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	news := 0
	for _, cmd := range cmds {
		news += int(cmd.Val())
	}
	return news, nil
}

func (s redisBenchSadd) contains(ctx context.Context, keys [][]byte) (int, error) {
	members := make([]any, len(keys))
	for i, key := range keys {
		sum := sha1.Sum(key)
		members[i] = sum[:]
	}
	got, err := s.c.SMIsMember(ctx, "sadd:set", members...).Result()
	return numTrue(got), err
}

func (s redisBenchSadd) bytes(ctx context.Context) (uint64, error) {
	n, err := s.c.MemoryUsage(ctx, "sadd:set", 0).Result()
	return uint64(n), err
}

// redisBenchRow is one measured run.
type redisBenchRow struct {
	keys, distinct, news int
	keysPerSec           float64
	usedBytesPerKey      float64 // Redis memory of all keys (MEMORY USAGE) per distinct key
	payloadBytesPerKey   float64 // bits or members per distinct key
	fpp                  float64
	redisUS, goUS        float64 // CPU microseconds per key
	commands             string  // the heaviest Redis commands, from INFO commandstats
}

func redisInfoFloat(ctx context.Context, c *redis.Client, section string, fields ...string) float64 {
	info := c.Info(ctx, section).Val()
	var sum float64
	for _, line := range strings.Split(info, "\r\n") {
		for _, f := range fields {
			if v, ok := strings.CutPrefix(line, f+":"); ok {
				x, _ := strconv.ParseFloat(v, 64)
				sum += x
			}
		}
	}
	return sum
}

// redisKeysMemory sums MEMORY USAGE (every element sampled) over all keys.
func redisKeysMemory(tb testing.TB, c *redis.Client) int64 {
	tb.Helper()
	ctx := context.Background()
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		tb.Fatal(err)
	}
	pipe := c.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.MemoryUsage(ctx, k, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		tb.Fatal(err)
	}
	var sum int64
	for _, cmd := range cmds {
		sum += cmd.Val()
	}
	return sum
}

func processCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// topCommands summarizes INFO commandstats: the commands that took the most
// Redis time, with microseconds per key of the stream.
func topCommands(ctx context.Context, c *redis.Client, keys int) string {
	type cmd struct {
		name string
		us   float64
	}
	var cmds []cmd
	for _, line := range strings.Split(c.Info(ctx, "commandstats").Val(), "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || strings.HasPrefix(line, "#") || name == "info" || strings.HasPrefix(name, "config") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				us, _ := strconv.ParseFloat(v, 64)
				cmds = append(cmds, cmd{name, us})
			}
		}
	}
	var parts []string
	for len(cmds) > 0 && len(parts) < 3 {
		best := 0
		for i := range cmds {
			if cmds[i].us > cmds[best].us {
				best = i
			}
		}
		parts = append(parts, fmt.Sprintf("%s %.2f", cmds[best].name, cmds[best].us/float64(keys)))
		cmds = append(cmds[:best], cmds[best+1:]...)
	}
	return strings.Join(parts, ", ")
}

// runRedisBench flushes Redis, builds a dedup with open, feeds it keys in
// batches and measures it.
func runRedisBench(tb testing.TB, c *redis.Client, open func() redisBenchDedup, keys [][]byte, distinct, batch int, absent [][]byte) redisBenchRow {
	tb.Helper()
	ctx := context.Background()
	if err := c.FlushAll(ctx).Err(); err != nil {
		tb.Fatal(err)
	}
	d := open()
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		tb.Fatal(err)
	}
	r := redisBenchRow{keys: len(keys), distinct: distinct}
	rcpu0, gcpu0, t0 := redisInfoFloat(ctx, c, "cpu", "used_cpu_user", "used_cpu_sys"), processCPU(), time.Now()
	for i := 0; i < len(keys); i += batch {
		n, err := d.add(ctx, keys[i:min(i+batch, len(keys))])
		if err != nil {
			tb.Fatalf("add: %v", err)
		}
		r.news += n
	}
	elapsed := time.Since(t0)
	r.redisUS = (redisInfoFloat(ctx, c, "cpu", "used_cpu_user", "used_cpu_sys") - rcpu0) * 1e6 / float64(len(keys))
	r.goUS = (processCPU() - gcpu0) * 1e6 / float64(len(keys))
	r.commands = topCommands(ctx, c, len(keys))
	r.keysPerSec = float64(len(keys)) / elapsed.Seconds()
	r.usedBytesPerKey = float64(redisKeysMemory(tb, c)) / float64(distinct)
	payload, err := d.bytes(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	r.payloadBytesPerKey = float64(payload) / float64(distinct)
	fp := 0
	for i := 0; i < len(absent); i += 1000 {
		n, err := d.contains(ctx, absent[i:min(i+1000, len(absent))])
		if err != nil {
			tb.Fatalf("contains: %v", err)
		}
		fp += n
	}
	r.fpp = float64(fp) / float64(len(absent))
	return r
}

func TestRedisFilterStreams(t *testing.T) {
	if !*redisBenchFlag {
		t.Skip("benchmark tables; run with -sieve.redisbench")
	}
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client()
	absent := make([][]byte, *redisBenchProbes)
	for i := range absent {
		absent[i] = []byte(fmt.Sprintf("https://absent%d.example/never/%d", i%977, i))
	}
	sieve := func(g Growth) func() redisBenchDedup {
		return func() redisBenchDedup {
			f, err := OpenRedisBloom(ctx, c, "bench", RedisBloomOptions{
				InitialCapacity: redisBenchCapacity, TargetFPP: redisBenchFPP, Factor: g.Factor, Tightening: g.Tightening,
			})
			if err != nil {
				t.Fatal(err)
			}
			return redisBenchSieve{f}
		}
	}
	var out strings.Builder
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "stream\tbatch\tfilter\tkeys\tkeys/s\tRedis B/key\tpayload B/key\tFPP\tredis µs/key\tgo µs/key\tspeed vs SADD\tspeed vs SETBIT\tmemory vs SADD\ttop Redis commands (µs/key)\t\n")
	for _, s := range redisBenchStreams(*redisBenchN) {
		for _, batch := range []int{1, 100, 1000} {
			keys, distinct := s.keys, s.distinct
			if batch == 1 && *redisBenchPrefix < len(keys) {
				keys = keys[:*redisBenchPrefix]
				seen := make(map[string]bool, len(keys))
				for _, k := range keys {
					seen[string(k)] = true
				}
				distinct = len(seen)
			}
			kinds := []struct {
				name string
				open func() redisBenchDedup
			}{
				{"SADD sha1", func() redisBenchDedup { return redisBenchSadd{c} }},
				{"SETBIT pipeline", func() redisBenchDedup {
					d, err := newRedisBenchSetbit(ctx, c, distinct)
					if err != nil {
						t.Fatal(err)
					}
					return d
				}},
				{"BITFIELD floor", func() redisBenchDedup {
					d, err := newRedisBenchSetbit(ctx, c, distinct)
					if err != nil {
						t.Fatal(err)
					}
					return redisBenchBitfield{d}
				}},
				{"Sieve RedisBloom", sieve(Growth{})},
			}
			rows := map[string]redisBenchRow{}
			for _, k := range kinds {
				r := runRedisBench(t, c, k.open, keys, distinct, batch, absent)
				rows[k.name] = r
				vsSadd, vsSetbit, memSadd := "", "", ""
				if b, ok := rows["SADD sha1"]; ok && k.name != "SADD sha1" {
					vsSadd = fmt.Sprintf("%.2fx", r.keysPerSec/b.keysPerSec)
					memSadd = fmt.Sprintf("1/%.1f", b.usedBytesPerKey/r.usedBytesPerKey)
				}
				if b, ok := rows["SETBIT pipeline"]; ok && (k.name == "Sieve RedisBloom" || k.name == "BITFIELD floor") {
					vsSetbit = fmt.Sprintf("%.2fx", r.keysPerSec/b.keysPerSec)
				}
				fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%.0f\t%.2f\t%.2f\t%.5f\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t\n",
					s.name, batch, k.name, len(keys), r.keysPerSec, r.usedBytesPerKey, r.payloadBytesPerKey, r.fpp,
					r.redisUS, r.goUS, vsSadd, vsSetbit, memSadd, r.commands)
			}
		}
	}
	_ = w.Flush()
	t.Logf("streams of %d URL-like keys (batch 1: the first %d); Sieve: initial capacity %d, target FPP %v, defaults otherwise; "+
		"SETBIT: one bitmap sized for the stream's distinct keys at %v; FPP over %d never-inserted keys; "+
		"Redis B/key = MEMORY USAGE of all keys / distinct keys; payload = bits or set members\n%s",
		*redisBenchN, *redisBenchPrefix, redisBenchCapacity, redisBenchFPP, redisBenchFPP, len(absent), out.String())

	if !*redisBenchSweep {
		return
	}
	// Growth factor and tightening: memory against layers (bit operations)
	// per key, on the all-distinct stream (10x the initial capacity).
	out.Reset()
	w = tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "factor\ttightening\tlayers\tΣk\tkeys/s\tRedis B/key\tpayload B/key\tFPP\tredis µs/key\t\n")
	s := redisBenchStreams(*redisBenchN)[0]
	for _, g := range []Growth{{Factor: 2, Tightening: 0.5}, {Factor: 2, Tightening: 0.8}, {Factor: 2, Tightening: 0.9},
		{Factor: 1.5, Tightening: 0.8}, {Factor: 1.25, Tightening: 0.8}, {Factor: 3, Tightening: 0.7}, {Factor: 4, Tightening: 0.8}} {
		var f *RedisBloom
		open := func() redisBenchDedup {
			d := sieve(g)()
			f = d.(redisBenchSieve).f
			return d
		}
		r := runRedisBench(t, c, open, s.keys, s.distinct, 1000, absent)
		st, err := f.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sumK := 0
		for _, l := range st.Layers {
			sumK += l.Hashes
		}
		fmt.Fprintf(w, "%v\t%v\t%d\t%d\t%.0f\t%.2f\t%.2f\t%.5f\t%.2f\t\n", g.Factor, g.Tightening, len(st.Layers), sumK,
			r.keysPerSec, r.usedBytesPerKey, r.payloadBytesPerKey, r.fpp, r.redisUS)
	}
	_ = w.Flush()
	t.Logf("growth sweep, stream %q, batch 1000, %d keys = %dx the initial capacity\n%s", s.name, len(s.keys), len(s.keys)/redisBenchCapacity, out.String())
}
