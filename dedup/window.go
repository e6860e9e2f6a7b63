package dedup

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"
)

// DefaultWindowGranularity is the granularity g of a revisit window whose
// options leave it zero: generations a quarter of the window long, so a key
// is new again between D and 1.25·D after it was admitted.
const DefaultWindowGranularity = 4

// maxWindowGranularity bounds g: every lookup reads g+1 generations.
const maxWindowGranularity = 64

// ErrCannotForget is returned by Forget on a filter made of Bloom filters.
// A Bloom filter's bits are shared by many keys, so clearing the bits of one
// would make others read as absent; only a cuckoo filter, which stores one
// fingerprint per key, can remove a key.
var ErrCannotForget = errors.New("dedup: a Bloom filter cannot forget a key (its bits are shared with other keys); use the cuckoo kind, or a revisit window to have keys admitted again after a while")

// Clock tells a revisit window the time. Every process sharing a window
// must read the same clock (see RedisClock); tests inject their own.
type Clock interface {
	Now(ctx context.Context) (time.Time, error)
}

// ClockFunc adapts a function, such as time.Now or a test's fake, to Clock.
type ClockFunc func() time.Time

// Now returns f().
func (f ClockFunc) Now(context.Context) (time.Time, error) { return f(), nil }

// WindowOptions configures a revisit window. The zero value is not valid
// for a new window: After must be set. Opening a stored window (in Redis, or
// from its file) adopts the stored After and Granularity where left zero;
// given, they must equal the stored ones.
type WindowOptions struct {
	// After is the revisit window D: a key admitted at time t is seen until
	// at least t+D and new again from at most t+D·(1+1/Granularity).
	After time.Duration
	// Granularity is g, the number of generations a window is cut into; 0
	// means DefaultWindowGranularity. A larger g makes the moment a key is
	// new again more precise and costs a lookup in more generations.
	Granularity int
	// Clock is the time source; nil means the local clock for a window in
	// memory and the Redis server's (NewRedisClock) for one in Redis.
	Clock Clock
}

func (o WindowOptions) withDefaults() WindowOptions {
	if o.Granularity == 0 {
		o.Granularity = DefaultWindowGranularity
	}
	return o
}

// validate reports the first field of o (after defaults) that cannot
// describe a window.
func (o WindowOptions) validate() error {
	switch {
	case o.After <= 0:
		return fmt.Errorf("%w: revisit window %v must be positive", ErrInvalidParams, o.After)
	case o.Granularity < 1 || o.Granularity > maxWindowGranularity:
		return fmt.Errorf("%w: window granularity %d must be in [1, %d]", ErrInvalidParams, o.Granularity, maxWindowGranularity)
	case o.After < time.Duration(o.Granularity):
		return fmt.Errorf("%w: revisit window %v is shorter than %d ns", ErrInvalidParams, o.After, o.Granularity)
	}
	return nil
}

// period returns L, the length of a generation: ceil(D/g) nanoseconds, so
// that g·L ≥ D.
func (o WindowOptions) period() int64 {
	d, g := int64(o.After), int64(o.Granularity)
	return (d + g - 1) / g
}

// generationFPP returns the false-positive rate each of the g+1 live
// generations is sized for, so that their union stays within target.
func (o WindowOptions) generationFPP(target float64) float64 {
	return target / float64(o.Granularity+1)
}

// generation is one generation's filter: any of the package's growing
// filters.
type generation interface {
	TestAndAdd(ctx context.Context, keys [][]byte) ([]bool, error)
	Contains(ctx context.Context, keys [][]byte) ([]bool, error)
	Stats(ctx context.Context) (Stats, error)
	Close() error
}

// forgetter is a generation that can remove keys (a cuckoo filter).
type forgetter interface {
	Forget(ctx context.Context, keys [][]byte) ([]bool, error)
}

var (
	_ forgetter = (*Cuckoo)(nil)
	_ forgetter = (*RedisCuckoo)(nil)
)

// windowStore keeps a window's generations: in memory or in Redis.
type windowStore interface {
	// open returns generation e's filter, creating it when create is set;
	// without create it returns nil, nil for a generation that does not
	// exist.
	open(ctx context.Context, e int64, create bool) (generation, error)
	// drop deletes the stored data of every generation older than e.
	drop(ctx context.Context, before int64) error
	// remote reports whether a call costs a round trip, so generations are
	// better asked in parallel.
	remote() bool
}

// Window is a seen-set with a revisit window: a key admitted at time t reads
// as seen until at least t+D (WindowOptions.After) and is admitted again when
// it is rediscovered after at most t+D·(1+1/g). It is a rotating set of
// generations, each a growing filter of any of this package's kinds (Bloom or
// cuckoo, in memory or in Redis); the package documentation derives its
// bounds.
//
// Time is cut into periods of L = ceil(D/g); generation e holds the keys
// admitted during [e·L, (e+1)·L), counted from the Unix epoch, so every
// process agrees on the generations from the clock alone. At a time in
// period c the generations c−g … c are live: a key is seen if any live
// generation holds it, and TestAndAdd adds a key to generation c only when
// no live generation holds it. A generation that is no longer live is
// closed and its data deleted.
//
// A Window is safe for concurrent use; in Redis, many processes may share
// one. Its zero value is not usable; call one of the constructors.
type Window struct {
	opts   WindowOptions // with defaults
	period int64         // L, in nanoseconds
	target float64
	kind   string
	store  windowStore

	mu     sync.RWMutex // shared by every operation, exclusive to rotate
	closed bool
	cur    int64 // the newest period seen (never goes back)
	gens   map[int64]generation
	absent map[int64]bool // past generations known not to exist
}

func newWindow(opts WindowOptions, target float64, kind string, store windowStore, gens map[int64]generation) *Window {
	w := &Window{
		opts: opts, period: opts.period(), target: target, kind: kind, store: store,
		cur: math.MinInt64, gens: gens, absent: map[int64]bool{},
	}
	if w.gens == nil {
		w.gens = map[int64]generation{}
	}
	for e := range w.gens {
		w.cur = max(w.cur, e)
	}
	return w
}

// epoch returns the period that holds t.
func (w *Window) epoch(t time.Time) int64 {
	ns := t.UnixNano()
	e := ns / w.period
	if ns%w.period < 0 {
		e--
	}
	return e
}

// live is the view of the live generations one operation works on, oldest
// first; the current one (period cur) is last if it exists.
type live struct {
	cur     int64
	epochs  []int64
	gens    []generation
	current generation // nil if it does not exist
}

// acquire reads the clock and returns the live generations with the read
// lock held (the caller calls w.mu.RUnlock); with create, the current
// generation exists. It rotates first if the period changed.
func (w *Window) acquire(ctx context.Context, create bool) (live, error) {
	if err := ctx.Err(); err != nil {
		return live{}, err
	}
	now, err := w.opts.Clock.Now(ctx)
	if err != nil {
		return live{}, fmt.Errorf("read clock: %w", err)
	}
	c := w.epoch(now)
	for attempt := 0; ; attempt++ {
		w.mu.RLock()
		if w.closed {
			w.mu.RUnlock()
			return live{}, ErrClosed
		}
		c = max(c, w.cur)
		// Without create, a missing current generation is looked up once
		// per call (another process may have created it since).
		if c == w.cur && (w.gens[c] != nil || (!create && attempt > 0)) {
			return w.view(c), nil
		}
		w.mu.RUnlock()
		if attempt > 2 { // each retry follows another caller's rotation
			return live{}, fmt.Errorf("generation %d did not open", c)
		}
		if err := w.rotate(ctx, c, create); err != nil {
			return live{}, err
		}
	}
}

// view lists the live generations at period c. w.mu must be held.
func (w *Window) view(c int64) live {
	v := live{cur: c}
	for e := c - int64(w.opts.Granularity); e <= c; e++ {
		if g := w.gens[e]; g != nil {
			v.epochs = append(v.epochs, e)
			v.gens = append(v.gens, g)
		}
	}
	if n := len(v.epochs); n > 0 && v.epochs[n-1] == c {
		v.current = v.gens[n-1]
	}
	return v
}

// rotate moves the window to period c: it closes and deletes the
// generations older than c−g, and opens the live ones that exist (creating
// the current one with create).
func (w *Window) rotate(ctx context.Context, c int64, create bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	if c > w.cur {
		oldest := c - int64(w.opts.Granularity)
		for e, g := range w.gens {
			if e < oldest {
				_ = g.Close()
				delete(w.gens, e)
			}
		}
		clear(w.absent)
		if err := w.store.drop(ctx, oldest); err != nil {
			return fmt.Errorf("drop generations before %d: %w", oldest, err)
		}
		w.cur = c
	}
	for e := c - int64(w.opts.Granularity); e <= c; e++ {
		if w.gens[e] != nil || w.absent[e] {
			continue
		}
		g, err := w.store.open(ctx, e, create && e == c)
		if err != nil {
			return fmt.Errorf("open generation %d: %w", e, err)
		}
		switch {
		case g != nil:
			w.gens[e] = g
		case e < c:
			w.absent[e] = true // no process adds to a past generation
		}
	}
	return nil
}

// heldBefore reports, per key, whether a live generation older than the
// current one holds it. Remote generations are asked at once, all about
// every key (one round trip); in memory they are asked newest first, each
// about the keys no newer one holds.
func (w *Window) heldBefore(ctx context.Context, v live, keys [][]byte) ([]bool, error) {
	held := make([]bool, len(keys))
	gens := v.gens
	if v.current != nil {
		gens = gens[:len(gens)-1]
	}
	if w.store.remote() && len(gens) > 1 {
		got := make([][]bool, len(gens))
		errs := make([]error, len(gens))
		var wg sync.WaitGroup
		for j, g := range gens {
			wg.Go(func() { got[j], errs[j] = g.Contains(ctx, keys) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		for _, gj := range got {
			for i, ok := range gj {
				held[i] = held[i] || ok
			}
		}
		return held, nil
	}
	ask := keys
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	for j := len(gens) - 1; j >= 0 && len(ask) > 0; j-- {
		got, err := gens[j].Contains(ctx, ask)
		if err != nil {
			return nil, err
		}
		var rest [][]byte
		n := 0
		for x, ok := range got {
			if ok {
				held[idx[x]] = true
				continue
			}
			rest = append(rest, ask[x])
			idx[n] = idx[x]
			n++
		}
		ask, idx = rest, idx[:n]
	}
	return held, nil
}

// TestAndAdd reports, per key, whether it was new: held by no live
// generation, and now added to the current one. Within a batch a repeated
// key is new at most once, and of concurrent callers (in any process sharing
// the window) one is told a key is new, as the generation's filter
// guarantees. Keys the current generation could not store are reported false
// and listed in a *BatchError (with indexes into keys), as the generation's
// filter reports them.
func (w *Window) TestAndAdd(ctx context.Context, keys [][]byte) ([]bool, error) {
	v, err := w.acquire(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("dedup: window: test-and-add: %w", err)
	}
	defer w.mu.RUnlock()
	held, err := w.heldBefore(ctx, v, keys)
	if err != nil {
		return nil, fmt.Errorf("dedup: window: test-and-add: %w", err)
	}
	var rest [][]byte
	var at []int
	for i, h := range held {
		if !h {
			rest, at = append(rest, keys[i]), append(at, i)
		}
	}
	out := make([]bool, len(keys))
	if len(rest) == 0 {
		return out, nil
	}
	got, err := v.current.TestAndAdd(ctx, rest)
	var be *BatchError
	if err != nil && !errors.As(err, &be) {
		return nil, fmt.Errorf("dedup: window: test-and-add: %w", err)
	}
	for j, i := range at {
		out[i] = got[j]
	}
	if be != nil {
		mapped := &BatchError{Err: be.Err}
		for _, j := range be.Keys {
			mapped.Keys = append(mapped.Keys, at[j])
		}
		return out, mapped
	}
	return out, nil
}

// Contains reports, per key, whether a live generation holds it. It writes
// nothing (in Redis, it creates no generation).
func (w *Window) Contains(ctx context.Context, keys [][]byte) ([]bool, error) {
	v, err := w.acquire(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("dedup: window: contains: %w", err)
	}
	defer w.mu.RUnlock()
	held, err := w.heldBefore(ctx, v, keys)
	if err == nil && v.current != nil {
		var got []bool
		if got, err = v.current.Contains(ctx, keys); err == nil {
			for i, ok := range got {
				held[i] = held[i] || ok
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("dedup: window: contains: %w", err)
	}
	return held, nil
}

// Forget makes each key read as absent in every live generation (see
// Cuckoo.Forget) and reports per key whether a generation held it. A window
// of Bloom filters cannot forget: it returns ErrCannotForget.
func (w *Window) Forget(ctx context.Context, keys [][]byte) ([]bool, error) {
	if w.kind != "cuckoo" {
		return nil, ErrCannotForget
	}
	v, err := w.acquire(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("dedup: window: forget: %w", err)
	}
	defer w.mu.RUnlock()
	out := make([]bool, len(keys))
	for _, g := range v.gens {
		got, err := g.(forgetter).Forget(ctx, keys)
		if err != nil {
			return nil, fmt.Errorf("dedup: window: forget: %w", err)
		}
		for i, ok := range got {
			out[i] = out[i] || ok
		}
	}
	return out, nil
}

// GenerationStats describes one live generation of a Window.
type GenerationStats struct {
	// Epoch numbers the generation: it holds the keys admitted in
	// [Start, Start+L).
	Epoch int64 `json:"epoch"`
	// Start is when the generation began taking keys.
	Start time.Time `json:"start"`
	// Expires is when it stops being read: Start + (g+1)·L.
	Expires time.Time `json:"expires"`
	// Stats are the generation filter's own.
	Stats Stats `json:"stats"`
}

// Generations reports every live generation that exists, oldest first.
func (w *Window) Generations(ctx context.Context) ([]GenerationStats, error) {
	v, err := w.acquire(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("dedup: window: stats: %w", err)
	}
	defer w.mu.RUnlock()
	out := make([]GenerationStats, len(v.gens))
	for i, g := range v.gens {
		s, err := g.Stats(ctx)
		if err != nil {
			return nil, fmt.Errorf("dedup: window: stats of generation %d: %w", v.epochs[i], err)
		}
		start := v.epochs[i] * w.period
		out[i] = GenerationStats{
			Epoch:   v.epochs[i],
			Start:   time.Unix(0, start),
			Expires: time.Unix(0, start+int64(w.opts.Granularity+1)*w.period),
			Stats:   s,
		}
	}
	return out, nil
}

// Stats sums the live generations: items, deletes and memory are totals,
// Layers lists every generation's layers (oldest generation first),
// EstimatedFPP is 1 − Π(1 − fpp_i) over the generations' estimates, and
// TargetFPP is the window's bound.
func (w *Window) Stats(ctx context.Context) (Stats, error) {
	gens, err := w.Generations(ctx)
	if err != nil {
		return Stats{}, err
	}
	s := Stats{Kind: w.kind, TargetFPP: w.target}
	pass := 1.0
	for _, g := range gens {
		s.Items += g.Stats.Items
		s.Deletes += g.Stats.Deletes
		s.MemoryBytes += g.Stats.MemoryBytes
		s.Layers = append(s.Layers, g.Stats.Layers...)
		s.NextLayerCapacity = g.Stats.NextLayerCapacity
		pass *= 1 - g.Stats.EstimatedFPP
	}
	s.EstimatedFPP = 1 - pass
	if s.Items > 0 {
		s.BytesPerItem = float64(s.MemoryBytes) / float64(s.Items)
	}
	return s, nil
}

// Options returns the window's options, with defaults filled in.
func (w *Window) Options() WindowOptions { return w.opts }

// Close closes every generation's filter (leaving a Redis window's data in
// Redis). Later calls return ErrClosed. It is idempotent and safe for
// concurrent use.
func (w *Window) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	epochs := make([]int64, 0, len(w.gens))
	for e := range w.gens {
		epochs = append(epochs, e)
	}
	sort.Slice(epochs, func(i, j int) bool { return epochs[i] < epochs[j] })
	var errs []error
	for _, e := range epochs {
		errs = append(errs, w.gens[e].Close())
	}
	w.gens = nil
	return errors.Join(errs...)
}
