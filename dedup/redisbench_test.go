package dedup

import (
	"cmp"
	"context"
	"crypto/sha1"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
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
//	go test ./dedup -run TestRedisFilterStreams -sieve.redisbench -v -timeout 90m
//
// It starts one local redis-server and, for two streams of URL-like keys,
// measures Sieve's RedisBloom against, in the same run: the script protocol
// it replaced (layout 1, one Lua call per batch); native BITFIELD on one
// fixed Bloom bitmap, one command per batch (a key is new when any of its
// old bits was 0: the least Redis work a plain-Redis Bloom filter can do);
// SADD of the key's 20-byte SHA-1 (scrapy-redis's dupefilter); and, on
// request, one SETBIT per bit, pipelined. Each row is the median (by keys/s)
// of -sieve.redisbench.runs runs; rows marked "×2" split the stream between
// two clients (two connections, two filter instances: two processes) on the
// same Redis. It ends with the issue-13 goals, each a ratio of this run.
var (
	redisBenchFlag    = flag.Bool("sieve.redisbench", false, "run the Redis filter benchmark tables (TestRedisFilterStreams)")
	redisBenchN       = flag.Int("sieve.redisbench.n", 1_000_000, "keys per stream")
	redisBenchBatches = flag.String("sieve.redisbench.batches", "1000", "comma-separated batch sizes")
	redisBenchRuns    = flag.Int("sieve.redisbench.runs", 3, "runs of each row; the median by keys/s is printed")
	redisBenchPrefix  = flag.Int("sieve.redisbench.batch1", 100_000, "keys of each stream run at batch size 1 (a prefix)")
	redisBenchSetbitF = flag.Bool("sieve.redisbench.setbit", false, "also run the SETBIT pipeline (slow)")
	redisBenchSweep   = flag.Bool("sieve.redisbench.sweep", false, "also sweep growth factor and tightening")
	redisBenchProbes  = flag.Int("sieve.redisbench.probes", 100_000, "never-inserted keys to measure the false-positive rate on")
	redisBenchOnly    = flag.String("sieve.redisbench.only", "", "run only the rows whose names contain this (for profiling)")
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
	redisUS, goUS        float64 // CPU microseconds per key (Redis: INFO cpu; Go: this process)
	cmdUSPerNew          float64 // INFO commandstats: Redis command time per new key
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

// redisCommandStat is one line of INFO commandstats.
type redisCommandStat struct {
	name  string
	calls float64
	usec  float64
}

// commandStats reads INFO commandstats, without the benchmark's own
// INFO and CONFIG calls.
func commandStats(ctx context.Context, c *redis.Client) []redisCommandStat {
	var out []redisCommandStat
	for _, line := range strings.Split(c.Info(ctx, "commandstats").Val(), "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || strings.HasPrefix(line, "#") || name == "info" || strings.HasPrefix(name, "config") {
			continue
		}
		st := redisCommandStat{name: name}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				st.usec, _ = strconv.ParseFloat(v, 64)
			}
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				st.calls, _ = strconv.ParseFloat(v, 64)
			}
		}
		out = append(out, st)
	}
	return out
}

// topCommands summarizes commandstats: the three commands that took the
// most Redis time, with microseconds per key of the stream and keys per
// call.
func topCommands(stats []redisCommandStat, keys int) string {
	stats = slices.Clone(stats)
	slices.SortFunc(stats, func(a, b redisCommandStat) int { return cmp.Compare(b.usec, a.usec) })
	var parts []string
	for _, st := range stats[:min(3, len(stats))] {
		parts = append(parts, fmt.Sprintf("%s %.2f (%.0f keys/call)", st.name, st.usec/float64(keys), float64(keys)/max(st.calls, 1)))
	}
	return strings.Join(parts, ", ")
}

// redisBenchOpen builds a dedup on a client; a "×2" row calls it once per
// client.
type redisBenchOpen func(c *redis.Client) redisBenchDedup

// runRedisBench flushes Redis, builds one dedup per client with open, feeds
// them keys in batches (batch b to client b mod clients, all clients at
// once) and measures them.
func runRedisBench(tb testing.TB, srv *redistest.Server, open redisBenchOpen, clients int, keys [][]byte, distinct, batch int, absent [][]byte) redisBenchRow {
	tb.Helper()
	ctx := context.Background()
	c := srv.Client()
	if err := c.FlushAll(ctx).Err(); err != nil {
		tb.Fatal(err)
	}
	ds := make([]redisBenchDedup, clients)
	for i := range ds {
		ds[i] = open(srv.Client())
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		tb.Fatal(err)
	}
	r := redisBenchRow{keys: len(keys), distinct: distinct}
	rcpu0, gcpu0, t0 := redisInfoFloat(ctx, c, "cpu", "used_cpu_user", "used_cpu_sys"), processCPU(), time.Now()
	news := make([]int, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range ds {
		wg.Go(func() {
			for at := i * batch; at < len(keys) && errs[i] == nil; at += clients * batch {
				var n int
				n, errs[i] = ds[i].add(ctx, keys[at:min(at+batch, len(keys))])
				news[i] += n
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatalf("add: %v", err)
	}
	elapsed := time.Since(t0)
	for _, n := range news {
		r.news += n
	}
	r.redisUS = (redisInfoFloat(ctx, c, "cpu", "used_cpu_user", "used_cpu_sys") - rcpu0) * 1e6 / float64(len(keys))
	r.goUS = (processCPU() - gcpu0) * 1e6 / float64(len(keys))
	stats := commandStats(ctx, c)
	var usec float64
	for _, st := range stats {
		usec += st.usec
	}
	r.cmdUSPerNew = usec / float64(max(r.news, 1))
	r.commands = topCommands(stats, len(keys))
	r.keysPerSec = float64(len(keys)) / elapsed.Seconds()
	r.usedBytesPerKey = float64(redisKeysMemory(tb, c)) / float64(distinct)
	payload, err := ds[0].bytes(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	r.payloadBytesPerKey = float64(payload) / float64(distinct)
	fp := 0
	for i := 0; i < len(absent); i += 1000 {
		n, err := ds[0].contains(ctx, absent[i:min(i+1000, len(absent))])
		if err != nil {
			tb.Fatalf("contains: %v", err)
		}
		fp += n
	}
	r.fpp = float64(fp) / float64(len(absent))
	return r
}

// medianRedisBench runs runRedisBench runs times and returns the run with
// the median keys/s.
func medianRedisBench(tb testing.TB, runs int, run func() redisBenchRow) redisBenchRow {
	rows := make([]redisBenchRow, max(runs, 1))
	for i := range rows {
		rows[i] = run()
	}
	slices.SortFunc(rows, func(a, b redisBenchRow) int { return cmp.Compare(a.keysPerSec, b.keysPerSec) })
	return rows[len(rows)/2]
}

// Names of the benchmark's rows.
const (
	benchSadd      = "SADD sha1"
	benchSetbit    = "SETBIT pipeline"
	benchBitfield  = "BITFIELD floor"
	benchToday     = "Sieve layout 1 (Lua)"
	benchSieve     = "Sieve"
	benchRightSize = "Sieve right-sized"
	benchTwo       = " ×2"
)

func TestRedisFilterStreams(t *testing.T) {
	if !*redisBenchFlag {
		t.Skip("benchmark tables; run with -sieve.redisbench")
	}
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	absent := make([][]byte, *redisBenchProbes)
	for i := range absent {
		absent[i] = []byte(fmt.Sprintf("https://absent%d.example/never/%d", i%977, i))
	}
	var batches []int
	for _, b := range strings.Split(*redisBenchBatches, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(b))
		if err != nil || n < 1 {
			t.Fatalf("bad -sieve.redisbench.batches %q", *redisBenchBatches)
		}
		batches = append(batches, n)
	}
	sieveAt := func(layout string, capacity int64, g Growth) redisBenchOpen {
		return func(c *redis.Client) redisBenchDedup {
			f, err := openRedisBloomLayout(ctx, c, "bench", RedisBloomOptions{
				InitialCapacity: capacity, TargetFPP: redisBenchFPP, Factor: g.Factor, Tightening: g.Tightening,
			}, layout)
			if err != nil {
				t.Fatal(err)
			}
			return redisBenchSieve{f}
		}
	}
	sieve := func(g Growth) redisBenchOpen { return sieveAt(redisBloomLayout, redisBenchCapacity, g) }
	var out strings.Builder
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "stream\tbatch\tfilter\tkeys\tkeys/s\tRedis B/key\tpayload B/key\tFPP\tredis CPU µs/key\tcmd µs/new key\tgo µs/key\tvs SADD\tvs BITFIELD\tvs layout 1\tvs 1 client\ttop Redis commands (µs/key)\t\n")
	// all[stream][row] for the goals.
	all := map[string]map[string]redisBenchRow{}
	for si, s := range redisBenchStreams(*redisBenchN) {
		for _, batch := range batches {
			keys, distinct := s.keys, s.distinct
			if batch == 1 && *redisBenchPrefix < len(keys) {
				keys = keys[:*redisBenchPrefix]
				seen := make(map[string]bool, len(keys))
				for _, k := range keys {
					seen[string(k)] = true
				}
				distinct = len(seen)
			}
			bitmap := func(c *redis.Client) *redisBenchSetbit {
				d, err := newRedisBenchSetbit(ctx, c, distinct)
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			type kind struct {
				name    string
				open    redisBenchOpen
				clients int
			}
			kinds := []kind{{benchSadd, func(c *redis.Client) redisBenchDedup { return redisBenchSadd{c} }, 1}}
			if *redisBenchSetbitF {
				kinds = append(kinds, kind{benchSetbit, func(c *redis.Client) redisBenchDedup { return bitmap(c) }, 1})
			}
			bf := func(c *redis.Client) redisBenchDedup { return redisBenchBitfield{bitmap(c)} }
			today := sieveAt(redisBloomLayoutScript, redisBenchCapacity, Growth{})
			kinds = append(kinds,
				kind{benchBitfield, bf, 1}, kind{benchBitfield + benchTwo, bf, 2},
				kind{benchToday, today, 1}, kind{benchToday + benchTwo, today, 2},
				kind{benchSieve, sieve(Growth{}), 1}, kind{benchSieve + benchTwo, sieve(Growth{}), 2})
			if si == 0 {
				kinds = append(kinds, kind{benchRightSize, sieveAt(redisBloomLayout, int64(distinct), Growth{}), 1})
			}
			rows := map[string]redisBenchRow{}
			for _, k := range kinds {
				if !strings.Contains(k.name, *redisBenchOnly) {
					continue
				}
				r := medianRedisBench(t, *redisBenchRuns, func() redisBenchRow {
					return runRedisBench(t, srv, k.open, k.clients, keys, distinct, batch, absent)
				})
				rows[k.name] = r
				ratio := func(base string) string {
					if b, ok := rows[base]; ok && base != k.name {
						return fmt.Sprintf("%.2fx", r.keysPerSec/b.keysPerSec)
					}
					return ""
				}
				one := ""
				if base, ok := strings.CutSuffix(k.name, benchTwo); ok {
					one = ratio(base)
				}
				fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%.0f\t%.2f\t%.2f\t%.5f\t%.2f\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%s\t\n",
					s.name, batch, k.name, len(keys), r.keysPerSec, r.usedBytesPerKey, r.payloadBytesPerKey, r.fpp,
					r.redisUS, r.cmdUSPerNew, r.goUS, ratio(benchSadd), ratio(benchBitfield), ratio(benchToday), one, r.commands)
			}
			if batch == 1000 {
				all[s.name] = rows
			}
		}
	}
	_ = w.Flush()
	t.Logf("streams of %d URL-like keys (batch 1: the first %d); Sieve: initial capacity %d, target FPP %v, defaults otherwise "+
		"(right-sized: initial capacity = the distinct keys); BITFIELD/SETBIT: one bitmap sized for the stream's distinct keys at %v; "+
		"FPP over %d never-inserted keys; Redis B/key = MEMORY USAGE of all keys / distinct keys; payload = bits or set members; "+
		"cmd µs/new key = Σ usec of INFO commandstats / new keys; median of %d runs\n%s",
		*redisBenchN, *redisBenchPrefix, redisBenchCapacity, redisBenchFPP, redisBenchFPP, len(absent), *redisBenchRuns, out.String())
	logRedisBenchGoals(t, all)

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
		open := func(c *redis.Client) redisBenchDedup {
			d := sieve(g)(c)
			f = d.(redisBenchSieve).f
			return d
		}
		r := runRedisBench(t, srv, open, 1, s.keys, s.distinct, 1000, absent)
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

// logRedisBenchGoals prints issue 13's goals, each measured in this run
// (batch 1000).
func logRedisBenchGoals(t *testing.T, all map[string]map[string]redisBenchRow) {
	streams := redisBenchStreams(0)
	a, b := all[streams[0].name], all[streams[1].name]
	if a == nil || b == nil {
		t.Log("goals: need batch 1000 (-sieve.redisbench.batches)")
		return
	}
	x := func(rows map[string]redisBenchRow, num, den string) float64 {
		return rows[num].keysPerSec / rows[den].keysPerSec
	}
	var out strings.Builder
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "goal\tmeasured\ttarget\t\n")
	fmt.Fprintf(w, "all new, 1 client: Sieve vs layout 1 (Lua)\t%.2fx (%.0f vs %.0f keys/s)\t≥ 2.5x\t\n", x(a, benchSieve, benchToday), a[benchSieve].keysPerSec, a[benchToday].keysPerSec)
	fmt.Fprintf(w, "all new, 1 client: Sieve vs BITFIELD floor\t%.2fx (%.0f keys/s)\t≥ 1.2x\t\n", x(a, benchSieve, benchBitfield), a[benchBitfield].keysPerSec)
	fmt.Fprintf(w, "Redis µs per new key (commandstats): Sieve\t%.2f (layout 1 %.2f, BITFIELD %.2f, SADD %.2f)\t≤ 3.0\t\n",
		a[benchSieve].cmdUSPerNew, a[benchToday].cmdUSPerNew, a[benchBitfield].cmdUSPerNew, a[benchSadd].cmdUSPerNew)
	fmt.Fprintf(w, "all new, 2 clients vs 1: Sieve\t%.2fx (layout 1 %.2fx, BITFIELD %.2fx)\t≥ 1.7x\t\n",
		x(a, benchSieve+benchTwo, benchSieve), x(a, benchToday+benchTwo, benchToday), x(a, benchBitfield+benchTwo, benchBitfield))
	fmt.Fprintf(w, "90%% repeats, 1 client: Sieve vs SADD\t%.2fx (layout 1 %.2fx)\t≥ 1.0x\t\n", x(b, benchSieve, benchSadd), x(b, benchToday, benchSadd))
	fmt.Fprintf(w, "Redis B/key after 10x growth (FPP)\t%.2f (%.4f; layout 1 %.2f)\t≤ 2.96\t\n", a[benchSieve].usedBytesPerKey, a[benchSieve].fpp, a[benchToday].usedBytesPerKey)
	fmt.Fprintf(w, "Redis B/key right-sized (FPP)\t%.2f (%.4f)\t≤ 1.84\t\n", a[benchRightSize].usedBytesPerKey, a[benchRightSize].fpp)
	_ = w.Flush()
	t.Logf("issue 13 goals, batch 1000, this run:\n%s", out.String())
}
