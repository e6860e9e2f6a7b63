// Package memtrim returns a process's free heap to the operating system
// once the process goes quiet after a burst of work.
//
// The Go runtime grows its heap for a burst (a fill of millions of URLs
// allocates gigabytes in minutes) and gives the free part back slowly: its
// background scavenger keeps what the last collection's goal allows, and a
// quiet process runs no collection that would lower the goal. A server at
// rest then holds hundreds of MB it does not use. Run watches the
// runtime's metrics and, when allocations have stayed low for a while and
// enough free memory is still held, calls debug.FreeOSMemory once: a
// collection and a release of every free page (and, built with cgo on
// Linux, malloc_trim: Pebble's memtables and cache are C memory then). It is the only trigger: a
// busy process is never slowed, and a quiet one is trimmed once per burst
// (after the trim nothing is left to return until work resumes).
package memtrim

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Options tune Run; the zero value means every default.
type Options struct {
	// Interval is how often the metrics are read (default 5 s).
	Interval time.Duration
	// Quiet is how long allocations must stay under QuietRate before a
	// trim (default 30 s).
	Quiet time.Duration
	// QuietRate is the allocation rate, in bytes per second, under which
	// the process counts as quiet (default 1 MiB/s: heartbeats, scrapes
	// and the live page allocate less).
	QuietRate float64
	// MinFree is the free, unreleased heap worth a trim (default 64 MiB).
	MinFree uint64
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
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	lastAllocs, _, _ := read()
	quietSince := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			allocs, free, released := read()
			rate := float64(allocs-lastAllocs) / o.Interval.Seconds()
			lastAllocs = allocs
			if rate >= o.QuietRate {
				quietSince = now
				continue
			}
			if now.Sub(quietSince) < o.Quiet || free < o.MinFree {
				continue
			}
			debug.FreeOSMemory()
			trimC()
			var after uint64
			lastAllocs, _, after = read()
			if o.Trimmed != nil && after > released {
				o.Trimmed(after - released)
			}
		}
	}
}
