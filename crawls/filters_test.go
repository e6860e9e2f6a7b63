package crawls_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/pipeline"
)

// TestSnapshots finds the crawls' snapshot files from their names alone,
// the inverse of pipeline.CrawlFilter's naming: a file named after a kind
// is the crawl's of either kind; the shared file, names that are no crawl
// id and files of other names are not crawls'.
func TestSnapshots(t *testing.T) {
	dir := t.TempDir()
	named := func(snapshot, crawl, kind string) string {
		return pipeline.CrawlFilter(config.Filter{Snapshot: filepath.Join(dir, snapshot)}, crawl, frontier.CrawlSettings{Kind: kind}).Snapshot
	}
	files := []string{
		named("seen.bloom", "a", "bloom"), named("seen.bloom", "b", "cuckoo"), named("seen.dat", "c", ""),
		filepath.Join(dir, "seen.bloom"), filepath.Join(dir, "seen.x.y.bloom"), filepath.Join(dir, "seen.a.bloom.tmp"),
	}
	for _, f := range files {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "seen.d.bloom"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		snapshot string
		want     []string // crawl ids
	}{
		{"seen.bloom", []string{"a", "b"}},
		{"seen.cuckoo", []string{"a", "b"}},
		{"seen.dat", []string{"c"}},
		{"", nil},
	} {
		section := config.Filter{}
		if tt.snapshot != "" {
			section.Snapshot = filepath.Join(dir, tt.snapshot)
		}
		got, err := crawls.DedupFilters{Section: section}.Snapshots()
		var ids []string
		for _, f := range got {
			ids = append(ids, f.Crawl)
			if f.Bytes != 1 || filepath.Dir(f.Path) != dir {
				t.Errorf("Snapshots(%q): %+v", tt.snapshot, f)
			}
		}
		if err != nil || !slices.Equal(ids, tt.want) {
			t.Errorf("Snapshots(%q) = %q, %v; want %q", tt.snapshot, ids, err, tt.want)
		}
	}
}
