//go:build linux && cgo

package memtrim

// #include <malloc.h>
import "C"

// trimC returns the C heap's free memory to the system. With cgo, Pebble
// keeps its block cache and memtables in C memory (malloc); glibc keeps
// what is freed in its arenas, which after a burst of flushed memtables
// is hundreds of MB, until malloc_trim.
func trimC() { C.malloc_trim(0) }
