package redistest

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Dump returns every key of c (every master of a cluster) and its DUMP,
// so a test can show that something wrote nothing: compare two Dumps.
func Dump(tb testing.TB, c redis.UniversalClient) map[string]string {
	tb.Helper()
	ctx := context.Background()
	out := map[string]string{}
	var mu sync.Mutex
	read := func(ctx context.Context, node *redis.Client) error {
		keys, err := node.Keys(ctx, "*").Result()
		if err != nil {
			return err
		}
		for _, k := range keys {
			v, err := node.Dump(ctx, k).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			out[k] = v
			mu.Unlock()
		}
		return nil
	}
	var err error
	switch c := c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, read)
	case *redis.Client:
		err = read(ctx, c)
	default:
		tb.Fatalf("redistest.Dump: client of type %T", c)
	}
	if err != nil {
		tb.Fatalf("redistest.Dump: %v", err)
	}
	return out
}
