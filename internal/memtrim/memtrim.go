// Package memtrim returns a process's free heap to the operating system
// once the process goes quiet after a burst of work.
//
// The Go runtime grows its heap for a burst (a fill of millions of URLs
// allocates gigabytes in minutes) and gives the free part back slowly: its
// background scavenger keeps what the last collection's goal allows, and a
// quiet process runs no collection that would lower the goal. A server at
// rest then holds hundreds of MB it does not use. Run watches the
// runtime's metrics and, when the process has been quiet for a while and
// enough free memory is still held, collects twice and calls
// debug.FreeOSMemory: a release of every free page (and, built with cgo
// on Linux, malloc_trim: Pebble's memtables and cache are C memory then).
// Two collections, because what sync.Pools hold (NATS's block buffers) is
// dropped only at the second. A busy process is never slowed, and a quiet
// one is trimmed once per burst, and again each Quiet while its
// background work allocates MinFree or more in between: garbage holds
// pages until a collection, and an idle heap is collected only every
// 2 minutes.
//
// Quiet is what the process says (Options.Work: its API's own work), or
// else a low allocation rate. A server's stores go on after a fill of
// millions of URLs (Pebble's compactions, a follower reading the log
// behind), allocating above a quiet rate: after a fill of 5 M URLs on a
// busy box, 30 s under 1 MiB/s came 40 s after the last put; 10 s without
// a URL put, 12 s after it.
package memtrim

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Options tune Run; the zero value means every default.
type Options struct {
	// Interval is how often the metrics are read (default 5 s).
	Interval time.Duration
	// Quiet is how long the process must stay quiet (Work unchanged, or
	// allocations under QuietRate) before a trim, and the least time
	// between two trims (default 30 s).
	Quiet time.Duration
	// QuietRate is the allocation rate, in bytes per second, under which
	// the process counts as quiet (default 1 MiB/s: heartbeats, scrapes
	// and the live page allocate less).
	QuietRate float64
	// MinFree is the free, unreleased heap, or the bytes allocated since
	// the last trim, worth a trim (default 64 MiB).
	MinFree uint64
	// Work, if set, counts the process's own work (calls served, items
	// handled): the process is quiet once it stops growing for Quiet,
	// whatever the runtime allocates meanwhile. Nil: quiet is an
	// allocation rate under QuietRate.
	Work func() uint64
	// Trimmed, if set, is told what each trim returned (bytes).
	Trimmed func(freed uint64)
}

const (
	allocsMetric   = "/gc/heap/allocs:bytes"
	freeMetric     = "/memory/classes/heap/free:bytes"
	releasedMetric = "/memory/classes/heap/released:bytes"
)

// Run trims until ctx ends.
func Run(ctx context.Context, o Options) {
	if o.Interval <= 0 {
		o.Interval = 5 * time.Second
	}
	if o.Quiet <= 0 {
		o.Quiet = 30 * time.Second
	}
	if o.QuietRate <= 0 {
		o.QuietRate = 1 << 20
	}
	if o.MinFree == 0 {
		o.MinFree = 64 << 20
	}
	samples := []metrics.Sample{{Name: allocsMetric}, {Name: freeMetric}, {Name: releasedMetric}}
	read := func() (allocs, free, released uint64) {
		metrics.Read(samples)
		return samples[0].Value.Uint64(), samples[1].Value.Uint64(), samples[2].Value.Uint64()
	}
	work := func() uint64 { return 0 }
	if o.Work != nil {
		work = o.Work
	}
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	lastAllocs, _, _ := read()
	lastWork := work()
	quietSince := time.Now()
	var lastTrim time.Time
	// trimAllocs is what had been allocated at the last trim: what was
	// allocated since is garbage or live, and only a collection tells.
	trimAllocs := lastAllocs
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			allocs, free, released := read()
			rate := float64(allocs-lastAllocs) / o.Interval.Seconds()
			lastAllocs = allocs
			w := work()
			busy := w != lastWork || (o.Work == nil && rate >= o.QuietRate)
			lastWork = w
			if busy {
				quietSince = now
				continue
			}
			if now.Sub(quietSince) < o.Quiet || now.Sub(lastTrim) < o.Quiet || (free < o.MinFree && allocs-trimAllocs < o.MinFree) {
				continue
			}
			runtime.GC()
			debug.FreeOSMemory()
			trimC()
			lastTrim = now
			var after uint64
			lastAllocs, _, after = read()
			trimAllocs = lastAllocs
			if o.Trimmed != nil && after > released {
				o.Trimmed(after - released)
			}
		}
	}
}
