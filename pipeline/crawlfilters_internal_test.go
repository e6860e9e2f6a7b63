package pipeline

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
)

// testCrawlFilters returns in-memory crawl filters saved every millisecond
// beside a temporary seen.bloom, and their registry on a NATS server of
// the test's own.
func testCrawlFilters(t *testing.T, ctx context.Context) (*crawlFilters, *frontier.Crawls) {
	t.Helper()
	nsrv := natstest.Start(t, natstest.Options{})
	reg, err := frontier.OpenCrawls(ctx, nsrv.JetStream(), frontier.Topology{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default().Filter
	cfg.Capacity = 10_000
	cfg.Snapshot = filepath.Join(t.TempDir(), "seen.bloom")
	cfg.SnapshotInterval = time.Millisecond
	return newCrawlFilters(cfg, nil, "test", time.Hour, slog.New(slog.DiscardHandler),
		func(context.Context) (*frontier.Crawls, error) { return reg, nil }), reg
}

// TestForgetStopsSaves: a deleted crawl's in-memory filter never writes
// its snapshot file once forget has returned, not even from a save the loop
// began with the filter in hand before forget dropped it. Before, that save
// could land after the delete had removed the file, and the crawl created
// again under the id opened with the deleted crawl's URLs seen (a URL put
// after DeleteCrawl was answered SKIPPED, one run of the URLFrontier
// reference's DumpURLsTest in about 40). The loop's late save is played
// here by ticking the filter it took, after forget and the file's removal.
func TestForgetStopsSaves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, _ := testCrawlFilters(t, ctx)

	for _, tc := range []struct {
		name  string
		saved bool // the file holds an earlier save when the crawl is deleted
	}{{"never saved", false}, {"saved before", true}} {
		t.Run(tc.name, func(t *testing.T) {
			f, release, err := s.Acquire(ctx, "d")
			if err != nil {
				t.Fatal(err)
			}
			e := s.readyFilters()["d"] // as the loop takes it
			if e == nil || e.snap == nil {
				t.Fatalf("no in-memory filter with a snapshot for crawl d: %+v", e)
			}
			if tc.saved {
				if err := e.snap.save(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := f.TestAndAdd(ctx, [][]byte{[]byte("https://d.example/" + tc.name)}); err != nil {
				t.Fatal(err)
			}
			release()

			s.forget("d")
			if err := os.Remove(e.cfg.Snapshot); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			e.snap.tick(ctx, time.Now().Add(time.Hour)) // the save the loop had begun
			if err := e.snap.final(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(e.cfg.Snapshot); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the deleted crawl's snapshot %s was written after forget: %v", e.cfg.Snapshot, err)
			}
			if got := s.readyFilters()["d"]; got != nil {
				t.Fatalf("crawl d's filter is still open after forget")
			}
			s.closeDropped()
		})
	}
}

// TestForgetDeleted: the registry's report of a deletion, which comes after
// the record went, drops a filter of the deleted incarnation and removes
// the snapshot file a save wrote again after the deleting command (in
// another process) had removed it; a filter of the crawl created again
// meanwhile (a new incarnation) is kept, file and all.
func TestForgetDeleted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, reg := testCrawlFilters(t, ctx)
	create := func(incarnation string) {
		t.Helper()
		if _, err := reg.Update(ctx, "d", func(rec *frontier.CrawlRecord) (bool, error) {
			rec.Incarnation, rec.Created = incarnation, time.Now().UTC()
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// open returns crawl d's filter, one URL added and saved, as the loop
	// holds it.
	open := func(u string) *crawlFilter {
		t.Helper()
		f, release, err := s.Acquire(ctx, "d")
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		if _, err := f.TestAndAdd(ctx, [][]byte{[]byte(u)}); err != nil {
			t.Fatal(err)
		}
		e := s.readyFilters()["d"]
		if err := e.snap.save(ctx); err != nil {
			t.Fatal(err)
		}
		return e
	}
	exists := func(path string) bool {
		_, err := os.Stat(path)
		return err == nil
	}

	create("one")
	old := open("https://d.example/old")
	// delete-crawl in another process: the file, then the record.
	if err := os.Remove(old.cfg.Snapshot); err != nil {
		t.Fatal(err)
	}
	if err := reg.Delete(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := old.f.TestAndAdd(ctx, [][]byte{[]byte("https://d.example/late")}); err != nil {
		t.Fatal(err)
	}
	old.snap.tick(ctx, time.Now().Add(time.Hour)) // a save before the report
	if !exists(old.cfg.Snapshot) {
		t.Fatal("the late save wrote no file: the test plays nothing")
	}
	s.forgetDeleted(ctx, "d")
	if exists(old.cfg.Snapshot) {
		t.Errorf("the deleted crawl's snapshot, saved again after the delete, is still there")
	}
	if s.readyFilters()["d"] != nil {
		t.Errorf("the deleted crawl's filter is still open")
	}

	// Deleted and created again before the report of the deletion comes.
	create("two")
	renewed := open("https://d.example/new")
	if err := os.Remove(renewed.cfg.Snapshot); err != nil {
		t.Fatal(err)
	}
	if err := reg.Delete(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	create("three")
	fresh := open("https://d.example/fresh") // still the "two" filter, saved again: nothing dropped it
	if fresh != renewed || !exists(fresh.cfg.Snapshot) {
		t.Fatal("a second filter opened for crawl d, or the first saved nothing")
	}
	s.forgetDeleted(ctx, "d") // the incarnation "two" is gone: dropped, its file removed
	if s.readyFilters()["d"] != nil {
		t.Fatal("a filter of a deleted incarnation is still open")
	}
	if exists(fresh.cfg.Snapshot) {
		t.Fatal("the deleted incarnation's snapshot is still there for the crawl created again")
	}
	current := open("https://d.example/current") // opened for "three"
	if current.incarnation != "three" {
		t.Fatalf("the filter opened after the re-creation has incarnation %q, want three", current.incarnation)
	}
	if seen, err := current.f.Contains(ctx, [][]byte{[]byte("https://d.example/fresh")}); err != nil || seen[0] {
		t.Fatalf("the crawl created again has the deleted incarnation's URL: %v, %v", seen, err)
	}
	s.forgetDeleted(ctx, "d") // a late report of the same deletion
	if s.readyFilters()["d"] != current || !exists(current.cfg.Snapshot) {
		t.Errorf("the filter of the crawl created again, or its file, went with a late report of the deletion")
	}
	s.closeDropped()
}
