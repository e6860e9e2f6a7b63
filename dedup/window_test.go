package dedup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/redistest"
)

// fakeClock is a test's clock: it tells the time it was set to.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.set(t)
	return c
}

func (c *fakeClock) Now(context.Context) (time.Time, error) { return time.Unix(0, c.ns.Load()), nil }
func (c *fakeClock) set(t time.Time)                        { c.ns.Store(t.UnixNano()) }

// windowStart is a moment that begins a period for any period that divides
// an hour (midnight UTC is a multiple of every such period since 1970).
var windowStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// windowKind makes a window of one kind and place, sized for capacity keys a
// generation and a window-wide rate fpp.
type windowKind struct {
	name  string
	redis redis.UniversalClient // nil: in memory
	open  func(tb testing.TB, name string, w WindowOptions, capacity int64, fpp float64) *Window
}

func memoryWindowKinds() []windowKind {
	return []windowKind{
		{name: "memory/bloom", open: func(tb testing.TB, _ string, w WindowOptions, capacity int64, fpp float64) *Window {
			return mustWindow(tb)(NewBloomWindow(w, ScalableOptions{Growth: Growth{InitialCapacity: capacity, TargetFPP: fpp}}))
		}},
		{name: "memory/cuckoo", open: func(tb testing.TB, _ string, w WindowOptions, capacity int64, fpp float64) *Window {
			return mustWindow(tb)(NewCuckooWindow(w, CuckooOptions{Growth: Growth{InitialCapacity: capacity, TargetFPP: fpp}}))
		}},
	}
}

// redisWindowKinds returns the Bloom and cuckoo windows on client.
func redisWindowKinds(where string, client redis.UniversalClient) []windowKind {
	return []windowKind{
		{name: where + "/bloom", redis: client, open: func(tb testing.TB, name string, w WindowOptions, capacity int64, fpp float64) *Window {
			return mustWindow(tb)(OpenRedisBloomWindow(context.Background(), client, name, w,
				RedisBloomOptions{InitialCapacity: capacity, TargetFPP: fpp, Shards: 4}))
		}},
		{name: where + "/cuckoo", redis: client, open: func(tb testing.TB, name string, w WindowOptions, capacity int64, fpp float64) *Window {
			return mustWindow(tb)(OpenRedisCuckooWindow(context.Background(), client, name, w,
				RedisCuckooOptions{CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: capacity, TargetFPP: fpp}}, Shards: 4}))
		}},
	}
}

func mustWindow(tb testing.TB) func(*Window, error) *Window {
	tb.Helper()
	return func(w *Window, err error) *Window {
		tb.Helper()
		if err != nil {
			tb.Fatalf("open window: %v", err)
		}
		tb.Cleanup(func() { _ = w.Close() })
		return w
	}
}

// allWindowKinds are every kind in memory, on a single Redis and on a
// three-master Redis Cluster.
func allWindowKinds(t *testing.T) []windowKind {
	kinds := memoryWindowKinds()
	kinds = append(kinds, redisWindowKinds("redis", redistest.Start(t, redistest.Options{}).Client())...)
	return append(kinds, redisWindowKinds("cluster", redistest.StartCluster(t, 3).Client())...)
}

// TestWindowRevisit pins the window's two bounds with D = 1h and g = 4
// (periods of 15 minutes): a key admitted at t is a duplicate until t+D and
// new again from t+D·(1+1/g), exactly once; the moment it turns new is the
// end of the (g+1)-th period after its own began. Keys admitted at a
// period's first and last nanosecond meet each bound to the nanosecond.
func TestWindowRevisit(t *testing.T) {
	ctx := context.Background()
	const D, g = time.Hour, 4
	L := D / g
	for _, k := range allWindowKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			clock := newFakeClock(windowStart)
			name := strings.ReplaceAll("revisit-"+k.name, "/", "-")
			w := k.open(t, name, WindowOptions{After: D, Granularity: g, Clock: clock}, 1000, 0.001)
			tests := []struct {
				name     string
				admitted time.Duration // after windowStart
			}{
				{"period's first ns: new again at t+D(1+1/g)", 0},
				{"mid-period", 7 * time.Minute},
				{"period's last ns: new again at t+D+1ns", L - 1},
			}
			for i, tt := range tests {
				key := fmt.Appendf(nil, "https://revisit.example/%d", i)
				start := windowStart.Add(time.Duration(i) * 10 * D) // a period's start, far from the last key's
				expires := start.Add((g + 1) * L)                   // end of the key's (g+1)-th period
				step := func(at time.Time, wantNew bool, what string) {
					t.Helper()
					clock.set(at)
					seen, err := w.Contains(ctx, [][]byte{key})
					if err != nil {
						t.Fatal(err)
					}
					got, err := w.TestAndAdd(ctx, [][]byte{key, key})
					if err != nil {
						t.Fatal(err)
					}
					if got[0] != wantNew || got[1] || seen[0] == wantNew {
						t.Errorf("%s: %s at %v: TestAndAdd = %v, Contains = %v, want new=%v once", tt.name, what, at.Sub(start), got, seen, wantNew)
					}
				}
				at := start.Add(tt.admitted)
				step(at, true, "first discovery")
				step(at.Add(L), false, "a period later")
				step(at.Add(D-1), false, "at t+D-1ns")
				if expires.Sub(at) > D {
					step(at.Add(D), false, "at t+D")
				}
				step(expires.Add(-1), false, "just before expiry")
				if d := expires.Sub(at); d <= D || d > D+D/g {
					t.Fatalf("%s: expiry %v after admission, want in (D, D(1+1/g)]", tt.name, d)
				}
				step(expires, true, "at expiry")
				step(expires.Add(D-1), false, "at expiry+D-1ns (admitted again at expiry)")
			}
			if k.redis != nil {
				// Every generation but the current one has expired and its
				// keys are gone from Redis.
				late := windowStart.Add(100 * D)
				clock.set(late)
				if _, err := w.TestAndAdd(ctx, [][]byte{[]byte("https://revisit.example/late")}); err != nil {
					t.Fatal(err)
				}
				epochs := redisGenerations(t, k.redis, name)
				cur := late.UnixNano() / int64(L)
				if len(epochs) != 1 || epochs[0] != cur {
					t.Errorf("generations in Redis = %v, want only the current %d (expired ones deleted)", epochs, cur)
				}
			}
		})
	}
}

// redisGenerations lists the generations of window name found in Redis (any
// of their keys), ascending.
func redisGenerations(tb testing.TB, client redis.UniversalClient, name string) []int64 {
	tb.Helper()
	ctx := context.Background()
	found := map[int64]bool{}
	var mu sync.Mutex // ForEachMaster scans the masters at once
	prefix := name + ":gen:"
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, "*", 1000).Iterator()
		for it.Next(ctx) {
			if e, ok := generationOfKey(it.Val(), prefix); ok {
				mu.Lock()
				found[e] = true
				mu.Unlock()
			}
		}
		return it.Err()
	}
	var err error
	if cc, ok := client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, client)
	}
	if err != nil {
		tb.Fatal(err)
	}
	var out []int64
	for e := range found {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TestWindowRotation runs a continuous crawl through five full windows in
// memory and four in Redis (D = 1h, g = 4: 25 and 20 periods) at a steady rate of new keys, 2.5 times each
// generation's first-layer capacity so that generations grow. At the end of
// every period, when the g+1 live generations hold the most keys, it checks:
//   - the false-positive rate measured on keys never inserted stays under the
//     window's target P plus a 4-sigma binomial margin (binomialUpper: a
//     filter meeting P exceeds it with probability about 3e-5 per check);
//   - Stats().MemoryBytes stops growing once the first window is full: from
//     period g on it never exceeds its value at the end of period g.
func TestWindowRotation(t *testing.T) {
	ctx := context.Background()
	const (
		D, g      = time.Hour, 4
		capacity  = 2000
		perPeriod = 5000
		fpp       = 0.01
	)
	L := D / g
	kinds := memoryWindowKinds()
	kinds = append(kinds, redisWindowKinds("redis", redistest.Start(t, redistest.Options{}).Client())...)
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			probes, periods := 100_000, 5*(g+1)
			if k.redis != nil {
				probes, periods = 10_000, 4*(g+1) // Redis answers fewer lookups a second
			}
			clock := newFakeClock(windowStart)
			w := k.open(t, strings.ReplaceAll("rotation-"+k.name, "/", "-"), WindowOptions{After: D, Granularity: g, Clock: clock}, capacity, fpp)
			limit := binomialUpper(fpp, probes)
			var memory []uint64
			worst := 0.0
			for p := range periods {
				clock.set(windowStart.Add(time.Duration(p) * L))
				keys := cuckooKeys(fmt.Sprintf("p%d", p), 0, perPeriod)
				for i := 0; i < len(keys); i += 1000 {
					if _, err := w.TestAndAdd(ctx, keys[i:i+1000]); err != nil {
						t.Fatal(err)
					}
				}
				clock.set(windowStart.Add(time.Duration(p+1)*L - 1))
				got, err := w.Contains(ctx, cuckooKeys(fmt.Sprintf("never%d", p), 0, probes))
				if err != nil {
					t.Fatal(err)
				}
				rate := float64(numTrue(got)) / float64(probes)
				worst = max(worst, rate)
				if rate > limit {
					t.Errorf("period %d: false-positive rate %.5f over %d keys never inserted, above %v + 4σ = %.5f", p, rate, probes, fpp, limit)
				}
				st, err := w.Stats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if st.EstimatedFPP > fpp {
					t.Errorf("period %d: Stats().EstimatedFPP = %v above the target %v", p, st.EstimatedFPP, fpp)
				}
				memory = append(memory, st.MemoryBytes)
			}
			steady := memory[g]
			for p := g + 1; p < periods; p++ {
				if memory[p] > steady {
					t.Errorf("period %d: memory %d bytes, more than %d at the end of the first window", p, memory[p], steady)
				}
			}
			t.Logf("%d periods (%d windows), %d new keys a period: worst FPP %.5f (target %v, limit %.5f); memory by period %v; steady %d bytes",
				periods, periods/(g+1), perPeriod, worst, fpp, limit, memory, steady)
		})
	}
}

// TestWindowSnapshot saves in-memory windows holding keys of several
// generations and loads them back: the same answers; a generation that has
// expired by the time the file is loaded is dropped; other parameters are
// refused with a *MismatchError naming the field; a damaged file is
// ErrCorrupt and a missing one fs.ErrNotExist.
func TestWindowSnapshot(t *testing.T) {
	ctx := context.Background()
	const D, g = time.Hour, 4
	L := D / g
	type loader func(path string, w WindowOptions) (*Window, error)
	tests := []struct {
		name        string
		make        func(WindowOptions) (*Window, error)
		load, other loader
	}{
		{"bloom",
			func(w WindowOptions) (*Window, error) {
				return NewBloomWindow(w, ScalableOptions{Growth: Growth{InitialCapacity: 500}})
			},
			func(p string, w WindowOptions) (*Window, error) {
				return LoadBloomWindow(ctx, p, w, ScalableOptions{Growth: Growth{InitialCapacity: 500}})
			},
			func(p string, w WindowOptions) (*Window, error) {
				return LoadCuckooWindow(ctx, p, w, CuckooOptions{Growth: Growth{InitialCapacity: 500}})
			}},
		{"cuckoo",
			func(w WindowOptions) (*Window, error) {
				return NewCuckooWindow(w, CuckooOptions{Growth: Growth{InitialCapacity: 500}})
			},
			func(p string, w WindowOptions) (*Window, error) {
				return LoadCuckooWindow(ctx, p, w, CuckooOptions{Growth: Growth{InitialCapacity: 500}})
			},
			func(p string, w WindowOptions) (*Window, error) {
				return LoadBloomWindow(ctx, p, w, ScalableOptions{Growth: Growth{InitialCapacity: 500}})
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock(windowStart)
			opts := WindowOptions{After: D, Granularity: g, Clock: clock}
			w := mustWindow(t)(tt.make(opts))
			// Generation p holds keys "p<p>/*", for p = 0 … g: the window is full.
			for p := range g + 1 {
				clock.set(windowStart.Add(time.Duration(p) * L))
				if _, err := w.TestAndAdd(ctx, cuckooKeys(fmt.Sprintf("p%d", p), 0, 700)); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(t.TempDir(), "window.snap")
			if err := w.Save(ctx, path); err != nil {
				t.Fatal(err)
			}
			before, err := w.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			gens, err := w.Generations(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Loaded a period later: generation 0 has expired.
			clock.set(windowStart.Add(time.Duration(g+1) * L))
			loaded := mustWindow(t)(tt.load(path, opts))
			for p := range g + 1 {
				got, err := loaded.Contains(ctx, cuckooKeys(fmt.Sprintf("p%d", p), 0, 700))
				if err != nil {
					t.Fatal(err)
				}
				want := 700
				if p == 0 {
					want = 0
				}
				// A key never inserted may be a false positive (rate ≤ 0.001).
				if n := numTrue(got); n < want || n > want+5 {
					t.Errorf("generation %d after load: %d of 700 keys seen, want %d", p, n, want)
				}
			}
			after, err := loaded.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := before.Items - gens[0].Stats.Items; after.Items != want || len(gens) != g+1 {
				t.Errorf("loaded window holds %d items, want %d (all but the expired generation's)", after.Items, want)
			}

			var me *MismatchError
			for _, bad := range []struct {
				field string
				load  func() (*Window, error)
			}{
				{"window", func() (*Window, error) {
					return tt.load(path, WindowOptions{After: 2 * D, Granularity: g, Clock: clock})
				}},
				{"granularity", func() (*Window, error) { return tt.load(path, WindowOptions{After: D, Granularity: 2, Clock: clock}) }},
				{"kind", func() (*Window, error) { return tt.other(path, opts) }},
			} {
				if _, err := bad.load(); !errors.As(err, &me) || me.Field != bad.field {
					t.Errorf("load with another %s: %v, want a *MismatchError on %q", bad.field, err, bad.field)
				}
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 0x10
			damaged := filepath.Join(t.TempDir(), "damaged.snap")
			if err := os.WriteFile(damaged, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := tt.load(damaged, opts); !errors.Is(err, ErrCorrupt) {
				t.Errorf("load of a damaged file: %v, want ErrCorrupt", err)
			}
			if _, err := tt.load(filepath.Join(t.TempDir(), "missing"), opts); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("load of a missing file: %v, want fs.ErrNotExist", err)
			}
		})
	}
}

// TestWindowForget: a cuckoo window forgets a key in whichever live
// generation holds it, so it is admitted again; a Bloom window refuses with
// ErrCannotForget.
func TestWindowForget(t *testing.T) {
	ctx := context.Background()
	const D = time.Hour
	for _, k := range memoryWindowKinds() {
		t.Run(k.name, func(t *testing.T) {
			clock := newFakeClock(windowStart)
			w := k.open(t, "", WindowOptions{After: D, Clock: clock}, 1000, 0.001)
			key := [][]byte{[]byte("https://forget.example/")}
			if _, err := w.TestAndAdd(ctx, key); err != nil {
				t.Fatal(err)
			}
			clock.set(windowStart.Add(D / 2)) // the key is in an older generation
			got, err := w.Forget(ctx, key)
			if k.name == "memory/bloom" {
				if !errors.Is(err, ErrCannotForget) {
					t.Errorf("Forget on a Bloom window: %v, want ErrCannotForget", err)
				}
				return
			}
			if err != nil || !got[0] {
				t.Fatalf("Forget = %v, %v; want [true]", got, err)
			}
			if added, err := w.TestAndAdd(ctx, key); err != nil || !added[0] {
				t.Errorf("TestAndAdd after Forget = %v, %v; want new", added, err)
			}
		})
	}
}

// TestRedisWindowReadOnly: Contains on a Redis window creates no generation
// (a read-only command writes nothing but the window's metadata, written
// when it is opened), and a window reopened with other parameters is
// refused.
func TestRedisWindowReadOnly(t *testing.T) {
	ctx := context.Background()
	client := redistest.Start(t, redistest.Options{}).Client()
	opts := WindowOptions{After: time.Hour, Clock: newFakeClock(windowStart)}
	w := mustWindow(t)(OpenRedisBloomWindow(ctx, client, "ro", opts, RedisBloomOptions{InitialCapacity: 1000, Shards: 2}))
	if _, err := w.Contains(ctx, testKeys("ro", 10)); err != nil {
		t.Fatal(err)
	}
	if n := client.DBSize(ctx).Val(); n != 1 {
		t.Errorf("after Contains Redis holds %d keys, want 1 (the window's metadata)", n)
	}
	var me *MismatchError
	for _, tt := range []struct {
		field string
		open  func() (*Window, error)
	}{
		{"after_ns", func() (*Window, error) {
			return OpenRedisBloomWindow(ctx, client, "ro", WindowOptions{After: 2 * time.Hour}, RedisBloomOptions{InitialCapacity: 1000, Shards: 2})
		}},
		{"kind", func() (*Window, error) {
			return OpenRedisCuckooWindow(ctx, client, "ro", WindowOptions{After: time.Hour}, RedisCuckooOptions{})
		}},
	} {
		if _, err := tt.open(); !errors.As(err, &me) || me.Field != tt.field {
			t.Errorf("reopen with another %s: %v, want a *MismatchError on %q", tt.field, err, tt.field)
		}
	}
}

// TestRedisClock: the clock tells the server's time (of the master holding
// its key on a cluster), whether it asks on every call or advances a
// synchronized reading with the local monotonic clock.
func TestRedisClock(t *testing.T) {
	ctx := context.Background()
	single := redistest.Start(t, redistest.Options{}).Client()
	cluster := redistest.StartCluster(t, 3).Client()
	for _, tt := range []struct {
		name   string
		client redis.UniversalClient
		resync time.Duration
	}{
		{"single, every call", single, 0},
		{"single, synced once", single, time.Hour},
		{"cluster, every call", cluster, 0},
		{"cluster, synced once", cluster, time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := NewRedisClock(tt.client, "clock-key", tt.resync)
			var node redis.Cmdable = tt.client
			if cc, ok := tt.client.(*redis.ClusterClient); ok {
				n, err := cc.MasterForKey(ctx, "clock-key")
				if err != nil {
					t.Fatal(err)
				}
				node = n
			}
			for range 3 {
				lo := node.Time(ctx).Val()
				got, err := c.Now(ctx)
				if err != nil {
					t.Fatal(err)
				}
				hi := node.Time(ctx).Val()
				// TIME has µs resolution, and the local clock drifts (well
				// under a millisecond in a test's time).
				slack := c.Uncertainty() + time.Microsecond + time.Millisecond
				if got.Before(lo.Add(-slack)) || got.After(hi.Add(slack)) {
					t.Errorf("Now() = %v, server said %v then %v (uncertainty %v)", got, lo, hi, c.Uncertainty())
				}
			}
		})
	}
}

// TestGenerationOfKey pins which Redis keys belong to a window's generation:
// its metadata and its shards' hash-tagged keys, not those of a window whose
// name extends this one's.
func TestGenerationOfKey(t *testing.T) {
	tests := []struct {
		key    string
		epoch  int64
		belong bool
	}{
		{"w:gen:123:meta", 123, true},
		{"{w:gen:123:0}:state", 123, true},
		{"{w:gen:123:15}:bits:2:0", 123, true},
		{"{w:gen:-4:1}:slots:0", -4, true},
		{"w:window", 0, false},
		{"w:gen:5:gen:123:meta", 0, false},      // window "w:gen:5"
		{"{w:gen:5:gen:123:0}:state", 0, false}, // window "w:gen:5"
		{"w:gen:12x:meta", 0, false},
		{"{w:gen:12}:state", 0, false},
		{"x:gen:1:meta", 0, false},
	}
	for _, tt := range tests {
		e, ok := generationOfKey(tt.key, "w:gen:")
		if ok != tt.belong || e != tt.epoch {
			t.Errorf("generationOfKey(%q) = %d, %v; want %d, %v", tt.key, e, ok, tt.epoch, tt.belong)
		}
	}
}

// TestWindowClose: Close is idempotent and later calls fail with ErrClosed.
func TestWindowClose(t *testing.T) {
	ctx := context.Background()
	w, err := NewBloomWindow(WindowOptions{After: time.Hour}, ScalableOptions{Growth: Growth{InitialCapacity: 100}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.TestAndAdd(ctx, testKeys("c", 3)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := w.Contains(ctx, testKeys("c", 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Contains after Close: %v, want ErrClosed", err)
	}
}

// TestWindowOptionsInvalid: options that cannot describe a window are
// refused with ErrInvalidParams.
func TestWindowOptionsInvalid(t *testing.T) {
	for _, w := range []WindowOptions{
		{},
		{After: -time.Second},
		{After: time.Hour, Granularity: -1},
		{After: time.Hour, Granularity: maxWindowGranularity + 1},
		{After: 3, Granularity: 4},
	} {
		if _, err := NewBloomWindow(w, ScalableOptions{}); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("NewBloomWindow(%+v) = %v, want ErrInvalidParams", w, err)
		}
	}
}

// TestWindowConcurrentNewOnce races callers adding the same keys: goroutines
// sharing one in-memory window, and separate windows (as separate processes
// would open) on one Redis name, single and cluster. Each key is new to
// exactly one caller, or to none when it is a false positive.
func TestWindowConcurrentNewOnce(t *testing.T) {
	clock := newFakeClock(windowStart.Add(time.Minute))
	opts := WindowOptions{After: time.Hour, Clock: clock}
	keys := testKeys("race", 4000)
	for _, k := range allWindowKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			name := strings.ReplaceAll("race-"+k.name, "/", "-")
			var windows []*Window
			if k.redis == nil {
				windows = repeat(k.open(t, name, opts, 2000, 0.001), 8)
			} else {
				for range 4 {
					windows = append(windows, k.open(t, name, opts, 2000, 0.001))
				}
			}
			counts := raceNewOnce(t, windows, keys, 250, 7, nil)
			checkNewOnce(t, keys, counts, binomialCount(len(keys), 0.001))
		})
	}
}

// binomialCount is binomialCountUpper as a whole count.
func binomialCount(n int, p float64) int { return int(binomialCountUpper(n, p)) }

// TestWindowRotatesUnderLoad advances the clock through many periods while
// goroutines add and look up keys: no call fails (a generation is never
// closed under a call using it) and the window ends with at most g+1
// generations.
func TestWindowRotatesUnderLoad(t *testing.T) {
	ctx := context.Background()
	const D, g = time.Hour, 4
	for _, k := range memoryWindowKinds() {
		t.Run(k.name, func(t *testing.T) {
			clock := newFakeClock(windowStart)
			w := k.open(t, "", WindowOptions{After: D, Granularity: g, Clock: clock}, 1000, 0.01)
			var wg sync.WaitGroup
			done := make(chan struct{})
			for i := range 4 {
				wg.Go(func() {
					for n := 0; ; n++ {
						select {
						case <-done:
							return
						default:
						}
						keys := cuckooKeys(fmt.Sprintf("load%d-%d", i, n), 0, 50)
						if _, err := w.TestAndAdd(ctx, keys); err != nil {
							t.Error(err)
							return
						}
						if _, err := w.Contains(ctx, keys); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			for p := range 30 {
				clock.set(windowStart.Add(time.Duration(p) * D / g))
				if _, err := w.TestAndAdd(ctx, testKeys(fmt.Sprintf("tick%d", p), 10)); err != nil {
					t.Fatal(err)
				}
			}
			close(done)
			wg.Wait()
			gens, err := w.Generations(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(gens) > g+1 {
				t.Errorf("%d generations live, want at most %d", len(gens), g+1)
			}
		})
	}
}
