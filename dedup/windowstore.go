package dedup

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// memoryWindowStore makes a window's generations in memory. The Window
// holds them; dropping one is closing it.
type memoryWindowStore struct {
	create func() (generation, error)
}

func (s memoryWindowStore) open(_ context.Context, _ int64, create bool) (generation, error) {
	if !create {
		return nil, nil
	}
	return s.create()
}

func (memoryWindowStore) drop(context.Context, int64) error { return nil }
func (memoryWindowStore) remote() bool                      { return false }

// prepare validates a window's options, filling in defaults and the
// default clock.
func (o WindowOptions) prepare(clock func() Clock) (WindowOptions, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return o, err
	}
	if o.Clock == nil {
		o.Clock = clock()
	}
	return o, nil
}

func localClock() Clock { return ClockFunc(time.Now) }

// NewBloomWindow returns an empty revisit window in memory whose generations
// are ScalableBlooms. gen.Growth.TargetFPP (0: 0.001) bounds the whole
// window's false-positive rate: each generation is sized for TargetFPP/(g+1).
// gen.Growth.InitialCapacity (0: 1,000,000) is each generation's first
// layer: R·D/g keys for a steady rate R of new keys (see Plan). The clock
// defaults to the local one.
func NewBloomWindow(w WindowOptions, gen ScalableOptions) (*Window, error) {
	w, gen, target, err := bloomWindowOptions(w, gen)
	if err != nil {
		return nil, err
	}
	store := memoryWindowStore{create: func() (generation, error) { return NewScalableBloom(gen) }}
	return newWindow(w, target, "bloom", store, nil), nil
}

func bloomWindowOptions(w WindowOptions, gen ScalableOptions) (WindowOptions, ScalableOptions, float64, error) {
	gen = gen.withDefaults()
	w, target, err := w.split(&gen.Growth)
	if err == nil {
		err = gen.Growth.Validate()
	}
	return w, gen, target, err
}

// split prepares an in-memory window's options and sets a generation's
// rate to its share of the window's target, which it returns.
func (o WindowOptions) split(g *Growth) (WindowOptions, float64, error) {
	o, err := o.prepare(localClock)
	target := g.TargetFPP
	g.TargetFPP = o.generationFPP(target)
	return o, target, err
}

// NewCuckooWindow returns an empty revisit window in memory whose
// generations are Cuckoo filters, sized as NewBloomWindow's are.
func NewCuckooWindow(w WindowOptions, gen CuckooOptions) (*Window, error) {
	w, gen, target, err := cuckooWindowOptions(w, gen)
	if err != nil {
		return nil, err
	}
	store := memoryWindowStore{create: func() (generation, error) { return NewCuckoo(gen) }}
	return newWindow(w, target, "cuckoo", store, nil), nil
}

func cuckooWindowOptions(w WindowOptions, gen CuckooOptions) (WindowOptions, CuckooOptions, float64, error) {
	gen = gen.withDefaults()
	w, target, err := w.split(&gen.Growth)
	if err == nil {
		err = gen.validate()
	}
	return w, gen, target, err
}

// OpenRedisBloomWindow opens the revisit window named name in Redis,
// creating it if it does not exist. Its generations are RedisBlooms named
// "<name>:gen:<epoch>", sized as NewBloomWindow's are (gen.TargetFPP, 0
// meaning DefaultRedisBloomFPP, bounds the whole window;
// gen.InitialCapacity is each generation's). The window's own parameters
// (kind, D, g, target rate) are stored in the hash "<name>:window"; opening
// an existing window adopts those left zero (w.After, w.Granularity,
// gen.TargetFPP) and fails with a *MismatchError naming both values on one
// given otherwise. A generation's sizing left zero in gen is adopted from
// the live generations that exist (see OpenRedisBloom), and a new one is
// sized as they are. The clock defaults to the Redis server's
// (NewRedisClock), so every process agrees on the generations. An expired
// generation's keys are deleted by the first process that sees it expire.
// With gen.Existing the window must exist (else an error matching
// ErrNotFound) and is only read: nothing is created or stored, and expired
// generations are left for a writer to delete.
func OpenRedisBloomWindow(ctx context.Context, client redis.UniversalClient, name string, w WindowOptions, gen RedisBloomOptions) (*Window, error) {
	return openRedisWindow(ctx, client, name, w, "bloom", gen.Existing, gen.TargetFPP, DefaultRedisBloomFPP, func(w WindowOptions, target float64) func(context.Context, string) (generation, error) {
		gen.TargetFPP = w.generationFPP(target)
		return func(ctx context.Context, name string) (generation, error) {
			f, err := OpenRedisBloom(ctx, client, name, gen)
			if err == nil { // later generations are sized as this one
				gen.InitialCapacity, gen.Factor, gen.Tightening = f.opts.InitialCapacity, f.opts.Factor, f.opts.Tightening
				gen.Shards, gen.ChunkBytes = f.opts.Shards, f.opts.ChunkBytes
			}
			return f, err
		}
	})
}

// OpenRedisCuckooWindow opens the revisit window named name in Redis, as
// OpenRedisBloomWindow does, with RedisCuckoo generations (gen's TargetFPP,
// 0 meaning 0.001, bounds the whole window; gen.Existing only reads).
func OpenRedisCuckooWindow(ctx context.Context, client redis.UniversalClient, name string, w WindowOptions, gen RedisCuckooOptions) (*Window, error) {
	return openRedisWindow(ctx, client, name, w, "cuckoo", gen.Existing, gen.Growth.TargetFPP, defaultTargetFPP, func(w WindowOptions, target float64) func(context.Context, string) (generation, error) {
		gen.Growth.TargetFPP = w.generationFPP(target)
		return func(ctx context.Context, name string) (generation, error) {
			f, err := OpenRedisCuckoo(ctx, client, name, gen)
			if err == nil { // later generations are sized as this one
				policy, force := gen.Policy, gen.Force
				gen.CuckooOptions, gen.Shards = f.opts.CuckooOptions, f.opts.Shards
				gen.Policy, gen.Force = policy, force
			}
			return f, err
		}
	})
}

// redisWindowLayout versions the Redis layout of a window (its metadata and
// generation names).
const redisWindowLayout = "1"

func openRedisWindow(ctx context.Context, client redis.UniversalClient, name string, w WindowOptions, kind string, existing bool, target, defaultTarget float64,
	opener func(w WindowOptions, target float64) func(context.Context, string) (generation, error)) (*Window, error) {
	wrap := func(err error) error { return fmt.Errorf("dedup: open redis %s window %q: %w", kind, name, err) }
	if name == "" || strings.ContainsAny(name, "{}") {
		return nil, wrap(fmt.Errorf("%w: window name %q is empty or holds '{' or '}'", ErrInvalidParams, name))
	}
	if err := CheckRedis(ctx, client); err != nil {
		return nil, wrap(err)
	}
	s := &redisWindowStore{client: client, name: name, readOnly: existing}
	// An existing window's parameters fill in those not given.
	stored, err := redisMeta{key: s.metaKey(), name: name}.read(ctx, client)
	if err != nil {
		return nil, wrap(err)
	}
	if existing && stored == nil {
		return nil, wrap(fmt.Errorf("%w: no window %q", ErrNotFound, name))
	}
	after := int64(w.After)
	err = adoptStored(stored, storedParam{"after_ns", &after}, storedParam{"granularity", &w.Granularity}, storedParam{"target_fpp", &target})
	if err != nil {
		return nil, wrap(err)
	}
	w.After = time.Duration(after)
	if target == 0 {
		target = defaultTarget
	}
	w, err = w.prepare(func() Clock { return NewRedisClock(client, s.metaKey(), DefaultRedisClockResync) })
	if err != nil {
		return nil, wrap(err)
	}
	if !(target > 0 && target < 1) {
		return nil, wrap(fmt.Errorf("%w: target false-positive rate %v must be in (0, 1)", ErrInvalidParams, target))
	}
	s.create = opener(w, target)
	meta := redisMeta{key: s.metaKey(), name: name, fields: []redisMetaField{
		{"kind", kind},
		{"layout", redisWindowLayout},
		{"after_ns", strconv.FormatInt(int64(w.After), 10)},
		{"granularity", strconv.Itoa(w.Granularity)},
		{"target_fpp", formatFloat(target)},
	}}
	if existing {
		_, err = meta.check(stored, false)
	} else {
		_, err = meta.ensure(ctx, client, false)
	}
	if err != nil {
		return nil, wrap(err)
	}
	return newWindow(w, target, kind, s, nil), nil
}

// redisWindowStore keeps a window's generations in Redis: generation e is a
// filter named "<name>:gen:<e>".
type redisWindowStore struct {
	client   redis.UniversalClient
	name     string
	create   func(ctx context.Context, name string) (generation, error)
	readOnly bool // opened Existing: drop deletes nothing
}

func (s *redisWindowStore) metaKey() string { return s.name + ":window" }

func (s *redisWindowStore) genPrefix() string { return s.name + ":gen:" }

func (s *redisWindowStore) remote() bool { return true }

// open opens generation e, or without create reports nil if its metadata
// hash ("<filter>:meta") does not exist.
func (s *redisWindowStore) open(ctx context.Context, e int64, create bool) (generation, error) {
	name := s.genPrefix() + strconv.FormatInt(e, 10)
	if !create {
		n, err := s.client.Exists(ctx, name+":meta").Result()
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, nil
		}
	}
	return s.create(ctx, name)
}

// drop deletes (UNLINK: freed in the background) every key of every
// generation older than before, found by SCAN on every master, so that
// generations a crashed process left behind go too. A generation's keys are
// its metadata "<name>:gen:<e>:meta" and its shards' "{<name>:gen:<e>:<j>}:…".
func (s *redisWindowStore) drop(ctx context.Context, before int64) error {
	if s.readOnly {
		return nil
	}
	prefix := s.genPrefix()
	patterns := []string{globEscape(prefix) + "*", "{" + globEscape(prefix) + "*"}
	sweep := func(ctx context.Context, c redis.Cmdable) error {
		var doomed []string
		for _, p := range patterns {
			it := c.Scan(ctx, 0, p, 1000).Iterator()
			for it.Next(ctx) {
				if e, ok := generationOfKey(it.Val(), prefix); ok && e < before {
					doomed = append(doomed, it.Val())
				}
			}
			if err := it.Err(); err != nil {
				return err
			}
		}
		if len(doomed) == 0 {
			return nil
		}
		pipe := c.Pipeline()
		for _, k := range doomed {
			pipe.Unlink(ctx, k) // one key a command: they lie in different slots
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return sweep(ctx, c) })
	}
	return sweep(ctx, s.client)
}

// generationOfKey returns the generation a Redis key of a window belongs
// to: key is "<prefix><e>:meta" or "{<prefix><e>:<shard>}…" (a shard's hash
// tag). Keys of another window whose name extends this one's
// ("<prefix>5:gen:…") match neither form.
func generationOfKey(key, prefix string) (int64, bool) {
	tagged := strings.HasPrefix(key, "{")
	rest, ok := strings.CutPrefix(strings.TrimPrefix(key, "{"), prefix)
	if !ok {
		return 0, false
	}
	n := strings.IndexFunc(rest, func(r rune) bool { return r != '-' && (r < '0' || r > '9') })
	if n <= 0 {
		return 0, false
	}
	e, err := strconv.ParseInt(rest[:n], 10, 64)
	if err != nil {
		return 0, false
	}
	rest = rest[n:]
	if !tagged {
		if rest != ":meta" {
			return 0, false
		}
		return e, true
	}
	rest, ok = strings.CutPrefix(rest, ":")
	shard, _, closed := strings.Cut(rest, "}")
	if !ok || !closed || shard == "" || strings.Trim(shard, "0123456789") != "" {
		return 0, false
	}
	return e, true
}

// globEscape escapes the characters special to Redis's MATCH patterns.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// StoredRedisWindowKind returns the generations' kind of the revisit window
// named name in Redis (see OpenRedisBloomWindow), "unknown" if it exists
// but its kind cannot be told, or "" if there is none. It writes nothing.
func StoredRedisWindowKind(ctx context.Context, client redis.UniversalClient, name string) (string, error) {
	return redisMeta{key: (&redisWindowStore{name: name}).metaKey(), name: name}.kind(ctx, client)
}

// DefaultRedisClockResync is how often a RedisClock made by a window's
// constructor asks the server for its time.
const DefaultRedisClockResync = 5 * time.Second

// RedisClock is the time of one Redis server (its TIME command), so that
// every process sharing a window agrees on the time whatever their hosts'
// clocks say. On a Redis Cluster it is the master that holds key's hash
// slot. Between synchronizations it advances with this process's monotonic
// clock from the server's time, taken as the midpoint of the TIME round
// trip: its error is at most half a round trip plus the drift of the local
// clock over Resync (tens of microseconds a second at worst; see
// Uncertainty). A RedisClock
// is safe for concurrent use.
type RedisClock struct {
	client redis.UniversalClient
	key    string
	resync time.Duration

	mu      sync.Mutex
	synced  bool
	server  time.Time     // the server's time at the last synchronization
	local   time.Time     // this process's clock (monotonic) at that moment
	halfRTT time.Duration // half the round trip of that synchronization
}

// NewRedisClock returns the clock of the server behind client (on a
// cluster, of the master holding key). It asks the server again when resync
// has passed since it last did; resync 0 means on every call.
func NewRedisClock(client redis.UniversalClient, key string, resync time.Duration) *RedisClock {
	return &RedisClock{client: client, key: key, resync: resync}
}

// Now returns the server's time.
func (c *RedisClock) Now(ctx context.Context) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.synced && time.Since(c.local) < c.resync {
		return c.server.Add(time.Since(c.local)), nil
	}
	var node redis.Cmdable = c.client
	if cc, ok := c.client.(*redis.ClusterClient); ok {
		n, err := cc.MasterForKey(ctx, c.key)
		if err != nil {
			return time.Time{}, fmt.Errorf("redis clock: %w", err)
		}
		node = n
	}
	t0 := time.Now()
	t, err := node.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("redis clock: %w", err)
	}
	t1 := time.Now()
	c.halfRTT = t1.Sub(t0) / 2
	c.server, c.local, c.synced = t, t0.Add(c.halfRTT), true
	return c.server.Add(time.Since(c.local)), nil
}

// Uncertainty bounds how far Now is from the server's time, but for the
// local clock's drift since the last synchronization: half that
// synchronization's round trip (the server read its clock somewhere in it),
// plus the microsecond TIME is given in.
func (c *RedisClock) Uncertainty() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.halfRTT + time.Microsecond
}
