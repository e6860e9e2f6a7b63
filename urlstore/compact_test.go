package urlstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable time for compaction's periods.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func openCompacting(t testing.TB, dir string, log Log, snaps Snapshots, clk *clock) *Store {
	t.Helper()
	return openWith(t, dir, log, Options{Logf: t.Logf, Snapshots: snaps, CompactEvery: time.Minute, Now: clk.Now})
}

// writeRounds sets keys k0000…k(n-1) to round's value, each in partition
// i%4: every round rewrites the same records, as hand-outs and
// acknowledgements rewrite a queue's.
func writeRounds(t testing.TB, s *Store, n, round int) {
	t.Helper()
	for i := range n {
		var b Batch
		b.Set(fmt.Appendf(nil, "k%04d", i), fmt.Appendf(nil, "round %d", round))
		if err := s.Write(t.Context(), i%4, &b); err != nil {
			t.Fatal(err)
		}
	}
}

func currentManifest(t testing.TB, snaps Snapshots) *manifest {
	t.Helper()
	m, _, err := readManifest(t.Context(), snaps)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCompactTrimsAndRestores: each compaction period the log loses the
// entries the previous period's snapshot holds, so it keeps about two
// periods of work whatever was done before; a store opened on an empty
// directory, on one stopped for longer than a period, or on one whose
// restore was interrupted, starts from the current snapshot and holds
// what a store that applied every entry holds.
func TestCompactTrimsAndRestores(t *testing.T) {
	clk := &clock{now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	log := &MemLog{Now: clk.Now}
	snaps := &MemSnapshots{}
	a := openCompacting(t, t.TempDir(), log, snaps, clk)
	lateDir := t.TempDir()
	late := openCompacting(t, lateDir, log, snaps, clk)

	writeRounds(t, a, 200, 1)
	for i := range 4 { // records written once, in the first period
		var b Batch
		b.Set(fmt.Appendf(nil, "once/%d", i), nil)
		if err := a.Write(t.Context(), i, &b); err != nil {
			t.Fatal(err)
		}
	}
	waitFollowed(t, late, uint64(log.Len()))
	late.Close() // stopped for longer than a period from here

	c, err := a.Compact(t.Context())
	if err != nil || c.Snapshot == "" || c.Trimmed != 0 {
		t.Fatalf("first Compact = %+v, %v; want a snapshot and nothing trimmed", c, err)
	}
	first := currentManifest(t, snaps)
	if c, err := a.Compact(t.Context()); err != nil || c.Snapshot != "" {
		t.Fatalf("Compact within the period = %+v, %v; want nothing", c, err)
	}
	for round := 2; round <= 4; round++ {
		clk.Add(time.Minute)
		writeRounds(t, a, 200, round)
		c, err := a.Compact(t.Context())
		if err != nil || c.Snapshot == "" {
			t.Fatalf("Compact of round %d = %+v, %v", round, c, err)
		}
		m := currentManifest(t, snaps)
		if names := snaps.Names(); !slices.Equal(names, []string{m.Snapshot}) {
			t.Errorf("round %d: snapshots held %q, want the current one alone, %s", round, names, m.Snapshot)
		}
		if round == 2 && !maps.Equal(m.Trimmed, first.Applied) {
			t.Errorf("round 2 announces trimming below %v, want the first snapshot's points %v", m.Trimmed, first.Applied)
		}
	}
	// Four rounds of 200 entries and 4 more written, those of rounds 1
	// and 2 trimmed (below the points announced in round 3), but for each
	// partition's last entry at its trim point.
	if live, all := log.Live(), log.Len(); all != 804 || live > 200+200+4 {
		t.Errorf("the log keeps %d of %d entries; want at most the last two rounds' 400 and a trim point each", live, all)
	}
	// Idle, a period later: the trim announced in round 4 is made, but
	// the snapshot there is current: none is taken, and after that
	// nothing more is done.
	clk.Add(time.Minute)
	if c, err := a.Compact(t.Context()); err != nil || c.Snapshot != "" || c.Trimmed != 4 {
		t.Errorf("Compact of an idle store = %+v, %v; want the announced trim alone", c, err)
	}
	if live := log.Live(); live > 200+4 {
		t.Errorf("after the idle period's trim the log keeps %d entries; want round 4's 200 and a trim point each", live)
	}
	if c, err := a.Compact(t.Context()); err != nil || c != (Compaction{}) {
		t.Errorf("Compact of an idle store again = %+v, %v; want nothing", c, err)
	}
	want := dump(t, a)

	for _, tc := range []struct {
		name string
		dir  string
		prep func(dir string)
	}{
		{"empty directory", t.TempDir(), nil},
		{"stopped for longer than a period", lateDir, nil},
		{"interrupted restore", t.TempDir(), func(dir string) {
			if err := os.WriteFile(filepath.Join(dir, restoringFile), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "000001.sst"), []byte("half a file"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		if tc.prep != nil {
			tc.prep(tc.dir)
		}
		s := openCompacting(t, tc.dir, log, snaps, clk)
		if got := dump(t, s); !maps.Equal(got, want) {
			t.Errorf("%s: the store holds %d keys (%q…), want %d as the writer", tc.name, len(got), got["k0000"], len(want))
		}
		if restoring(tc.dir) {
			t.Errorf("%s: the restore marker stayed", tc.name)
		}
		s.Close()
	}

	// Without its snapshot, the log alone no longer rebuilds the store:
	// what the trim is for, and why Open restores first. A store that
	// tries meets the first hole and stops there.
	bare, err := Open(t.Context(), t.TempDir(), log, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if err := bare.WaitReady(t.Context()); !errors.Is(err, ErrStale) {
		t.Errorf("a store rebuilt from the trimmed log alone: WaitReady = %v, want ErrStale", err)
	}
	if got := dump(t, bare); len(got) >= len(want) {
		t.Errorf("a store rebuilt from the trimmed log alone holds %d keys of %d: it applied past the holes", len(got), len(want))
	}
}

// gatedLog holds its readers until the gate opens: a store whose follower
// lags.
type gatedLog struct {
	*MemLog
	gate chan struct{}
}

func (l gatedLog) Read(ctx context.Context, after uint64, caughtUp func(), fn func(Entry) error) error {
	select {
	case <-l.gate:
	case <-ctx.Done():
		return nil
	}
	return l.MemLog.Read(ctx, after, caughtUp, fn)
}

// TestCompactStaleFollower: a store running while its follower lags more
// than a period behind the trims stops with ErrStale rather than apply a
// log with holes; its own Compact, behind the current snapshot, leaves
// the manifest to the others.
func TestCompactStaleFollower(t *testing.T) {
	clk := &clock{now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	log := &MemLog{Now: clk.Now}
	snaps := &MemSnapshots{}
	a := openCompacting(t, t.TempDir(), log, snaps, clk)
	gate := make(chan struct{})
	slow, err := Open(t.Context(), t.TempDir(), gatedLog{log, gate}, Options{Logf: t.Logf, Snapshots: snaps, CompactEvery: time.Minute, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	for round := 1; round <= 3; round++ {
		writeRounds(t, a, 50, round)
		if _, err := a.Compact(t.Context()); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Minute)
	}
	before := currentManifest(t, snaps)
	if c, err := slow.Compact(t.Context()); err != nil || c.Snapshot != "" {
		t.Errorf("Compact of a store behind the snapshot = %+v, %v; want nothing", c, err)
	}
	if after := currentManifest(t, snaps); after.Snapshot != before.Snapshot {
		t.Errorf("a store behind replaced the manifest's snapshot %s with %s", before.Snapshot, after.Snapshot)
	}
	close(gate)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := slow.WaitReady(ctx); !errors.Is(err, ErrStale) || !errors.Is(slow.Err(), ErrStale) {
		t.Errorf("a follower behind the trims: WaitReady = %v, Err = %v; want ErrStale", err, slow.Err())
	}
	select {
	case <-slow.Stopped(): // what serve waits on to exit
	case <-ctx.Done():
		t.Errorf("a follower behind the trims: Stopped not closed")
	}
}

// failingManifest is Snapshots whose manifest cannot be read once fail
// is set.
type failingManifest struct {
	*MemSnapshots
	fail *atomic.Bool
}

func (f failingManifest) Manifest(ctx context.Context) ([]byte, uint64, error) {
	if f.fail.Load() {
		return nil, 0, errors.New("manifest unreadable")
	}
	return f.MemSnapshots.Manifest(ctx)
}

// TestFollowerStopsAtAHole makes a hole in the log every way it can
// happen under a running store whose follower lags, and checks that it
// stops at the hole (ErrStale) without applying anything after it, and
// that it restores at its next Open. The check is each entry's Prev
// against the partition's last entry applied, so it holds whatever the
// clocks say and whether or not the manifest can be read; the checks of
// an entry's age and of the manifest it replaced missed the last three.
func TestFollowerStopsAtAHole(t *testing.T) {
	for _, tc := range []struct {
		name string
		// slowClock is the lagging store's clock beside the writer's.
		slowClock time.Duration
		// manifestFails: the lagging store cannot read the manifest.
		manifestFails bool
		// lost: entries go without a compaction (no snapshot to restore).
		lost bool
	}{
		{name: "trim while behind"},
		{name: "clocks apart", slowClock: -time.Hour},
		{name: "manifest unreadable", manifestFails: true},
		{name: "entries lost", lost: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
			slowClk := &clock{now: clk.now.Add(tc.slowClock)}
			log := &MemLog{Now: clk.Now}
			snaps := &MemSnapshots{}
			a := openCompacting(t, t.TempDir(), log, snaps, clk)
			gate := make(chan struct{})
			fail := &atomic.Bool{}
			slowDir := t.TempDir()
			slow, err := Open(t.Context(), slowDir, gatedLog{log, gate},
				Options{Logf: t.Logf, Snapshots: failingManifest{snaps, fail}, CompactEvery: time.Minute, Now: slowClk.Now})
			if err != nil {
				t.Fatal(err)
			}
			defer slow.Close()
			fail.Store(tc.manifestFails)
			for round := 1; round <= 3; round++ {
				writeRounds(t, a, 50, round)
				if tc.lost {
					for p := range 4 {
						last, _ := log.Last(t.Context(), p)
						if err := log.Trim(t.Context(), p, last); err != nil {
							t.Fatal(err)
						}
					}
				} else if _, err := a.Compact(t.Context()); err != nil {
					t.Fatal(err)
				}
				clk.Add(time.Minute)
				slowClk.Add(time.Minute)
			}
			var b Batch
			b.Set([]byte("written last"), nil)
			if err := a.Write(t.Context(), 0, &b); err != nil {
				t.Fatal(err)
			}
			close(gate)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if err := slow.WaitReady(ctx); !errors.Is(err, ErrStale) || !errors.Is(slow.Err(), ErrStale) {
				t.Fatalf("a follower behind a hole: WaitReady = %v, Err = %v; want ErrStale", err, slow.Err())
			}
			t.Logf("the follower stopped: %v", slow.Err())
			if got := dump(t, slow); len(got) > 0 {
				t.Errorf("the follower applied %d keys (%q…) past the hole", len(got), got["k0000"])
			}
			slow.Close()
			if tc.lost {
				return // no snapshot holds what went
			}
			fail.Store(false)
			again := openCompacting(t, slowDir, log, snaps, clk)
			if got, want := dump(t, again), dump(t, a); !maps.Equal(got, want) {
				t.Errorf("opened again: the store holds %d keys, want %d as the writer", len(got), len(want))
			}
		})
	}
}

// TestCompactWithoutSnapshots: a store without Snapshots never trims.
func TestCompactWithoutSnapshots(t *testing.T) {
	log := &MemLog{}
	s := open(t, t.TempDir(), log)
	writeRounds(t, s, 20, 1)
	if c, err := s.Compact(t.Context()); err != nil || c != (Compaction{}) || log.Live() != 20 {
		t.Errorf("Compact without Snapshots = %+v, %v, %d entries left; want nothing done", c, err, log.Live())
	}
}

// TestCompactRatio: with CompactRatio, a period passing is not enough: a
// snapshot waits until the entries applied since the last add up to the
// ratio times its size.
func TestCompactRatio(t *testing.T) {
	clk := &clock{now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	log := &MemLog{Now: clk.Now}
	snaps := &MemSnapshots{}
	s := openWith(t, t.TempDir(), log, Options{Logf: t.Logf, Snapshots: snaps, CompactEvery: time.Minute, Now: clk.Now, CompactRatio: 1})
	value := make([]byte, 200)
	write := func(from, n int) (bytes int) {
		for i := from; i < from+n; i++ {
			var b Batch
			b.Set(fmt.Appendf(nil, "k%05d", i), value)
			if err := s.Write(t.Context(), i%4, &b); err != nil {
				t.Fatal(err)
			}
			bytes += len(b.data)
		}
		return bytes
	}
	write(0, 100)
	first, err := s.Compact(t.Context())
	if err != nil || first.Snapshot == "" {
		t.Fatalf("first Compact = %+v, %v; want a snapshot", first, err)
	}
	clk.Add(time.Minute)
	written := write(100, 10)
	if c, err := s.Compact(t.Context()); err != nil || c.Snapshot != "" {
		t.Fatalf("Compact after %d bytes beside a snapshot of %d = %+v, %v; want none", written, first.Bytes, c, err)
	}
	for next := 110; int64(written) < first.Bytes; next += 10 {
		written += write(next, 10)
	}
	if c, err := s.Compact(t.Context()); err != nil || c.Snapshot == "" {
		t.Fatalf("Compact after %d bytes beside a snapshot of %d = %+v, %v; want a snapshot", written, first.Bytes, c, err)
	}
}
