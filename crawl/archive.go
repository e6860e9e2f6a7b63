package crawl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
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

// unchangedLinks returns the links of a page the server said is unchanged
// (304 to the archive's conditional request): those of the capture that
// holds its payload, read back from the archive, so a revisit crawl goes on
// past unchanged pages. False if that capture cannot be read (another
// crawler's file, say): the page then counts as without links.
func (c *Crawler) unchangedLinks(entry frontier.Entry, tr *warc.Tracker) ([]string, bool) {
	r, ok := tr.Of(entry.URL)
	if !ok || r.Type != "revisit" || r.RefFile == "" {
		return nil, false
	}
	resp, err := c.opts.Archive.ReadPayload(r)
	if err != nil {
		c.opts.Logger.Warn("links of an unchanged page: capture unreadable", "url", entry.URL, "err", err)
		return nil, false
	}
	defer resp.Body.Close()
	return c.fetcher.stored(entry.URL, resp).Links, true
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

// publishFetched publishes the fetch event ev, retrying while NATS is away;
// false if it gave up, having handed msg back.
func (c *Crawler) publishFetched(ctx context.Context, msg jetstream.Msg, ev frontier.Fetched) bool {
	id := "f:" + ev.Crawl + ":" + strconv.FormatInt(ev.Time.UnixNano(), 36) + ":" + ev.URL
	return c.deliver(ctx, msg, ev.URL, func(ctx context.Context) error {
		return c.opts.Topology.PublishFetched(ctx, c.js, ev, id)
	})
}
