package crawl

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/sitemap"
	"github.com/sievecrawl/sieve/warc"
)

// job is a frontier message in hand: in its host's buffer in the scheduler,
// or being fetched.
type job struct {
	msg    jetstream.Msg
	entry  frontier.Entry
	u      *url.URL
	seeds  seedSet
	run    *partitionRun
	settle func() // ends its hold; called once it is acknowledged, terminated or handed back
}

// admit takes a frontier message from a partition's puller: unreadable or
// out-of-scope messages are settled at once; the others are offered to the
// scheduler, or handed back to wait for their host's turn when its buffer is
// full.
func (c *Crawler) admit(msg jetstream.Msg, r *partitionRun) {
	ctx := c.jobCtx
	o := c.opts
	settle := c.hold(msg, r)
	entry, err := frontier.DecodeEntry(msg.Data())
	if err != nil {
		var pe *frontier.PoisonError
		reason := "poison"
		if errors.As(err, &pe) {
			reason = "poison_" + pe.Reason
		}
		c.stats.skip(reason)
		o.Logger.Warn("unreadable frontier message", "err", err)
		_ = msg.TermWithReason(reason)
		settle()
		return
	}
	u, err := url.Parse(entry.URL)
	if err != nil {
		c.stats.skip("bad_url")
		_ = msg.TermWithReason("bad_url")
		settle()
		return
	}
	seeds, err := c.seeds.get(ctx, entry.Crawl, false)
	if err != nil {
		c.retryLater(msg, "crawl record: "+err.Error())
		settle()
		return
	}
	in, why := o.Scope.in(seeds, u)
	if !in && entry.Depth == 0 {
		// A new seed of a known crawl: read the seeds again.
		if seeds, err = c.seeds.get(ctx, entry.Crawl, true); err == nil {
			in, why = o.Scope.in(seeds, u)
		}
	}
	switch {
	case !in:
		c.stats.skip(why)
		c.settleLater(msg, settle)
		return
	case entry.Depth > o.MaxDepth:
		c.stats.skip("too_deep")
		c.settleLater(msg, settle)
		return
	}
	if of, seen := c.spelling(entry); seen {
		// Another spelling of a page fetched already: dropped before it
		// waits for, or takes, a turn of its host.
		c.stats.spelling(entry.Crawl, u.Host)
		o.Logger.Debug("another spelling of a page fetched: dropped", "url", entry.URL, "of", of)
		c.settleLater(msg, settle)
		return
	}
	j := &job{msg: msg, entry: entry, u: u, seeds: seeds, run: r, settle: settle}
	offer := c.sched.Offer
	if md, err := msg.Metadata(); err == nil && md.NumDelivered > 1 {
		// Deferred before, retried, or handed back: older than the
		// host's new URLs, so not held behind them.
		offer = c.sched.OfferDeferred
	}
	if ok, at := offer(entry.QueueKey(), j); !ok {
		c.stats.deferred()
		o.Logger.Debug("host busy: handed back until its turn", "url", entry.URL, "at", at)
		_ = msg.NakWithDelay(max(time.Until(at), 0))
		settle()
	}
}

// settleLater acknowledges msg without holding up the puller.
func (c *Crawler) settleLater(msg jetstream.Msg, settle func()) {
	go func() {
		defer settle()
		c.ack(msg)
	}()
}

// handle fetches the URL of j, whose host's turn has come (the scheduler
// counts it in process under key until Done), and settles its message:
// acknowledged, terminated, or handed back for a later try.
func (c *Crawler) handle(key string, j *job) {
	defer j.settle()
	ctx := c.jobCtx
	o := c.opts
	msg, entry, u, seeds, r := j.msg, j.entry, j.u, j.seeds, j.run
	if of, seen := c.spelling(entry); seen {
		// Another spelling of a page fetched already, by rules learned
		// since this one was offered: no request, so the host's turn is
		// given back.
		c.sched.Unused(key)
		c.stats.spelling(entry.Crawl, u.Host)
		o.Logger.Debug("another spelling of a page fetched: dropped", "url", entry.URL, "of", of)
		c.ack(msg)
		return
	}
	if o.MaxPages > 0 && c.started.Add(1) > o.MaxPages {
		c.sched.Unused(key)
		_ = msg.Nak() // for the next run
		return
	} else if o.MaxPages == 0 {
		c.started.Add(1)
	}

	if err := c.recordArchive(ctx, entry.Crawl); err != nil {
		c.sched.Unused(key)
		c.started.Add(-1)
		c.retryLater(msg, err.Error())
		return
	}
	start := time.Now()
	wait, fctx := r.ctx, ctx
	var tr *warc.Tracker
	if o.Archive != nil {
		tr = warc.NewTracker(entry.Crawl, entry.URL)
		wait, fctx = tr.Context(wait), tr.Context(ctx)
	}
	level := sitemapLevel(entry)
	var read bodyReader
	if level > 0 {
		read = readSitemap(sitemap.Limits{})
	}
	page, pause, err := c.fetcher.fetchLazy(wait, fctx, entry.URL, read)
	if err == nil {
		c.observe(wait, ctx, entry, u.Host, page, pause)
	}
	var fe *FetchError
	if errors.As(err, &fe) && fe.RetryAfter > 0 && c.fetcher.holdsHost(entry.URL) {
		// A 429 or 503 with Retry-After: the whole host waits, from
		// before its turn ends (the URL's retry waits in any case).
		c.sched.BlockUntil(key, time.Now().Add(min(fe.RetryAfter, c.fetcher.opts.MaxCrawlDelay)))
	}
	c.sched.Done(key, start, pause)
	if page != nil {
		// The host's turn ended at the exchange: the next one starts
		// while this page's links are read.
		page.ReadLinks()
	}
	if fatal, aerr := c.archiveErr(tr, err); aerr != nil {
		if fatal {
			c.archiveFailed(msg, aerr)
		} else {
			c.started.Add(-1)
			c.retryLater(msg, aerr.Error())
		}
		return
	}
	c.refetched(entry, tr)
	if err != nil {
		if r.ctx.Err() != nil && ctx.Err() == nil && !isFetchError(err) {
			// Given back before its turn came: unfetched, for the
			// partition's next owner.
			c.started.Add(-1)
			_ = msg.Nak()
			return
		}
		if isFetchError(err) {
			c.finished.Add(1)
			if requested(err) && !c.publishFetched(ctx, msg, entry, start, nil, err, tr) {
				return
			}
		}
		c.failed(ctx, msg, entry, err)
		return
	}
	c.finished.Add(1)
	if !c.publishFetched(ctx, msg, entry, start, page, nil, tr) {
		return
	}
	o.Logger.Debug("fetched", "url", entry.URL, "status", page.Status)
	c.stats.fetched(entry.Crawl, u.Hostname(), page)
	d := frontier.Discovered{Crawl: entry.Crawl, URL: entry.URL, Depth: entry.Depth, Kind: frontier.KindPage}
	links := plainLinks(page.Links)
	if page.Status == http.StatusNotModified && tr != nil {
		l, err := c.unchangedLinks(entry, tr)
		if err != nil {
			// Its links are never dropped: handed back, the page is
			// fetched again, in full, once the check before the
			// request finds the record unreadable.
			o.Logger.Warn("links of an unchanged page: capture unreadable since the request; fetching it again", "url", entry.URL, "err", err)
			c.stats.retry(entry.Crawl, ReasonCaptureUnreadable)
			c.retryLater(msg, err.Error())
			return
		}
		links = plainLinks(l)
	}
	switch {
	case page.sitemap != nil:
		links = c.sitemapLinks(entry, level, page.sitemap)
	case page.Redirect == "":
		links = append(links, c.robotsSitemaps(entry.Crawl, u)...)
	}
	if page.Redirect != "" {
		hops, err := c.redirects.hops(ctx, entry.URL)
		if err != nil {
			c.retryLater(msg, err.Error())
			return
		}
		if hops++; hops > o.MaxRedirects {
			c.stats.fail(entry.Crawl, ReasonTooManyRedirects)
			c.ack(msg)
			return
		}
		if target, err := o.Canonicalize(page.Redirect); err == nil {
			if err := c.redirects.record(ctx, target, hops); err != nil {
				c.retryLater(msg, err.Error())
				return
			}
			c.redirected(entry, target)
		}
		if entry.Depth == 0 {
			// A seed that moved (http://example.com/ →
			// https://www.example.com/) takes its scope along.
			if tu, err := url.Parse(page.Redirect); err == nil {
				if in, _ := o.Scope.in(seeds, tu); !in {
					if err := c.seeds.moved(ctx, entry.Crawl, page.Redirect); err != nil {
						c.retryLater(msg, err.Error())
						return
					}
					if seeds, err = c.seeds.get(ctx, entry.Crawl, true); err != nil {
						c.retryLater(msg, err.Error())
						return
					}
				}
			}
		}
		d.Kind = frontier.KindRedirect
		links = plainLinks([]string{page.Redirect})
		if level > 0 {
			// A sitemap that moved is still a sitemap.
			links = []frontier.Link{sitemapDoc(page.Redirect, level)}
		}
	}
	linkDepth := d.LinkDepth()
	for _, l := range links {
		lu, err := url.Parse(l.URL)
		if err != nil {
			c.stats.dropLink("bad_url")
			continue
		}
		if ok, why := o.Scope.in(seeds, lu); !ok {
			c.stats.dropLink(why)
			continue
		}
		if linkDepth > o.MaxDepth {
			c.stats.dropLink("too_deep")
			continue
		}
		d.Add(l)
	}
	if !c.publish(ctx, msg, d) {
		return
	}
	c.stats.published(entry.Crawl, len(d.Links))
	c.ack(msg)
}

// plainLinks are urls as links of the message's default kind.
func plainLinks(urls []string) []frontier.Link {
	links := make([]frontier.Link, len(urls))
	for i, u := range urls {
		links[i] = frontier.Link{URL: u}
	}
	return links
}

func isFetchError(err error) bool {
	var fe *FetchError
	return errors.As(err, &fe)
}

// publish puts d on the discovered stream, retrying while NATS is away (the
// message is kept alive meanwhile). A page whose links do not fit in one
// message is published in several. It returns false if it gave up, having
// settled msg.
func (c *Crawler) publish(ctx context.Context, msg jetstream.Msg, d frontier.Discovered) bool {
	return c.deliver(ctx, msg, d.URL, func(ctx context.Context) error { return c.publishParts(ctx, d) })
}

// deliver runs publish (of something about the page of msg at url) until
// it succeeds, retrying while NATS is away with msg kept alive. It returns
// false if it gave up, having settled msg: handed back when ctx ended,
// acknowledged when what it publishes can never be (a *PoisonError,
// counted).
func (c *Crawler) deliver(ctx context.Context, msg jetstream.Msg, url string, publish func(context.Context) error) bool {
	backoff := 100 * time.Millisecond
	for {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := publish(pctx)
		cancel()
		if err == nil {
			return true
		}
		var pe *frontier.PoisonError
		if errors.As(err, &pe) {
			// Cannot happen for a well-formed page; count it and move on.
			c.stats.skip("unpublishable_" + pe.Reason)
			c.opts.Logger.Warn("page not publishable", "url", url, "err", err)
			c.ack(msg)
			return false
		}
		if ctx.Err() != nil {
			_ = msg.Nak()
			return false
		}
		c.opts.Logger.Debug("publish", "url", url, "err", err)
		_ = msg.InProgress()
		sleep(ctx, backoff)
		backoff = min(2*backoff, 5*time.Second)
	}
}

// publishParts hands d to the Admitter, if any, else publishes it,
// halving its links until each part fits in a message. A retried part is
// stored once (its id is a digest of its bytes).
func (c *Crawler) publishParts(ctx context.Context, d frontier.Discovered) error {
	if c.opts.Admitter != nil {
		if err := c.opts.Admitter.AdmitPage(ctx, d); !errors.Is(err, frontier.ErrNotInProcess) {
			return err
		}
	}
	err := c.opts.Topology.PublishDiscovered(ctx, c.js, d)
	var pe *frontier.PoisonError
	if errors.As(err, &pe) && pe.Reason == frontier.PoisonTooLarge && len(d.Links) > 1 {
		half := len(d.Links) / 2
		a, b := d, d
		a.Links, b.Links = d.Links[:half], d.Links[half:]
		if err := c.publishParts(ctx, a); err != nil {
			return err
		}
		return c.publishParts(ctx, b)
	}
	return err
}

// ack acknowledges msg, without waiting for the server to confirm: what
// the page yields is durable already (published, or admitted and marked),
// so a lost acknowledgement only has the message delivered again after
// AckWait, its page fetched twice at worst and its links deduplicated.
// Waiting for the confirmation (DoubleAck) cost a round trip per page and
// 3 % of an embedded crawl's CPU, and changed nothing: its error was only
// logged. Run flushes the connection before it returns.
func (c *Crawler) ack(msg jetstream.Msg) {
	if err := msg.Ack(); err != nil {
		c.opts.Logger.Debug("ack frontier message", "err", err)
	}
}

func (c *Crawler) retryLater(msg jetstream.Msg, why string) {
	c.opts.Logger.Debug("message handed back", "why", why)
	_ = msg.NakWithDelay(time.Second)
}

// failed settles a message whose fetch failed.
func (c *Crawler) failed(ctx context.Context, msg jetstream.Msg, entry frontier.Entry, err error) {
	o := c.opts
	if ctx.Err() != nil {
		c.started.Add(-1)
		_ = msg.Nak()
		return
	}
	var fe *FetchError
	if !errors.As(err, &fe) {
		c.started.Add(-1)
		c.retryLater(msg, err.Error())
		return
	}
	if u, err := url.Parse(entry.URL); err == nil {
		c.stats.attempt(entry.Crawl, u.Hostname(), fe)
	}
	if fe.Temporary {
		n, aerr := c.attempts.failed(ctx, msg)
		if aerr != nil {
			c.retryLater(msg, aerr.Error())
			return
		}
		if n <= o.MaxRetries {
			backoff := o.RetryBackoff
			if p, ok := c.fetcher.policy(entry.URL); ok && p.RetryBackoff > 0 {
				backoff = p.RetryBackoff
			}
			delay := min(backoff<<(n-1), o.MaxRetryDelay)
			delay = max(delay, min(fe.RetryAfter, o.MaxRetryDelay))
			c.stats.retry(entry.Crawl, fe.Reason)
			o.Logger.Debug("retrying later", "url", entry.URL, "reason", fe.Reason, "try", n, "delay", delay)
			_ = msg.NakWithDelay(delay)
			return
		}
	}
	c.stats.fail(entry.Crawl, fe.Reason)
	o.Logger.Debug("giving up", "url", entry.URL, "reason", fe.Reason, "err", fe.Err)
	c.ack(msg)
}
