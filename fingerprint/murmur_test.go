package fingerprint

import (
	"math/rand/v2"
	"testing"

	"github.com/spaolacci/murmur3"
)

// TestSum64: sum64 is murmur3.Sum64, for every tail length and beyond a
// few blocks.
func TestSum64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 100)
	for range 20 {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		for n := range len(b) + 1 {
			if got, want := sum64(b[:n]), murmur3.Sum64(b[:n]); got != want {
				t.Fatalf("sum64(%x) = %#x, want %#x", b[:n], got, want)
			}
		}
	}
}
