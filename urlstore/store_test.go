package urlstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/klauspost/compress/s2"

	"github.com/sievecrawl/sieve/internal/leaktest"
)

func open(t testing.TB, dir string, log Log) *Store {
	t.Helper()
	return openWith(t, dir, log, Options{Logf: t.Logf})
}

// openWith opens a store with o, closed at the test's end, and waits until
// it has caught up.
func openWith(t testing.TB, dir string, log Log, o Options) *Store {
	t.Helper()
	s, err := Open(t.Context(), dir, log, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// dump is every key and value of a store.
func dump(t testing.TB, s *Store) map[string]string {
	t.Helper()
	m := map[string]string{}
	if err := s.Scan(nil, func(k, v []byte) bool { m[string(k)] = string(v); return true }); err != nil {
		t.Fatal(err)
	}
	return m
}

// waitFollowed polls until s has read the log up to seq.
func waitFollowed(t testing.TB, s *Store, seq uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Followed < seq {
		if time.Now().After(deadline) {
			t.Fatalf("followed %d, want %d", s.Stats().Followed, seq)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestOperations pins what each operation leaves, alone and after the
// others of its batch (SetIfAbsent reads through its own batch).
func TestOperations(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(b *Batch)
		ops   func(b *Batch)
		want  map[string]string
	}{
		{"set", nil, func(b *Batch) { b.Set([]byte("a"), []byte("1")) }, map[string]string{"a": "1"}},
		{"set over", func(b *Batch) { b.Set([]byte("a"), []byte("1")) }, func(b *Batch) { b.Set([]byte("a"), []byte("2")) }, map[string]string{"a": "2"}},
		{"set if absent, absent", nil, func(b *Batch) { b.SetIfAbsent([]byte("a"), []byte("1")) }, map[string]string{"a": "1"}},
		{"set if absent, present", func(b *Batch) { b.Set([]byte("a"), []byte("1")) }, func(b *Batch) { b.SetIfAbsent([]byte("a"), []byte("2")) }, map[string]string{"a": "1"}},
		{"set if absent after a set of the same batch", nil, func(b *Batch) {
			b.Set([]byte("a"), []byte("1"))
			b.SetIfAbsent([]byte("a"), []byte("2"))
		}, map[string]string{"a": "1"}},
		{"set if absent after a delete of the same batch", func(b *Batch) { b.Set([]byte("a"), []byte("1")) }, func(b *Batch) {
			b.Delete([]byte("a"))
			b.SetIfAbsent([]byte("a"), []byte("2"))
		}, map[string]string{"a": "2"}},
		{"delete", func(b *Batch) { b.Set([]byte("a"), []byte("1")); b.Set([]byte("b"), []byte("2")) }, func(b *Batch) { b.Delete([]byte("a")) }, map[string]string{"b": "2"}},
		{"delete prefix", func(b *Batch) {
			b.Set([]byte("c1/x"), []byte("1"))
			b.Set([]byte("c1/y"), []byte("2"))
			b.Set([]byte("c10/x"), []byte("3"))
			b.Set([]byte("c2/x"), []byte("4"))
		}, func(b *Batch) { b.DeletePrefix([]byte("c1/")) }, map[string]string{"c10/x": "3", "c2/x": "4"}},
		{"delete prefix of 0xff bytes", func(b *Batch) { b.Set([]byte{0xff, 0xff, 1}, []byte("1")); b.Set([]byte{0xfe}, []byte("2")) },
			func(b *Batch) { b.DeletePrefix([]byte{0xff}) }, map[string]string{"\xfe": "2"}},
		{"empty value", nil, func(b *Batch) { b.Set([]byte("a"), nil) }, map[string]string{"a": ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := open(t, t.TempDir(), &MemLog{})
			for _, f := range []func(*Batch){c.setup, c.ops} {
				if f == nil {
					continue
				}
				var b Batch
				f(&b)
				if err := s.Write(t.Context(), 0, &b); err != nil {
					t.Fatal(err)
				}
			}
			if got := dump(t, s); !maps.Equal(got, c.want) {
				t.Errorf("state = %q, want %q", got, c.want)
			}
		})
	}
}

// TestWriteRefusesBadBatches: a batch that would delete everything is
// refused before it reaches the log.
func TestWriteRefusesBadBatches(t *testing.T) {
	log := &MemLog{}
	s := open(t, t.TempDir(), log)
	var b Batch
	b.DeletePrefix(nil)
	if err := s.Write(t.Context(), 0, &b); !errors.Is(err, ErrBadBatch) {
		t.Errorf("Write(DeletePrefix(nil)) = %v, want ErrBadBatch", err)
	}
	if err := s.Write(t.Context(), -1, &Batch{}); err == nil {
		t.Error("Write to partition -1 = nil, want an error")
	}
	if log.Len() != 0 {
		t.Errorf("the log holds %d entries, want 0", log.Len())
	}
}

// TestStoresConverge: stores sharing a log, written concurrently on the
// same partitions, end with one state, and SetIfAbsent has one winner:
// the first in the log, whoever wrote it.
func TestStoresConverge(t *testing.T) {
	log := &MemLog{}
	stores := []*Store{open(t, t.TempDir(), log), open(t, t.TempDir(), log), open(t, t.TempDir(), log)}
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() {
			for j := range 200 {
				var b Batch
				b.SetIfAbsent(fmt.Appendf(nil, "first/%d", j%20), fmt.Appendf(nil, "store%d", i))
				b.Set(fmt.Appendf(nil, "last/%d", j%20), fmt.Appendf(nil, "store%d", i))
				b.Set(fmt.Appendf(nil, "own/%d/%d", i, j), nil)
				if err := s.Write(t.Context(), (j%20)%3, &b); err != nil { // a key lives in one partition
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, s := range stores {
		waitFollowed(t, s, uint64(log.Len()))
	}
	want := dump(t, stores[0])
	if len(want) != 20+20+3*200 {
		t.Fatalf("%d keys, want %d", len(want), 20+20+3*200)
	}
	for i, s := range stores[1:] {
		if got := dump(t, s); !maps.Equal(got, want) {
			t.Errorf("store %d differs from store 0", i+1)
		}
	}
}

// TestRestartReadsOnlyTheTail: a store opened again applies only what
// was written while it was closed; one in an empty directory rebuilds
// everything from the log.
func TestRestartReadsOnlyTheTail(t *testing.T) {
	log := &MemLog{}
	dir := t.TempDir()
	a := open(t, dir, log)
	other := open(t, t.TempDir(), log)
	write := func(s *Store, from, n int) {
		for i := from; i < from+n; i++ {
			var b Batch
			b.Set(fmt.Appendf(nil, "k%04d", i), fmt.Appendf(nil, "v%d", i))
			if err := s.Write(t.Context(), i%4, &b); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(a, 0, 500)
	waitFollowed(t, a, uint64(log.Len()))
	a.Close()
	write(other, 500, 30)
	a = open(t, dir, log)
	if st := a.Stats(); st.Applied != 30 || st.Read != 30 {
		t.Errorf("reopened store read %d entries and applied %d, want the 30 written while it was closed", st.Read, st.Applied)
	}
	if n := len(dump(t, a)); n != 530 {
		t.Errorf("reopened store holds %d keys, want 530", n)
	}
	fresh := open(t, t.TempDir(), log)
	if got, want := dump(t, fresh), dump(t, a); !maps.Equal(got, want) {
		t.Errorf("a store rebuilt from the log holds %d keys, want %d", len(got), len(want))
	}
}

// TestBadEntrySkipped: an entry that does not decode (something else wrote
// to the log, or it is damaged) is counted and skipped by every store
// alike; the store goes on.
func TestBadEntrySkipped(t *testing.T) {
	log := &MemLog{}
	s := open(t, t.TempDir(), log)
	if _, err := log.Append(t.Context(), 0, 0, []byte{1, opSet, 200}); err != nil { // a key length past the end
		t.Fatal(err)
	}
	waitFollowed(t, s, 1)
	var b Batch
	b.Set([]byte("a"), []byte("1"))
	if err := s.Write(t.Context(), 0, &b); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Bad; got != 1 {
		t.Errorf("Bad = %d, want 1", got)
	}
	if got := dump(t, s); !maps.Equal(got, map[string]string{"a": "1"}) {
		t.Errorf("state = %q", got)
	}
}

// TestCloseLeaksNothing: Close stops the follower; a second Close is a
// no-op.
func TestCloseLeaksNothing(t *testing.T) {
	noLeak := leaktest.Check(t)
	s, err := Open(t.Context(), t.TempDir(), &MemLog{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	noLeak()
}

// FuzzDecodeBatch: decoding never panics, and what decodes encodes to a
// batch that decodes to the same operations.
func FuzzDecodeBatch(f *testing.F) {
	var b Batch
	b.Set([]byte("k"), []byte("v"))
	b.SetIfAbsent([]byte("k2"), nil)
	b.Delete([]byte("k"))
	b.DeletePrefix([]byte("p/"))
	f.Add(b.Bytes())
	f.Add([]byte{1, 9})
	f.Add(logged(longBatch(20).Bytes()))
	f.Add([]byte{batchS2, 0xff, 0xff, 0xff, 0x7f})
	f.Add(append([]byte{batchS2}, s2.Encode(nil, longBatch(20).Bytes())...))
	ops := func(data []byte) (string, *Batch, error) {
		var out string
		var again Batch
		err := decodeBatch(data, func(op operation) error {
			out += fmt.Sprintf("%d %q %q;", op.kind, op.key, op.value)
			again.op(op.kind, op.key, op.value, op.kind == opSet || op.kind == opSetIfAbsent)
			return nil
		})
		return out, &again, err
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		first, again, err := ops(data)
		if err != nil {
			return
		}
		second, _, err := ops(again.Bytes())
		if err != nil || second != first {
			t.Errorf("decoded %q, encoded again and decoded %q (%v)", first, second, err)
		}
	})
}

// longBatch is a batch of n sets of URL-like keys, as a fill writes them.
func longBatch(n int) *Batch {
	var b Batch
	for i := range n {
		b.Set(fmt.Appendf(nil, "R/bench/www.site%d.example/articles/%d.html", i%7, i), fmt.Appendf(nil, "depth=%d", i%5))
	}
	return &b
}

// TestLoggedBatch pins the log's two forms of an entry: a batch as
// written (version 1), and one of at least compressMin bytes as an S2
// block behind batchS2 (the stream holding the log stores blocks
// uncompressed, so an unclean stop's rebuild does not decompress them).
// Both decode to the same operations; a small batch, or one compression
// does not shrink, is logged as it is; a damaged compressed entry is
// ErrBadBatch, never a panic.
func TestLoggedBatch(t *testing.T) {
	decode := func(data []byte) (string, error) {
		var out string
		err := decodeBatch(data, func(op operation) error {
			out += fmt.Sprintf("%d %q %q;", op.kind, op.key, op.value)
			return nil
		})
		return out, err
	}
	long := longBatch(50)
	entry := logged(long.Bytes())
	if entry[0] != batchZstd || len(entry) >= long.Size()/2 {
		t.Errorf("logged(%d-byte batch of URLs) = %d bytes, version %d; want batchZstd, under half", long.Size(), len(entry), entry[0])
	}
	want, err := decode(long.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decode(entry); got != want || err != nil {
		t.Errorf("decode(logged) = %q, %v; want %q", got, err, want)
	}
	// An entry an earlier build compressed with S2 still decodes.
	s2Entry := append([]byte{batchS2}, s2.Encode(nil, long.Bytes())...)
	if got, err := decode(s2Entry); got != want || err != nil {
		t.Errorf("decode(an S2 entry) = %q, %v; want %q", got, err, want)
	}
	var small Batch
	small.Set([]byte("k"), []byte("v"))
	if got := logged(small.Bytes()); !bytes.Equal(got, small.Bytes()) {
		t.Errorf("logged(a %d-byte batch) = %x, want it as it is", small.Size(), got)
	}
	noise := make([]byte, 4096)
	rand.NewChaCha8([32]byte{1}).Read(noise)
	var random Batch
	random.Set([]byte("n"), noise)
	if got := logged(random.Bytes()); !bytes.Equal(got, random.Bytes()) {
		t.Errorf("logged(a batch of random bytes) = %d bytes from %d, want it as it is", len(got), random.Size())
	}
	for _, bad := range [][]byte{
		{batchS2},
		{batchS2, 0xff, 0xff, 0xff, 0x7f},       // claims 256 MiB
		append([]byte{batchS2}, entry[1:10]...), // cut short
		append([]byte{batchS2}, s2.Encode(nil, []byte{batchS2, 1, 2})...), // nested
		{batchZstd},
		{batchZstd, 0x28, 0xb5, 0x2f, 0xfd},       // a frame header alone
		append([]byte{batchZstd}, entry[1:10]...), // cut short
		append([]byte{batchZstd}, zstdEncoder().EncodeAll([]byte{batchZstd, 1, 2}, nil)...), // nested
	} {
		if _, err := decode(bad); !errors.Is(err, ErrBadBatch) {
			t.Errorf("decode(%x) = %v, want ErrBadBatch", bad, err)
		}
	}
}

// TestUnindexed: Append and Lookup, which need no local store, agree with
// a store applying the same log.
func TestUnindexed(t *testing.T) {
	log := &MemLog{}
	s := open(t, t.TempDir(), log)
	steps := []func(b *Batch){
		func(b *Batch) { b.Set([]byte("a/1"), []byte("x")); b.SetIfAbsent([]byte("a/2"), []byte("y")) },
		func(b *Batch) { b.SetIfAbsent([]byte("a/1"), []byte("ignored")); b.Set([]byte("b/1"), []byte("z")) },
		func(b *Batch) { b.DeletePrefix([]byte("b/")) },
		func(b *Batch) { b.Delete([]byte("a/2")); b.SetIfAbsent([]byte("a/2"), []byte("again")) },
	}
	for i, st := range steps {
		var b Batch
		st(&b)
		var err error
		if i%2 == 0 {
			err = Append(t.Context(), log, 0, &b)
		} else {
			err = s.Write(t.Context(), 0, &b)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	waitFollowed(t, s, uint64(log.Len()))
	for _, k := range []string{"a/1", "a/2", "b/1", "c"} {
		want, wantOK, _ := s.Get([]byte(k))
		got, ok, err := Lookup(t.Context(), log, 0, []byte(k))
		if err != nil || ok != wantOK || string(got) != string(want) {
			t.Errorf("Lookup(%s) = %q %v %v, the store holds %q %v", k, got, ok, err, want, wantOK)
		}
	}
}

// TestUpdateDecidesOnce: stores sharing a log hand out from one pool of
// tokens with read-modify-writes; however their updates race, each token
// is taken once, and every store sees the same takers.
func TestUpdateDecidesOnce(t *testing.T) {
	log := &MemLog{}
	stores := []*Store{open(t, t.TempDir(), log), open(t, t.TempDir(), log), open(t, t.TempDir(), log)}
	var b Batch
	for i := range 60 {
		b.Set(fmt.Appendf(nil, "free/%02d", i), nil)
	}
	if err := stores[0].Write(t.Context(), 7, &b); err != nil {
		t.Fatal(err)
	}
	for _, s := range stores {
		waitFollowed(t, s, 1)
	}
	var wg sync.WaitGroup
	taken := make([][]string, len(stores))
	for i, s := range stores {
		wg.Go(func() {
			for {
				var got string
				err := s.Update(t.Context(), 7, func(r Reader, b *Batch) error {
					got = ""
					err := r.Scan([]byte("free/"), func(k, _ []byte) bool { got = string(k); return false })
					if err != nil || got == "" {
						return err
					}
					b.Delete([]byte(got))
					b.Set([]byte("taken/"+got[len("free/"):]), fmt.Appendf(nil, "store%d", i))
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				if got == "" {
					return
				}
				taken[i] = append(taken[i], got)
			}
		})
	}
	wg.Wait()
	seen := map[string]int{}
	for i, ts := range taken {
		for _, tk := range ts {
			seen[tk]++
			if seen[tk] > 1 {
				t.Errorf("%s taken twice (the second by store %d)", tk, i)
			}
		}
	}
	if len(seen) != 60 {
		t.Errorf("%d tokens taken, want 60", len(seen))
	}
	for _, s := range stores {
		waitFollowed(t, s, uint64(log.Len()))
	}
	want := dump(t, stores[0])
	for i, s := range stores[1:] {
		if got := dump(t, s); !maps.Equal(got, want) {
			t.Errorf("store %d differs from store 0", i+1)
		}
	}
	for i, ts := range taken {
		for _, tk := range ts {
			if v := want["taken/"+tk[len("free/"):]]; v != fmt.Sprintf("store%d", i) {
				t.Errorf("%s: taken by store %d, the stores say %q", tk, i, v)
			}
		}
	}
}

// TestOpenHeldDirectory: a directory another store holds is refused with
// ErrLocked, and free again once that store closes.
func TestOpenHeldDirectory(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(t.Context(), dir, &MemLog{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(t.Context(), dir, &MemLog{}, Options{}); !errors.Is(err, ErrLocked) {
		t.Errorf("Open of a held directory = %v, want ErrLocked", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := Open(t.Context(), dir, &MemLog{}, Options{})
	if err != nil {
		t.Fatalf("Open after Close = %v", err)
	}
	b.Close()
}

// TestOnApplyMirrorsEveryStore keeps a summary from OnApply in two stores
// sharing a log, one writing, the other following: both summaries end
// equal to what the stores hold, whoever wrote, and a SetIfAbsent that
// found its key taken is not reported.
func TestOnApplyMirrorsEveryStore(t *testing.T) {
	log := &MemLog{}
	type mirror struct {
		mu   sync.Mutex
		m    map[string]string
		told []string // keys reported, in order
	}
	openMirrored := func(dir string) (*Store, *mirror) {
		mr := &mirror{m: map[string]string{}}
		s, err := Open(t.Context(), dir, log, Options{Logf: t.Logf, OnApply: func(_ int, cs []Change) {
			mr.mu.Lock()
			defer mr.mu.Unlock()
			for _, c := range cs {
				mr.told = append(mr.told, string(c.Key))
				switch {
				case c.Prefix:
					for k := range mr.m {
						if len(k) >= len(c.Key) && k[:len(c.Key)] == string(c.Key) {
							delete(mr.m, k)
						}
					}
				case c.Deleted:
					delete(mr.m, string(c.Key))
				default:
					mr.m[string(c.Key)] = string(c.Value)
				}
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, mr
	}
	a, ma := openMirrored(t.TempDir())
	b, mb := openMirrored(t.TempDir())
	write := func(s *Store, fill func(*Batch)) {
		t.Helper()
		var bt Batch
		fill(&bt)
		if err := s.Write(t.Context(), 0, &bt); err != nil {
			t.Fatal(err)
		}
	}
	write(a, func(bt *Batch) { bt.Set([]byte("q1"), []byte("1")); bt.Set([]byte("q2"), []byte("2")) })
	write(b, func(bt *Batch) { bt.SetIfAbsent([]byte("q1"), []byte("x")); bt.Set([]byte("r1"), []byte("3")) })
	write(a, func(bt *Batch) { bt.DeletePrefix([]byte("q")); bt.Set([]byte("q3"), []byte("4")) })
	write(b, func(bt *Batch) { bt.Delete([]byte("r1")) })
	if err := a.Sync(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"q3": "4"}
	if got := dump(t, a); !maps.Equal(got, want) {
		t.Fatalf("store a holds %v, want %v", got, want)
	}
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if !maps.Equal(mb.m, want) {
		t.Errorf("b's summary %v, want %v", mb.m, want)
	}
	// a saw: its first entry, b's (r1 only: q1 was taken), its prefix
	// delete and set, b's delete.
	ma.mu.Lock()
	defer ma.mu.Unlock()
	if got, want := fmt.Sprint(ma.told), "[q1 q2 r1 q q3 r1]"; got != want {
		t.Errorf("a was told of %s, want %s", got, want)
	}
}

// TestUpdateReads: inside an Update, Get and Scan answer as Pebble's own
// Get and a bounded iterator do, for keys in the last level (compacted), in the
// memtable, absent, and prefixes of one another, in any order of calls.
func TestUpdateReads(t *testing.T) {
	s := open(t, t.TempDir(), &MemLog{})
	write := func(kv ...string) {
		var b Batch
		for i := 0; i < len(kv); i += 2 {
			b.Set([]byte(kv[i]), []byte(kv[i+1]))
		}
		if err := s.Write(t.Context(), 0, &b); err != nil {
			t.Fatal(err)
		}
	}
	write("q/a", "1", "q/ab", "2", "q/b", "3", "r/a", "4")
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Compact(t.Context(), []byte{0}, []byte{0xff}, false); err != nil {
		t.Fatal(err)
	}
	if m := s.Metrics(); m.Levels[6].TablesCount == 0 {
		t.Fatalf("nothing compacted into L6:\n%s", m)
	}
	write("q/abc", "5", "q/b", "6", "s/a", "7")
	gets := []string{"q/a", "q/ab", "q/abc", "q/abcd", "q/b", "q/", "q", "r/a", "r/b", "s/a", "z", ""}
	scans := []string{"q/", "q/a", "r/", "s/", "t/", ""}
	scan := func(r Reader, prefix string) (map[string]string, error) {
		m := map[string]string{}
		err := r.Scan([]byte(prefix), func(k, v []byte) bool { m[string(k)] = string(v); return true })
		return m, err
	}
	// The store's Scan reads as an Update does: the oracle is Pebble's own
	// iterator, bounded as Scan promises.
	pebbleScan := func(prefix string) (map[string]string, error) {
		lo := userKey([]byte(prefix))
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
		if err != nil {
			return nil, err
		}
		m := map[string]string{}
		for it.First(); it.Valid(); it.Next() {
			m[string(it.Key()[1:])] = string(it.Value())
		}
		return m, errors.Join(it.Error(), it.Close())
	}
	err := s.Update(t.Context(), 0, func(r Reader, _ *Batch) error {
		// Gets and scans interleaved, each against Pebble's own.
		for i := range max(len(gets), len(scans)) {
			if i < len(gets) {
				k := []byte(gets[i])
				v, ok, err := r.Get(k)
				wv, wok, werr := s.Get(k)
				if err != nil || werr != nil || ok != wok || string(v) != string(wv) {
					t.Errorf("Get(%q) = %q, %v, %v; the store's: %q, %v, %v", k, v, ok, err, wv, wok, werr)
				}
			}
			if i < len(scans) {
				got, err := scan(r, scans[i])
				want, werr := pebbleScan(scans[i])
				if err != nil || werr != nil || !maps.Equal(got, want) {
					t.Errorf("Scan(%q) = %q, %v; the store's: %q, %v", scans[i], got, err, want, werr)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
