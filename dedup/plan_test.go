package dedup

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/redistest"
)

// TestPlanMatchesFilters creates real filters with the options a plan was
// made for, fills them with N keys and checks that the plan's byte figures
// are what the filters report (Stats().MemoryBytes, within 5%) and that
// they have the planned number of layers, for both kinds, in memory and in
// Redis. N is chosen away from a layer's boundary: near one, the random
// spread of keys over shards (or a cuckoo insertion's luck) decides whether
// the next layer opens.
func TestPlanMatchesFilters(t *testing.T) {
	ctx := context.Background()
	client := redistest.Start(t, redistest.Options{}).Client()
	tests := []PlanOptions{
		{URLs: 50_000, TargetFPP: 0.01, InitialCapacity: 20_000, Shards: 4},                  // two layers
		{URLs: 30_000, TargetFPP: 0.001, Shards: 8},                                          // one layer sized for N
		{URLs: 60_000, TargetFPP: 0.0001, InitialCapacity: 5000, Factor: 3, Shards: 2},       // three layers
		{URLs: 40_000, TargetFPP: 0.01, InitialCapacity: 10_000, Tightening: 0.5, Shards: 4}, // two layers
	}
	for i, o := range tests {
		for _, kind := range []string{"bloom", "cuckoo"} {
			o.Kind = kind
			t.Run(fmt.Sprintf("%d/%s", i, kind), func(t *testing.T) {
				plans, err := Plan(o)
				if err != nil {
					t.Fatal(err)
				}
				p := plans[0]
				if p.Kind != kind || plans[1].Kind == kind {
					t.Fatalf("Plan kinds %q, %q; want %q first and the other second", p.Kind, plans[1].Kind, kind)
				}
				keys := testKeys(fmt.Sprintf("plan%d", i), int(o.URLs))
				mem, red := planFilters(t, client, fmt.Sprintf("plan-%d-%s", i, kind), p)
				for _, c := range []struct {
					where string
					f     generation
					place PlanPlace
				}{{"memory", mem, p.Memory}, {"redis", red, p.Redis}} {
					for j := 0; j < len(keys); j += 5000 {
						if _, err := c.f.TestAndAdd(ctx, keys[j:min(j+5000, len(keys))]); err != nil {
							t.Fatal(err)
						}
					}
					st, err := c.f.Stats(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if d := math.Abs(float64(st.MemoryBytes)/float64(c.place.Bytes) - 1); d > 0.05 {
						t.Errorf("%s: filter reports %d bytes, plan says %d (%.1f%% off)", c.where, st.MemoryBytes, c.place.Bytes, 100*d)
					}
					if len(st.Layers) != len(c.place.Layers) {
						t.Errorf("%s: filter has %d layers, plan says %d", c.where, len(st.Layers), len(c.place.Layers))
					}
					if c.place.FPP > p.TargetFPP || (st.EstimatedFPP > 0 && math.Abs(math.Log(c.place.FPP/st.EstimatedFPP)) > math.Log(1.5)) {
						t.Errorf("%s: plan's FPP at N %v, filter estimates %v (target %v)", c.where, c.place.FPP, st.EstimatedFPP, p.TargetFPP)
					}
					t.Logf("%s: %d layers, %d bytes planned, %d reported; FPP at N %.3g planned, %.3g estimated",
						c.where, len(c.place.Layers), c.place.Bytes, st.MemoryBytes, c.place.FPP, st.EstimatedFPP)
				}
			})
		}
	}
}

// planFilters opens the in-memory and Redis filters a plan sizes.
func planFilters(tb testing.TB, client redis.UniversalClient, name string, p FilterPlan) (mem, red generation) {
	tb.Helper()
	ctx := context.Background()
	var err error
	if p.Kind == "bloom" {
		mem, err = NewScalableBloom(ScalableOptions{Growth: p.Growth})
		if err == nil {
			red, err = OpenRedisBloom(ctx, client, name, RedisBloomOptions{InitialCapacity: p.Growth.InitialCapacity,
				TargetFPP: p.Growth.TargetFPP, Factor: p.Growth.Factor, Tightening: p.Growth.Tightening, Shards: p.Redis.Shards})
		}
	} else {
		mem, err = NewCuckoo(CuckooOptions{Growth: p.Growth})
		if err == nil {
			red, err = OpenRedisCuckoo(ctx, client, name, RedisCuckooOptions{CuckooOptions: CuckooOptions{Growth: p.Growth}, Shards: p.Redis.Shards})
		}
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { mem.Close(); red.Close() })
	return mem, red
}

// TestPlanWindowSteadyState runs windows at a steady rate for two full
// windows and checks their memory against the plan of the same window, in
// memory and in Redis, Bloom and cuckoo: the steady-state figure a user
// would plan with.
func TestPlanWindowSteadyState(t *testing.T) {
	ctx := context.Background()
	const (
		D, g = time.Hour, 4
		rate = 10.0 // new keys a second: 9,000 a period of 15 minutes
	)
	L := D / g
	client := redistest.Start(t, redistest.Options{}).Client()
	for _, k := range append(memoryWindowKinds(), redisWindowKinds("redis", client)...) {
		t.Run(k.name, func(t *testing.T) {
			kind := "bloom"
			if k.name[len(k.name)-6:] == "cuckoo" {
				kind = "cuckoo"
			}
			plans, err := Plan(PlanOptions{URLs: 1 << 40, TargetFPP: 0.01, Window: D, Granularity: g, Rate: rate, Kind: kind, Shards: 4})
			if err != nil {
				t.Fatal(err)
			}
			p := plans[0]
			place := p.Memory
			if k.redis != nil {
				place = p.Redis
			}
			clock := newFakeClock(windowStart)
			w := k.open(t, "steady-"+kind, WindowOptions{After: D, Granularity: g, Clock: clock}, p.Growth.InitialCapacity, p.TargetFPP)
			var st Stats
			for period := range 2 * (g + 1) {
				clock.set(windowStart.Add(time.Duration(period) * L))
				keys := testKeys(fmt.Sprintf("steady%d", period), int(p.KeysPerGeneration))
				for j := 0; j < len(keys); j += 3000 {
					if _, err := w.TestAndAdd(ctx, keys[j:min(j+3000, len(keys))]); err != nil {
						t.Fatal(err)
					}
				}
				if st, err = w.Stats(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if d := math.Abs(float64(st.MemoryBytes)/float64(place.Bytes) - 1); d > 0.05 {
				t.Errorf("steady window reports %d bytes, plan says %d (%.1f%% off)", st.MemoryBytes, place.Bytes, 100*d)
			}
			if p.Generations != g+1 || p.KeysPerGeneration != int64(rate*L.Seconds()) {
				t.Errorf("plan: %d generations of %d keys, want %d of %d", p.Generations, p.KeysPerGeneration, g+1, int64(rate*L.Seconds()))
			}
			t.Logf("steady state after %d periods: %d bytes reported, %d planned; %d items; FPP estimated %.3g, planned %.3g",
				2*(g+1), st.MemoryBytes, place.Bytes, st.Items, st.EstimatedFPP, place.FPP)
		})
	}
}

// TestPlanErrors: options that describe no filter are refused.
func TestPlanErrors(t *testing.T) {
	for _, o := range []PlanOptions{
		{},
		{URLs: 10, Kind: "trie"},
		{URLs: 10, TargetFPP: 2},
		{URLs: 10, Window: time.Hour},           // no rate
		{URLs: 10, Rate: 5},                     // no window
		{URLs: 10, Window: time.Hour, Rate: -1}, // negative rate
		{URLs: 10, Factor: 0.5},                 // shrinking layers
		{URLs: 10, NodeMemory: -1},              // negative memory
		{URLs: 10, Window: time.Hour, Granularity: 1000, Rate: 1},
	} {
		if _, err := Plan(o); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("Plan(%+v) = %v, want ErrInvalidParams", o, err)
		}
	}
}

// TestPlanNodes: the node count spreads whole shards over nodes.
func TestPlanNodes(t *testing.T) {
	plans, err := Plan(PlanOptions{URLs: 100_000_000, TargetFPP: 0.001, Shards: 16})
	if err != nil {
		t.Fatal(err)
	}
	p := plans[0]
	u := p.Redis.ShardBytes
	tests := []struct {
		memory int64
		want   int
	}{
		{int64(u) - 1, -1},  // a shard does not fit
		{int64(u), 16},      // one shard a node
		{int64(2*u) + 1, 8}, // two shards a node
		{int64(16 * u), 1},  // all on one
		{int64(5 * u), 4},   // 5 a node: ceil(16/5)
	}
	for _, tt := range tests {
		plans, err := Plan(PlanOptions{URLs: 100_000_000, TargetFPP: 0.001, Shards: 16, NodeMemory: tt.memory})
		if err != nil {
			t.Fatal(err)
		}
		if got := plans[0].Nodes; got != tt.want {
			t.Errorf("nodes of %d bytes for 16 shards of %d: %d, want %d", tt.memory, u, got, tt.want)
		}
	}
}
