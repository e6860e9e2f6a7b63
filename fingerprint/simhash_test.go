package fingerprint

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// corpus generates text no test has seen before: words drawn uniformly from
// a vocabulary of random letter strings, all from one fixed seed.
type corpus struct {
	rng   *rand.Rand
	vocab []string
}

func newCorpus(seed uint64, vocab int) *corpus {
	c := &corpus{rng: rand.New(rand.NewPCG(seed, 0x5157e))}
	seen := make(map[string]bool, vocab)
	for len(c.vocab) < vocab {
		b := make([]byte, 2+c.rng.IntN(9))
		for i := range b {
			b[i] = byte('a' + c.rng.IntN(26))
		}
		if w := string(b); !seen[w] {
			seen[w] = true
			c.vocab = append(c.vocab, w)
		}
	}
	return c
}

// words returns n random words.
func (c *corpus) words(n int) []string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = c.vocab[c.rng.IntN(len(c.vocab))]
	}
	return ws
}

// mutate returns a copy of ws with one word in every per replaced (at least
// one), at distinct positions, each by a different word.
func (c *corpus) mutate(ws []string, per int) []string {
	out := append([]string(nil), ws...)
	n := max(1, (len(ws)+per/2)/per)
	for _, i := range c.rng.Perm(len(ws))[:n] {
		for out[i] == ws[i] {
			out[i] = c.vocab[c.rng.IntN(len(c.vocab))]
		}
	}
	return out
}

// html renders words as a page of paragraphs of 20 to 119 words, under a
// fixed header and footer, the way generated text would be served.
func (c *corpus) html(ws []string) []byte {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html><html><head><title>Page</title></head><body><header><nav><a href=/>Home</a></nav></header><main>\n")
	for len(ws) > 0 {
		n := min(len(ws), 20+c.rng.IntN(100))
		b.WriteString("<p>")
		b.WriteString(strings.Join(ws[:n], " "))
		b.WriteString("</p>\n")
		ws = ws[n:]
	}
	b.WriteString("</main><footer>Contact</footer></body></html>\n")
	return []byte(b.String())
}

// TestSimHashStatistics measures SimHash distances on generated pages of 300
// to 1000 words (vocabulary 4,000 words, fixed seed), 2,000 pairs of each
// kind; it logs the histograms with -v.
//
// Unrelated pages share almost no shingle, so their SimHash bits are close
// to independent fair coins: the distance is about Binomial(64, 1/2), mean
// 32 and standard deviation 4. Over 2,000 pairs the mean's standard error
// is 4/√2000 ≈ 0.09, so the bound 32 ± 2 is over 20 standard errors wide:
// it fails only if the bits are biased or correlated (a broken hash or
// count), not by chance. P(Binomial(64, 1/2) ≤ 10) ≈ 1.0e-8, so the
// expected number of pairs at distance ≤ 10 is 2e-5, and the bound "fewer
// than 0.1%" (at most 1 pair of 2,000) fails by chance with probability
// about 2e-10. Measured with this seed: mean 31.94, smallest distance 17.
//
// A copy with one word in 300 changed (1 to 3 words, so 3 to 9 of 300 to
// 1000 shingles, about 1%) moves only the bits whose counts were near a
// tie. Measured with this seed: mean distance 2.81, 99.35% of pairs at ≤ 7,
// the largest 10 (one pair). On 20,000 pairs of another seed: mean 2.76,
// 99.4% at ≤ 7, one pair (0.005%) above 10. So the bound "≥ 99% at ≤ 10"
// allows 20 pairs above 10 where about 0.1 are expected: it fails only if
// small edits move many more bits than they do. The mean's standard error
// is about 1.6/√2000 ≈ 0.04, and its bound 4 is 30 of them above the
// measured 2.81: a change that makes edits move half as many bits again
// fails it.
func TestSimHashStatistics(t *testing.T) {
	const pairs = 2000
	c := newCorpus(20240501, 4000)
	var unrelated, edited [65]int
	prev := Of(c.html(c.words(300 + c.rng.IntN(701))))
	for i := range pairs {
		ws := c.words(300 + c.rng.IntN(701))
		p := Of(c.html(ws))
		unrelated[Distance(p.SimHash, prev.SimHash)]++
		q := Of(c.html(c.mutate(ws, 300)))
		edited[Distance(p.SimHash, q.SimHash)]++
		if i%2 == 0 {
			prev = p
		} else {
			// Disjoint pairs: the next page is compared with a new one.
			prev = Of(c.html(c.words(300 + c.rng.IntN(701))))
		}
	}
	mean := func(h *[65]int) float64 {
		s, n := 0, 0
		for d, k := range h {
			s += d * k
			n += k
		}
		return float64(s) / float64(n)
	}
	atMost := func(h *[65]int, d int) int {
		n := 0
		for _, k := range h[:d+1] {
			n += k
		}
		return n
	}
	t.Logf("unrelated: mean distance %.2f, at ≤ 10: %d of %d, histogram %v", mean(&unrelated), atMost(&unrelated, 10), pairs, unrelated)
	t.Logf("one word in 300 changed: mean distance %.2f, at ≤ 10: %d of %d, histogram %v", mean(&edited), atMost(&edited, 10), pairs, edited[:16])

	if m := mean(&unrelated); m < 30 || m > 34 {
		t.Errorf("unrelated pages: mean SimHash distance %.2f, want 32 ± 2", m)
	}
	if n := atMost(&unrelated, 10); n*1000 >= pairs {
		t.Errorf("unrelated pages: %d of %d pairs at distance ≤ 10, want fewer than 0.1%%", n, pairs)
	}
	if n := atMost(&edited, 10); n*100 < 99*pairs {
		t.Errorf("one word in 300 changed: %d of %d pairs at distance ≤ 10, want ≥ 99%%", n, pairs)
	}
	if m := mean(&edited); m > 4 {
		t.Errorf("one word in 300 changed: mean SimHash distance %.2f, want ≤ 4", m)
	}
}
