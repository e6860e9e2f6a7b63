// Package leaktest checks that what a test started and closed left no
// goroutine running.
package leaktest

import (
	"runtime"
	"testing"
	"time"
)

// Check counts the goroutines now and returns a function that waits (up
// to 5 s) until there are no more than that, failing tb with every
// goroutine's stack if they stay more. Call it before starting what is to
// be closed, and the function after closing it.
func Check(tb testing.TB) (after func()) {
	tb.Helper()
	before := runtime.NumGoroutine()
	return func() {
		tb.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				tb.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
