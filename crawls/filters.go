package crawls

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/pipeline"
)

var _ Filters = DedupFilters{}

// DedupFilters are the crawls' dedup filters where the workers keep them,
// named from the workers' filter section as the workers name them
// (pipeline.CrawlFilter): in Redis when Redis is set, else in the snapshot
// files beside Section.Snapshot (an embedded run's data directory); with
// neither, in the workers' memory, which nothing else reaches. A
// DedupFilters does not close Redis.
type DedupFilters struct {
	// Section is the workers' filter section.
	Section config.Filter
	// Redis is the workers' Redis; nil: their filters are in memory.
	Redis redis.UniversalClient
	// Policy is the normalize policy version the filters hold URLs of
	// (normalize.Normalizer.Version).
	Policy string
}

// Describe reads the crawl's filter as it is stored, writing nothing,
// whatever the section's kind, capacity and fpp say (config.Filter.SizedByCrawl),
// and its revisit window if it is one. A crawl without a filter yet has
// none (nil, no error); the error says why one that exists cannot be read.
func (f DedupFilters) Describe(ctx context.Context, id string, st frontier.CrawlSettings) (*dedup.Stats, *dedup.WindowStats, error) {
	fc := pipeline.CrawlFilter(f.Section.SizedByCrawl(), id, st)
	fc.Log = slog.New(slog.DiscardHandler) // its notes are for commands that write
	sf, err := pipeline.OpenExistingFilter(ctx, fc, f.Redis, f.Policy)
	if errors.Is(err, dedup.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer sf.Close()
	stats, err := sf.Stats(ctx)
	if err != nil {
		return nil, nil, err
	}
	w, err := dedup.ReadWindow(ctx, sf)
	return &stats, w, err
}

// Delete deletes the crawl's filter: its keys in Redis, or its snapshot
// file. A filter in the workers' memory is left to them (zero
// FilterDeleted).
func (f DedupFilters) Delete(ctx context.Context, id string, st frontier.CrawlSettings) (FilterDeleted, error) {
	fc := pipeline.CrawlFilter(f.Section, id, st)
	switch {
	case f.Redis != nil:
		n, err := dedup.DeleteRedis(ctx, f.Redis, fc.Name)
		return FilterDeleted{Name: fc.Name, RedisKeys: n}, err
	case fc.Snapshot != "":
		switch err := os.Remove(fc.Snapshot); {
		case err == nil:
			return FilterDeleted{File: fc.Snapshot, Removed: true}, nil
		case errors.Is(err, fs.ErrNotExist):
			return FilterDeleted{File: fc.Snapshot}, nil
		default:
			return FilterDeleted{File: fc.Snapshot}, err
		}
	}
	return FilterDeleted{}, nil
}

// SnapshotFile is a crawl's filter snapshot file.
type SnapshotFile struct {
	Crawl string
	Path  string
	Bytes int64
}

// Snapshots lists the crawls' snapshot files beside Section.Snapshot, by
// crawl id, as pipeline.CrawlFilter names them ("<stem>.<crawl><ext>", the
// ext a crawl's kind when the section's file is named after one: an
// embedded data dir's seen.<crawl>.<kind>); none without a snapshot file.
// It reads only the directory, so it works while a run holds the crawls'
// records.
func (f DedupFilters) Snapshots() ([]SnapshotFile, error) {
	path := f.Section.Snapshot
	if path == "" {
		return nil, nil
	}
	ext := filepath.Ext(path)
	stem := strings.TrimSuffix(path, ext)
	exts := []string{ext}
	if ext == ".bloom" || ext == ".cuckoo" {
		exts = []string{".bloom", ".cuckoo"}
	}
	var out []SnapshotFile
	for _, ext := range exts {
		files, err := filepath.Glob(stem + ".*" + ext)
		if err != nil {
			return nil, err
		}
		for _, file := range files {
			id := strings.TrimSuffix(strings.TrimPrefix(file, stem+"."), ext)
			if st, err := os.Stat(file); err == nil && frontier.ValidCrawl(id) && st.Mode().IsRegular() {
				out = append(out, SnapshotFile{Crawl: id, Path: file, Bytes: st.Size()})
			}
		}
	}
	slices.SortFunc(out, func(a, b SnapshotFile) int { return strings.Compare(a.Crawl+a.Path, b.Crawl+b.Path) })
	return out, nil
}
