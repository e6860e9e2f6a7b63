//go:build !linux || !cgo

package memtrim

// trimC has nothing to do without cgo: no C heap.
func trimC() {}
