// Package heaptest measures memory for the benchmarks that state bytes per
// item.
package heaptest

import "runtime"

// Live returns the bytes of live heap that what build returns keeps: the
// heap after a collection with it alive, less the heap after one before
// build ran.
func Live(build func() any) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return after.HeapAlloc - before.HeapAlloc
}
