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

// TestForgetStopsSaves: a deleted crawl's in-memory filter never writes
// its snapshot file once forget has returned, not even from a save the loop
// began with the filter in hand before forget dropped it. Before, that save
// could land after the delete had removed the file, and the crawl created
// again under the id opened with the deleted crawl's URLs seen (a URL put
// after DeleteCrawl was answered SKIPPED, one run of the URLFrontier
// reference's DumpURLsTest in about 40). The loop's late save is played
// here by ticking the filter it took, after forget and the file's removal.
func TestForgetStopsSaves(t *testing.T) {
	nsrv := natstest.Start(t, natstest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg, err := frontier.OpenCrawls(ctx, nsrv.JetStream(), frontier.Topology{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default().Filter
	cfg.Capacity = 10_000
	cfg.Snapshot = filepath.Join(t.TempDir(), "seen.bloom")
	cfg.SnapshotInterval = time.Millisecond
	s := newCrawlFilters(cfg, nil, "test", time.Hour, slog.New(slog.DiscardHandler),
		func(context.Context) (*frontier.Crawls, error) { return reg, nil })

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
