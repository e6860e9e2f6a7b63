package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/watch"
)

// tools are the connections of a one-shot command.
type tools struct {
	crawl  string // the crawl whose filter it is, if one was named (--crawl)
	writes bool   // the command writes the filter (import, forget)
	rdb    redis.UniversalClient
	filter seenFilter // nil if it does not exist (and create was false)
	rec    statsStore
}

// open connects to Redis (if configured) and opens the filter; with create
// it makes a missing filter, else it leaves t.filter nil. A command that
// writes a crawl's filter opens it by the crawl's settings (openCrawl),
// from the section as configured; one that reads it, as stored, from the
// section named for the crawl (forCrawl).
func (t *tools) open(ctx context.Context, cfg *config.Config, policy string, create bool) error {
	if cfg.Redis.Enabled() {
		rdb, err := cfg.Redis.Client()
		if err != nil {
			return err
		}
		if err := cfg.Redis.Ping(ctx, rdb); err != nil {
			rdb.Close()
			return err
		}
		t.rdb = rdb
		t.rec = stats.NewRedis(rdb, cfg.Frontier.Prefix)
	} else {
		if cfg.Filter.Snapshot == "" {
			return errNoSharedFilter
		}
		if dir := filepath.Dir(cfg.Filter.Snapshot); t.writes {
			if url := watch.RunningURL(ctx, dir); url != "" {
				// Its next save would undo what this command writes.
				return fmt.Errorf("the crawl running in %s (%s) keeps its filters in memory and saves them over their files there: stop it first", dir, url)
			}
		}
		t.rec = stats.NewMemory()
	}
	var err error
	switch {
	case t.crawl != "" && t.writes:
		err = t.openCrawl(ctx, cfg, policy, create)
	case create:
		t.filter, err = pipeline.OpenFilter(ctx, cfg.Filter, t.rdb, policy)
	default: // the section already names a crawl's filter (forCrawl)
		t.filter, err = openExisting(ctx, cfg, t.rdb, policy, t.crawl)
	}
	if err != nil {
		return fmt.Errorf("open filter: %w", err)
	}
	return nil
}

func (t *tools) close() {
	if t.filter != nil {
		t.filter.Close()
	}
	if t.rdb != nil {
		t.rdb.Close()
	}
}

func importFlags(fs *flag.FlagSet) {
	fs.Int("batch", 10_000, "URLs per filter call")
	crawlFlag(fs)
}

// importCounts are the running totals of an import.
type importCounts struct {
	lines, added, seen, rejected atomic.Int64
	bytes                        atomic.Int64
}

// cmdImport is "dedup-worker import FILE|-": it canonicalizes each line's
// URL and marks it seen in the filter, without enqueueing it, showing
// progress on a terminal, and ends with the new / already seen / rejected
// counts.
func cmdImport(ctx context.Context, e env, fs *flag.FlagSet, cfg *config.Config) int {
	fail := func(err error) int {
		fmt.Fprintf(e.stderr, "dedup-worker import: %v\n", err)
		return exitFail
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(e.stderr, "dedup-worker import: want one FILE argument, or - for stdin")
		return exitUsage
	}
	var batchSize int
	fmt.Sscan(flagValue(fs, "batch"), &batchSize)
	if batchSize < 1 {
		batchSize = 10_000
	}
	n, err := cfg.Normalize.Normalizer()
	if err != nil {
		return fail(err)
	}
	var in io.Reader = e.stdin
	var total int64 // input size, for the progress bar; 0 if unknown
	if name := fs.Arg(0); name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			total = fi.Size()
		}
		in = f
	}
	t := tools{crawl: crawlOf(fs), writes: true}
	if err := t.open(ctx, cfg, n.Version(), true); err != nil {
		return fail(err)
	}
	defer t.close()

	var c importCounts
	rejected := map[string]int64{}
	progress := newProgress(e.stderr, total, &c)
	defer progress.stop()

	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	keys := make([][]byte, 0, batchSize)
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		added, err := t.filter.TestAndAdd(ctx, keys)
		if err != nil {
			return err
		}
		for _, a := range added {
			if a {
				c.added.Add(1)
			} else {
				c.seen.Add(1)
			}
		}
		keys = keys[:0]
		return nil
	}
	for sc.Scan() {
		line := sc.Bytes()
		c.bytes.Add(int64(len(line) + 1))
		s := strings.TrimSpace(string(line))
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		c.lines.Add(1)
		u, err := n.URL(s)
		if err != nil {
			c.rejected.Add(1)
			rejected[reasonOf(err)]++
			continue
		}
		keys = append(keys, []byte(u))
		if len(keys) == batchSize {
			if err := flush(); err != nil {
				return fail(err)
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err := sc.Err(); err != nil {
		return fail(fmt.Errorf("read: %w", err))
	}
	if err := flush(); err != nil {
		return fail(err)
	}
	progress.stop()
	if err := t.rec.Add(ctx, stats.Delta{Imported: c.added.Load(), ImportedSeen: c.seen.Load()}); err != nil {
		fmt.Fprintf(e.stderr, "dedup-worker import: stats not updated: %v\n", err)
	}
	if t.rdb == nil {
		if err := pipeline.SaveFilter(ctx, cfg.Filter, t.filter); err != nil {
			return fail(fmt.Errorf("save snapshot: %w", err))
		}
	}
	fmt.Fprintf(e.stdout, "imported %s URLs: %s new, %s already seen, %s rejected",
		num(c.lines.Load()), num(c.added.Load()), num(c.seen.Load()), num(c.rejected.Load()))
	if len(rejected) > 0 {
		var parts []string
		for _, k := range sortedKeys(rejected) {
			parts = append(parts, fmt.Sprintf("%s %s", k, num(rejected[k])))
		}
		fmt.Fprintf(e.stdout, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintln(e.stdout)
	if ctx.Err() != nil {
		fmt.Fprintln(e.stderr, "dedup-worker import: interrupted; the URLs above were imported")
		return exitFail
	}
	return exitOK
}

// progress draws a progress bar on a terminal (or a line every 10 s
// elsewhere) until stopped.
type progress struct {
	w     io.Writer
	total int64
	c     *importCounts
	tty   bool
	start time.Time
	done  chan struct{}
	ended chan struct{}
	once  atomic.Bool
}

func newProgress(w io.Writer, total int64, c *importCounts) *progress {
	p := &progress{w: w, total: total, c: c, tty: isTerminal(w), start: time.Now(), done: make(chan struct{}), ended: make(chan struct{})}
	go p.loop()
	return p
}

func (p *progress) loop() {
	defer close(p.ended)
	every := 10 * time.Second
	if p.tty {
		every = 200 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			if p.tty {
				p.draw()
				fmt.Fprintln(p.w)
			}
			return
		case <-t.C:
			p.draw()
		}
	}
}

func (p *progress) draw() {
	lines := p.c.lines.Load()
	rate := float64(lines) / max(time.Since(p.start).Seconds(), 1e-3)
	counts := fmt.Sprintf("%s URLs (%s new, %s seen, %s rejected) %s/s",
		num(lines), num(p.c.added.Load()), num(p.c.seen.Load()), num(p.c.rejected.Load()), num(int64(rate)))
	if !p.tty {
		fmt.Fprintln(p.w, "import:", counts)
		return
	}
	if p.total > 0 {
		frac := min(float64(p.c.bytes.Load())/float64(p.total), 1)
		const width = 30
		filled := int(frac * width)
		fmt.Fprintf(p.w, "\r[%s%s] %3.0f%% %s ", strings.Repeat("#", filled), strings.Repeat(".", width-filled), 100*frac, counts)
		return
	}
	fmt.Fprintf(p.w, "\r%s ", counts)
}

// stop ends the display; it is idempotent.
func (p *progress) stop() {
	if p.once.CompareAndSwap(false, true) {
		close(p.done)
		<-p.ended
	}
}
