package dust

import (
	"flag"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/fingerprint"
	"github.com/sievecrawl/sieve/internal/heaptest"
)

var costBench = flag.Bool("sieve.dustcost", false, "measure a Learner's bytes per remembered page and its time per page (./bench.sh dust)")

// TestLearnerCost measures what a Learner costs per page it remembers
// (live heap, by heaptest) and per page observed (time), on pages of the
// PostgreSQL documentation's shape (a 60-block page, distinct text), for
// 10,000, 50,000 and 100,000 pages: past MaxPages (50,000) it remembers
// nothing more, so that is its ceiling whatever the crawl's size. The baseline is
// the same pages' fingerprints alone in a slice (their URLs not counted).
func TestLearnerCost(t *testing.T) {
	if !*costBench {
		t.Skip("a benchmark: ./bench.sh dust")
	}
	for _, n := range []int{10_000, 50_000, 100_000} {
		prints := make([]fingerprint.Print, n)
		urls := make([]string, n)
		for i := range prints {
			urls[i] = fmt.Sprintf("http://docs.example:8080/docs/15/page-%07d.html", i)
			prints[i] = fingerprint.Of(html(urls[i], words(urls[i], 120), []string{"nav", "footer " + fmt.Sprint(i%7)}))
			// A page of 60 blocks, as PostgreSQL's average page.
			for len(prints[i].Blocks) < 60 {
				prints[i].Blocks = append(prints[i].Blocks, fingerprint.Block{Path: uint32(len(prints[i].Blocks)), Text: uint32(i)})
			}
		}
		// What a crawler hands over is its own: the URL, the digest and
		// the blocks are copied, so that what they cost is counted.
		own := func(i int) (string, fingerprint.Print) {
			p := prints[i]
			p.Blocks = append([]fingerprint.Block(nil), p.Blocks...)
			p.Digest = string([]byte(p.Digest))
			return string([]byte(urls[i])), p
		}
		base := heaptest.Live(func() any {
			kept := make([]fingerprint.Print, n)
			for i := range kept {
				_, kept[i] = own(i)
			}
			return kept
		})
		var took time.Duration
		live := heaptest.Live(func() any {
			l := NewLearner(Options{})
			var spent time.Duration
			for i := range prints {
				u, p := own(i)
				start := time.Now()
				l.Observe(u, p)
				spent += time.Since(start)
			}
			took = spent
			return l
		})
		runtime.KeepAlive(prints) // alive across both measures, not freed in the second
		runtime.KeepAlive(urls)
		t.Logf("%d pages: Learner %.0f B/page (fingerprints alone %.0f B/page, ratio %.2f), %.1f µs/page observed",
			n, float64(live)/float64(n), float64(base)/float64(n), float64(live)/float64(base), float64(took.Microseconds())/float64(n))
		if n <= DefaultMaxPages {
			// dedup-worker plan states BytesPerPage: it must stay true.
			if r := float64(live) / float64(n) / BytesPerPage; r < 0.8 || r > 1.25 {
				t.Errorf("%d pages: %.0f B/page measured, %.2f× dust.BytesPerPage (%d): update the constant", n, float64(live)/float64(n), r, BytesPerPage)
			}
		}
	}
}
