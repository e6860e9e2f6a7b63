package crawl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/warc"
)

// ErrArchive is returned by Run when the archive could not keep what was
// fetched: the crawler stops fetching rather than fetch what it cannot keep.
var ErrArchive = errors.New("crawl: archive failed")

// archive installs rec in the fetcher options: its connection wrapper
// after any other, its round tripper innermost, so it records the request
// exactly as the transport sends it.
func archive(fo FetcherOptions, rec *warc.Recorder) FetcherOptions {
	if rec == nil {
		return fo
	}
	if prev := fo.WrapConn; prev != nil {
		fo.WrapConn = func(c net.Conn) net.Conn { return rec.WrapConn(prev(c)) }
	} else {
		fo.WrapConn = rec.WrapConn
	}
	fo.RoundTrippers = append(append([]func(http.RoundTripper) http.RoundTripper(nil), fo.RoundTrippers...), rec.RoundTripper)
	return fo
}

// archiveErr returns the archive's failure, if the crawler archives and it
// failed (the tracker's exchanges, or the writer for good), and whether it
// is for good: a captures store that failed (warc.ErrCaptures) is worth
// another try later, a file that cannot be written is not.
func (c *Crawler) archiveErr(tr *warc.Tracker, fetchErr error) (fatal bool, err error) {
	if c.opts.Archive == nil {
		return false, nil
	}
	if err := c.opts.Archive.Err(); err != nil {
		return true, err
	}
	if err := tr.Err(); err != nil {
		return !errors.Is(err, warc.ErrCaptures), err
	}
	if errors.Is(fetchErr, warc.ErrCaptures) {
		return false, fetchErr
	}
	return false, nil
}

// archiveFailed hands msg back (it is fetched again after a restart) and
// stops the run with ErrArchive.
func (c *Crawler) archiveFailed(msg jetstream.Msg, err error) {
	c.started.Add(-1)
	_ = msg.Nak()
	c.archiveOnce.Do(func() {
		c.opts.Logger.Error("archive failed: fetching stops", "err", err)
		c.stopRun(fmt.Errorf("%w: %w", ErrArchive, err))
	})
}

// archiveDirs is the warc.Directories of a crawler's crawls: the
// directories in each crawl's record, newest first, read again at most
// every few seconds (the seed cache's refresh).
type archiveDirs struct{ c *Crawler }

func (d archiveDirs) Dirs(ctx context.Context, crawl string) ([]string, error) {
	if d.c.seeds == nil {
		return nil, nil // not running: its own directory only
	}
	dirs, err := d.c.seeds.archive(ctx, crawl)
	if err != nil {
		return nil, err
	}
	dirs = slices.Clone(dirs)
	slices.Reverse(dirs)
	return dirs, nil
}

// recordArchive adds the crawler's WARC directory to the record of crawl,
// once per crawl and process, before any capture of the crawl points into
// it: later runs writing elsewhere find its files there.
func (c *Crawler) recordArchive(ctx context.Context, crawl string) error {
	if c.opts.Archive == nil {
		return nil
	}
	if _, ok := c.archiveDirs.Load(crawl); ok {
		return nil
	}
	if err := c.seeds.addArchive(ctx, crawl, c.opts.Archive.Writer().Dir()); err != nil {
		return fmt.Errorf("record the crawl's WARC directory: %w", err)
	}
	c.archiveDirs.Store(crawl, struct{}{})
	return nil
}

// refetched counts a fetch made in full because the record of the page's
// last capture could not be read, and logs the first such fetch of each
// file (a deleted file would log once per page otherwise).
func (c *Crawler) refetched(entry frontier.Entry, tr *warc.Tracker) {
	if tr == nil {
		return
	}
	r, ok := tr.Of(entry.URL)
	if !ok || r.Refetch == nil {
		return
	}
	c.stats.refetch(entry.Crawl, r.Refetch.Reason)
	if _, seen := c.unreadableLog.LoadOrStore(r.Refetch.File, struct{}{}); !seen {
		c.opts.Logger.Warn("capture unreadable: pages whose payload it holds are fetched again in full",
			"url", entry.URL, "file", r.Refetch.File, "reason", r.Refetch.Reason, "err", r.Refetch.Err)
	}
}

// unchangedLinks returns the links of a page the server said is unchanged
// (304 to the archive's conditional request): those of the capture that
// holds its payload, read back from the archive, so a revisit crawl goes on
// past unchanged pages. The record was read whole before the request was
// made conditional; an error means it went away since (deleted
// meanwhile). No links and no error if the exchange is no revisit (a 304
// the crawl did not ask for).
func (c *Crawler) unchangedLinks(entry frontier.Entry, tr *warc.Tracker) ([]string, error) {
	r, ok := tr.Of(entry.URL)
	if !ok || r.Type != "revisit" || r.RefPath == "" {
		return nil, nil
	}
	resp, err := c.opts.Archive.ReadPayload(r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return c.fetcher.stored(entry.URL, resp).Links, nil
}

// fetchedEvent is the record of the fetch of entry that started at start.
func (c *Crawler) fetchedEvent(entry frontier.Entry, start time.Time, page *Page, err error, tr *warc.Tracker) frontier.Fetched {
	ev := frontier.Fetched{Crawl: entry.Crawl, URL: entry.URL, Time: start.UTC(), Crawler: c.opts.ID}
	var fe *FetchError
	if errors.As(err, &fe) {
		ev.Status, ev.Reason = fe.Status, string(fe.Reason)
	}
	if page != nil {
		ev.Status, ev.MIME, ev.Links, ev.Redirect, ev.Truncated = page.Status, page.ContentType, len(page.Links), page.Redirect, page.Truncated
		if p := page.Print; p != nil {
			ev.Digest, ev.Size, ev.SimHash = p.Digest, int64(p.Size), fmt.Sprintf("%016x", p.SimHash)
		}
		ev.DuplicateOf, ev.Duplicate = page.DuplicateOf, page.DuplicateKind
	}
	if tr != nil {
		if r, ok := tr.Of(entry.URL); ok && r.Err == nil {
			ev.Time, ev.Digest, ev.Size, ev.Truncated = r.Date, r.Digest, r.Size, r.Truncated
			ev.Record, ev.RefersTo, ev.File, ev.Offset, ev.Length = r.Type, r.RefersTo, r.File, r.Offset, r.Length
			if ev.MIME == "" {
				ev.MIME = r.MIME
			}
		}
	}
	return ev
}

// requested reports whether a fetch that failed with err made a request:
// refusals by robots.txt or the address guard did not, and are no fetch.
func requested(err error) bool {
	var fe *FetchError
	if !errors.As(err, &fe) {
		return false
	}
	switch fe.Reason {
	case ReasonRobots, ReasonRobotsUnavailable, ReasonBadURL, ReasonForbiddenAddress:
		return false
	}
	return true
}

// publishFetched publishes the fetch event of entry (fetchedEvent),
// retrying while NATS is away; false if it gave up, having handed msg back.
// With Options.SkipFetchEvents it does nothing, and builds no event.
func (c *Crawler) publishFetched(ctx context.Context, msg jetstream.Msg, entry frontier.Entry, start time.Time, page *Page, err error, tr *warc.Tracker) bool {
	if c.opts.SkipFetchEvents {
		return true
	}
	ev := c.fetchedEvent(entry, start, page, err, tr)
	id := "f:" + ev.Crawl + ":" + strconv.FormatInt(ev.Time.UnixNano(), 36) + ":" + ev.URL
	return c.deliver(ctx, msg, ev.URL, func(ctx context.Context) error {
		return c.opts.Topology.PublishFetched(ctx, c.js, ev, id)
	})
}
