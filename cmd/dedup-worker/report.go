package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/watch"
)

// report is what /stats serves and "dedup-worker stats" prints.
type report struct {
	// Worker is the answering worker's own state (only from /stats).
	Worker *frontier.Status `json:"worker,omitempty"`
	// Shared is the statistics all workers share.
	Shared *stats.Snapshot `json:"shared,omitempty"`
	// Filter is the filter's health.
	Filter *dedup.Stats `json:"filter,omitempty"`
	// Window is the filter's revisit window, if it has one (only with
	// --crawl: a crawl created with --revisit-after).
	Window *dedup.WindowStats `json:"window,omitempty"`
	// Streams is the queues' state.
	Streams *streams `json:"streams,omitempty"`
	// Crawls are the filters of every crawl there is (stats without
	// --crawl, from Redis): workers keep one filter per crawl.
	Crawls []crawlFilter `json:"crawls,omitempty"`
	// Crawl is the crawl whose filter the report shows (stats --crawl):
	// the shared counts are every crawl's, its own are in Shared's
	// Totals.Crawls.
	Crawl string `json:"crawl,omitempty"`
	// Errors says why a part is missing.
	Errors map[string]string `json:"errors,omitempty"`
}

// streams is the pipeline's queues, as the watch page shows them.
type streams = watch.Depths

func (r *report) fail(part string, err error) {
	if r.Errors == nil {
		r.Errors = map[string]string{}
	}
	r.Errors[part] = err.Error()
}

// addWindow adds f's revisit window to the report, if it is one.
func (r *report) addWindow(ctx context.Context, f seenFilter) {
	w, err := dedup.ReadWindow(ctx, f)
	if err != nil {
		r.fail("window", err)
	}
	r.Window = w
}

// gather builds a report from whichever sources are given (nil ones are
// skipped): the shared statistics, the filter's health, the streams.
func gather(ctx context.Context, shared func(context.Context, int) (stats.Snapshot, error),
	filter func(context.Context) (dedup.Stats, error), nc *nats.Conn, topo frontier.Topology, topN int) report {
	var r report
	if shared != nil {
		if s, err := shared(ctx, topN); err != nil {
			r.fail("shared", err)
		} else {
			r.Shared = &s
		}
	}
	if filter != nil {
		if s, err := filter(ctx); err != nil {
			r.fail("filter", err)
		} else {
			r.Filter = &s
		}
	}
	if nc != nil {
		if s, err := streamState(ctx, nc, topo); err != nil {
			r.fail("streams", err)
		} else {
			r.Streams = s
		}
	}
	return r
}

func streamState(ctx context.Context, nc *nats.Conn, topo frontier.Topology) (*streams, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	d, err := watch.NewJetStreamQueues(js, topo).Depths(ctx)
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// printReport writes the report as tables.
func printReport(w io.Writer, r report, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	if s := r.Shared; s != nil {
		t := s.Totals
		when := "no counts yet"
		if !s.Since.IsZero() {
			when = fmt.Sprintf("since %s, updated %s ago", s.Since.Format(time.RFC3339), now.Sub(s.Updated).Round(time.Second))
		}
		fmt.Fprintf(tw, "SEEN URLS\t(all workers and crawls; %s)\n", when)
		fmt.Fprintf(tw, "  pages\t%s\n", num(t.Pages))
		fmt.Fprintf(tw, "  links discovered\t%s\n", num(t.Links))
		fmt.Fprintf(tw, "  admitted\t%s\t%s\n", num(t.Admitted), pct(t.Admitted, t.Links))
		fmt.Fprintf(tw, "  duplicates\t%s\t%s\n", num(t.Duplicates), pct(t.Duplicates, t.Links))
		fmt.Fprintf(tw, "  rejected\t%s\t%s\n", num(t.RejectedTotal()), pct(t.RejectedTotal(), t.Links))
		for _, k := range sortedKeys(t.Rejected) {
			fmt.Fprintf(tw, "    %s\t%s\n", k, num(t.Rejected[k]))
		}
		fmt.Fprintf(tw, "  republished (absorbed)\t%s\n", num(t.Republished))
		fmt.Fprintf(tw, "  poison messages\t%s\n", num(t.PoisonTotal()))
		for _, k := range sortedKeys(t.Poison) {
			fmt.Fprintf(tw, "    %s\t%s\n", k, num(t.Poison[k]))
		}
		if t.Imported+t.ImportedSeen > 0 {
			fmt.Fprintf(tw, "  imported\t%s new, %s already seen\n", num(t.Imported), num(t.ImportedSeen))
		}
		fmt.Fprintf(tw, "  links/s (1m, 5m)\t%.1f\t%.1f\n", s.Rates.LinksPerSec1m, s.Rates.LinksPerSec5m)
		fmt.Fprintf(tw, "  admitted/s (1m, 5m)\t%.1f\t%.1f\n", s.Rates.AdmittedPerSec1m, s.Rates.AdmittedPerSec5m)
		if id := r.Crawl; id != "" {
			c, ok := t.Crawls[id]
			fmt.Fprintf(tw, "\nCRAWL %s\t", id)
			if !ok {
				fmt.Fprintf(tw, "no counts yet\n")
			} else {
				fmt.Fprintf(tw, "%s links, %s admitted, %s duplicates, %s rejected\n", num(c.Links), num(c.Admitted), num(c.Duplicates), num(c.Rejected))
			}
		}
		fmt.Fprintf(tw, "\nTOP HOSTS\t(%s hosts)\tadmitted\tduplicates\n", num(s.HostCount))
		for _, h := range s.TopHosts {
			fmt.Fprintf(tw, "  %s\t\t%s\t%s\n", h.Host, num(h.Admitted), num(h.Duplicates))
		}
	}
	if f := r.Filter; f != nil {
		printFilter(tw, f, "")
	}
	printWindow(tw, r.Window)
	for _, c := range r.Crawls {
		switch {
		case c.Error != "":
			fmt.Fprintf(tw, "\nFILTER\tUNAVAILABLE\tcrawl %s: %s\n", c.Crawl, c.Error)
		case c.Filter == nil:
			fmt.Fprintf(tw, "\nFILTER\tnone yet\tcrawl %s (its workers make it with its first page)\n", c.Crawl)
		default:
			printFilter(tw, c.Filter, c.Crawl)
			printWindow(tw, c.Window)
		}
	}
	if s := r.Streams; s != nil {
		fmt.Fprintf(tw, "\nQUEUES\n")
		fmt.Fprintf(tw, "  discovered\t%s waiting\t%d in flight\t%d redelivered\n", num(int64(s.DiscoveredQueued)), s.DiscoveredInFlight, s.DiscoveredRedelivered)
		fmt.Fprintf(tw, "  frontier\t%s waiting (%s)\t%s stored ever\n", num(int64(s.FrontierQueued)), bytesText(s.FrontierBytes), num(int64(s.FrontierStored)))
	}
	if wk := r.Worker; wk != nil {
		fmt.Fprintf(tw, "\nTHIS WORKER\tready=%v\tsince %s\t%d batches in flight\n", wk.Ready, wk.Started.Format(time.RFC3339), wk.InflightBatches)
		for _, d := range sortedKeys(wk.Dependencies) {
			st := wk.Dependencies[d]
			state := "up"
			if !st.Up {
				state = "DOWN: " + st.Error
			}
			fmt.Fprintf(tw, "  %s\t%s\n", d, state)
		}
		for _, id := range sortedKeys(wk.Parked) {
			p := wk.Parked[id]
			fmt.Fprintf(tw, "  crawl %s\tPARKED since %s, %d messages held back: %s\n", id, p.Since.Format(time.RFC3339), p.Messages, p.Error)
		}
	}
	if len(r.Errors) > 0 {
		fmt.Fprintf(tw, "\nUNAVAILABLE\n")
		for _, k := range sortedKeys(r.Errors) {
			fmt.Fprintf(tw, "  %s\t%s\n", k, r.Errors[k])
		}
	}
}

// printFilter writes a filter's health; crawl names the crawl it is of, if
// the report shows several.
func printFilter(tw io.Writer, f *dedup.Stats, crawl string) {
	of := ""
	if crawl != "" {
		of = "\tcrawl " + crawl
	}
	fmt.Fprintf(tw, "\nFILTER\t%s%s\n", f.Kind, of)
	fmt.Fprintf(tw, "  items\t%s\n", num(int64(f.Items)))
	fmt.Fprintf(tw, "  false-positive rate\t%.3g now\t%.3g bound\n", f.EstimatedFPP, f.TargetFPP)
	fmt.Fprintf(tw, "  memory\t%s\t%s\n", bytesText(f.MemoryBytes), memoryPerItem(f))
	for i, l := range f.Layers {
		fmt.Fprintf(tw, "  layer %d\t%s / %s items\tfill %.1f%%\tfpp %.3g now, %.3g full\n",
			i, num(int64(l.Items)), num(int64(l.Capacity)), 100*l.Fill, l.EstimatedFPP, l.FPP)
	}
	if f.NextLayerCapacity > 0 {
		fmt.Fprintf(tw, "  next layer\t%s items\n", num(int64(f.NextLayerCapacity)))
	}
}

// minItemsPerByte is how many items a filter holds before its bytes per
// item mean something. A filter's memory is allocated up front for its
// layers' capacity, so a near-empty one divides a fixed size by a few items:
// 36 MiB sized for 10 million URLs read 337,568.8 B/item with 107 in it
// (issue 39).
const minItemsPerByte = 1000

// memoryPerItem says what a filter's memory buys: its bytes per item once
// it holds minItemsPerByte items, else that the size is fixed and what it
// is per item at the capacity it was allocated for.
func memoryPerItem(f *dedup.Stats) string {
	if f.Items >= minItemsPerByte {
		return fmt.Sprintf("%.1f B/item", f.BytesPerItem)
	}
	var capacity uint64
	for _, l := range f.Layers {
		capacity += l.Capacity
	}
	if capacity == 0 {
		return "fixed size (B/item from " + num(minItemsPerByte) + " items)"
	}
	return fmt.Sprintf("fixed size, allocated for %s items (%.1f B/item when full; B/item from %s items)",
		num(int64(capacity)), float64(f.MemoryBytes)/float64(capacity), num(minItemsPerByte))
}

// printWindow writes a revisit window's generations, if w is one.
func printWindow(tw io.Writer, w *dedup.WindowStats) {
	if w == nil {
		return
	}
	fmt.Fprintf(tw, "\nREVISIT WINDOW\t%v, granularity %d\t(a URL is new again %v to %v after it was admitted)\n",
		w.After, w.Granularity, w.After, w.After+w.Period)
	fmt.Fprintf(tw, "  period\t%v per generation\t%d live\n", w.Period, len(w.Generations))
	for _, g := range w.Generations {
		fmt.Fprintf(tw, "  generation %d\tfrom %s\texpires %s\t%s items\t%s\n", g.Epoch, g.Start.Format(time.RFC3339),
			g.Expires.Format(time.RFC3339), num(int64(g.Stats.Items)), bytesText(g.Stats.MemoryBytes))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// num formats n with thousands separators.
func num(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func pct(part, whole int64) string {
	if whole == 0 {
		return ""
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}

func bytesText(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
