package dedup_test

import (
	"context"
	"fmt"

	"github.com/sievecrawl/sieve/dedup"
)

// A cuckoo filter admits each URL once and can forget one, for example a URL
// whose fetch failed for good, so that it is admitted again later.
func ExampleCuckoo() {
	ctx := context.Background()
	f, err := dedup.NewCuckoo(dedup.CuckooOptions{
		Growth: dedup.Growth{InitialCapacity: 1000, TargetFPP: 0.001},
		Policy: "v1",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()

	urls := [][]byte{[]byte("https://example.com/a"), []byte("https://example.com/b"), []byte("https://example.com/a")}
	isNew, _ := f.TestAndAdd(ctx, urls)
	fmt.Println("new:", isNew)

	forgotten, _ := f.Forget(ctx, urls[:1])
	fmt.Println("forgotten:", forgotten)

	isNew, _ = f.TestAndAdd(ctx, urls)
	fmt.Println("new again:", isNew)

	st, _ := f.Stats(ctx)
	fmt.Printf("%s: %d items, %d deletes, %d-bit fingerprints\n", st.Kind, st.Items, st.Deletes, st.Layers[0].Hashes)
	// Output:
	// new: [true true false]
	// forgotten: [true]
	// new again: [true false false]
	// cuckoo: 2 items, 1 deletes, 16-bit fingerprints
}
