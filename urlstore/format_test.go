package urlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// valueFormat is a user's value format for the gate's tests: the first
// byte of a value is its version; this "build" reads up to readsUpTo.
func valueFormat(readsUpTo byte) (map[string]int, func(key, value []byte) error) {
	return map[string]int{"value": int(readsUpTo)}, func(key, value []byte) error {
		if len(value) > 0 && value[0] > readsUpTo {
			return fmt.Errorf("%w: a value of version %d, this build reads up to %d", ErrNewerFormat, value[0], readsUpTo)
		}
		return nil
	}
}

// appendRaw appends data to partition p of log after its last entry, as
// another build's writer would.
func appendRaw(t *testing.T, log Log, p int, data []byte) {
	t.Helper()
	last, err := log.Last(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := log.Append(t.Context(), p, last, data); err != nil {
		t.Fatal(err)
	}
}

func batchOf(k, v string) []byte {
	var b Batch
	b.Set([]byte(k), []byte(v))
	return logged(b.data)
}

// waitStopped waits until s's follower stops and returns its error.
func waitStopped(t *testing.T, s *Store) error {
	t.Helper()
	select {
	case <-s.Stopped():
		return s.Err()
	case <-time.After(10 * time.Second):
		t.Fatal("the follower did not stop")
		return nil
	}
}

// TestFormatGate is a rolling upgrade: a newer build writes beside an
// older one. The older store stops at the first entry or value of a newer
// format, applying neither it nor anything after it (skipping it would
// lose a write every newer store applied), and says which versions; once
// a newer build has opened a store on the log, its formats are the
// deployment's, recorded in the manifest, and an older build refuses to
// open one, naming both versions.
func TestFormatGate(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	formats, check := valueFormat(1)
	for _, tc := range []struct {
		name  string
		entry []byte // what the newer build writes
		want  string // in the older store's error
	}{
		{"an entry of a newer log format", append([]byte{LogFormat + 1}, "whatever it holds"...), fmt.Sprintf("log format %d; this build reads up to %d", LogFormat+1, LogFormat)},
		{"a value of a newer version", batchOf("b", "\x02new"), "version 2, this build reads up to 1"},
		{"a newer value, compressed", batchOf("b", "\x02"+strings.Repeat("new ", 100)), "version 2, this build reads up to 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &MemLog{}
			old := openWith(t, t.TempDir(), log, Options{Logf: t.Logf, Snapshots: &MemSnapshots{}, Formats: formats, CheckValue: check})
			var b Batch
			b.Set([]byte("a"), []byte("\x01old"))
			if err := old.Write(ctx, 0, &b); err != nil {
				t.Fatal(err)
			}
			appendRaw(t, log, 1, tc.entry)
			appendRaw(t, log, 2, batchOf("c", "\x01after"))
			err := waitStopped(t, old)
			if !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("the older store stopped with %v; want ErrNewerFormat saying %q", err, tc.want)
			}
			t.Logf("stopped: %v", err)
			if got := dump(t, old); len(got) != 1 || got["a"] != "\x01old" {
				t.Errorf("the older store holds %q; want its own write alone, nothing at or after the newer entry", got)
			}
			if old.Stats().Bad != 0 {
				t.Errorf("the newer entry was counted bad (skipped)")
			}
		})
	}

	t.Run("the deployment's formats", func(t *testing.T) {
		log, snaps := &MemLog{}, &MemSnapshots{}
		openWith(t, t.TempDir(), log, Options{Snapshots: snaps, Formats: formats, CheckValue: check})
		newFormats, newCheck := valueFormat(2)
		openWith(t, t.TempDir(), log, Options{Snapshots: snaps, Formats: newFormats, CheckValue: newCheck})
		m := currentManifest(t, snaps)
		if m.Formats["value"] != 2 || m.Formats[logFormatName] != LogFormat || m.Snapshot != "" {
			t.Fatalf("manifest %+v: want the newer value format 2 and the log's %d recorded, no snapshot", m, LogFormat)
		}
		_, err := Open(ctx, t.TempDir(), log, Options{Snapshots: snaps, Formats: formats, CheckValue: check})
		if !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), "value format is 2") || !strings.Contains(err.Error(), "this build's is 1") {
			t.Errorf("an older build opening a store: %v; want ErrNewerFormat naming 2 and 1", err)
		}
		// A newer log format, recorded by a newer build.
		m.Formats[logFormatName] = LogFormat + 1
		b, _ := json.Marshal(m)
		_, rev, _ := snaps.Manifest(ctx)
		if _, err := snaps.SetManifest(ctx, b, rev); err != nil {
			t.Fatal(err)
		}
		_, err = Open(ctx, t.TempDir(), log, Options{Snapshots: snaps, Formats: newFormats, CheckValue: newCheck})
		if want := fmt.Sprintf("log format is %d (a newer build opened it), this build's is %d", LogFormat+1, LogFormat); !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), want) {
			t.Errorf("a build of log format %d opening a store of log format %d: %v; want ErrNewerFormat saying %q", LogFormat, LogFormat+1, err, want)
		}
		// Compaction keeps the formats in every manifest it writes.
		clk := &clock{now: time.Now()}
		m.Formats[logFormatName] = LogFormat
		b, _ = json.Marshal(m)
		_, rev, _ = snaps.Manifest(ctx)
		if _, err := snaps.SetManifest(ctx, b, rev); err != nil {
			t.Fatal(err)
		}
		s := openWith(t, t.TempDir(), log, Options{Snapshots: snaps, Formats: newFormats, CompactEvery: time.Minute, Now: clk.Now})
		writeRounds(t, s, 10, 1)
		if c, err := s.Compact(ctx); err != nil || c.Snapshot == "" {
			t.Fatalf("Compact = %+v, %v", c, err)
		}
		if m := currentManifest(t, snaps); m.Snapshot == "" || m.Formats["value"] != 2 {
			t.Errorf("after a compaction the manifest is %+v; want a snapshot and the value format 2", m)
		}
	})
}
