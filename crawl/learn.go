package crawl

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sievecrawl/sieve/dust"
	"github.com/sievecrawl/sieve/fingerprint"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/warc"
)

// Learning which spellings name one page (package dust) is the crawler's
// part of "one page, one fetch": every fetched HTML page's fingerprint goes
// to its crawl's Learner, which says whether an earlier URL had the same
// page (a duplicate, counted by kind with its bytes) and learns rewrite
// rules from such pairs. The rules are written to the crawl's rules in
// the bucket <PREFIX>_RULES, where the dedup workers read them and admit
// every later spelling under its page's key; spellings admitted before a
// rule was active are dropped here, at fetch time (Stats.Spellings). A host is
// fetched by one crawler at a time (its partition's lease), so the pages a
// rule is learned from meet in one Learner; a crawler starting a crawl
// loads what the bucket holds, so rules outlive it.

// learning holds a crawler's Learners, one per crawl; pinned and vetoed
// rules are read again from the crawl's record every few seconds.
type learning struct {
	rules *frontier.Rules
	reg   *frontier.Crawls

	kick chan struct{} // a crawl's active rules changed: share them now

	mu        sync.Mutex
	crawls    map[string]*dust.Learner
	retryAt   map[string]time.Time // crawls whose settings could not be read, until when
	overrides map[string]string    // the pinned and vetoed rules each Learner has, as read
	refreshed time.Time            // when the records' pins and vetoes were last read
}

func newLearning(rules *frontier.Rules, reg *frontier.Crawls) *learning {
	return &learning{rules: rules, reg: reg, kick: make(chan struct{}, 1), crawls: map[string]*dust.Learner{},
		retryAt: map[string]time.Time{}, overrides: map[string]string{}}
}

// overridesOf reads a crawl record's pinned and vetoed rules (those that do
// not parse are skipped: the command that writes them validates them), and
// a signature that changes when they do.
func overridesOf(rec frontier.CrawlRecord) (pin, veto []dust.HostRule, sig string) {
	for _, s := range rec.PinRules {
		if hr, err := dust.ParseHostRule(s); err == nil && hr.Host != "" {
			pin = append(pin, hr)
		}
	}
	for _, s := range rec.VetoRules {
		if hr, err := dust.ParseHostRule(s); err == nil {
			veto = append(veto, hr)
		}
	}
	return pin, veto, strings.Join(rec.PinRules, "\n") + "\x00" + strings.Join(rec.VetoRules, "\n")
}

// of returns crawl's Learner, making it from the crawl's record and the
// rules stored for it (and for the crawl its rules come from); a crawl
// whose learning is off gets one that only finds duplicates. nil when its
// record cannot be read now (learning waits, fetching does not).
func (l *learning) of(ctx context.Context, crawl string) *dust.Learner {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if lr, ok := l.crawls[crawl]; ok || time.Now().Before(l.retryAt[crawl]) {
		l.mu.Unlock()
		return lr
	}
	l.mu.Unlock()
	// Read without the lock: the other crawls' fetches go on meanwhile.
	lr, sig, err := l.open(ctx, crawl)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.retryAt[crawl] = time.Now().Add(5 * time.Second)
		return nil
	}
	if first, ok := l.crawls[crawl]; ok {
		return first // another fetch of the crawl opened it meanwhile
	}
	l.crawls[crawl], l.overrides[crawl] = lr, sig
	if lr.Urgent() { // rules loaded from another crawl: the workers need them now
		l.shareSoon()
	}
	return lr
}

// shareSoon asks share to write the records now (a crawl's active rules
// changed), without waiting.
func (l *learning) shareSoon() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *learning) open(ctx context.Context, crawl string) (*dust.Learner, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rec, err := l.reg.Get(ctx, crawl)
	if err != nil && !errors.Is(err, frontier.ErrNoCrawl) {
		return nil, "", err
	}
	o := dust.Options{Incarnation: rec.Incarnation, NoRules: rec.Settings.Learn == "off"}
	var sig string
	o.Pin, o.Veto, sig = overridesOf(rec)
	lr := dust.NewLearner(o)
	if from := rec.Settings.RulesFrom; from != "" {
		prior, err := l.rules.List(ctx, from)
		if err != nil {
			return nil, "", err
		}
		lr.Load(prior)
	}
	own, err := l.rules.List(ctx, crawl)
	if err != nil {
		return nil, "", err
	}
	lr.Load(own)
	return lr, sig, nil
}

// share writes the records of the hosts whose rules changed, every period
// and at once when a crawl's active rules changed, until ctx ends; and once
// more at the end.
func (l *learning) share(ctx context.Context, period time.Duration, log func(msg string, args ...any)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			l.flush(fctx, log)
			cancel()
			return
		case <-t.C:
			l.flush(ctx, log)
		case <-l.kick:
			l.flush(ctx, log)
		}
	}
}

// refresh gives each Learner the pinned and vetoed rules its crawl's
// record holds now, if they changed (an operator's `crawler rules veto`).
func (l *learning) refresh(ctx context.Context) {
	l.mu.Lock()
	crawls := make(map[string]*dust.Learner, len(l.crawls))
	maps.Copy(crawls, l.crawls)
	l.refreshed = time.Now()
	l.mu.Unlock()
	for crawl, lr := range crawls {
		rec, err := l.reg.Get(ctx, crawl)
		if err != nil {
			continue
		}
		pin, veto, sig := overridesOf(rec)
		l.mu.Lock()
		changed := l.overrides[crawl] != sig
		l.overrides[crawl] = sig
		l.mu.Unlock()
		if changed {
			lr.Override(pin, veto)
		}
	}
}

func (l *learning) flush(ctx context.Context, log func(msg string, args ...any)) {
	l.mu.Lock()
	stale := time.Since(l.refreshed) > 5*time.Second
	l.mu.Unlock()
	if stale {
		l.refresh(ctx)
	}
	l.mu.Lock()
	type pending struct {
		crawl string
		lr    *dust.Learner
	}
	var all []pending
	for c, lr := range l.crawls {
		all = append(all, pending{c, lr})
	}
	l.mu.Unlock()
	for _, p := range all {
		for _, rec := range p.lr.Records(false) {
			if err := l.rules.Put(ctx, p.crawl, rec); err != nil {
				log("learned rules not shared yet", "crawl", p.crawl, "host", rec.Host, "err", err)
				p.lr.Records(true) // all of them again next time
				break
			}
		}
	}
}

// spelling reports whether the URL of entry names a page already fetched
// under another spelling, by its crawl's rules: it is dropped unfetched.
func (c *Crawler) spelling(entry frontier.Entry) (of string, seen bool) {
	lr := c.learn.of(c.jobCtx, entry.Crawl)
	if lr == nil {
		return "", false
	}
	return lr.Seen(entry.URL)
}

// observe hands a fetched page to its crawl's Learner and counts what it
// says. When the Learner asks, the page is fetched a second time, after
// the host's delay (the host's turn is still this fetch's), to measure its
// render-to-render noise; with an archive, that second render is archived
// like any fetch.
func (c *Crawler) observe(wait, ctx context.Context, entry frontier.Entry, host string, page *Page, pause time.Duration) {
	if page == nil || page.Print == nil || page.Status != http.StatusOK {
		return
	}
	lr := c.learn.of(ctx, entry.Crawl)
	if lr == nil {
		return
	}
	v := lr.Observe(entry.URL, *page.Print)
	if v.Refetch {
		v = c.refetch(wait, ctx, lr, entry, host, page, pause)
	}
	if lr.Urgent() {
		c.learn.shareSoon()
	}
	if page.Canonical != "" {
		if canon, err := c.opts.Canonicalize(page.Canonical); err == nil && canon != entry.URL {
			lr.Hint(canon, entry.URL)
		}
	}
	if v.Of != "" {
		c.stats.duplicate(entry.Crawl, host, v.Kind, page.Print.Size)
		page.DuplicateOf, page.DuplicateKind = v.Of, v.Kind
	}
}

// redirected tells the crawl's Learner that the URL of entry redirects
// to target (canonical): a hint that they name one page.
func (c *Crawler) redirected(entry frontier.Entry, target string) {
	if lr := c.learn.of(c.jobCtx, entry.Crawl); lr != nil {
		lr.Hint(entry.URL, target)
	}
}

// listed tells the crawl's Learner that a sitemap lists loc: the site's
// own spelling of a page, a hint against the spellings fetched.
func (c *Crawler) listed(crawl, loc string) {
	lr := c.learn.of(c.jobCtx, crawl)
	if lr == nil {
		return
	}
	if canon, err := c.opts.Canonicalize(loc); err == nil {
		lr.Listed(canon)
	}
}

// refetch fetches entry's page again, as far from the first fetch as the
// host's politeness asks (its delay, or a longer Crawl-delay: pause), and
// hands both renders to lr.
func (c *Crawler) refetch(wait, ctx context.Context, lr *dust.Learner, entry frontier.Entry, host string, page *Page, pause time.Duration) dust.Verdict {
	delay := c.fetcher.opts.HostDelay
	if p, ok := c.fetcher.policy(entry.URL); ok && p.Delay != 0 {
		delay = p.Delay
	}
	if delay = max(delay, pause); delay > 0 {
		sleep(wait, delay)
	}
	c.stats.noiseRefetch(entry.Crawl)
	if c.opts.Archive != nil {
		ctx = warc.NewTracker(entry.Crawl, entry.URL).Context(ctx)
	}
	again, _, err := c.fetcher.fetchLazy(wait, ctx, entry.URL, nil) // its links are the first render's
	if again != nil {
		c.stats.fetched(entry.Crawl, host, again)
	}
	if err != nil || again == nil || again.Print == nil || again.Status != http.StatusOK {
		return lr.ObserveOnce(entry.URL, *page.Print)
	}
	return lr.ObserveRenders(entry.URL, *page.Print, *again.Print)
}

// fingerprintOf is the fingerprint of an HTML body, for Page.Print.
func fingerprintOf(body []byte) *fingerprint.Print {
	p := fingerprint.Of(body)
	return &p
}
