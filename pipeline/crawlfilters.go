package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/admit"
	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
)

// Each crawl has its own filter, opened on the crawl's first message from
// the settings stored with the crawl (frontier.Crawls; a crawl without
// settings takes the worker's filter section), and named after the
// worker's: in Redis "<filter.name>:<crawl>", in memory the snapshot file
// "<stem>.<crawl><ext>" beside filter.snapshot (seen.bloom → seen.web.bloom).
// A crawl with a revisit window has a dedup.Window of that filter kind.
// Filters unused for IdleFilter are saved and closed (an in-memory filter
// without a snapshot file is kept: closing it would forget its URLs).

// DefaultIdleFilter is how long a crawl's filter stays open unused.
const DefaultIdleFilter = 10 * time.Minute

// CrawlFilter returns the filter section of a crawl's filter: the worker's
// section f named for the crawl, sized by the crawl's settings st (zero
// fields keep f's). A snapshot file named after a kind (seen.bloom) is
// named after the crawl's kind when st has one (seen.<crawl>.cuckoo). An existing filter adopts its stored parameters, unless
// f.Given names them: then a stored value other than the crawl's is an
// error naming both.
func CrawlFilter(f config.Filter, crawl string, st frontier.CrawlSettings) config.Filter {
	f.Name += ":" + crawl
	if f.Snapshot != "" {
		snap := f.Snapshot
		// A snapshot named after a kind (the embedded mode's seen.bloom)
		// is named after the crawl's own kind: a cuckoo crawl's file is
		// seen.<crawl>.cuckoo whatever filter.kind a command or a later
		// run is given.
		if ext := filepath.Ext(snap); st.Kind != "" && (ext == ".bloom" || ext == ".cuckoo") {
			snap = strings.TrimSuffix(snap, ext) + "." + st.Kind
		}
		f.Snapshot = CrawlSnapshot(snap, crawl)
	}
	if st.Kind != "" {
		f.Kind = st.Kind
	}
	if st.FPP != 0 {
		f.FPP = st.FPP
	}
	if st.ExpectURLs != 0 {
		f.Capacity = st.ExpectURLs
		if st.RevisitAfter != 0 {
			// ExpectURLs is what a window admits; a generation holds 1/g
			// of it.
			g := int64(windowOptions(st).Granularity)
			f.Capacity = max((st.ExpectURLs+g-1)/g, 1)
		}
	}
	return f
}

// CrawlSnapshot is the snapshot file of a crawl's in-memory filter, beside
// the worker's file path: "<stem>.<crawl><ext>".
func CrawlSnapshot(path, crawl string) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "." + crawl + ext
}

func windowOptions(st frontier.CrawlSettings) dedup.WindowOptions {
	w := dedup.WindowOptions{After: st.RevisitAfter, Granularity: st.Granularity}
	if w.Granularity == 0 {
		w.Granularity = dedup.DefaultWindowGranularity
	}
	return w
}

// OpenCrawlFilter opens a crawl's filter from its section (CrawlFilter) and
// settings: in Redis when rdb is not nil, else in memory (loaded from its
// snapshot file when one exists).
func OpenCrawlFilter(ctx context.Context, f config.Filter, st frontier.CrawlSettings, rdb redis.UniversalClient, policy string) (dedup.Filter, error) {
	if st.RevisitAfter == 0 {
		return OpenFilter(ctx, f, rdb, policy)
	}
	w := windowOptions(st)
	spec := f.Spec(rdb, policy)
	spec.Window = &w
	sf, err := dedup.Open(ctx, spec)
	if errors.Is(err, dedup.ErrUnknownKind) {
		return nil, &config.FieldError{Field: "filter.kind", Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("%s window %q (revisit after %v): %w", f.Kind, f.Name, st.RevisitAfter, err)
	}
	return expiring{sf}, nil
}

// expiring is a revisit window: its keys expire, so a worker must not
// cache them (admit.Expiring).
type expiring struct{ dedup.Filter }

// Expires reports true.
func (expiring) Expires() bool { return true }

// Save writes the window to path (SaveFilter).
func (e expiring) Save(ctx context.Context, path string) error {
	return e.Filter.(interface {
		Save(context.Context, string) error
	}).Save(ctx, path)
}

// incarnated is a crawl's filter as the admission core gets it: with the
// crawl's incarnation (admit.Incarnated), its revisit window still
// expiring.
type incarnated struct {
	dedup.Filter
	incarnation string
}

// Incarnation returns the crawl's incarnation.
func (f incarnated) Incarnation() string { return f.incarnation }

// Expires reports whether the crawl's filter is a revisit window.
func (f incarnated) Expires() bool {
	e, ok := f.Filter.(admit.Expiring)
	return ok && e.Expires()
}

// CrawlFilterStatus is one open crawl filter, as a worker reports it.
type CrawlFilterStatus struct {
	// Crawl is the crawl's id.
	Crawl string `json:"crawl"`
	// Name is the filter's Redis name, or its snapshot file in memory.
	Name string `json:"name"`
	// Settings are the crawl's.
	Settings frontier.CrawlSettings `json:"settings"`
	// Stats is the filter's state (empty if it could not be read).
	Stats dedup.Stats `json:"stats"`
	// InUse counts the batches using it now.
	InUse int `json:"in_use"`
	// Used is when a batch last released it.
	Used time.Time `json:"used"`
}

var (
	_ admit.Filters    = (*crawlFilters)(nil)
	_ admit.Expiring   = expiring{}
	_ admit.Incarnated = incarnated{}
)

// crawlFilters is a Worker's admit.Filters. It is safe for concurrent
// use.
type crawlFilters struct {
	cfg    config.Filter
	rdb    redis.UniversalClient
	policy string
	idle   time.Duration
	log    *slog.Logger
	reg    func(ctx context.Context) (*frontier.Crawls, error)

	mu      sync.Mutex
	open    map[string]*crawlFilter
	closed  map[string]SnapshotStatus // closed filters' last snapshot status
	dropped []*crawlFilter            // deleted crawls' filters, closed unsaved once unused
}

// crawlFilter is one crawl's open (or opening, or closing) filter.
type crawlFilter struct {
	ready   chan struct{} // closed once opened (err set on failure)
	closing chan struct{} // non-nil while being saved and closed
	err     error
	f       dedup.Filter
	cfg     config.Filter
	st      frontier.CrawlSettings
	// incarnation is the crawl's (frontier.CrawlRecord.Incarnation): its
	// URLs are published under IDs that cover it.
	incarnation string
	snap        *snapshotter
	refs        int
	used        time.Time
}

func newCrawlFilters(cfg config.Filter, rdb redis.UniversalClient, policy string, idle time.Duration, log *slog.Logger,
	reg func(context.Context) (*frontier.Crawls, error)) *crawlFilters {
	if idle <= 0 {
		idle = DefaultIdleFilter
	}
	return &crawlFilters{cfg: cfg, rdb: rdb, policy: policy, idle: idle, log: log, reg: reg, open: map[string]*crawlFilter{},
		closed: map[string]SnapshotStatus{}}
}

// Acquire returns the crawl's filter, opening it from the crawl's settings
// on first use; release ends the use.
func (s *crawlFilters) Acquire(ctx context.Context, crawl string) (admit.Filter, func(), error) {
	e, err := s.acquire(ctx, crawl)
	if err != nil {
		return nil, nil, err
	}
	var f admit.Filter = e.f
	if e.incarnation != "" {
		f = incarnated{e.f, e.incarnation}
	}
	var once sync.Once
	return f, func() {
		once.Do(func() {
			s.mu.Lock()
			e.refs--
			e.used = time.Now()
			s.mu.Unlock()
		})
	}, nil
}

func (s *crawlFilters) acquire(ctx context.Context, crawl string) (*crawlFilter, error) {
	for {
		s.mu.Lock()
		e := s.open[crawl]
		switch {
		case e == nil:
			e = &crawlFilter{ready: make(chan struct{}), refs: 1}
			s.open[crawl] = e
			s.mu.Unlock()
			e.err = s.load(ctx, crawl, e)
			if e.err != nil {
				s.mu.Lock()
				delete(s.open, crawl)
				s.mu.Unlock()
			}
			close(e.ready)
			return e, e.err
		case e.closing != nil:
			closing := e.closing
			s.mu.Unlock()
			select {
			case <-closing: // then open it again
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			continue
		}
		e.refs++
		s.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			s.release(e)
			return nil, ctx.Err()
		}
		if e.err != nil {
			return nil, e.err
		}
		return e, nil
	}
}

func (s *crawlFilters) release(e *crawlFilter) {
	s.mu.Lock()
	e.refs--
	s.mu.Unlock()
}

// load opens the crawl's filter into e.
func (s *crawlFilters) load(ctx context.Context, crawl string, e *crawlFilter) error {
	reg, err := s.reg(ctx)
	if err != nil {
		return err
	}
	rec, err := reg.Get(ctx, crawl)
	if err != nil && !errors.Is(err, frontier.ErrNoCrawl) {
		return err
	}
	e.st, e.incarnation = rec.Settings, rec.Incarnation
	e.cfg = CrawlFilter(s.cfg, crawl, e.st)
	if err := s.adoptShared(ctx, crawl, e.cfg); err != nil {
		return fmt.Errorf("crawl %s: %w", crawl, err)
	}
	f, err := OpenCrawlFilter(ctx, e.cfg, e.st, s.rdb, s.policy)
	if err != nil {
		return unusable(fmt.Errorf("crawl %s: open filter: %w", crawl, err))
	}
	e.f = f
	if s.rdb == nil && e.cfg.Snapshot != "" {
		e.snap = newSnapshotter(e.cfg, f, s.log)
	}
	s.log.Debug("crawl filter opened", "crawl", crawl, "name", e.name(), "revisit_after", e.st.RevisitAfter)
	return nil
}

// unusable marks err with admit.ErrFilterUnusable when it is
// permanent, so that the worker parks the crawl's messages and goes on with
// the other crawls.
func unusable(err error) error {
	if permanent(err) {
		return unusableError{err}
	}
	return err
}

// permanent reports whether an error opening a filter will not go away by
// waiting, only when someone acts: a corrupt snapshot, parameters that
// conflict with the stored ones or that no filter can have, a Redis server
// too old for the filters.
func permanent(err error) bool {
	var fe *config.FieldError
	return errors.Is(err, dedup.ErrCorrupt) || errors.Is(err, dedup.ErrMismatch) || errors.Is(err, dedup.ErrInvalidParams) ||
		errors.Is(err, dedup.ErrGuavaFormat) || errors.Is(err, dedup.ErrRedisTooOld) || errors.As(err, &fe)
}

// unusableError is an error that also matches admit.ErrFilterUnusable.
type unusableError struct{ err error }

func (e unusableError) Error() string   { return e.err.Error() }
func (e unusableError) Unwrap() []error { return []error{e.err, admit.ErrFilterUnusable} }

// SharedCrawl is the crawl that takes over an in-memory filter every crawl
// shared before each crawl had its own: the crawler's default crawl id,
// the one crawl most single-machine runs had.
const SharedCrawl = "default"

// adoptShared deals with the filter every crawl shared before each crawl
// had its own, named by the worker's section itself (filter.snapshot in
// memory, filter.name in Redis), when the crawl's own filter does not exist
// yet. In memory, crawl SharedCrawl takes the shared snapshot file over
// (renamed to the crawl's), so an upgraded single-machine run refetches
// nothing it fetched before. A shared file left for another crawl, and a
// shared filter in Redis (whose keys cannot be renamed across a cluster's
// slots), are only reported: they are never read again, so the crawl
// starts empty, and the log says which filter to delete once it is not
// needed.
func (s *crawlFilters) adoptShared(ctx context.Context, crawl string, own config.Filter) error {
	if s.rdb != nil {
		if own.Name == s.cfg.Name {
			return nil
		}
		kind, err := dedup.StoredRedisKind(ctx, s.rdb, s.cfg.Name)
		if err != nil || kind == "" {
			return nil // no shared filter (an unreachable Redis fails the open next)
		}
		if ownKind, err := dedup.StoredRedisKind(ctx, s.rdb, own.Name); err == nil && ownKind == "" {
			s.log.Warn("a filter shared by every crawl is not used: each crawl has its own filter now",
				"shared", s.cfg.Name, "crawl", crawl, "filter", own.Name)
		}
		return nil
	}
	shared := s.cfg.Snapshot
	if shared == "" || own.Snapshot == "" || own.Snapshot == shared {
		return nil
	}
	if _, err := os.Stat(own.Snapshot); !errors.Is(err, fs.ErrNotExist) {
		return nil // the crawl's own file exists (or cannot be read: the open says why)
	}
	// Named after the worker's kind before files were named after the
	// crawl's (CrawlFilter): the same crawl's file, under its former name.
	if former := CrawlSnapshot(shared, crawl); former != own.Snapshot {
		if _, err := os.Stat(former); err == nil {
			if err := os.Rename(former, own.Snapshot); err != nil {
				return fmt.Errorf("rename the crawl's snapshot to its kind's name: %w", err)
			}
			s.log.Info("the crawl's snapshot is named after its kind now", "crawl", crawl, "from", former, "to", own.Snapshot)
			return nil
		}
	}
	if _, err := os.Stat(shared); err != nil {
		return nil
	}
	if crawl != SharedCrawl {
		s.log.Warn("a snapshot shared by every crawl is not used: each crawl has its own filter now",
			"shared", shared, "crawl", crawl, "filter", own.Snapshot)
		return nil
	}
	if err := os.Rename(shared, own.Snapshot); err != nil {
		return fmt.Errorf("take over the shared snapshot: %w", err)
	}
	s.log.Info("the snapshot every crawl shared is now this crawl's", "crawl", crawl, "from", shared, "to", own.Snapshot)
	return nil
}

func (e *crawlFilter) name() string {
	if e.cfg.Snapshot != "" && e.snap != nil {
		return e.cfg.Snapshot
	}
	return e.cfg.Name
}

// persistent reports whether closing the filter keeps its URLs: in Redis,
// or in memory with a snapshot file.
func (e *crawlFilter) persistent(redis bool) bool { return redis || e.snap != nil }

// ready returns the open filters (not opening or closing).
func (s *crawlFilters) readyFilters() map[string]*crawlFilter {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]*crawlFilter, len(s.open))
	for id, e := range s.open {
		select {
		case <-e.ready:
			if e.err == nil && e.closing == nil {
				out[id] = e
			}
		default:
		}
	}
	return out
}

// forget drops the open filter of a crawl that was deleted: a later
// message of a crawl created again under the id opens a new one, and the
// old one is closed without saving (its snapshot file, deleted with the
// crawl, must not come back) once no batch uses it. Before, a deleted
// crawl's filter stayed open until it had been idle for IdleFilter, and a
// crawl created again meanwhile under the same id found its URLs seen.
//
// An in-memory filter's saves stop before forget returns, a save under way
// included (the loop may have taken the filter before it was dropped):
// after that its file is never written again, so a delete that drops the
// filter before removing the file removes it for good. A filter being
// closed as idle is waited for: its last save is then behind it.
func (s *crawlFilters) forget(id string) *crawlFilter {
	s.mu.Lock()
	e := s.open[id]
	for e != nil && e.closing != nil {
		closing := e.closing
		s.mu.Unlock()
		<-closing
		s.mu.Lock()
		e = s.open[id] // gone once closed, or open again if its save failed
	}
	if e == nil {
		s.mu.Unlock()
		return nil
	}
	delete(s.open, id)
	delete(s.closed, id)
	s.dropped = append(s.dropped, e)
	s.mu.Unlock()
	select {
	case <-e.ready: // e.snap is set
		if e.snap != nil {
			e.snap.stop()
		}
	default: // opening: not in the loop's hands yet, and never will be
		e = nil
	}
	s.log.Info("crawl deleted: its filter is dropped", "crawl", id)
	return e
}

// forgetDeleted is forget for a deletion the registry's watch reports,
// which comes some time after the record went, from whichever process
// deleted it:
//   - by then the crawl may have been created again under its id and its
//     new filter opened: a filter of the incarnation the registry holds
//     now is kept;
//   - the deleting command (delete-crawl, in another process) removed the
//     in-memory filter's snapshot file, and a save may have written it
//     again before the report came: once the dropped filter's saves have
//     stopped, its file is removed if the crawl has no record, or one of
//     another incarnation (no filter of which was open here to write it),
//     so that a crawl created again does not open with the deleted one's
//     URLs.
//
// When the registry cannot be read, the filter is dropped as forget does.
func (s *crawlFilters) forgetDeleted(ctx context.Context, id string) {
	reg, err := s.reg(ctx)
	var rec frontier.CrawlRecord
	if err == nil {
		rec, err = reg.Get(ctx, id)
	}
	exists := err == nil
	if err != nil && !errors.Is(err, frontier.ErrNoCrawl) {
		s.log.Warn("deleted crawl: its record could not be read; its filter is dropped", "crawl", id, "error", err)
		s.forget(id)
		return
	}
	if exists && rec.Incarnation != "" {
		s.mu.Lock()
		e := s.open[id]
		kept := false
		if e != nil {
			select {
			case <-e.ready: // opened: its incarnation is set
				kept = e.err == nil && e.incarnation == rec.Incarnation
			default: // opening: which incarnation it reads is not known yet
			}
		}
		s.mu.Unlock()
		if kept {
			s.log.Debug("deleted crawl created again: its new filter is kept", "crawl", id)
			return
		}
	}
	e := s.forget(id)
	if e == nil || e.snap == nil || (exists && (rec.Incarnation == "" || rec.Incarnation == e.incarnation)) {
		return
	}
	switch err := os.Remove(e.cfg.Snapshot); {
	case err == nil:
		s.log.Info("deleted crawl: its snapshot, saved again after the delete, is removed", "crawl", id, "path", e.cfg.Snapshot)
	case !errors.Is(err, fs.ErrNotExist):
		s.log.Error("deleted crawl: its snapshot could not be removed", "crawl", id, "path", e.cfg.Snapshot, "error", err)
	}
}

// closeDropped closes, unsaved, the dropped filters no batch uses any more.
func (s *crawlFilters) closeDropped() {
	s.mu.Lock()
	var done []*crawlFilter
	kept := s.dropped[:0]
	for _, e := range s.dropped {
		select {
		case <-e.ready:
			if e.refs == 0 {
				done = append(done, e)
				continue
			}
		default:
		}
		kept = append(kept, e)
	}
	s.dropped = kept
	s.mu.Unlock()
	for _, e := range done {
		if e.err == nil {
			_ = e.f.Close()
		}
	}
}

// closeIdle saves and closes the filters unused since before now−idle.
func (s *crawlFilters) closeIdle(ctx context.Context, now time.Time) {
	var doomed []string
	s.mu.Lock()
	for id, e := range s.open {
		select {
		case <-e.ready:
		default:
			continue
		}
		if e.err == nil && e.closing == nil && e.refs == 0 && now.Sub(e.used) >= s.idle && e.persistent(s.rdb != nil) {
			e.closing = make(chan struct{})
			doomed = append(doomed, id)
		}
	}
	s.mu.Unlock()
	for _, id := range doomed {
		s.mu.Lock()
		e := s.open[id]
		s.mu.Unlock()
		if err := s.closeOne(ctx, id, e); err != nil {
			// Kept open: it holds URLs its file does not.
			s.log.Error("idle crawl filter not closed", "crawl", id, "error", err)
			s.mu.Lock()
			close(e.closing)
			e.closing = nil
			s.mu.Unlock()
			continue
		}
		s.log.Debug("idle crawl filter closed", "crawl", id)
		s.mu.Lock()
		delete(s.open, id)
		close(e.closing)
		s.mu.Unlock()
	}
}

// closeOne saves an in-memory filter to its file and closes it, keeping
// the file's last status.
func (s *crawlFilters) closeOne(ctx context.Context, id string, e *crawlFilter) error {
	if e.snap != nil {
		err := e.snap.final(ctx)
		st := e.snap.status()
		s.mu.Lock()
		if prev, ok := s.closed[id]; ok {
			st.Saves += prev.Saves
			st.Failures += prev.Failures
		}
		s.closed[id] = st
		s.mu.Unlock()
		if err != nil {
			return err
		}
		e.snap = nil // counted in closed
	}
	return e.f.Close()
}

// loop closes idle filters and saves in-memory ones as they change until
// ctx ends.
func (s *crawlFilters) loop(ctx context.Context, saveEvery time.Duration) {
	tick := min(s.idle/4, time.Minute)
	if saveEvery > 0 && s.rdb == nil {
		tick = min(tick, saveEvery)
	}
	t := time.NewTicker(max(tick, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, e := range s.readyFilters() {
				if e.snap != nil {
					e.snap.tick(ctx, now)
				}
			}
			s.closeIdle(ctx, now)
			s.closeDropped()
		}
	}
}

// closeAll saves and closes every open filter; Acquire must not be called
// any more.
func (s *crawlFilters) closeAll(ctx context.Context) error {
	s.closeDropped()
	s.mu.Lock()
	open := s.open
	s.open = map[string]*crawlFilter{}
	s.mu.Unlock()
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(open)) {
		e := open[id]
		<-e.ready
		if e.err != nil || e.closing != nil {
			continue
		}
		if err := s.closeOne(ctx, id, e); err != nil {
			errs = append(errs, fmt.Errorf("crawl %s: %w", id, err))
			_ = e.f.Close()
		}
	}
	return errors.Join(errs...)
}

// status reports every open filter, by crawl.
func (s *crawlFilters) status(ctx context.Context) []CrawlFilterStatus {
	open := s.readyFilters()
	out := make([]CrawlFilterStatus, 0, len(open))
	for _, id := range slices.Sorted(maps.Keys(open)) {
		e := open[id]
		st, _ := e.f.Stats(ctx)
		s.mu.Lock()
		out = append(out, CrawlFilterStatus{Crawl: id, Name: e.name(), Settings: e.st, Stats: st, InUse: e.refs, Used: e.used})
		s.mu.Unlock()
	}
	return out
}

// stats sums the open filters' stats: items and memory add up; the rates
// are the highest of any crawl's; layers are listed crawl by crawl.
func (s *crawlFilters) stats(ctx context.Context) (dedup.Stats, error) {
	out := dedup.Stats{Kind: s.cfg.Kind, TargetFPP: s.cfg.FPP}
	for _, e := range s.readyFilters() {
		st, err := e.f.Stats(ctx)
		if errors.Is(err, dedup.ErrClosed) {
			continue // closed as idle meanwhile
		}
		if err != nil {
			return out, err
		}
		out.Items += st.Items
		out.Deletes += st.Deletes
		out.MemoryBytes += st.MemoryBytes
		out.TargetFPP = max(out.TargetFPP, st.TargetFPP)
		out.EstimatedFPP = max(out.EstimatedFPP, st.EstimatedFPP)
		out.Layers = append(out.Layers, st.Layers...)
		out.NextLayerCapacity = max(out.NextLayerCapacity, st.NextLayerCapacity)
	}
	if out.Items > 0 {
		out.BytesPerItem = float64(out.MemoryBytes) / float64(out.Items)
	}
	return out, nil
}

// snapshotStatus sums the open in-memory filters' snapshot files: Path is
// the file name pattern, Error the first failing file's.
func (s *crawlFilters) snapshotStatus() SnapshotStatus {
	out := SnapshotStatus{Path: CrawlSnapshot(s.cfg.Snapshot, "<crawl>")}
	all := map[string]SnapshotStatus{}
	s.mu.Lock()
	maps.Copy(all, s.closed)
	s.mu.Unlock()
	for id, e := range s.readyFilters() {
		if e.snap == nil {
			continue
		}
		st := e.snap.status()
		if prev, ok := all[id]; ok { // closed when idle, then opened again
			st.Saves += prev.Saves
			st.Failures += prev.Failures
		}
		all[id] = st
	}
	for _, id := range slices.Sorted(maps.Keys(all)) {
		st := all[id]
		out.Items += st.Items
		out.Bytes += st.Bytes
		out.Saves += st.Saves
		out.Failures += st.Failures
		out.Seconds = max(out.Seconds, st.Seconds)
		if st.Saved.After(out.Saved) {
			out.Saved = st.Saved
		}
		if st.Error != "" && out.Error == "" {
			out.Error = st.Path + ": " + st.Error
		}
	}
	return out
}
