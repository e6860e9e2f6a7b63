package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/watch"
)

// The embedded crawls of a data directory are listed and deleted by the
// deployment's commands (crawlsCommand, deleteCrawlCommand) on a connection
// to the directory's own NATS, which openDataDir starts as a run does. Only
// one process at a time may open the store: while a run owns the directory,
// crawls shows what the run reports (runningCrawls) and delete-crawl is
// refused.

// openDataDir opens the embedded NATS of data_dir for a one-shot command,
// connected as name: it takes the directory's lock (lockDir) for the
// command's duration and starts the server on the directory's store as an
// embedded run does (backend.startNATS), without a dedup worker. With
// create (crawler seed) a directory no run has used yet is made; without, a
// directory that does not exist or holds no NATS store is an error and
// nothing is created. One that a run owns is a *dirInUseError.
func openDataDir(s settings, name string, create bool) (jetstream.JetStream, func(), error) {
	dir := s.DataDir
	if create {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("data dir: %w", err)
		}
	}
	if st, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("data dir %s does not exist: no embedded crawl has run there", dir)
	} else if err != nil {
		return nil, nil, fmt.Errorf("data dir: %w", err)
	} else if !st.IsDir() {
		return nil, nil, fmt.Errorf("data dir %s is not a directory", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "nats")); !create && errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("data dir %s holds no NATS store (nats/): no embedded crawl has run there", dir)
	}
	unlock, err := lockDir(dir)
	var inUse *dirInUseError
	if errors.As(err, &inUse) {
		if url := watch.RunningURL(context.Background(), dir); url != "" {
			return nil, nil, fmt.Errorf("%w; the crawl running there is at %s", err, url)
		}
		return nil, nil, err
	} else if err != nil {
		return nil, nil, err
	}
	b := &backend{closers: []func() error{unlock}} // released last
	if err := b.startNATS(s, name); err != nil {
		b.close()
		return nil, nil, err
	}
	return b.js, func() { b.close() }, nil
}

// filterSection is the section the crawls' filters are named from: in
// embedded mode the worker's (embeddedConfig), whose snapshots are in the
// data directory.
func (s settings) filterSection() config.Filter {
	if s.Embedded {
		return embeddedConfig(s).Filter
	}
	return s.Filter
}

// dataDirCrawlsCommand is `crawler crawls --data-dir`: the crawls stored
// in the data directory, listed by crawlsCommand, with each one's filter
// from its snapshot file and its counts from the report the last run left;
// while a run owns the directory, what that run reports (runningCrawls).
func dataDirCrawlsCommand(ctx context.Context, s settings, jsonOut bool, stdout io.Writer) error {
	var out bytes.Buffer
	err := crawlsCommand(ctx, s, jsonOut, &out)
	var inUse *dirInUseError
	if errors.As(err, &inUse) {
		return runningCrawls(ctx, s, inUse.pid, jsonOut, stdout)
	}
	if err != nil {
		return err
	}
	if !jsonOut {
		note := "filters and counts in Redis"
		if !s.Redis.Enabled() {
			note = "no run has left its counts"
			if _, at, ok := s.lastReport().Read(); ok {
				note = "ADMITTED and DUPLICATES are the last run's, which ended " + at.Local().Format(time.DateTime)
			}
			note += "; FILTER is each one's snapshot seen.<crawl>.<kind>"
		}
		fmt.Fprintf(stdout, "crawls stored in %s (%s)\n", s.DataDir, note)
	}
	_, err = out.WriteTo(stdout)
	return err
}

// dirInUse is what `crawler crawls --data-dir` shows of a directory a run
// owns: the crawls' records are in the store the run holds, so it shows the
// process, where to watch it, and what it reports of each crawl.
type dirInUse struct {
	DataDir string `json:"data_dir"`
	PID     int    `json:"pid"`
	// URL is the run's watch page, if it serves one.
	URL    string      `json:"url,omitempty"`
	Crawls []liveCrawl `json:"crawls"`
}

// liveCrawl is a crawl as the run owning its data directory reports it,
// with its filter's snapshot file.
type liveCrawl struct {
	ID string `json:"id"`
	// Crawler is the run's crawler's counts for the crawl, Counts its
	// dedup worker's, Queued its URLs on the frontier.
	Crawler *crawl.CrawlStats  `json:"crawler,omitempty"`
	Counts  *stats.CrawlCounts `json:"counts,omitempty"`
	Queued  uint64             `json:"queued"`
	// Snapshot is the crawl's filter snapshot file, SnapshotBytes its
	// size; empty if it has none (yet).
	Snapshot      string `json:"snapshot,omitempty"`
	SnapshotBytes int64  `json:"snapshot_bytes,omitempty"`
}

// runningCrawls shows the crawls of a data directory that process pid
// owns: from the run's report (its /stats, as `crawler stats` reads it)
// and the snapshot files in the directory.
func runningCrawls(ctx context.Context, s settings, pid int, jsonOut bool, stdout io.Writer) error {
	d := dirInUse{DataDir: s.DataDir, PID: pid, Crawls: []liveCrawl{}}
	byID := map[string]*liveCrawl{}
	get := func(id string) *liveCrawl {
		if c, ok := byID[id]; ok {
			return c
		}
		c := &liveCrawl{ID: id}
		byID[id] = c
		return c
	}
	if d.URL = watch.RunningURL(ctx, s.DataDir); d.URL != "" {
		if c, err := watch.NewClient(s.Client.Options()); err != nil {
			return err
		} else if r, live, err := c.ReadDir(ctx, s.DataDir); err == nil && live {
			if r.Crawler != nil {
				for id, cs := range r.Crawler.Crawls {
					get(id).Crawler = &cs
				}
			}
			if r.Shared != nil {
				for id, cc := range r.Shared.Totals.Crawls {
					get(id).Counts = &cc
				}
			}
			if r.Streams != nil {
				for id, n := range r.Streams.Crawls {
					get(id).Queued = n
				}
			}
		}
	}
	snaps, _ := crawls.DedupFilters{Section: s.filterSection()}.Snapshots()
	for _, f := range snaps {
		c := get(f.Crawl)
		c.Snapshot, c.SnapshotBytes = f.Path, f.Bytes
	}
	for _, id := range sortedKeys(byID) {
		d.Crawls = append(d.Crawls, *byID[id])
	}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(d)
	}
	who := fmt.Sprintf("process %d", pid)
	if pid == 0 {
		who = "another process"
	}
	where := "it serves no watch page (http.addr is empty)"
	if d.URL != "" {
		where = "watch it at " + d.URL
	}
	fmt.Fprintf(stdout, "data dir %s is in use by %s, a running crawl: %s\n", s.DataDir, who, where)
	fmt.Fprintf(stdout, "Its crawls' records are in the store it holds: this lists what it reports; 'crawler stats --data-dir %s' shows the run.\n", s.DataDir)
	if len(d.Crawls) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CRAWL\tFETCHED\tADMITTED\tDUPLICATES\tQUEUED\tFILTER SNAPSHOT")
	for _, c := range d.Crawls {
		fetched, admitted, dups, snapshot := "-", "-", "-", "-"
		if c.Crawler != nil {
			fetched = count(c.Crawler.Fetched)
		}
		if c.Counts != nil {
			admitted, dups = count(c.Counts.Admitted), count(c.Counts.Duplicates)
		}
		if c.Snapshot != "" {
			snapshot = fmt.Sprintf("%s, %s", c.Snapshot, bytesText(uint64(c.SnapshotBytes)))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", c.ID, fetched, admitted, dups, c.Queued, snapshot)
	}
	return tw.Flush()
}
