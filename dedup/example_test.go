package dedup_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sievecrawl/sieve/dedup"
)

// A Bloom filter sized like Guava's BloomFilter.create(stringFunnel, 500,
// 0.003) admits each URL once, and exchanges its bits with Java.
func ExampleBloom() {
	ctx := context.Background()
	b, err := dedup.NewBloom(dedup.BloomOptions{Capacity: 500, FPP: 0.003, Policy: "v1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	urls := [][]byte{
		[]byte("https://example.com/a"),
		[]byte("https://example.com/b"),
		[]byte("https://example.com/a"), // repeated in the batch
	}
	isNew, _ := b.TestAndAdd(ctx, urls)
	fmt.Println("new:", isNew)
	seen, _ := b.Contains(ctx, [][]byte{[]byte("https://example.com/b"), []byte("https://example.com/c")})
	fmt.Println("seen:", seen)

	st, _ := b.Stats(ctx)
	fmt.Printf("bits: %d, hashes: %d, items: %d\n", st.Layers[0].Bits, st.Layers[0].Hashes, st.Items)

	// The stream Guava's BloomFilter.readFrom reads.
	var java bytes.Buffer
	if err := b.WriteGuava(&java); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("guava stream: %d bytes, strategy %d, k %d\n", java.Len(), java.Bytes()[0], java.Bytes()[1])
	// Output:
	// new: [true true false]
	// seen: [true false]
	// bits: 6080, hashes: 8, items: 2
	// guava stream: 766 bytes, strategy 1, k 8
}

// A scalable Bloom filter grows a layer at a time as URLs arrive, and is
// saved to and restored from a file; reopening it under another normalize
// policy is refused.
func ExampleScalableBloom() {
	ctx := context.Background()
	opts := dedup.ScalableOptions{
		Growth: dedup.Growth{InitialCapacity: 1000, TargetFPP: 1e-6},
		Policy: "v1",
	}
	s, err := dedup.NewScalableBloom(opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	urls := make([][]byte, 5000)
	for i := range urls {
		urls[i] = fmt.Appendf(nil, "https://example.com/page/%d", i)
	}
	isNew, _ := s.TestAndAdd(ctx, urls)
	fresh := 0
	for _, n := range isNew {
		if n {
			fresh++
		}
	}
	st, _ := s.Stats(ctx)
	fmt.Printf("new: %d of %d, layers:", fresh, len(urls))
	for _, l := range st.Layers {
		fmt.Printf(" %d/%d", l.Items, l.Capacity)
	}
	fmt.Printf(", next layer: %d\n", st.NextLayerCapacity)

	dir, err := os.MkdirTemp("", "sieve-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "seen.snap")
	if err := s.Save(ctx, path); err != nil {
		fmt.Println(err)
		return
	}
	r, err := dedup.LoadScalableBloom(ctx, path, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	again, _ := r.TestAndAdd(ctx, urls[:3])
	fmt.Println("after restore, new:", again)

	_, err = dedup.LoadScalableBloom(ctx, path, dedup.ScalableOptions{Growth: opts.Growth, Policy: "v2"})
	fmt.Println("other policy refused:", errors.Is(err, dedup.ErrMismatch))
	// Output:
	// new: 5000 of 5000, layers: 1000/1000 2000/2000 2000/4000, next layer: 8000
	// after restore, new: [false false false]
	// other policy refused: true
}
