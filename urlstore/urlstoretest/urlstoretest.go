// Package urlstoretest checks that an implementation of urlstore.Log keeps
// the contract a Store relies on, as testing/fstest.TestFS checks an
// fs.FS: the in-memory log (urlstore.MemLog) that unit tests run on and the
// JetStream log that users run (frontier.StoreLog) both run it, so the
// test twin cannot drift from the real one.
package urlstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/urlstore"
)

// TestLog runs the contract of urlstore.Log, each part a subtest on a new,
// empty log from open: compare-and-append and its conflicts, sequences,
// each entry's predecessor (Prev), reading from a point and following,
// the catch-up signal, pending counts, reading one partition, and trims.
func TestLog(t *testing.T, open func(t *testing.T) urlstore.Log) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, ctx context.Context, log urlstore.Log)
	}{
		{"append", testAppend},
		{"concurrent appends", testConcurrentAppends},
		{"read", testRead},
		{"read follows", testReadFollows},
		{"read part", testReadPart},
		{"trim", testTrim},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			c.run(t, ctx, open(t))
		})
	}
}

func data(part int, i int) []byte { return fmt.Appendf(nil, "entry %d of partition %d", i, part) }

// appendAll appends n entries to each of parts, partitions interleaved,
// and returns their sequences, per partition in order.
func appendAll(t *testing.T, ctx context.Context, log urlstore.Log, parts, n int) map[int][]uint64 {
	t.Helper()
	seqs := map[int][]uint64{}
	for i := range n {
		for p := range parts {
			var last uint64
			if s := seqs[p]; len(s) > 0 {
				last = s[len(s)-1]
			}
			seq, err := log.Append(ctx, p, last, data(p, i))
			if err != nil {
				t.Fatalf("Append(part %d, last %d): %v", p, last, err)
			}
			seqs[p] = append(seqs[p], seq)
		}
	}
	return seqs
}

// readAll reads every entry after after that the log holds, until the
// last, and returns them; caughtUp must have been called by then.
func readAll(t *testing.T, ctx context.Context, log urlstore.Log, after uint64, want int) []urlstore.Entry {
	t.Helper()
	var got []urlstore.Entry
	caught := 0
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	err := log.Read(rctx, after, func() { caught++ }, func(e urlstore.Entry) error {
		got = append(got, e)
		if len(got) == want {
			stop()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Read(after %d): %v", after, err)
	}
	if len(got) != want {
		t.Fatalf("Read(after %d): %d entries, want %d", after, len(got), want)
	}
	if caught != 1 {
		t.Errorf("Read(after %d): caughtUp called %d times once every entry was read, want once", after, caught)
	}
	return got
}

func testAppend(t *testing.T, ctx context.Context, log urlstore.Log) {
	if last, err := log.Last(ctx, 0); err != nil || last != 0 {
		t.Fatalf("Last of an empty partition = %d, %v; want 0", last, err)
	}
	first, err := log.Append(ctx, 0, 0, []byte("a"))
	if err != nil || first == 0 {
		t.Fatalf("Append to an empty partition = %d, %v", first, err)
	}
	if _, err := log.Append(ctx, 0, 0, []byte("b")); !errors.Is(err, urlstore.ErrConflict) {
		t.Errorf("Append expecting an empty partition that has an entry: %v, want ErrConflict", err)
	}
	if _, err := log.Append(ctx, 0, first+100, []byte("b")); !errors.Is(err, urlstore.ErrConflict) {
		t.Errorf("Append expecting a later last: %v, want ErrConflict", err)
	}
	other, err := log.Append(ctx, 1, 0, []byte("c"))
	if err != nil || other <= first {
		t.Fatalf("Append to another partition = %d, %v; want a sequence above %d", other, err, first)
	}
	second, err := log.Append(ctx, 0, first, []byte("d"))
	if err != nil || second <= other {
		t.Fatalf("Append after the partition's last = %d, %v; want a sequence above %d (sequences grow over the log)", second, err, other)
	}
	if _, err := log.Append(ctx, 0, first, []byte("e")); !errors.Is(err, urlstore.ErrConflict) {
		t.Errorf("Append expecting an earlier last: %v, want ErrConflict", err)
	}
	for p, want := range map[int]uint64{0: second, 1: other, 2: 0} {
		if last, err := log.Last(ctx, p); err != nil || last != want {
			t.Errorf("Last(%d) = %d, %v; want %d", p, last, err, want)
		}
	}
}

func testConcurrentAppends(t *testing.T, ctx context.Context, log urlstore.Log) {
	first, err := log.Append(ctx, 0, 0, []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, conflicts := 0, 0
	for i := range n {
		wg.Go(func() {
			_, err := log.Append(ctx, 0, first, fmt.Appendf(nil, "racer %d", i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, urlstore.ErrConflict):
				conflicts++
			default:
				t.Errorf("racer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || conflicts != n-1 {
		t.Errorf("%d appends expecting the same last: %d stored, %d conflicts; want 1 and %d", n, wins, conflicts, n-1)
	}
}

func testRead(t *testing.T, ctx context.Context, log urlstore.Log) {
	seqs := appendAll(t, ctx, log, 3, 4)
	got := readAll(t, ctx, log, 0, 12)
	prev := map[int]uint64{}
	idx := map[int]int{}
	for i, e := range got {
		if i > 0 && e.Seq <= got[i-1].Seq {
			t.Errorf("entry %d read after %d: out of order", e.Seq, got[i-1].Seq)
		}
		if want := seqs[e.Part][idx[e.Part]]; e.Seq != want {
			t.Errorf("entry %d of partition %d: want sequence %d", e.Seq, e.Part, want)
		}
		if want := data(e.Part, idx[e.Part]); !bytes.Equal(e.Data, want) {
			t.Errorf("entry %d: data %q, want %q", e.Seq, e.Data, want)
		}
		if !e.Chained || e.Prev != prev[e.Part] {
			t.Errorf("entry %d of partition %d: Prev %d (chained %v), want %d: the entry it was appended after", e.Seq, e.Part, e.Prev, e.Chained, prev[e.Part])
		}
		if e.Time.IsZero() {
			t.Errorf("entry %d: no time", e.Seq)
		}
		if want := uint64(len(got) - 1 - i); e.Pending != want {
			t.Errorf("entry %d: Pending %d, want %d", e.Seq, e.Pending, want)
		}
		prev[e.Part] = e.Seq
		idx[e.Part]++
	}
	// From a point: what follows it, and the catch-up signal once there.
	mid := got[5].Seq
	tail := readAll(t, ctx, log, mid, 6)
	if tail[0].Seq != got[6].Seq {
		t.Errorf("Read after %d begins at %d, want %d", mid, tail[0].Seq, got[6].Seq)
	}
	// After the last: caughtUp at once, and nothing read.
	rctx, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	defer stop()
	caught := false
	err := log.Read(rctx, got[11].Seq, func() { caught = true }, func(e urlstore.Entry) error {
		return fmt.Errorf("read entry %d after the last", e.Seq)
	})
	if err != nil || !caught {
		t.Errorf("Read after the last entry: %v, caughtUp %v; want nil and caughtUp", err, caught)
	}
}

func testReadFollows(t *testing.T, ctx context.Context, log urlstore.Log) {
	seqs := appendAll(t, ctx, log, 1, 2)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	entries := make(chan urlstore.Entry, 16)
	caught := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- log.Read(rctx, 0, func() { close(caught) }, func(e urlstore.Entry) error {
			entries <- e
			return nil
		})
	}()
	for range 2 {
		<-entries
	}
	select {
	case <-caught:
	case <-ctx.Done():
		t.Fatal("caughtUp not called after the entries the log held")
	}
	// An entry appended now reaches the reader.
	seq, err := log.Append(ctx, 0, seqs[0][1], []byte("later"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-entries:
		if e.Seq != seq || string(e.Data) != "later" || e.Prev != seqs[0][1] {
			t.Errorf("followed entry %d %q (Prev %d), want %d \"later\" (Prev %d)", e.Seq, e.Data, e.Prev, seq, seqs[0][1])
		}
	case <-ctx.Done():
		t.Fatal("an entry appended while reading never came")
	}
	// fn's error ends the read with it; ctx's end ends it with nil.
	stop()
	if err := <-done; err != nil {
		t.Errorf("Read ended by its context: %v, want nil", err)
	}
	boom := errors.New("boom")
	if err := log.Read(ctx, 0, func() {}, func(urlstore.Entry) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Read whose fn failed: %v, want fn's error", err)
	}
}

func testReadPart(t *testing.T, ctx context.Context, log urlstore.Log) {
	seqs := appendAll(t, ctx, log, 3, 5)
	var got []uint64
	if err := log.ReadPart(ctx, 1, func(e urlstore.Entry) error {
		if e.Part != 1 {
			t.Errorf("ReadPart(1) read entry %d of partition %d", e.Seq, e.Part)
		}
		got = append(got, e.Seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(seqs[1]) {
		t.Errorf("ReadPart(1) read %v, want %v", got, seqs[1])
	}
	n := 0
	if err := log.ReadPart(ctx, 7, func(urlstore.Entry) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("ReadPart of an empty partition: %d entries, %v", n, err)
	}
}

func testTrim(t *testing.T, ctx context.Context, log urlstore.Log) {
	seqs := appendAll(t, ctx, log, 2, 5)
	keep := seqs[0][3]
	if err := log.Trim(ctx, 0, keep); err != nil {
		t.Fatal(err)
	}
	if err := log.Trim(ctx, 1, 1); err != nil {
		t.Errorf("Trim below the first sequence: %v", err)
	}
	var part0 []uint64
	if err := log.ReadPart(ctx, 0, func(e urlstore.Entry) error { part0 = append(part0, e.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(part0) != fmt.Sprint(seqs[0][3:]) {
		t.Errorf("partition 0 after Trim below %d: %v, want %v (the entry at the point and every later one)", keep, part0, seqs[0][3:])
	}
	got := readAll(t, ctx, log, 0, 2+5)
	for _, e := range got {
		if e.Part == 0 && e.Seq < keep {
			t.Errorf("Read returned trimmed entry %d", e.Seq)
		}
		if e.Part == 0 && e.Seq == keep && e.Prev != seqs[0][2] {
			t.Errorf("the entry at the trim point: Prev %d, want %d (still the entry it followed, now gone)", e.Prev, seqs[0][2])
		}
	}
	// The partition's last and the compare-and-append are unchanged.
	if last, err := log.Last(ctx, 0); err != nil || last != seqs[0][4] {
		t.Errorf("Last(0) after a trim = %d, %v; want %d", last, err, seqs[0][4])
	}
	if _, err := log.Append(ctx, 0, seqs[0][4], []byte("after the trim")); err != nil {
		t.Errorf("Append after a trim: %v", err)
	}
}
