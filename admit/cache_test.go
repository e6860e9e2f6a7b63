package admit

import (
	"fmt"
	"testing"
)

func TestSeenCacheGenerations(t *testing.T) {
	c := newSeenCache(100) // two generations of 50
	urls := make([]URL, 300)
	for i := range urls {
		urls[i].URL = fmt.Sprintf("https://example.com/%d", i)
	}
	idx := func(from, to int) []int {
		var out []int
		for i := from; i < to; i++ {
			out = append(out, i)
		}
		return out
	}
	count := func(hits []bool) (n int) {
		for _, h := range hits {
			if h {
				n++
			}
		}
		return n
	}
	if n := count(c.known(urls, idx(0, 100))); n != 0 {
		t.Fatalf("empty cache knows %d URLs", n)
	}
	c.add(urls, idx(0, 100))
	if s := c.size(); s > 100 {
		t.Fatalf("size %d exceeds the capacity 100", s)
	}
	// The newest 50 are surely kept; the oldest are dropped first.
	if n := count(c.known(urls, idx(50, 100))); n != 50 {
		t.Errorf("knows %d of the newest 50 URLs", n)
	}
	if n := count(c.known(urls, idx(0, 50))); n == 50 {
		t.Errorf("kept all 100 URLs in a cache of 100 with generations of 50: no eviction happened")
	}
	if n := count(c.known(urls, idx(100, 300))); n != 0 {
		t.Errorf("knows %d URLs never added", n)
	}
	var off *seenCache = newSeenCache(0)
	off.add(urls, idx(0, 10))
	if n := count(off.known(urls, idx(0, 10))); n != 0 || off.size() != 0 {
		t.Errorf("disabled cache knows %d URLs", n)
	}
}

// TestSeenCacheForget checks that forgetting a crawl (it was deleted) drops
// its URLs and no other crawl's, and that the crawl remembers again after.
func TestSeenCacheForget(t *testing.T) {
	c := newSeenCache(100)
	urls := []URL{{URL: "https://a.example/", Crawl: "x"}, {URL: "https://a.example/", Crawl: "y"}}
	both := []int{0, 1}
	c.add(urls, both)
	if got := c.known(urls, both); !got[0] || !got[1] {
		t.Fatalf("known after add = %v", got)
	}
	c.forget("x")
	if got := c.known(urls, both); got[0] || !got[1] {
		t.Errorf("after forgetting crawl x: known = %v, want [false true]", got)
	}
	c.add(urls, []int{0})
	if got := c.known(urls, both); !got[0] || !got[1] {
		t.Errorf("after adding again: known = %v, want [true true]", got)
	}
	var none *seenCache
	none.forget("x") // a worker without a cache
}
