package urlstore

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Compaction: the log is the truth, but it grows with the work done (every
// put, hand-out and acknowledgement appends), not with the records held.
// Compact bounds it the way a replicated state machine does (raft's
// snapshots, Kafka's tiered log compaction): it copies the index into a
// snapshot (Options.Snapshots) and trims the log below what the snapshot
// holds, so the log keeps about two compaction periods of entries; a store
// opened in an empty directory starts from the snapshot and reads only the
// log's tail.
//
// A trim must never remove an entry that a store still needs. Each cycle
// of Compact, run when the manifest's snapshot is at least
// Options.CompactEvery old:
//
//  1. trims every partition below the points the manifest announced as
//     to be trimmed (its Trimmed, written one cycle earlier);
//  2. takes a new snapshot (a Pebble checkpoint: a consistent copy, with
//     the partitions' sequences it holds), if this store has applied at
//     least the current snapshot's points (a store behind leaves it to
//     another) and more (an idle store's snapshot is current: an idle
//     deployment uploads nothing);
//  3. replaces the manifest, compare-and-set on its revision: the new
//     snapshot, and as Trimmed the previous snapshot's points.
//
// So an entry goes only a full period after the manifest announced it,
// and the snapshot named then and every later one hold it. A store opened
// on a directory behind the announced points (stopped for longer than a
// period), empty, or left by an interrupted restore, restores the current
// snapshot first. A running store checks every entry it applies against
// the last it applied of the entry's partition (Entry.Prev, the
// compare-and-append's expected sequence, kept with the entry): one that
// fell behind a trim meets an entry whose predecessor it never applied,
// and stops with ErrStale rather than apply past the hole, whatever the
// clocks say or whether the manifest can be read; it restores at its next
// Open. This is raft's log matching (an entry names the one before it),
// not a guess from an entry's age.

// ErrStale is the error of a store whose follower met a hole in the log:
// entries of a partition it never applied are gone (trimmed by Compact
// while it was behind, or lost). Its index cannot be made current from the
// log; it restores from the snapshot when opened again.
var ErrStale = errors.New("urlstore: the index is behind what the log holds: open it again to restore from the snapshot")

// DefaultCompactEvery is Options.CompactEvery's default.
const DefaultCompactEvery = 10 * time.Minute

// manifest names the current snapshot and what it holds.
type manifest struct {
	// Snapshot is the current snapshot's name in Snapshots.
	Snapshot string `json:"snapshot"`
	// Applied is, per partition, the sequence of its last entry the
	// snapshot holds; Followed the follower's position in it.
	Applied  map[int]uint64 `json:"applied"`
	Followed uint64         `json:"followed"`
	// Made is when the snapshot was taken; Bytes its size.
	Made  time.Time `json:"made"`
	Bytes int64     `json:"bytes"`
	// Trimmed is, per partition, the sequence below which the next cycle
	// trims the log (or an earlier one did): the previous snapshot's
	// Applied. A store whose index is behind it restores.
	Trimmed map[int]uint64 `json:"trimmed,omitempty"`
	// Formats are the deployment's formats (Options.Formats, "log"
	// among them): the newest any build that opened a store on the log
	// wrote. A manifest may hold them alone, before any snapshot.
	Formats map[string]int `json:"formats,omitempty"`

	// applied is the taker's appliedBytes at the checkpoint (not stored).
	applied uint64
}

func readManifest(ctx context.Context, snaps Snapshots) (*manifest, uint64, error) {
	b, rev, err := snaps.Manifest(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("urlstore: read the snapshots' manifest: %w", err)
	}
	if len(b) == 0 {
		return nil, rev, nil
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, 0, fmt.Errorf("urlstore: the snapshots' manifest: %w", err)
	}
	return &m, rev, nil
}

// behind reports whether applied (a store's per-partition sequences) is
// behind points in some partition.
func behind(applied, points map[int]uint64) bool {
	for p, seq := range points {
		if applied[p] < seq {
			return true
		}
	}
	return false
}

// Compaction reports one call of Compact.
type Compaction struct {
	// Trimmed counts the partitions trimmed.
	Trimmed int
	// Snapshot is the snapshot taken ("" if none), Bytes its size and
	// Took how long taking and storing it took.
	Snapshot string
	Bytes    int64
	Took     time.Duration
}

// Compact runs one cycle of compaction if the current snapshot is at least
// Options.CompactEvery old, or there is none: trim what the manifest
// announced, snapshot, announce the previous snapshot's points. It does
// nothing without Options.Snapshots. Several processes may call it on one
// log: the manifest's compare-and-set lets one of them through per cycle.
func (s *Store) Compact(ctx context.Context) (Compaction, error) {
	var out Compaction
	if s.snaps == nil {
		return out, nil
	}
	m, rev, err := readManifest(ctx, s.snaps)
	if err != nil {
		return out, err
	}
	var formats map[string]int
	if m != nil {
		if formats = m.Formats; m.Snapshot == "" {
			m = nil // the formats alone: no snapshot yet
		}
	}
	if m != nil && s.now().Sub(m.Made) < s.compactEvery {
		return out, nil
	}
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	if m != nil && m.Snapshot != s.trimmedFor {
		for p, seq := range m.Trimmed {
			if err := s.log.Trim(ctx, p, seq); err != nil {
				return out, fmt.Errorf("urlstore: %w", err)
			}
			out.Trimmed++
		}
		s.trimmedFor = m.Snapshot
	}
	if m != nil {
		applied := s.appliedNow()
		if behind(applied, m.Applied) {
			return out, nil // this store is behind the snapshot there: another takes the next
		}
		if !behind(m.Applied, applied) {
			return out, nil // nothing written since: the snapshot there is current
		}
		if m.Snapshot != s.sinceFor {
			s.sinceFor, s.sinceBytes = m.Snapshot, s.appliedBytes.Load()
		}
		if written := s.appliedBytes.Load() - s.sinceBytes; float64(written) < s.compactRatio*float64(m.Bytes) {
			return out, nil // the log written since is small beside a snapshot
		}
	}
	start := time.Now()
	next, err := s.snapshot(ctx)
	if err != nil {
		return out, err
	}
	keep := false
	defer func() {
		if !keep {
			_ = s.snaps.Delete(context.WithoutCancel(ctx), next.Snapshot)
		}
	}()
	if m != nil {
		next.Trimmed = m.Applied
	}
	next.Formats = mergeFormats(formats, s.formats)
	b, err := json.Marshal(next)
	if err != nil {
		return out, err
	}
	if _, err := s.snaps.SetManifest(ctx, b, rev); errors.Is(err, ErrConflict) {
		return out, nil // another process compacted meanwhile
	} else if err != nil {
		return out, fmt.Errorf("urlstore: write the snapshots' manifest: %w", err)
	}
	keep = true
	s.sinceFor, s.sinceBytes = next.Snapshot, next.applied
	if m != nil && m.Snapshot != next.Snapshot {
		if err := s.snaps.Delete(ctx, m.Snapshot); err != nil && s.logf != nil {
			s.logf("urlstore: the previous snapshot %s stays: %v", m.Snapshot, err)
		}
	}
	out.Snapshot, out.Bytes, out.Took = next.Snapshot, next.Bytes, time.Since(start)
	return out, nil
}

// CompactLoop calls Compact every tenth of Options.CompactEvery (every
// second at least) until ctx ends, and report with each outcome that did
// something or failed. Every process on a log may run it: the first to
// find the snapshot a period old takes the next.
func (s *Store) CompactLoop(ctx context.Context, report func(Compaction, error)) {
	if s.snaps == nil {
		return
	}
	t := time.NewTicker(max(s.compactEvery/10, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c, err := s.Compact(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil || c != (Compaction{}) {
			report(c, err)
		}
	}
}

// snapshot copies the index into a new snapshot and returns its manifest
// (without Trimmed): a Pebble checkpoint beside the directory (hard links,
// on the same file system), its sequences read from it, stored as a tar.
func (s *Store) snapshot(ctx context.Context) (*manifest, error) {
	tmp := s.dir + ".snapshot"
	if err := os.RemoveAll(tmp); err != nil {
		return nil, fmt.Errorf("urlstore: snapshot: %w", err)
	}
	defer os.RemoveAll(tmp)
	// The memtables to tables first: compressed, and never replayed.
	if err := s.db.Flush(); err != nil {
		return nil, fmt.Errorf("urlstore: snapshot: %w", err)
	}
	if err := s.db.Checkpoint(tmp, pebble.WithFlushedWAL()); err != nil {
		return nil, fmt.Errorf("urlstore: snapshot: %w", err)
	}
	m := &manifest{Applied: map[int]uint64{}, Made: s.now(), applied: s.appliedBytes.Load()}
	if err := readCheckpoint(tmp, m); err != nil {
		return nil, err
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	m.Snapshot = fmt.Sprintf("%016x-%s", m.Followed, hex.EncodeToString(id[:]))
	pr, pw := io.Pipe()
	var size int64
	go func() { pw.CloseWithError(writeTar(pw, tmp, &size)) }()
	err := s.snaps.Put(ctx, m.Snapshot, pr)
	pr.CloseWithError(err)
	if err != nil {
		return nil, fmt.Errorf("urlstore: store snapshot %s: %w", m.Snapshot, err)
	}
	m.Bytes = size
	return m, nil
}

// readCheckpoint reads the sequences a checkpoint holds into m.
func readCheckpoint(dir string, m *manifest) error {
	db, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, Logger: quiet{}})
	if err != nil {
		return fmt.Errorf("urlstore: snapshot: %w", err)
	}
	defer db.Close()
	if v, closer, err := db.Get(followedKey); err == nil {
		if len(v) == 8 {
			m.Followed = binary.BigEndian.Uint64(v)
		}
		closer.Close()
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: appliedPrefix, UpperBound: prefixEnd(appliedPrefix)})
	if err != nil {
		return fmt.Errorf("urlstore: snapshot: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k, v := it.Key(), it.Value()
		if len(k) == len(appliedPrefix)+4 && len(v) == 8 {
			seq := binary.BigEndian.Uint64(v)
			m.Applied[int(binary.BigEndian.Uint32(k[len(appliedPrefix):]))] = seq
			m.Followed = max(m.Followed, seq)
		}
	}
	return it.Error()
}

// writeTar writes the regular files of dir (a checkpoint: no
// subdirectories) to w as a tar, adding their sizes to size.
func writeTar(w io.Writer, dir string, size *int64) error {
	tw := tar.NewWriter(w)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == "LOCK" { // the read of its sequences made one
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Name: e.Name(), Mode: 0o644, Size: fi.Size(), ModTime: fi.ModTime(), Typeflag: tar.TypeReg})
		}
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		f.Close()
		if err != nil {
			return err
		}
		*size += fi.Size()
	}
	return tw.Close()
}

// restoringFile marks a directory whose restore has not finished: Open
// restores it again.
const restoringFile = "RESTORING"

// restore replaces the index in dir (whose lock the caller holds) with
// the snapshot m names: the marker first, every file but the lock out,
// the snapshot's files in, the marker last.
func restore(ctx context.Context, dir string, snaps Snapshots, m *manifest, logf func(string, ...any)) error {
	marker := filepath.Join(dir, restoringFile)
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		return fmt.Errorf("urlstore: restore %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("urlstore: restore %s: %w", dir, err)
	}
	for _, e := range entries {
		if n := e.Name(); n != "LOCK" && n != restoringFile {
			if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
				return fmt.Errorf("urlstore: restore %s: %w", dir, err)
			}
		}
	}
	if logf != nil {
		logf("urlstore: restoring %s from snapshot %s (%d bytes, taken %s)", dir, m.Snapshot, m.Bytes, m.Made.Format(time.RFC3339))
	}
	r, err := snaps.Open(ctx, m.Snapshot)
	if err != nil {
		return fmt.Errorf("urlstore: restore %s: %w", dir, err)
	}
	defer r.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("urlstore: restore %s from %s: %w", dir, m.Snapshot, err)
		}
		name := filepath.Base(h.Name)
		if h.Typeflag != tar.TypeReg || name != h.Name || name == "LOCK" || name == restoringFile || strings.HasPrefix(name, ".") {
			return fmt.Errorf("urlstore: restore %s from %s: unexpected entry %q", dir, m.Snapshot, h.Name)
		}
		if err := writeFileSync(filepath.Join(dir, name), tr); err != nil {
			return fmt.Errorf("urlstore: restore %s from %s: %w", dir, m.Snapshot, err)
		}
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("urlstore: restore %s: %w", dir, err)
	}
	if err := os.Remove(marker); err != nil {
		return fmt.Errorf("urlstore: restore %s: %w", dir, err)
	}
	return syncDir(dir)
}

func writeFileSync(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// hasIndex reports whether dir holds a Pebble database (its OPTIONS file).
func hasIndex(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "OPTIONS-*"))
	return len(m) > 0
}

// restoring reports whether dir holds the marker of an unfinished restore.
func restoring(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, restoringFile))
	return !errors.Is(err, fs.ErrNotExist)
}

// applied returns the store's per-partition sequences.
func (s *Store) appliedNow() map[int]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]uint64, len(s.parts))
	for p, pt := range s.parts {
		out[p] = pt.last.Load()
	}
	return out
}

// hole stops the follower at e, an entry of a partition whose last
// applied entry here is last, not e.Prev: the entries between are gone.
// It marks the directory to be restored from the snapshot at the next
// Open, as an interrupted restore is.
func (s *Store) hole(e Entry, last uint64) error {
	err := fmt.Errorf("%w: partition %d: entry %d follows entry %d, and this index's last of the partition is %d", ErrStale, e.Part, e.Seq, e.Prev, last)
	if s.snaps != nil {
		if werr := os.WriteFile(filepath.Join(s.dir, restoringFile), nil, 0o644); werr != nil {
			return fmt.Errorf("%w (and marking it for a restore: %v)", err, werr)
		}
	}
	return err
}

// restoreCurrent restores dir from the current snapshot, reading the
// manifest again if the snapshot it named went meanwhile (a compaction
// replaced it). It returns the manifest restored.
func restoreCurrent(ctx context.Context, dir string, snaps Snapshots, m *manifest, logf func(string, ...any)) (*manifest, error) {
	for try := 0; ; try++ {
		err := restore(ctx, dir, snaps, m, logf)
		if !errors.Is(err, ErrNoSnapshot) || try == 2 {
			return m, err
		}
		if m, _, err = readManifest(ctx, snaps); err != nil {
			return nil, err
		}
		if m == nil || m.Snapshot == "" {
			return nil, fmt.Errorf("urlstore: restore %s: the snapshots' manifest went", dir)
		}
	}
}

// logFormatName is the log's own entry in Options.Formats.
const logFormatName = "log"

// recordFormats is Open's format gate: it refuses a build older than a
// format the manifest records, naming both versions, and records the
// formats of this build that are newer (compare-and-set, again on a
// conflict). It returns the manifest if it names a snapshot, what Open
// restores from.
func recordFormats(ctx context.Context, snaps Snapshots, formats map[string]int) (*manifest, error) {
	if snaps == nil {
		return nil, nil
	}
	for {
		m, rev, err := readManifest(ctx, snaps)
		if err != nil {
			return nil, err
		}
		if m == nil {
			m = &manifest{}
		}
		newer := false
		for _, name := range slices.Sorted(maps.Keys(formats)) {
			switch v, rec := formats[name], m.Formats[name]; {
			case rec > v:
				return nil, fmt.Errorf("%w: the deployment's %s format is %d (a newer build opened it), this build's is %d: upgrade it", ErrNewerFormat, name, rec, v)
			case rec < v:
				newer = true
			}
		}
		if newer {
			m.Formats = mergeFormats(m.Formats, formats)
			b, err := json.Marshal(m)
			if err != nil {
				return nil, err
			}
			if _, err := snaps.SetManifest(ctx, b, rev); errors.Is(err, ErrConflict) {
				continue
			} else if err != nil {
				return nil, fmt.Errorf("urlstore: record the formats in the snapshots' manifest: %w", err)
			}
		}
		if m.Snapshot == "" {
			return nil, nil
		}
		return m, nil
	}
}

// mergeFormats is the newest version of each name in a and b.
func mergeFormats(a, b map[string]int) map[string]int {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]int{}
	}
	for k, v := range b {
		out[k] = max(out[k], v)
	}
	return out
}
