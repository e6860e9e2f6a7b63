package dedup

import (
	"context"
	"fmt"
	"testing"

	"github.com/sievecrawl/sieve/redistest"
)

// TestRedisStatsCountEmptyShards checks that a Redis filter's first layer
// reports the capacity the filter was sized for from its first key on:
// shards no key has reached yet have an empty layer 0 all the same. Before,
// they were left out, and a filter sized for 1,000 URLs with one key in it
// showed "1 / 94 items" (one shard's capacity of 16).
func TestRedisStatsCountEmptyShards(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	type statser interface {
		TestAndAdd(context.Context, [][]byte) ([]bool, error)
		Stats(context.Context) (Stats, error)
	}
	for _, capacity := range []int64{1000, 100_000} {
		for _, kind := range []string{"bloom", "cuckoo"} {
			t.Run(fmt.Sprint(kind, capacity), func(t *testing.T) {
				name := fmt.Sprint("stats-", kind, capacity)
				var f statser
				var err error
				if kind == "bloom" {
					f, err = OpenRedisBloom(ctx, c, name, RedisBloomOptions{InitialCapacity: capacity, TargetFPP: 0.001, Shards: 16})
				} else {
					f, err = OpenRedisCuckoo(ctx, c, name, RedisCuckooOptions{CuckooOptions: CuckooOptions{Growth: Growth{InitialCapacity: capacity, TargetFPP: 0.001}}, Shards: 16})
				}
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.TestAndAdd(ctx, [][]byte{[]byte("https://a.example/")}); err != nil {
					t.Fatal(err)
				}
				st, err := f.Stats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				l := st.Layers[0]
				if l.Items != 1 || l.Capacity < uint64(capacity) || l.Capacity > uint64(capacity)*2 {
					t.Errorf("layer 0: %d items of %d, want 1 of about %d", l.Items, l.Capacity, capacity)
				}
				if st.NextLayerCapacity < l.Capacity {
					t.Errorf("next layer %d items, want at least layer 0's %d", st.NextLayerCapacity, l.Capacity)
				}
			})
		}
	}
}
