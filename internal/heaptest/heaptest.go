// Package heaptest measures memory for the benchmarks that state bytes per
// item.
package heaptest

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

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

// RSS returns this process's resident anonymous memory (its heap, stacks
// and anything allocated outside Go's heap, such as Pebble's cache) and
// resident file-backed memory (mapped files in the page cache), in bytes,
// read from /proc/self/status after a collection that returns freed heap
// to the OS: what a store costs in RAM beyond the Go heap that Live sees.
func RSS() (anon, file int64, err error) {
	debug.FreeOSMemory()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, fmt.Errorf("heaptest: %w", err)
	}
	anon, file = -1, -1
	for line := range strings.Lines(string(data)) {
		name, v, ok := strings.Cut(line, ":")
		if !ok || (name != "RssAnon" && name != "RssFile") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("heaptest: /proc/self/status %s %q: %w", name, v, err)
		}
		if name == "RssAnon" {
			anon = kb << 10
		} else {
			file = kb << 10
		}
	}
	if anon < 0 || file < 0 {
		return 0, 0, fmt.Errorf("heaptest: /proc/self/status has no RssAnon and RssFile")
	}
	return anon, file, nil
}
