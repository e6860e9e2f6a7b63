package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/captures"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/warc"
)

// urlCaptures is what the captures command knows of one URL.
type urlCaptures struct {
	URL string `json:"url"` // canonical, as fetched
	// Last is the crawl's last capture (the record revisits refer to):
	// from the capture store, exact.
	Last *warc.Capture `json:"last,omitempty"`
	// Path is where Last's file is, in the crawl's WARC directories;
	// Unreadable why it is in none of them (a revisit then fetches the
	// page in full).
	Path       string `json:"path,omitempty"`
	Unreadable string `json:"unreadable,omitempty"`
	// Index lists every capture in the CDXJ indexes of the crawl's WARC
	// directories (and warc.dir, when given).
	Index []warc.IndexEntry `json:"index,omitempty"`
}

// capturesCommand says where the captures of URLs are: the crawl's last
// capture from its capture store (Redis, or the embedded data dir's
// bucket) and the file holding it, and every capture the CDXJ indexes list
// in every directory the crawl has written WARC files to (its record
// lists them) and in warc.dir.
func capturesCommand(ctx context.Context, s settings, urls []string, jsonOut bool, stdout io.Writer) error {
	canon, err := s.Normalize.Normalizer()
	if err != nil {
		return err
	}
	js, rdb, closeAll, err := s.stores("sieve-crawler-captures")
	if err != nil {
		return err
	}
	defer closeAll()
	// Not bounded: a store of its own may restore a snapshot first.
	store, closeStore, err := s.captureReader(ctx, js, rdb)
	if err != nil {
		return err
	}
	defer closeStore()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	dirs, err := s.archiveDirs(ctx, js)
	if err != nil {
		return err
	}
	var out []urlCaptures
	for _, raw := range urls {
		u, err := canon.URL(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", raw, err)
		}
		uc := urlCaptures{URL: u}
		if c, ok, err := store.Last(ctx, s.Crawl.ID, u); err != nil {
			return err
		} else if ok {
			uc.Last = &c
			if uc.Path, err = warc.Locate(dirs, c.File); err != nil {
				uc.Unreadable = err.Error()
			}
		}
		if uc.Index, err = warc.Lookup(dirs, u); err != nil {
			return err
		}
		out = append(out, uc)
	}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for _, uc := range out {
		printCaptures(stdout, s, dirs, uc)
	}
	return nil
}

// archiveDirs returns the directories the crawl has written WARC files to,
// newest first (its record lists them), with warc.dir first if given.
func (s settings) archiveDirs(ctx context.Context, js jetstream.JetStream) ([]string, error) {
	var dirs []string
	if s.Warc.Dir != "" {
		abs, err := filepath.Abs(s.Warc.Dir)
		if err != nil {
			return nil, fmt.Errorf("warc.dir: %w", err)
		}
		dirs = append(dirs, abs)
	}
	reg, err := frontier.LookupCrawls(ctx, js, s.Frontier.Topology())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return dirs, nil // no crawl recorded yet
	}
	if err != nil {
		return nil, err
	}
	rec, err := reg.Get(ctx, s.Crawl.ID)
	if err != nil && !errors.Is(err, frontier.ErrNoCrawl) {
		return nil, err
	}
	for _, d := range slices.Backward(rec.Archive) {
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs, nil
}

func printCaptures(w io.Writer, s settings, dirs []string, uc urlCaptures) {
	fmt.Fprintf(w, "%s (crawl %q)\n", uc.URL, s.Crawl.ID)
	if c := uc.Last; c != nil {
		fmt.Fprintf(w, "  last fetched %s (status %d), payload %s\n", c.Date.UTC().Format(time.RFC3339), c.Status, c.Digest)
		fmt.Fprintf(w, "  payload record: %s at offset %d (%s, %s)\n", c.File, c.Offset, c.PayloadURL, c.PayloadDate.UTC().Format(time.RFC3339))
		if uc.Path != "" {
			fmt.Fprintf(w, "  in %s\n", uc.Path)
		} else {
			fmt.Fprintf(w, "  UNREADABLE (its next fetch is in full): %s\n", uc.Unreadable)
		}
	} else {
		fmt.Fprintln(w, "  no capture in the crawl's capture store")
	}
	if len(dirs) == 0 {
		fmt.Fprintln(w, "  the crawl has written no WARC directory")
		return
	}
	if len(uc.Index) == 0 {
		fmt.Fprintf(w, "  no capture in the indexes of %s\n", strings.Join(dirs, ", "))
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  time\tstatus\tmime\tdirectory\tfile\toffset\tlength")
	for _, e := range uc.Index {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Time, e.Status, e.MIME, e.Dir, e.Filename, e.Offset, e.Length)
	}
	tw.Flush()
}

// captureReader is what `crawler captures` reads: captureStore, except
// that once the captures' log is compacted (its early captures are in a
// snapshot, no longer in the log) it reads through a store of its own
// under data_dir, restored from the snapshot the first time and caught up
// with the log's tail the next.
func (s settings) captureReader(ctx context.Context, js jetstream.JetStream, rdb redis.UniversalClient) (warc.Captures, func() error, error) {
	if s.Warc.Captures == "disk" {
		snaps, err := frontier.OpenStoreSnapshots(ctx, js, s.Frontier.Topology(), captures.StoreName)
		if err != nil {
			return nil, nil, err
		}
		if m, _, err := snaps.Manifest(ctx); err != nil {
			return nil, nil, err
		} else if len(m) > 0 {
			d, err := s.diskCaptures(ctx, js, snaps, nil, false)
			if err != nil {
				return nil, nil, err
			}
			return d, d.Close, nil
		}
	}
	st, err := s.captureStore(ctx, js, rdb)
	return st, func() error { return nil }, err
}

// migrateCapturesCommand copies the captures earlier versions kept in
// Redis (from "redis") or the embedded bucket ("bucket") to the disk
// store's log, which every crawler's store applies.
func migrateCapturesCommand(ctx context.Context, s settings, from string, stdout io.Writer) error {
	js, rdb, closeAll, err := s.stores("sieve-crawler-migrate-captures")
	if err != nil {
		return err
	}
	defer closeAll()
	topo := s.Frontier.Topology().WithDefaults()
	log, err := frontier.OpenStoreLog(ctx, js, topo, captures.StoreName)
	if err != nil {
		return err
	}
	var moved captures.Moved
	switch from {
	case "redis":
		if rdb == nil {
			return errors.New("migrate-captures redis: set redis.url to the Redis that holds them")
		}
		moved, err = captures.MigrateRedis(ctx, captures.Redis{Client: rdb, Prefix: topo.Prefix}, log)
	case "bucket":
		kv, err2 := captures.OpenKV(ctx, js, topo)
		if err2 != nil {
			return err2
		}
		moved, err = captures.MigrateKV(ctx, kv, log)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "copied %d URLs' last captures and %d digests' first captures from %s to the disk store (stream %s)\n",
		moved.Captures, moved.Digests, from, topo.StoreStream())
	if moved.Skipped > 0 {
		fmt.Fprintf(stdout, "%d bucket entries name no URL (a revisit's capture, keyed by the URL's hash): those pages are fetched in full at their next visit\n", moved.Skipped)
	}
	fmt.Fprintf(stdout, "crawlers with warc.captures disk (the default) read them now; %s is left as it was\n", from)
	return nil
}
