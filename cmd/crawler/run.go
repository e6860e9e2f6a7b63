package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/testsite"
	"github.com/sievecrawl/sieve/warc"
)

// openArchive opens the WARC writer of s, if s keeps an archive: files
// named after the crawler id, bodies kept up to the crawl's size limit. A
// directory that cannot be written fails here, before anything is fetched.
func openArchive(s settings, crawlerID string, maxBody int64, caps warc.Captures) (*warc.Recorder, error) {
	if s.Warc.Dir == "" {
		return nil, nil
	}
	w, err := warc.Open(warc.Options{
		Dir: s.Warc.Dir, Prefix: s.Warc.Prefix, CrawlerID: crawlerID, MaxFileSize: int64(s.Warc.MaxFileSize),
		Info: map[string]string{"http-header-user-agent": s.Crawl.UserAgent, "robots": robotsPolicy(s.Crawl.IgnoreRobots)},
	})
	if err != nil {
		return nil, fmt.Errorf("warc.dir: %w", err)
	}
	return warc.NewRecorder(w, warc.RecorderOptions{MaxBodySize: maxBody, Captures: caps}), nil
}

// lazyCaptures opens the capture store on first use: the crawler is built
// before NATS is reached.
type lazyCaptures struct {
	ctx   context.Context // the run's: opening ends with it
	open  func(context.Context) (warc.Captures, error)
	mu    sync.Mutex
	store warc.Captures
}

func (l *lazyCaptures) get() (warc.Captures, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.store == nil {
		// The run's context, not the request's deadline: a store catching
		// up with its log (an empty data dir rebuilds its index, reporting
		// progress) takes as long as it takes, and every fetch waits for
		// it, since no revisit can be decided without it.
		st, err := l.open(l.ctx)
		if err != nil {
			return nil, err
		}
		l.store = st
	}
	return l.store, nil
}

// close closes the store if it was opened and is closable.
func (l *lazyCaptures) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.store.(io.Closer); ok {
		c.Close()
	}
}

func (l *lazyCaptures) Last(ctx context.Context, crawl, url string) (warc.Capture, bool, error) {
	st, err := l.get()
	if err != nil {
		return warc.Capture{}, false, err
	}
	return st.Last(ctx, crawl, url)
}

func (l *lazyCaptures) ByDigest(ctx context.Context, crawl, digest string) (warc.Capture, bool, error) {
	st, err := l.get()
	if err != nil {
		return warc.Capture{}, false, err
	}
	return st.ByDigest(ctx, crawl, digest)
}

func (l *lazyCaptures) Put(ctx context.Context, crawl, url string, c warc.Capture) error {
	st, err := l.get()
	if err != nil {
		return err
	}
	return st.Put(ctx, crawl, url, c)
}

func robotsPolicy(ignore bool) string {
	if ignore {
		return "ignore"
	}
	return "obey"
}

// seedCommand adds s.Seed to the crawl s.Crawl.ID.
func seedCommand(ctx context.Context, s settings, stdout io.Writer) error {
	js, closeConn, err := connectJS(s, "sieve-crawler-seed", true)
	if err != nil {
		return err
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rec, err := s.seed(ctx, js)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "seeded %d URL(s) into crawl %q\n", len(s.Seed), s.Crawl.ID)
	printCrawlSettings(stdout, rec.Settings)
	return nil
}

// runCommand crawls: against an external NATS, or with the whole pipeline
// embedded.
func runCommand(ctx context.Context, s settings, jsonOut bool, stdout, stderr io.Writer) error {
	logger := newLogger(s, stderr)
	var own map[string]crawl.HostPolicy // hosts we need not be gentle with
	if s.Demo {
		site, err := testsite.New(testsite.Options{Pages: 300})
		if err != nil {
			return err
		}
		defer site.Close()
		s.Seed = append(s.Seed, site.URL)
		if s.Crawl.ID == defaultSettings().Crawl.ID {
			s.Crawl.ID = "demo"
		}
		where := ""
		if s.Embedded {
			// The site's address changes with every run: its data is of
			// no use afterwards, and must not mix with a real crawl's.
			dir, err := os.MkdirTemp("", "sieve-demo-")
			if err != nil {
				return fmt.Errorf("demo data dir: %w", err)
			}
			defer os.RemoveAll(dir)
			s.DataDir, s.Filter.Snapshot = dir, ""
			where = ", data in a temporary directory removed at the end"
		}
		// The demo site is our own, on loopback: no need to be gentle with
		// it (no delay, quick retries, and its 503s are per page: a
		// Retry-After holds back the page's retry, not the site). Every
		// other host gets the configured politeness.
		own = map[string]crawl.HostPolicy{site.Host(): {
			Parallel:      max(s.Crawl.HostParallel, 8),
			Delay:         -1,
			RetryBackoff:  min(s.Crawl.RetryBackoff, 100*time.Millisecond),
			RetryAfterURL: true,
		}}
		fmt.Fprintf(stderr, "demo site: %s (300 pages, and the traps real sites set); crawl %q%s\n", site.URL, s.Crawl.ID, where)
	}
	if s.Embedded && s.IdleExit == 0 {
		s.IdleExit = time.Second
	}
	if s.Embedded && len(s.Seed) == 0 {
		// Nothing to continue where no run has been: say so before making
		// the directory (resumable checks an existing one).
		if _, err := os.Stat(filepath.Join(s.DataDir, "nats")); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("nothing to crawl: no run has used %s yet; give --seed URL to start crawl %q", s.DataDir, s.Crawl.ID)
		}
	}

	reg := newRegistry()
	var p *backend
	var err error
	if s.Embedded {
		p, err = startEmbedded(ctx, s, logger, reg)
	} else {
		p, err = connect(s)
	}
	if err != nil {
		return err
	}
	defer p.close()

	topo := s.Frontier.Topology()
	opts := s.crawlOptions()
	opts.Fetcher.Hosts = own
	canon, err := s.Normalize.Normalizer()
	if err != nil {
		return fmt.Errorf("normalizer: %w", err)
	}
	opts.Canonicalize = canon.URL
	opts.Logger = logger
	opts.Exclusive = s.Embedded
	if p.worker != nil {
		// The dedup worker runs beside the crawler: pages' links go to it
		// in process, not through the discovered stream.
		opts.Admitter = p.worker
	}
	opts.Registerer = reg
	caps := &lazyCaptures{ctx: ctx, open: func(ctx context.Context) (warc.Captures, error) {
		return s.crawlerCaptures(ctx, p.js, p.rdb, func(format string, args ...any) { logger.Info(fmt.Sprintf(format, args...)) })
	}}
	defer caps.close()
	arch, err := openArchive(s, opts.ID, opts.Fetcher.MaxBodySize, caps)
	if err != nil {
		return err
	}
	if arch != nil {
		defer arch.Writer().Close()
		opts.Archive = arch
		fmt.Fprintf(stderr, "archiving to %s\n", s.Warc.Dir)
	}
	c, err := crawl.New(p.js, opts) // it talks to NATS only in Run
	if err != nil {
		return err
	}
	defer c.Close()
	// The watch surface comes up before NATS does: while the crawler waits
	// for it, /readyz answers 503 and says what it waits for.
	w, err := startWatch(s, p, c, arch, reg, logger, stderr)
	if err != nil {
		return err
	}
	defer w.close(logger)
	if !s.Embedded {
		// Wait for NATS (logging what for), and refuse a server too old.
		if err := frontier.WaitServer(ctx, p.nc, logger); err != nil {
			return err
		}
	}

	// The dedup counts are shared by every run and crawl: the summary
	// shows what they gained during this run.
	var base *stats.Snapshot
	if p.dedup != nil {
		bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if snap, err := p.dedup(bctx, 0); err == nil {
			base = &snap
		}
		cancel()
	}
	if len(s.Seed) > 0 {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := s.seed(sctx, p.js)
		cancel()
		if err != nil {
			return err
		}
	} else if s.Embedded {
		if err := s.resumable(ctx, p.js, topo); err != nil {
			return err
		}
	}

	start := time.Now()
	var progLog *slog.Logger
	if s.Log.Format == "json" {
		progLog = logger
	}
	prog := newProgress(s.Progress, stderr, progLog, c, p, topo, base)
	prog.begin(ctx)
	err = c.Run(ctx)
	prog.end()
	elapsed := time.Since(start)
	end := "stopped"
	switch {
	case errors.Is(err, crawl.ErrIdle):
		end, err = "frontier empty", nil
	case errors.Is(err, crawl.ErrMaxPages):
		end, err = "max pages reached", nil
	}
	var archErr error
	if errors.Is(err, crawl.ErrArchive) {
		// Said in the summary, then the exit status.
		archErr, err = archiveFailed(arch, err), nil
		end = "stopped: " + archErr.Error()
	}
	if err != nil {
		return err
	}
	var stopErr error
	if p.stopWorker != nil {
		// Let the embedded worker finish what the crawler published, so
		// the summary counts it (and the next run finds it admitted), then
		// stop it.
		p.drain(ctx, topo, 30*time.Second)
		stopErr = p.stopWorker()
	}
	// The page is done: it leaves its last report in the data dir now,
	// after the worker's last counts (a max-pages run left one that
	// trailed the summary by the worker's last stats interval).
	w.close(logger)
	if arch != nil {
		// Closing sorts the last file's index: a full disk may fail it.
		if cerr := arch.Writer().Close(); cerr != nil && archErr == nil {
			archErr = archiveFailed(arch, cerr)
		}
	}
	sum := summarize(ctx, c, p, topo, elapsed, end, base, arch)
	if p.worker != nil {
		// Closing the worker saves its filter: the summary shows the save.
		stopErr = errors.Join(stopErr, p.worker.Close())
		if st, ok := p.worker.SnapshotStatus(); ok {
			sum.Snapshot = &st
		}
	}
	if jsonOut {
		err = json.NewEncoder(stdout).Encode(sum)
	} else {
		sum.print(stdout, s.Crawl.ID)
	}
	if stopErr != nil {
		stopErr = fmt.Errorf("dedup worker: %w", stopErr)
	}
	if archErr != nil || stopErr != nil {
		return errors.Join(archErr, stopErr)
	}
	return err
}

// archiveFailed names the part that failed: the crawler's archive, its
// directory and the setting that chose it.
func archiveFailed(arch *warc.Recorder, err error) error {
	return fmt.Errorf("crawler's archive in %s (warc.dir): %w", arch.Writer().Dir(), err)
}

// resumable refuses an embedded run without seeds that has nothing to
// crawl: its data dir holds no crawl of that id and no queued work (a run
// without --seed continues the crawl it finds there).
func (s settings) resumable(ctx context.Context, js jetstream.JetStream, topo frontier.Topology) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	reg, err := frontier.OpenCrawls(ctx, js, topo)
	if err != nil {
		return err
	}
	_, err = reg.Get(ctx, s.Crawl.ID)
	if !errors.Is(err, frontier.ErrNoCrawl) {
		return err
	}
	if d, err := crawl.QueueDepth(ctx, js, topo); err == nil && d.Frontier+d.Discovered > 0 {
		return nil // queued work of a crawl from before crawls had records
	}
	return fmt.Errorf("nothing to crawl: %s holds no crawl %q; give --seed URL to start it (a run without --seed continues a crawl of its data dir)", s.DataDir, s.Crawl.ID)
}

// backend is the NATS the crawler talks to, external or embedded with its
// dedup worker.
type backend struct {
	nc *nats.Conn
	js jetstream.JetStream
	// dedup reads the dedup side's counts; nil when the workers run
	// elsewhere without Redis.
	dedup func(ctx context.Context, topN int) (stats.Snapshot, error)
	// worker is the embedded dedup worker; nil for an external pipeline.
	worker *pipeline.Worker
	// stopWorker stops the embedded dedup worker (worker.Close then saves
	// its filter); nil for an external pipeline.
	stopWorker func() error
	// rdb is the deployment's Redis; nil without one (and embedded).
	rdb     redis.UniversalClient
	closers []func() error
}

// drain waits, at most d, for the discovered stream to be empty.
func (p *backend) drain(ctx context.Context, topo frontier.Topology, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	defer cancel()
	for {
		depth, err := crawl.QueueDepth(ctx, p.js, topo)
		if err == nil && depth.Discovered == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *backend) close() error {
	var errs []error
	for i := len(p.closers) - 1; i >= 0; i-- {
		errs = append(errs, p.closers[i]())
	}
	p.closers = nil
	return errors.Join(errs...)
}

func connect(s settings) (*backend, error) {
	nc, err := s.NATS.Connect("sieve-crawler")
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	p := &backend{nc: nc, js: js, closers: []func() error{func() error { nc.Close(); return nil }}}
	if s.Redis.Enabled() {
		// The workers' shared statistics, for progress and the summary.
		rdb, err := s.Redis.Client()
		if err != nil {
			p.close()
			return nil, err
		}
		p.dedup = stats.NewRedis(rdb, s.Frontier.Prefix).Snapshot
		p.rdb = rdb
		p.closers = append(p.closers, rdb.Close)
	}
	return p, nil
}

func newLogger(s settings, w io.Writer) *slog.Logger {
	level := new(slog.LevelVar)
	_ = level.UnmarshalText([]byte(s.Log.Level))
	return newLeveledLogger(s, w, level)
}
