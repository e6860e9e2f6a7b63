package urlstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configure a Store. The zero value means every default.
type Options struct {
	// CacheBytes is Pebble's block cache: the most RAM reads keep, whatever
	// the number of keys (default 16 MiB).
	CacheBytes int64
	// Logf reports a catch-up's progress and the log's bad entries (nil:
	// nothing is reported).
	Logf func(format string, args ...any)
	// OnApply, if set, is called with the changes of each entry once they
	// are applied (this store's writes and the follower's alike), in the
	// partition's log order: a user keeps a summary in RAM (a queue's
	// counts, say) the same in every process. It runs with the partition
	// held, so it must be quick and must not write to the store; the
	// changes' bytes are valid only during the call.
	OnApply func(part int, changes []Change)
	// Snapshots, if set, keeps the store's snapshots (see Compact): Open
	// restores the current one into a directory that is empty, behind
	// what the log trims, or left by an interrupted restore.
	Snapshots Snapshots
	// CompactEvery is how old the current snapshot must be before Compact
	// takes the next and trims the log (default DefaultCompactEvery): an
	// entry goes a full period after a snapshot holds it, so a store may
	// lag the log by up to a period without restoring; one further behind
	// meets a hole and stops (ErrStale).
	CompactEvery time.Duration
	// CompactRatio, if positive, holds a snapshot back until the entries
	// applied since the current one add up to CompactRatio times its size:
	// for a store whose index is large beside what a period writes (the
	// captures': a snapshot each period would cost more than the log it
	// saves). 0: a snapshot each period in which something was written.
	CompactRatio float64
	// Now is the clock of compaction (nil: time.Now).
	Now func() time.Time
	// Formats are the versions of what the store's user writes in its
	// values, by name (a queue's state, a capture…); "log" is the log's
	// own (LogFormat), added here. With Snapshots, they are the
	// deployment's formats recorded in the manifest: Open records a
	// newer one, and refuses, naming both versions, to open a store
	// whose build is older than one recorded (ErrNewerFormat).
	Formats map[string]int
	// CheckValue, if set, is called with each value an entry sets before
	// the entry is applied; an error (wrapping ErrNewerFormat: a value
	// of a newer version than its user reads) stops the store at that
	// entry, unapplied, as an entry of a newer log format does.
	CheckValue func(key, value []byte) error
}

// Change is one applied operation, as Options.OnApply sees it: Key set to
// Value, or with Deleted removed (with Prefix too: every key starting with
// Key removed). A SetIfAbsent that found its key taken
// changed nothing and is not reported.
type Change struct {
	Key, Value []byte
	Deleted    bool
	Prefix     bool
}

// Store is a local index of a Log: the state its entries leave, in a Pebble
// database in one directory. Writes go to the log first, then here; a
// follower applies every other writer's entries in log order. It is safe
// for concurrent use.
type Store struct {
	db      *pebble.DB
	dir     string
	log     Log
	logf    func(string, ...any)
	onApply func(int, []Change)
	// checkValue is Options.CheckValue; formats Options.Formats with the
	// log's own.
	checkValue func(key, value []byte) error
	formats    map[string]int

	snaps        Snapshots
	compactEvery time.Duration
	now          func() time.Time
	compactRatio float64
	compactMu    sync.Mutex // one Compact at a time
	trimmedFor   string     // the snapshot whose announced trim this store made
	// appliedBytes adds up the entries applied since the store opened;
	// sinceFor is the snapshot first seen at appliedBytes = sinceBytes.
	appliedBytes atomic.Uint64
	sinceFor     string
	sinceBytes   uint64
	// failed is the follower's final error (ErrStale), set before done
	// closes.
	failed atomic.Pointer[error]

	mu    sync.Mutex
	parts map[int]*part
	// applied is closed and replaced whenever an entry is applied.
	applied chan struct{}

	// followed is the last sequence the follower read (all partitions);
	// savedFollowed the last it wrote to the database (follower only).
	followed      atomic.Uint64
	savedFollowed uint64
	ready         chan struct{}
	readyOne      sync.Once
	// stats
	entries, bad, read atomic.Uint64
	// own is the last sequence this store appended.
	own atomic.Uint64

	lock   *pebble.Lock // the directory's, released after the database closes
	cancel context.CancelFunc
	done   chan struct{}
	closed sync.Once
}

// part is one partition's place in the log.
type part struct {
	mu sync.Mutex // held while appending or applying
	// last is the sequence of its last entry applied here: written with
	// mu held, read without by the follower to skip this store's own
	// entries without waiting behind a writer's append.
	last atomic.Uint64
}

// Keys inside the database: the store's own under 0x00, users' under 0x01,
// so no user key can overwrite a sequence.
var (
	appliedPrefix = []byte{0, 'a'} // + partition (4 bytes BE) → sequence (8 bytes BE)
	followedKey   = []byte{0, 'f'} // → sequence (8 bytes BE)
)

const userPrefix = 1

func userKey(k []byte) []byte {
	out := make([]byte, 1+len(k))
	out[0] = userPrefix
	copy(out[1:], k)
	return out
}

func appliedKey(p int) []byte {
	return binary.BigEndian.AppendUint32(append([]byte(nil), appliedPrefix...), uint32(p))
}

// quiet is Pebble's logger: errors only, through Logf.
type quiet struct{ logf func(string, ...any) }

func (quiet) Infof(string, ...any) {}
func (q quiet) Errorf(format string, args ...any) {
	if q.logf != nil {
		q.logf("urlstore: pebble: "+format, args...)
	}
}
func (q quiet) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// ErrLocked is the error of Open on a directory another store holds, in
// this process or another.
var ErrLocked = errors.New("urlstore: directory held by another store")

// isLockHeld reports Pebble's refusal of a held directory lock: the
// fcntl lock another process holds (EAGAIN or EACCES), or its own table of
// the locks this process holds, which has no sentinel.
func isLockHeld(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) ||
		strings.Contains(err.Error(), "lock held by current process")
}

// Open opens (creating if needed) the store in dir over log and starts its
// follower from where it stopped: a restart reads only the entries written
// since, never the whole log. Ready says when it has caught up.
func Open(ctx context.Context, dir string, log Log, opts Options) (*Store, error) {
	cacheBytes := opts.CacheBytes
	if cacheBytes <= 0 {
		cacheBytes = 16 << 20
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("urlstore: %w", err)
	}
	lock, err := pebble.LockDirectory(dir, vfs.Default)
	if err != nil {
		if isLockHeld(err) {
			err = ErrLocked
		}
		return nil, fmt.Errorf("urlstore: open %s: %w", dir, err)
	}
	s := &Store{dir: dir, lock: lock, log: log, logf: opts.Logf, onApply: opts.OnApply, parts: map[int]*part{},
		snaps: opts.Snapshots, compactEvery: opts.CompactEvery, compactRatio: opts.CompactRatio, now: opts.Now,
		checkValue: opts.CheckValue, formats: map[string]int{logFormatName: LogFormat},
		applied: make(chan struct{}), ready: make(chan struct{}), done: make(chan struct{})}
	for name, v := range opts.Formats {
		if name != logFormatName {
			s.formats[name] = v
		}
	}
	if s.compactEvery <= 0 {
		s.compactEvery = DefaultCompactEvery
	}
	if s.now == nil {
		s.now = time.Now
	}
	fail := func(err error) (*Store, error) {
		if s.db != nil {
			s.db.Close()
		}
		lock.Close()
		return nil, err
	}
	m, err := recordFormats(ctx, opts.Snapshots, s.formats)
	if err != nil {
		return fail(err)
	}
	if m != nil && (restoring(dir) || !hasIndex(dir)) {
		if _, err := restoreCurrent(ctx, dir, opts.Snapshots, m, opts.Logf); err != nil {
			return fail(err)
		}
	}
	for {
		if s.db, err = openPebble(dir, lock, cacheBytes, opts.Logf); err != nil {
			return fail(err)
		}
		if err := s.loadSequences(); err != nil {
			return fail(err)
		}
		if m == nil || !behind(s.appliedNow(), m.Trimmed) {
			break
		}
		// Stopped for longer than a compaction period: the log no longer
		// holds what this index misses.
		if opts.Logf != nil {
			opts.Logf("urlstore: %s is behind what the log trims", dir)
		}
		s.db.Close()
		s.db, s.parts = nil, map[int]*part{}
		s.followed.Store(0)
		s.savedFollowed = 0
		if _, err := restoreCurrent(ctx, dir, opts.Snapshots, m, opts.Logf); err != nil {
			return fail(err)
		}
		m = nil // restored: what it holds is what the manifest says
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go s.follow(fctx)
	return s, nil
}

// openPebble opens the database in dir, whose lock the caller holds, with
// the store's settings.
func openPebble(dir string, lock *pebble.Lock, cacheBytes int64, logf func(string, ...any)) (*pebble.DB, error) {
	cache := pebble.NewCache(cacheBytes)
	defer cache.Unref()
	po := &pebble.Options{
		Cache:              cache,
		Lock:               lock,
		Logger:             quiet{logf},
		FormatMajorVersion: pebble.FormatNewest,
	}
	// A Bloom filter per table (10 bits per key, 1 % false positives;
	// the lower levels inherit it): a Get of a key a table lacks, as most
	// of a put's checks for a URL already stored are, skips the table
	// without reading its blocks.
	po.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	// Writes never wait for compactions: Pebble's default stops them at
	// 12 files in L0, which a burst of puts on a busy machine reached
	// within seconds, holding every partition's writer (and the puts
	// behind it) until a compaction caught up. More files in L0 only make
	// reads slower for a while; CockroachDB stops at 1,000 too. Memtables
	// of 16 MiB (2 at most: fixed RAM) flush fewer, larger files.
	po.L0StopWritesThreshold = 1000
	po.MemTableSize = 16 << 20
	po.CompactionConcurrencyRange = func() (int, int) { return 1, 2 }
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("urlstore: open %s: %w", dir, err)
	}
	return db, nil
}

func (s *Store) loadSequences() error {
	v, ok, err := s.get(followedKey)
	if err != nil {
		return err
	}
	if ok && len(v) == 8 {
		s.followed.Store(binary.BigEndian.Uint64(v))
		s.savedFollowed = s.followed.Load()
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: appliedPrefix, UpperBound: prefixEnd(appliedPrefix)})
	if err != nil {
		return fmt.Errorf("urlstore: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k, v := it.Key(), it.Value()
		if len(k) != len(appliedPrefix)+4 || len(v) != 8 {
			continue
		}
		s.part(int(binary.BigEndian.Uint32(k[len(appliedPrefix):]))).last.Store(binary.BigEndian.Uint64(v))
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("urlstore: %w", err)
	}
	return nil
}

func (s *Store) part(p int) *part {
	s.mu.Lock()
	defer s.mu.Unlock()
	pt := s.parts[p]
	if pt == nil {
		pt = &part{}
		s.parts[p] = pt
	}
	return pt
}

// Write appends b to partition p of the log and applies it here, returning
// once the log has stored it (durably: what the log acknowledges). When
// another writer appended to p since this store last applied it, Write
// waits for the follower to apply that first, then appends again: every
// store applies p's entries in one order. An error other than the
// context's or a bad batch leaves it unknown whether b was stored; the
// follower applies it here if it was.
func (s *Store) Write(ctx context.Context, p int, b *Batch) error {
	return s.Update(ctx, p, func(_ Reader, out *Batch) error {
		*out = *b
		return nil
	})
}

// Reader reads a store's keys. Update's reader sees a partition as the
// entries applied so far leave it.
type Reader interface {
	Get(key []byte) ([]byte, bool, error)
	Scan(prefix []byte, fn func(key, value []byte) bool) error
}

// Update is a read-modify-write of partition p: fn reads p's keys as this
// store holds them and fills a batch, which is appended only if no other
// writer appended to p meanwhile (the compare-and-append on p's last
// sequence). Otherwise Update waits for the follower to apply the other
// entries and runs fn again on the new state, so a decision made from
// what fn read (handing a URL out, taking a queue's turn) holds in every
// store. fn must read only keys of p, the only ones whose state is
// fixed while it runs, and may run more than once; an empty batch
// appends nothing. Errors are as Write's; fn's are returned as they are.
func (s *Store) Update(ctx context.Context, p int, fn func(r Reader, b *Batch) error) error {
	if p < 0 {
		return fmt.Errorf("urlstore: partition %d", p)
	}
	pt := s.part(p)
	pt.mu.Lock()
	defer pt.mu.Unlock()
	for {
		var b Batch
		if err := s.Read(func(r Reader) error { return fn(r, &b) }); err != nil {
			return err
		}
		if b.Len() == 0 {
			return nil
		}
		if err := b.check(); err != nil {
			return err
		}
		entry := logged(b.data)
		seq, err := s.log.Append(ctx, p, pt.last.Load(), entry)
		if err == nil {
			s.noteOwn(seq)
			return s.apply(pt, p, seq, b.data, len(entry), false)
		}
		if !errors.Is(err, ErrConflict) {
			return fmt.Errorf("urlstore: append to partition %d: %w", p, err)
		}
		last, err := s.log.Last(ctx, p)
		if err != nil {
			return fmt.Errorf("urlstore: partition %d: %w", p, err)
		}
		pt.mu.Unlock()
		err = s.waitApplied(ctx, pt, last)
		pt.mu.Lock()
		if err != nil {
			return err
		}
	}
}

// Sync waits until this store has applied every entry of partition p
// that the log held when it was called: a read after it is exact across
// every writer, at the cost of one round trip to the log.
func (s *Store) Sync(ctx context.Context, p int) error {
	last, err := s.log.Last(ctx, p)
	if err != nil {
		return fmt.Errorf("urlstore: partition %d: %w", p, err)
	}
	return s.waitApplied(ctx, s.part(p), last)
}

// waitApplied waits until the follower has applied pt up to seq.
func (s *Store) waitApplied(ctx context.Context, pt *part, seq uint64) error {
	for {
		s.mu.Lock()
		ch := s.applied
		s.mu.Unlock()
		if pt.last.Load() >= seq {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		case <-time.After(time.Second): // the follower may be reconnecting
		}
	}
}

// check is Options.CheckValue of a set's value.
func (s *Store) check(op operation) error {
	if s.checkValue == nil {
		return nil
	}
	if err := s.checkValue(op.key, op.value); err != nil {
		return fmt.Errorf("urlstore: key %q: %w", op.key, err)
	}
	return nil
}

// apply writes an entry's operations and the partition's new sequence in
// one Pebble batch, so the two never disagree; size is the entry's bytes
// in the log. pt.mu is held. The batch
// is not synced: the log is the durable copy, and an entry lost here by
// a machine's crash is applied again from it, since the sequence went
// with it.
func (s *Store) apply(pt *part, p int, seq uint64, data []byte, size int, followed bool) error {
	pb := s.db.NewIndexedBatch()
	defer pb.Close()
	var changes []Change
	note := func(c Change) {
		if s.onApply != nil {
			changes = append(changes, c)
		}
	}
	err := decodeBatch(data, func(op operation) error {
		k := userKey(op.key)
		switch op.kind {
		case opSet:
			if err := s.check(op); err != nil {
				return err
			}
			note(Change{Key: op.key, Value: op.value})
			return pb.Set(k, op.value, nil)
		case opSetIfAbsent:
			if err := s.check(op); err != nil {
				return err
			}
			_, closer, err := pb.Get(k)
			if err == nil {
				return closer.Close()
			}
			if !errors.Is(err, pebble.ErrNotFound) {
				return err
			}
			note(Change{Key: op.key, Value: op.value})
			return pb.Set(k, op.value, nil)
		case opDelete:
			note(Change{Key: op.key, Deleted: true})
			return pb.Delete(k, nil)
		case opDeletePrefix:
			note(Change{Key: op.key, Deleted: true, Prefix: true})
			return pb.DeleteRange(k, prefixEnd(k), nil)
		}
		return nil
	})
	if errors.Is(err, ErrBadBatch) {
		changes = nil
		// Not ours, or damaged: skipped by every store alike.
		s.bad.Add(1)
		if s.logf != nil {
			s.logf("urlstore: entry %d of partition %d skipped: %v", seq, p, err)
		}
		pb.Reset()
	} else if err != nil {
		return fmt.Errorf("urlstore: apply entry %d: %w", seq, err)
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], seq)
	if err := pb.Set(appliedKey(p), v[:], nil); err != nil {
		return err
	}
	if followed {
		if err := pb.Set(followedKey, v[:], nil); err != nil {
			return err
		}
	}
	if err := pb.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("urlstore: apply entry %d: %w", seq, err)
	}
	pt.last.Store(seq)
	s.entries.Add(1)
	s.appliedBytes.Add(uint64(size))
	if len(changes) > 0 {
		s.onApply(p, changes)
	}
	s.mu.Lock()
	close(s.applied)
	s.applied = make(chan struct{})
	s.mu.Unlock()
	return nil
}

// follow applies the log's entries from the last one followed, forever:
// every writer's, in order (this store's own are skipped, applied when
// written). It reads the log again after an error, from where it was.
func (s *Store) follow(ctx context.Context) {
	defer close(s.done)
	lastReport := time.Now() // report a catch-up that lasts over 5 s
	for ctx.Err() == nil {
		err := s.log.Read(ctx, s.followed.Load(), func() {
			s.readyOne.Do(func() { close(s.ready) })
		}, func(e Entry) error {
			s.read.Add(1)
			pt := s.part(e.Part)
			skip := func() error {
				// Applied when written. The position is kept all the
				// same, now and then, so that a restart does not read
				// again every entry this store wrote itself.
				s.followed.Store(e.Seq)
				if e.Seq-s.savedFollowed >= savePositionEvery || e.Pending == 0 {
					return s.saveFollowed(e.Seq)
				}
				return nil
			}
			// Without the lock first: 32 writers holding partitions'
			// locks through their appends kept a follower that waited
			// for each lock 5 M entries behind them.
			if e.Seq <= pt.last.Load() {
				return skip()
			}
			pt.mu.Lock()
			defer pt.mu.Unlock()
			if e.Seq <= pt.last.Load() {
				return skip()
			}
			if last := pt.last.Load(); e.Chained && e.Prev != last {
				return s.hole(e, last)
			}
			if err := s.apply(pt, e.Part, e.Seq, e.Data, len(e.Data), true); err != nil {
				return err
			}
			s.followed.Store(e.Seq)
			s.savedFollowed = e.Seq
			if s.logf != nil && e.Pending > 0 && time.Since(lastReport) > 5*time.Second {
				lastReport = time.Now()
				s.logf("urlstore: catching up: at entry %d, %d to go", e.Seq, e.Pending)
			}
			return nil
		})
		if errors.Is(err, ErrStale) || errors.Is(err, ErrNewerFormat) {
			if s.logf != nil {
				s.logf("urlstore: %s: %v", s.dir, err)
			}
			s.failed.Store(&err)
			return
		}
		if err != nil && s.logf != nil {
			s.logf("urlstore: following the log: %v (again in 1s)", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// savePositionEvery is how many entries the follower may skip (this
// store's own) before it writes its position.
const savePositionEvery = 1000

// saveFollowed writes the follower's position. Only the follower calls it.
func (s *Store) saveFollowed(seq uint64) error {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], seq)
	if err := s.db.Set(followedKey, v[:], pebble.NoSync); err != nil {
		return fmt.Errorf("urlstore: save position: %w", err)
	}
	s.savedFollowed = seq
	return nil
}

// Ready is closed once the store has applied every entry the log held
// when it opened.
func (s *Store) Ready() <-chan struct{} { return s.ready }

// WaitReady waits for Ready or ctx; it returns Err if the follower
// stopped first.
func (s *Store) WaitReady(ctx context.Context) error {
	select {
	case <-s.ready:
		return nil
	case <-s.done:
		if err := s.Err(); err != nil {
			return err
		}
		return errors.New("urlstore: closed")
	case <-ctx.Done():
		return fmt.Errorf("urlstore: catching up with the log: %w", ctx.Err())
	}
}

// Stopped is closed once the follower stops: at Close, or at a hole in
// the log or an entry of a newer format (then Err says which).
func (s *Store) Stopped() <-chan struct{} { return s.done }

// Err is why the follower stopped, if not at Close: ErrStale at a hole in
// the log (entries it never applied are gone: it restores at the next
// Open), ErrNewerFormat at an entry or value of a newer build (this one
// must be upgraded); nil otherwise.
func (s *Store) Err() error {
	if err := s.failed.Load(); err != nil {
		return *err
	}
	return nil
}

// Get returns a copy of key's value.
func (s *Store) Get(key []byte) ([]byte, bool, error) { return s.get(userKey(key)) }

func (s *Store) get(k []byte) ([]byte, bool, error) {
	v, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("urlstore: get: %w", err)
	}
	defer closer.Close()
	return bytes.Clone(v), true, nil
}

// Scan calls fn with each key starting with prefix and its value, in key
// order, until fn returns false. key and value are valid only during the
// call.
func (s *Store) Scan(prefix []byte, fn func(key, value []byte) bool) error {
	return s.Read(func(r Reader) error { return r.Scan(prefix, fn) })
}

// Stats are a store's figures.
type Stats struct {
	Followed  uint64 // the last log sequence read
	Read      uint64 // entries the follower read since the store opened
	Applied   uint64 // entries applied since the store opened
	Bad       uint64 // entries skipped as undecodable
	DiskBytes uint64 // the database's files
}

// Stats returns the store's figures.
func (s *Store) Stats() Stats {
	return Stats{Followed: s.followed.Load(), Read: s.read.Load(), Applied: s.entries.Load(), Bad: s.bad.Load(),
		DiskBytes: s.db.Metrics().DiskSpaceUsage()}
}

// Metrics are Pebble's figures (memtables, cache, levels), for benchmarks
// and the page.
func (s *Store) Metrics() *pebble.Metrics { return s.db.Metrics() }

// Flush writes the memtable to disk (tests and benchmarks measure files).
func (s *Store) Flush() error { return s.db.Flush() }

// noteOwn records the sequence of an entry this store appended.
func (s *Store) noteOwn(seq uint64) {
	for {
		old := s.own.Load()
		if seq <= old || s.own.CompareAndSwap(old, seq) {
			return
		}
	}
}

// closeWait bounds how long Close waits for the follower to pass the
// store's own entries.
const closeWait = 10 * time.Second

// Close stops the follower and closes the database. It first lets the
// follower read past every entry this store wrote (for up to 10 s), so
// that its saved position is after them: a store that wrote faster than
// its follower read would otherwise read them all again at its next
// start. It is idempotent.
func (s *Store) Close() error {
	var err error
	s.closed.Do(func() {
		deadline := time.Now().Add(closeWait)
		for s.followed.Load() < s.own.Load() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		s.cancel()
		<-s.done
		if f := s.followed.Load(); f > s.savedFollowed {
			err = s.saveFollowed(f)
		}
		err = errors.Join(err, s.db.Close(), s.lock.Close())
	})
	return err
}

var _ io.Closer = (*Store)(nil)

// prefixEnd is the first key after every key starting with p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}

// OpenFree opens a store in dir, or in the first of dir.1, dir.2, … that
// no other store holds: two processes of one kind on one data directory
// (two crawlers, two serve) each keep their own index, and a process that
// starts again finds one (its own, or a copy as good: every index is the
// log's). It does not wait for the store to catch up (WaitReady).
func OpenFree(ctx context.Context, dir string, log Log, opts Options) (*Store, error) {
	var s *Store
	var err error
	for i := range 16 {
		d := dir
		if i > 0 {
			d = dir + "." + strconv.Itoa(i)
		}
		s, err = Open(ctx, d, log, opts)
		if !errors.Is(err, ErrLocked) {
			break
		}
	}
	return s, err
}
