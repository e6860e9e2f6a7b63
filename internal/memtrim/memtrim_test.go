package memtrim

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"
)

var sink [][]byte

// runTrims runs Run with o until the test ends and returns what each trim
// reported.
func runTrims(t *testing.T, o Options) <-chan uint64 {
	trims := make(chan uint64, 100)
	o.Trimmed = func(b uint64) { trims <- b }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, o)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return trims
}

// freeHeap is the heap's free memory not yet returned to the system.
func freeHeap() uint64 {
	s := []metrics.Sample{{Name: freeMetric}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestRunTrimsAfterBurst allocates a burst, drops it and goes quiet: Run
// must return the free memory once, and only once while nothing changes.
func TestRunTrimsAfterBurst(t *testing.T) {
	// The burst: 512 MiB in 1 MiB pieces, live until a collection after
	// they are dropped, which leaves the heap's goal (and what the
	// scavenger keeps) high.
	for range 512 {
		sink = append(sink, make([]byte, 1<<20))
	}
	sink = nil
	runtime.GC() // what a busy process's own collections do
	if f := freeHeap(); f < 128<<20 {
		t.Fatalf("after the burst the runtime holds %d MiB free, want at least 128 to test a trim", f>>20)
	}

	trims := runTrims(t, Options{Interval: 20 * time.Millisecond, Quiet: 200 * time.Millisecond, MinFree: 32 << 20})
	select {
	case b := <-trims:
		if b < 128<<20 {
			t.Errorf("the trim returned %d MiB, want at least 128 (the burst was 512)", b>>20)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no trim within 10 s of going quiet; %d MiB free", freeHeap()>>20)
	}
	if f := freeHeap(); f >= 32<<20 {
		t.Errorf("after the trim %d MiB are free and held, want under 32", f>>20)
	}
	// Quiet with nothing to return: no second trim.
	select {
	case b := <-trims:
		t.Errorf("a second trim (%d bytes) with nothing allocated since", b)
	case <-time.After(time.Second):
	}
}

// TestRunWaitsWhileBusy keeps allocating above the quiet rate: no trim.
func TestRunWaitsWhileBusy(t *testing.T) {
	trims := runTrims(t, Options{Interval: 20 * time.Millisecond, Quiet: 200 * time.Millisecond, MinFree: 1, QuietRate: 1 << 20})
	end := time.Now().Add(time.Second)
	for time.Now().Before(end) {
		sink = append(sink[:0], make([]byte, 1<<20)) // 1 MiB per ms: far above 1 MiB/s
		time.Sleep(time.Millisecond)
	}
	sink = nil
	select {
	case b := <-trims:
		t.Errorf("a trim (%d bytes) while allocating %d MiB/s", b, 1000)
	default:
	}
}

// TestRunTrimsWhenWorkStops: with a Work count, the process is quiet once
// the count stops, even while the runtime goes on allocating (a store's
// background work after a fill), and busy while it grows, however little
// is allocated.
func TestRunTrimsWhenWorkStops(t *testing.T) {
	var work atomic.Uint64
	trims := runTrims(t, Options{Interval: 20 * time.Millisecond, Quiet: 200 * time.Millisecond, MinFree: 1,
		QuietRate: 1 << 20, Work: work.Load})
	// Working, allocating nothing to speak of: no trim.
	end := time.Now().Add(time.Second)
	for time.Now().Before(end) {
		work.Add(1)
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case b := <-trims:
		t.Fatalf("a trim (%d bytes) while the work count grew", b)
	default:
	}
	// The work stops; the background allocates 1 MiB per ms: trimmed all
	// the same.
	deadline := time.Now().Add(10 * time.Second)
	for {
		sink = append(sink[:0], make([]byte, 1<<20))
		time.Sleep(time.Millisecond)
		select {
		case <-trims:
			sink = nil
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no trim within 10 s of the work stopping")
		}
	}
}
