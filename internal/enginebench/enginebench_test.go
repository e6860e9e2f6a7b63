package enginebench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/sievecrawl/sieve/internal/heaptest"
	"github.com/sievecrawl/sieve/redistest"
)

// The engine benchmark is a test that prints a table; it runs only when
// asked (see the package documentation).
var (
	benchFlag  = flag.Bool("sieve.enginebench", false, "run the storage engine benchmark table (TestEngineChoice)")
	benchSizes = flag.String("sieve.enginebench.sizes", "1000000", "comma-separated numbers of records to write per engine")
)

const (
	batchSize = 1000
	numReads  = 100_000
	// redisMaxN is the largest size Redis runs at: it holds everything in
	// RAM, and its figures per record do not change with N.
	redisMaxN = 1_000_000
	// redisShards is how many hashes the Redis engine spreads records over.
	redisShards = 64
	// recordsPerFile is how many records share one WARC file name.
	recordsPerFile = 10_000
)

// kindCapture is the 2-byte kind prefix of the benchmark's records.
var kindCapture = [2]byte{'c', 'p'}

// splitmix64 is SplitMix64's finaliser: a bijection on uint64 whose outputs
// look random, so records are deterministic in their index.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// crawlHash is the 8-byte hash of the one crawl all records belong to.
var crawlHash = splitmix64(0xc7a1)

// recordKey appends the key of record i: kind, crawl hash, URL hash.
func recordKey(dst []byte, i int) []byte {
	dst = append(dst, kindCapture[:]...)
	dst = binary.BigEndian.AppendUint64(dst, crawlHash)
	dst = binary.BigEndian.AppendUint64(dst, splitmix64(uint64(2*i)))
	return binary.BigEndian.AppendUint64(dst, splitmix64(uint64(2*i+1)))
}

// recordValue appends the value of record i: a compact binary capture.
func recordValue(dst []byte, i int) []byte {
	const (
		version  = 1
		crawlDay = 1_773_532_800 // 2026-03-15T00:00:00Z
	)
	h := splitmix64(uint64(i) ^ 0x5eed)
	file := i / recordsPerFile
	dst = append(dst, version)
	dst = binary.AppendUvarint(dst, uint64(crawlDay+i/50))           // fetched, unix seconds
	dst = binary.AppendUvarint(dst, uint64(crawlDay-int(h%(1<<26)))) // Last-Modified
	dst = binary.AppendUvarint(dst, []uint64{200, 200, 200, 200, 200, 200, 301, 304, 404, 200}[h%10])
	dst = append(dst, byte(h>>40)%12) // content type code
	for j := range uint64(3) {        // 20-byte payload digest (SHA-1 sized)
		d := binary.BigEndian.AppendUint64(nil, splitmix64(h+j))
		dst = append(dst, d[:min(8, 20-8*int(j))]...)
	}
	etag := fmt.Appendf(nil, "%q", strconv.FormatUint(h>>32, 16))
	dst = binary.AppendUvarint(dst, uint64(len(etag)))
	dst = append(dst, etag...)
	name := fmt.Appendf(nil, "sieve-20260315120000-%05d-worker-%02d.example.org.warc.gz", file, file%16)
	dst = binary.AppendUvarint(dst, uint64(len(name)))
	dst = append(dst, name...)
	length := 2_000 + h%60_000
	dst = binary.AppendUvarint(dst, uint64(i%recordsPerFile)*32_000+h%1000) // offset in the file
	dst = binary.AppendUvarint(dst, length)                                 // record length, compressed
	dst = binary.AppendUvarint(dst, 3*length)                               // payload length
	dst = binary.AppendUvarint(dst, uint64(h>>16)%4)                        // revisit count
	return dst
}

// store is what the benchmark drives: one engine holding records.
type store interface {
	// Write stores a batch of records in one transaction or batch.
	Write(keys, values [][]byte) error
	// Flush makes everything written reach the engine's files.
	Flush() error
	// Compact rewrites the whole key range into its final shape.
	Compact() error
	// Equal reads key and reports whether its value is want.
	Equal(key, want []byte) (bool, error)
	Close() error
}

// engine is one kind of store the benchmark builds.
type engine struct {
	name string
	// open opens an empty store in dir.
	open func(tb testing.TB, dir string) store
	// memory returns the memory the process holding the records uses, and
	// the mapped file pages (-1 if not applicable).
	memory func(tb testing.TB) (anon, file int64)
	// onDisk is false for a store that keeps nothing in dir.
	onDisk bool
	// maxN is the largest size the engine runs at (0 = any).
	maxN int
}

type pebbleStore struct{ db *pebble.DB }

func openPebble(tb testing.TB, dir string) store {
	tb.Helper()
	cache := pebble.NewCache(16 << 20)
	defer cache.Unref() // the DB holds its own reference
	db, err := pebble.Open(dir, &pebble.Options{Cache: cache})
	if err != nil {
		tb.Fatalf("pebble.Open: %v", err)
	}
	return &pebbleStore{db: db}
}

func (s *pebbleStore) Write(keys, values [][]byte) error {
	b := s.db.NewBatch()
	defer b.Close()
	for i, k := range keys {
		if err := b.Set(k, values[i], nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.NoSync)
}

// Flush writes the memtable to an sstable and waits for the compactions it
// triggers to settle.
func (s *pebbleStore) Flush() error {
	if err := s.db.Flush(); err != nil {
		return err
	}
	return s.settle()
}

// Compact compacts the whole key range into the last level and waits for
// the tables it replaced to be deleted.
func (s *pebbleStore) Compact() error {
	start := []byte{0}
	end := bytes.Repeat([]byte{0xff}, 27) // above every 26-byte key
	if err := s.db.Compact(context.Background(), start, end, true); err != nil {
		return err
	}
	return s.settle()
}

// settleTimeout bounds how long Pebble's background work may take to settle.
const settleTimeout = 5 * time.Minute

// settle waits until no flush or compaction has run for quietPeriod and
// every obsolete table has been deleted, polling Pebble's metrics. (Pebble's
// estimated compaction debt need not reach zero: it schedules a compaction
// only for a level whose score is 1 or more.)
func (s *pebbleStore) settle() error {
	const quietPeriod = time.Second
	deadline := time.Now().Add(settleTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var quietSince time.Time
	for {
		m := s.db.Metrics()
		busy := m.Flush.NumInProgress > 0 || m.Compact.NumInProgress > 0 ||
			m.Table.ObsoleteCount > 0 || m.Table.ZombieCount > 0
		switch {
		case busy:
			quietSince = time.Time{}
		case quietSince.IsZero():
			quietSince = time.Now()
		case time.Since(quietSince) >= quietPeriod:
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pebble not settled after %v: %d flushes and %d compactions running, %d obsolete and %d zombie tables",
				settleTimeout, m.Flush.NumInProgress, m.Compact.NumInProgress, m.Table.ObsoleteCount, m.Table.ZombieCount)
		}
		<-tick.C
	}
}

func (s *pebbleStore) Equal(key, want []byte) (bool, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	eq := bytes.Equal(v, want)
	return eq, closer.Close()
}

func (s *pebbleStore) Close() error { return s.db.Close() }

type boltStore struct{ db *bolt.DB }

var boltBucket = []byte("records")

func openBolt(tb testing.TB, dir string) store {
	tb.Helper()
	db, err := bolt.Open(filepath.Join(dir, "records.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		tb.Fatalf("bolt.Open: %v", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket(boltBucket)
		return err
	})
	if err != nil {
		_ = db.Close()
		tb.Fatalf("bolt CreateBucket: %v", err)
	}
	return &boltStore{db: db}
}

func (s *boltStore) Write(keys, values [][]byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		for i, k := range keys {
			if err := b.Put(k, values[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// Flush and Compact do nothing: with NoSync every Update has written its
// pages to the file (not fsynced), and a B+tree has nothing to compact.
func (s *boltStore) Flush() error   { return nil }
func (s *boltStore) Compact() error { return nil }

func (s *boltStore) Equal(key, want []byte) (bool, error) {
	var eq bool
	err := s.db.View(func(tx *bolt.Tx) error {
		eq = bytes.Equal(tx.Bucket(boltBucket).Get(key), want)
		return nil
	})
	return eq, err
}

func (s *boltStore) Close() error { return s.db.Close() }

// redisStore keeps records as fields of redisShards hashes, the field being
// the record key, the shard chosen by the first byte of its URL hash.
type redisStore struct {
	client *redis.Client
	ctx    context.Context
}

func redisHash(key []byte) string {
	return "enginebench:" + strconv.Itoa(int(key[10])%redisShards)
}

func (s *redisStore) Write(keys, values [][]byte) error {
	var fields [redisShards][]any
	for i, k := range keys {
		sh := int(k[10]) % redisShards
		fields[sh] = append(fields[sh], k, values[i])
	}
	_, err := s.client.Pipelined(s.ctx, func(p redis.Pipeliner) error {
		for sh, f := range fields {
			if len(f) > 0 {
				p.HSet(s.ctx, "enginebench:"+strconv.Itoa(sh), f...)
			}
		}
		return nil
	})
	return err
}

func (s *redisStore) Flush() error   { return nil }
func (s *redisStore) Compact() error { return nil }

func (s *redisStore) Equal(key, want []byte) (bool, error) {
	v, err := s.client.HGet(s.ctx, redisHash(key), string(key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return bytes.Equal(v, want), nil
}

func (s *redisStore) Close() error {
	return s.client.FlushAll(s.ctx).Err()
}

// redisEngine is the Redis engine on srv; the records of one run are
// removed when its store is closed, so runs do not share memory.
func redisEngine(srv *redistest.Server) engine {
	client := srv.Client()
	return engine{
		name: "redis hash",
		open: func(tb testing.TB, _ string) store {
			return &redisStore{client: client, ctx: context.Background()}
		},
		memory: func(tb testing.TB) (int64, int64) {
			tb.Helper()
			return redisUsedMemory(tb, client), -1
		},
		maxN: redisMaxN,
	}
}

// redisUsedMemory returns INFO memory's used_memory.
func redisUsedMemory(tb testing.TB, c *redis.Client) int64 {
	tb.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		tb.Fatalf("INFO memory: %v", err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				tb.Fatalf("INFO memory: used_memory %q: %v", v, err)
			}
			return n
		}
	}
	tb.Fatal("INFO memory: no used_memory")
	return 0
}

// processMemory returns RssAnon and RssFile of this process, in bytes.
func processMemory(tb testing.TB) (anon, file int64) {
	tb.Helper()
	anon, file, err := heaptest.RSS()
	if err != nil {
		tb.Fatal(err)
	}
	return anon, file
}

// dirSize returns the sum of the sizes of the files under dir, the bytes
// allocated to them on disk (less than the size for a sparse file), and a
// breakdown of the size by file kind ("sst: 123, log: 45").
func dirSize(tb testing.TB, dir string) (size, alloc int64, kinds string) {
	tb.Helper()
	byKind := map[string]int64{}
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, os.ErrNotExist) { // removed by a compaction meanwhile
			return nil
		}
		if err != nil {
			return err
		}
		size += info.Size()
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			alloc += st.Blocks * 512
		}
		kind := strings.TrimPrefix(filepath.Ext(d.Name()), ".")
		switch {
		case strings.HasPrefix(d.Name(), "marker."): // Pebble's empty marker files
			kind = "marker"
		case kind == "":
			kind, _, _ = strings.Cut(d.Name(), "-") // MANIFEST-000001, OPTIONS-000003
		}
		byKind[kind] += info.Size()
		return nil
	})
	if err != nil {
		tb.Fatalf("size of %s: %v", dir, err)
	}
	var parts []string
	for k, v := range byKind {
		parts = append(parts, fmt.Sprintf("%s: %d", k, v))
	}
	slices.Sort(parts)
	return size, alloc, strings.Join(parts, ", ")
}

// result is one row of the table; sizes are bytes per record, -1 when not
// applicable.
type result struct {
	insertsPerSec float64
	diskFlushed   float64
	diskCompacted float64
	diskAlloc     float64 // after compaction
	settle        time.Duration
	ramAnon       float64
	rssFile       float64
	readsPerSec   float64
}

// run writes n records into a new store of e and measures it.
func run(t *testing.T, e engine, n int) result {
	t.Helper()
	dir := t.TempDir()
	anon0, _ := e.memory(t)
	s := e.open(t, dir)
	closed := false
	defer func() {
		if !closed {
			_ = s.Close()
		}
	}()

	keys := make([][]byte, batchSize)
	values := make([][]byte, batchSize)
	for j := range keys {
		keys[j] = make([]byte, 0, 32)
		values[j] = make([]byte, 0, 160)
	}
	start := time.Now()
	for i := 0; i < n; i += batchSize {
		m := min(batchSize, n-i)
		for j := range m {
			keys[j] = recordKey(keys[j][:0], i+j)
			values[j] = recordValue(values[j][:0], i+j)
		}
		if err := s.Write(keys[:m], values[:m]); err != nil {
			t.Fatalf("%s: write batch at %d: %v", e.name, i, err)
		}
	}
	elapsed := time.Since(start)
	var r result
	r.insertsPerSec = float64(n) / elapsed.Seconds()
	anon1, file1 := e.memory(t)
	r.ramAnon = float64(anon1-anon0) / float64(n)
	r.rssFile = -1
	if file1 >= 0 {
		r.rssFile = float64(file1) / float64(n)
	}

	start = time.Now()
	if err := s.Flush(); err != nil {
		t.Fatalf("%s: flush: %v", e.name, err)
	}
	r.diskFlushed, r.diskCompacted, r.diskAlloc = -1, -1, -1
	if e.onDisk {
		size, _, kinds := dirSize(t, dir)
		r.diskFlushed = float64(size) / float64(n)
		t.Logf("%s at %d: files after flush: %s", e.name, n, kinds)
	}
	if err := s.Compact(); err != nil {
		t.Fatalf("%s: compact: %v", e.name, err)
	}
	r.settle = time.Since(start)
	if e.onDisk {
		size, alloc, kinds := dirSize(t, dir)
		r.diskCompacted = float64(size) / float64(n)
		r.diskAlloc = float64(alloc) / float64(n)
		t.Logf("%s at %d: files after compaction: %s", e.name, n, kinds)
	}

	rng := rand.New(rand.NewPCG(uint64(n), 7))
	readKeys := make([][]byte, numReads)
	want := make([][]byte, numReads)
	for j := range readKeys {
		i := rng.IntN(n)
		readKeys[j] = recordKey(nil, i)
		want[j] = recordValue(nil, i)
	}
	start = time.Now()
	for j, k := range readKeys {
		eq, err := s.Equal(k, want[j])
		if err != nil {
			t.Fatalf("%s: read: %v", e.name, err)
		}
		if !eq {
			t.Fatalf("%s: read %x: value not the one written", e.name, k)
		}
	}
	r.readsPerSec = numReads / time.Since(start).Seconds()

	closed = true
	if err := s.Close(); err != nil {
		t.Fatalf("%s: close: %v", e.name, err)
	}
	return r
}

func parseSizes(t *testing.T, list string) []int {
	t.Helper()
	var sizes []int
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("-sieve.enginebench.sizes: %q is not a positive number", f)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// TestEngineChoice prints, for each size and engine, the insert rate, disk
// and RAM bytes per record and the point-read rate, with the bbolt baseline
// measured in the same run and each engine's ratio to it (the package
// documentation says how each figure is measured).
func TestEngineChoice(t *testing.T) {
	if !*benchFlag {
		t.Skip("benchmark table; run with -sieve.enginebench")
	}
	sizes := parseSizes(t, *benchSizes)
	const baseline = "bbolt"
	engines := []engine{
		{name: baseline, open: openBolt, memory: processMemory, onDisk: true},
		{name: "pebble", open: openPebble, memory: processMemory, onDisk: true},
	}
	needRedis := false
	for _, n := range sizes {
		needRedis = needRedis || n <= redisMaxN
	}
	if needRedis {
		engines = append(engines, redisEngine(redistest.Start(t, redistest.Options{})))
	}

	var sample []byte
	for i := range 1000 {
		sample = append(sample, recordValue(nil, i)...)
	}
	var out strings.Builder
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "N\tengine\tinserts/s\tdisk B/rec flushed\tdisk B/rec compacted\tallocated B/rec\tsettle s\tRAM B/rec\tRssFile B/rec\treads/s\t\n")
	for _, n := range sizes {
		var base result
		for _, e := range engines {
			if e.maxN > 0 && n > e.maxN {
				continue
			}
			r := run(t, e, n)
			t.Logf("%s at %d: %+v", e.name, n, r)
			fmt.Fprintf(w, "%d\t%s\t%.0f\t%s\t%s\t%s\t%.1f\t%s\t%s\t%.0f\t\n", n, e.name, r.insertsPerSec,
				opt(r.diskFlushed), opt(r.diskCompacted), opt(r.diskAlloc), r.settle.Seconds(),
				opt(r.ramAnon), opt(r.rssFile), r.readsPerSec)
			if e.name == baseline {
				base = r
				continue
			}
			fmt.Fprintf(w, "\t%s/%s\t%s\t%s\t%s\t%s\t\t%s\t%s\t%s\t\n", e.name, baseline,
				ratio(r.insertsPerSec, base.insertsPerSec), ratio(r.diskFlushed, base.diskFlushed),
				ratio(r.diskCompacted, base.diskCompacted), ratio(r.diskAlloc, base.diskAlloc),
				ratio(r.ramAnon, base.ramAnon),
				ratio(r.rssFile, base.rssFile), ratio(r.readsPerSec, base.readsPerSec))
		}
	}
	_ = w.Flush()
	t.Logf("records: %d-byte keys, %.1f-byte values on average; batches of %d; %d point reads\n%s",
		len(recordKey(nil, 0)), float64(len(sample))/1000, batchSize, numReads, out.String())
}

// opt formats a figure, or "-" when it does not apply.
func opt(v float64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}

// ratio formats v/base, or "-" when either does not apply.
func ratio(v, base float64) string {
	if v < 0 || base <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v/base)
}
