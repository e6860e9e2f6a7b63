package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/warc"
	"github.com/sievecrawl/sieve/watch"
)

// progressEvery is how often a progress line goes to a file or a pipe (a
// terminal's is redrawn four times a second).
var progressEvery = 10 * time.Second

// progress shows a live status line: on a terminal it is redrawn in place,
// elsewhere (mode always) a line is written every 10 seconds.
type progress struct {
	log   *slog.Logger // with a JSON log: lines as log records, not text
	w     io.Writer
	tty   bool
	on    bool
	c     *crawl.Crawler
	p     *backend
	topo  frontier.Topology
	base  *stats.Snapshot // the dedup counts when the run began
	start time.Time

	// The dedup workers' held batches, as they announce them (read every
	// heldEvery at most); an embedded run asks its own worker.
	peers  watch.Peers
	heldAt time.Time
	held   *frontier.Held

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newProgress(mode string, w io.Writer, log *slog.Logger, c *crawl.Crawler, p *backend, topo frontier.Topology, base *stats.Snapshot) *progress {
	tty := isTerminal(w)
	pr := &progress{log: log, w: w, tty: tty, on: mode == "always" || (mode == "auto" && tty), c: c, p: p, topo: topo, base: base}
	if p.worker == nil && p.js != nil {
		pr.peers = watch.NewJetStreamPeers(p.js, topo, 0)
	}
	return pr
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// termWidth returns the width in columns of the terminal w is, or 0 if
// unknown.
func termWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}

// fit cuts line to at most width characters, ending it with "…" if cut; a
// width ≤ 0 leaves it whole.
func fit(line string, width int) string {
	if width <= 0 || utf8.RuneCountInString(line) <= width {
		return line
	}
	r := []rune(line)
	return string(r[:width-1]) + "…"
}

func (pr *progress) begin(ctx context.Context) {
	pr.start = time.Now()
	if !pr.on {
		return
	}
	ctx, pr.cancel = context.WithCancel(ctx)
	every := progressEvery
	if pr.tty {
		every = 250 * time.Millisecond
	}
	pr.wg.Add(1)
	go func() {
		defer pr.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		type sample struct {
			at time.Time
			n  int64
		}
		var window []sample
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			st := pr.c.Stats()
			now := time.Now()
			window = append(window, sample{now, st.Fetched})
			for len(window) > 2 && now.Sub(window[0].at) > 3*time.Second {
				window = window[1:]
			}
			rate := 0.0
			if d := now.Sub(window[0].at).Seconds(); d > 0 {
				rate = float64(st.Fetched-window[0].n) / d
			}
			queue, dups := pr.depths(ctx)
			held := pr.heldBatches(ctx)
			if pr.log != nil && !pr.tty {
				// A log read by machines: one record per line, its
				// figures as fields.
				pr.log.Info("progress", progressFields(st, rate, queue, dups, held)...)
				continue
			}
			line := progressLine(st, rate, queue, dups, held)
			if pr.tty {
				// Cut to the terminal's width: a longer line wraps, and
				// every redraw would scroll.
				fmt.Fprintf(pr.w, "\r\033[K%s", fit(line, termWidth(pr.w)-1))
			} else {
				fmt.Fprintln(pr.w, line)
			}
		}
	}()
}

// depths reads the frontier's depth and the duplicates dropped since the
// run began, as the progress line shows them ("?" or "n/a" when unknown).
func (pr *progress) depths(ctx context.Context) (queue, dups string) {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	queue = "?"
	if d, err := crawl.QueueDepth(qctx, pr.p.js, pr.topo); err == nil {
		queue = count(int64(d.Frontier))
	}
	dups = "n/a"
	if pr.p.dedup != nil {
		if snap, err := pr.p.dedup(qctx, 0); err == nil {
			dups = count(since(snap, pr.base).Totals.Duplicates)
		}
	}
	return queue, dups
}

// heldEvery bounds how often the progress line reads the workers'
// announcements.
const heldEvery = 5 * time.Second

// heldBatches returns the pipeline's batches held past their bound: the
// embedded worker's, or the dedup workers' as they announced them, summed
// (the oldest's age and reason); nil when none is held. Without it a
// pipeline that holds every batch (Redis WAIT without a replica) shows an
// empty queue and nothing in flight, as if the crawl were done.
func (pr *progress) heldBatches(ctx context.Context) *frontier.Held {
	if pr.p.worker != nil {
		st, ok := pr.p.worker.Status()
		if !ok {
			return nil
		}
		return st.Held
	}
	if pr.peers == nil || time.Since(pr.heldAt) < heldEvery {
		return pr.held
	}
	pr.heldAt = time.Now()
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	peers, err := pr.peers.List(qctx)
	if err != nil {
		return pr.held
	}
	var hs []*frontier.Held
	for _, p := range peers {
		hs = append(hs, p.Held)
	}
	pr.held = sumHeld(hs)
	return pr.held
}

// sumHeld adds held batches up: their count, the oldest's time and reason.
func sumHeld(hs []*frontier.Held) *frontier.Held {
	var out *frontier.Held
	for _, h := range hs {
		if h == nil {
			continue
		}
		if out == nil {
			c := *h
			out = &c
			continue
		}
		out.Batches += h.Batches
		if h.Since.Before(out.Since) {
			out.Since, out.Reason = h.Since, h.Reason
		}
	}
	return out
}

// progressFields are the progress line's figures as log fields, with the
// crawl's learning beside them (pages that were an earlier URL's page,
// spellings dropped unfetched).
func progressFields(st crawl.Stats, rate float64, queue, dups string, held *frontier.Held) []any {
	robots := st.Failed[crawl.ReasonRobots]
	f := []any{"fetched", st.Fetched, "per_second", math.Round(rate*10) / 10, "queue", queue, "duplicates_dropped", dups,
		"failed", crawl.Sum(st.Failed) - robots, "robots_refused", robots, "in_flight", st.InFlight,
		"same_page_again", crawl.Sum(st.Duplicates), "spellings_dropped", st.Spellings}
	if held != nil {
		f = append(f, "held_batches", held.Batches, "held_seconds", math.Round(time.Since(held.Since).Seconds()), "held_reason", held.Reason)
	}
	return f
}

// progressLine is the status line of st, fetching at rate, with queue and
// dups the frontier's depth and the duplicates dropped ("?" or "n/a" when
// unknown), and held the pipeline's batches held past their bound (nil:
// none). URLs robots.txt refused are counted apart from those that
// failed, as /metrics counts them (outcome robots): a refusal is the
// crawler keeping a site's rules, not a fault of the crawl or the site.
func progressLine(st crawl.Stats, rate float64, queue, dups string, held *frontier.Held) string {
	robots := st.Failed[crawl.ReasonRobots]
	line := fmt.Sprintf("fetched %s (%.1f/s) · queue %s · duplicates dropped %s · failed %s · robots refused %s · in flight %d",
		count(st.Fetched), rate, queue, dups, count(crawl.Sum(st.Failed)-robots), count(robots), st.InFlight)
	if held != nil {
		line += " · " + held.String()
	}
	return line
}

func (pr *progress) end() {
	if pr.cancel == nil {
		return
	}
	pr.cancel()
	pr.wg.Wait()
	if pr.tty {
		fmt.Fprint(pr.w, "\r\033[K")
	}
}

// runSummary is what a run did, printed as a table or as JSON (--json).
type runSummary struct {
	End     string          `json:"end"` // why the run ended
	Seconds float64         `json:"seconds"`
	Crawler crawl.Stats     `json:"crawler"`
	Dedup   *stats.Snapshot `json:"dedup,omitempty"`  // embedded mode, or with Redis stats
	Filter  *dedup.Stats    `json:"filter,omitempty"` // embedded mode
	Left    *crawl.Depth    `json:"left,omitempty"`   // messages left in the streams
	// Snapshot is the embedded filter's snapshot file, saved as the run
	// went and at its end.
	Snapshot *pipeline.SnapshotStatus `json:"snapshot,omitempty"`
	// Archive is what the run wrote to its WARC files.
	Archive *warc.Stats `json:"archive,omitempty"`
}

func summarize(ctx context.Context, c *crawl.Crawler, p *backend, topo frontier.Topology, elapsed time.Duration, end string, base *stats.Snapshot, arch *warc.Recorder) runSummary {
	sum := runSummary{End: end, Seconds: elapsed.Seconds(), Crawler: c.Stats()}
	if arch != nil {
		st := arch.Writer().Stats()
		sum.Archive = &st
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if p.dedup != nil {
		if snap, err := p.dedup(qctx, 5); err == nil {
			snap = since(snap, base)
			sum.Dedup = &snap
		}
	}
	if p.worker != nil {
		if fst, err := p.worker.FilterStats(qctx); err == nil {
			sum.Filter = &fst
		}
	}
	if d, err := crawl.QueueDepth(qctx, p.js, topo); err == nil {
		sum.Left = &d
	}
	return sum
}

// since returns the counts snap gained after base (nil: all of them). The
// top hosts, which cannot be subtracted, are left out then.
func since(snap stats.Snapshot, base *stats.Snapshot) stats.Snapshot {
	if base == nil {
		return snap
	}
	t, b := snap.Totals, base.Totals
	t.Pages -= b.Pages
	t.Links -= b.Links
	t.Admitted -= b.Admitted
	t.Duplicates -= b.Duplicates
	t.Republished -= b.Republished
	t.Imported -= b.Imported
	t.ImportedSeen -= b.ImportedSeen
	t.Rejected = subCounts(t.Rejected, b.Rejected)
	t.Poison = subCounts(t.Poison, b.Poison)
	snap.Totals, snap.Since = t, base.Updated
	snap.TopHosts, snap.HostCount = nil, 0
	return snap
}

func subCounts(a, b map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, n := range a {
		if d := n - b[k]; d != 0 {
			out[k] = d
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// crawlNames names the crawls a run fetched for, or the configured one.
func (sum runSummary) crawlNames(crawlID string) string {
	ids := slices.Sorted(maps.Keys(sum.Crawler.Crawls))
	if len(ids) == 0 {
		ids = []string{crawlID}
	}
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = strconv.Quote(id)
	}
	if len(q) == 1 {
		return "crawl " + q[0]
	}
	return "crawls " + strings.Join(q, ", ")
}

func (sum runSummary) print(w io.Writer, crawlID string) {
	st := sum.Crawler
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label string, n int64, note string) {
		fmt.Fprintf(tw, "%s\t%s\t  %s\n", label, count(n), note)
	}
	fmt.Fprintf(w, "\nSieve %s: %s after %.1fs\n\n", sum.crawlNames(crawlID), sum.End, sum.Seconds)
	row("fetched", st.Fetched, fmt.Sprintf("%.1f/s", float64(st.Fetched)/max(sum.Seconds, 1e-9)))
	row("HTML pages", st.Pages, "")
	row("other files", st.Files, "not parsed")
	row("redirects", st.Redirects, "targets sent through dedup")
	if st.Unchanged > 0 {
		row("unchanged", st.Unchanged, "304 to a revisit's conditional request")
	}
	if len(st.Refetched) > 0 {
		row("refetched in full", crawl.Sum(st.Refetched), "their last capture's WARC record unreadable: "+breakdown(st.Refetched))
	}
	row("failed", crawl.Sum(st.Failed), breakdown(st.Failed))
	row("retried", crawl.Sum(st.Retried), breakdown(st.Retried))
	row("skipped", crawl.Sum(st.Skipped), breakdown(st.Skipped))
	if st.Sitemaps > 0 || len(st.SitemapInvalid) > 0 {
		row("sitemaps read", st.Sitemaps, fmt.Sprintf("listing %s URLs; invalid: %s", count(st.SitemapURLs), breakdown(st.SitemapInvalid)))
	}
	if dups := crawl.Sum(st.Duplicates); dups > 0 || st.Spellings > 0 || st.NoiseFetches > 0 {
		row("same page again", dups, fmt.Sprintf("fetched pages that were an earlier URL's (%s), %s", breakdown(st.Duplicates), bytesText(uint64(crawl.Sum(st.DuplicateBytes)))))
		row("spellings dropped", st.Spellings, "unfetched: by the rules learned, another spelling of a page fetched")
		row("second renders", st.NoiseFetches, "pages fetched again to tell their noise from a different page")
	}
	row("links published", st.Links, fmt.Sprintf("in %s page messages", count(st.Published)))
	row("links dropped", crawl.Sum(st.Dropped), breakdown(st.Dropped))
	if sum.Dedup != nil {
		t := sum.Dedup.Totals
		row("dedup: links in", t.Links, fmt.Sprintf("from %s pages, during this run (every crawler and crawl on the pipeline)", count(t.Pages)))
		row("admitted", t.Admitted, "new URLs put on the frontier")
		row("duplicates dropped", t.Duplicates, "")
		row("rejected", t.RejectedTotal(), breakdown(t.Rejected))
	}
	if f := sum.Filter; f != nil {
		row("filter: URLs", int64(f.Items), fmt.Sprintf("%s, %d layer(s), est. FPP %.2g, %s", f.Kind, len(f.Layers), f.EstimatedFPP, bytesText(f.MemoryBytes)))
	}
	if sum.Left != nil {
		row("left on frontier", int64(sum.Left.Frontier), "")
	}
	if sn := sum.Snapshot; sn != nil {
		note := fmt.Sprintf("%s, %s, last save %.2fs", sn.Path, bytesText(uint64(sn.Bytes)), sn.Seconds)
		if sn.Error != "" {
			note = "FAILED (" + count(sn.Failures) + " times): " + sn.Error
		}
		row("filter snapshot saves", sn.Saves, note)
	}
	if a := sum.Archive; a != nil {
		note := fmt.Sprintf("in %s, %s written", a.Dir, bytesText(uint64(a.Bytes)))
		if a.Err != "" {
			note += "; FAILED: " + a.Err
		}
		row("WARC files", int64(a.Files), note)
		row("WARC records", crawl.Sum(a.Records), breakdown(a.Records))
	}
	tw.Flush()
}

func breakdown[K ~string](m map[K]int64) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if m[k] != 0 {
			parts = append(parts, fmt.Sprintf("%s %s", k, count(m[k])))
		}
	}
	return strings.Join(parts, ", ")
}

// count formats n with thousands separators.
func count(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

func bytesText(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
