package admit

import (
	"math/rand/v2"
	"time"
)

// Backoff is an exponential backoff with full jitter between Min and Max:
// the n-th pause is drawn from [d/2, d) with d = min(Min·2ⁿ⁻¹, Max), so
// that workers retrying together spread out. The zero value pauses for
// nothing; it is not safe for concurrent use.
type Backoff struct {
	Min, Max time.Duration
	cur      time.Duration
}

// Next returns the next pause.
func (b *Backoff) Next() time.Duration {
	if b.cur == 0 {
		b.cur = b.Min
	} else {
		b.cur = min(2*b.cur, b.Max)
	}
	return b.cur/2 + rand.N(b.cur/2+1)
}

// Reset makes the next pause Min again, after a success.
func (b *Backoff) Reset() { b.cur = 0 }
