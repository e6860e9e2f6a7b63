package admit

import "sync"

// flights coordinates a Core's concurrent batches so that two of them
// never publish the same URL: the first batch to ask about a URL owns it
// until it has published and marked it (or given up), and a later batch that
// holds the same URL waits for that outcome instead of asking the filter.
//
// Without it, two batches that both hold a new URL both find it absent
// (neither has marked it yet) and both publish it; JetStream's duplicate
// window stores one, so nothing is enqueued twice, but the window then does
// work that only crash recovery should need. Within a process the race can
// be closed exactly and for free; between worker processes it is what the
// window is for (see the package documentation, "Racing batches").
//
// Keys are exact (crawl and URL), never hashes: a waiter takes the owner's
// "marked" as its own verdict, so a collision would lose a URL. A waiter
// whose owner gave up (its context ended) runs the protocol for the URL
// itself. A batch waits only after it has landed all the URLs it owns, so
// waits never form a cycle.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

// flight is one URL being admitted by the batch that owns it.
type flight struct {
	done   chan struct{} // closed when the owner lands it
	marked bool          // written before done is closed: the URL is in the filter
}

// waiting is a URL of a batch (an index into its urls) that another batch
// owns.
type waiting struct {
	i int
	f *flight
}

func newFlights() *flights { return &flights{m: map[string]*flight{}} }

func flightKey(u URL) string { return u.Crawl + "\x00" + u.URL }

// claim splits the URLs urls[i], i in idx, into those the caller now owns,
// in order, and those another batch owns.
func (fl *flights) claim(urls []URL, idx []int) (own []int, others []waiting) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, i := range idx {
		k := flightKey(urls[i])
		if f, ok := fl.m[k]; ok {
			others = append(others, waiting{i, f})
			continue
		}
		fl.m[k] = &flight{done: make(chan struct{})}
		own = append(own, i)
	}
	return own, others
}

// land ends the caller's ownership of the URLs urls[i], i in own, telling
// their waiters whether the URLs are now in the filter.
func (fl *flights) land(urls []URL, own []int, marked bool) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, i := range own {
		k := flightKey(urls[i])
		f := fl.m[k]
		delete(fl.m, k)
		f.marked = marked
		close(f.done)
	}
}
