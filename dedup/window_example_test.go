package dedup_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sievecrawl/sieve/dedup"
)

// A revisit window of a day cut into 4 generations: a URL is a duplicate
// for at least a day after it was admitted and new again within 30 hours.
// The clock is set by hand here; in Redis every process reads the server's.
func ExampleWindow() {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	w, err := dedup.NewBloomWindow(
		dedup.WindowOptions{After: 24 * time.Hour, Granularity: 4, Clock: dedup.ClockFunc(func() time.Time { return now })},
		dedup.ScalableOptions{Growth: dedup.Growth{InitialCapacity: 10_000, TargetFPP: 0.001}},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	url := [][]byte{[]byte("https://example.com/")}
	for _, after := range []time.Duration{0, time.Hour, 24 * time.Hour, 30 * time.Hour, 31 * time.Hour} {
		now = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC).Add(after)
		got, err := w.TestAndAdd(ctx, url)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("after %v: new=%v\n", after, got[0])
	}
	// Output:
	// after 0s: new=true
	// after 1h0m0s: new=false
	// after 24h0m0s: new=false
	// after 30h0m0s: new=true
	// after 31h0m0s: new=false
}
