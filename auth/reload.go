package auth

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultReloadInterval is how often a TokenFile or a CertFile reads its
// files again when its options give no interval.
const DefaultReloadInterval = 2 * time.Second

// reloader keeps the value parsed from a few files current: it reads them
// every interval and, when their bytes changed, parses them again and swaps
// the value. Reading the bytes, rather than comparing modification times,
// sees every change (a rewrite within the same second, a Kubernetes
// secret's symlink swapped) at the cost of reading files of a few
// kilobytes. A parse that fails keeps the last good value: a half-written
// or broken file never leaves a server without credentials.
type reloader[T any] struct {
	paths  []string
	parse  func(contents [][]byte) (T, error)
	logger *slog.Logger
	what   string
	failed func() // counts a failed reload

	cur    atomic.Pointer[T]
	mu     sync.Mutex
	next   chan struct{} // closed when cur is swapped, then made anew
	last   [][]byte
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// start reads and parses the files once (an error then is returned) and
// polls them every interval until close.
func (r *reloader[T]) start(interval time.Duration) error {
	if interval <= 0 {
		interval = DefaultReloadInterval
	}
	contents, err := readAll(r.paths)
	if err != nil {
		return err
	}
	v, err := r.parse(contents)
	if err != nil {
		return err
	}
	r.cur.Store(&v)
	r.next = make(chan struct{})
	r.last = contents
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() {
		defer close(r.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				r.reload()
			}
		}
	}()
	return nil
}

// reload reads the files and swaps the value if they changed and parse.
func (r *reloader[T]) reload() {
	contents, err := readAll(r.paths)
	if err == nil && same(contents, r.last) {
		return
	}
	if err == nil {
		var v T
		if v, err = r.parse(contents); err == nil {
			r.cur.Store(&v)
			r.mu.Lock()
			close(r.next)
			r.next = make(chan struct{})
			r.mu.Unlock()
			r.last = contents
			r.logger.Info("auth: reloaded "+r.what, "files", r.paths)
			return
		}
		r.last = contents // report a broken file once, not every interval
	}
	r.failed()
	r.logger.Error("auth: reload "+r.what+": keeping the last good one", "error", err)
}

// changed returns a channel closed when the value is next swapped: a
// reader takes it before reading the value, then waits on it.
func (r *reloader[T]) changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

// close stops the polling and waits for it; it is idempotent.
func (r *reloader[T]) close() {
	r.once.Do(func() {
		if r.cancel != nil {
			r.cancel()
			<-r.done
		}
	})
}

func readAll(paths []string) ([][]byte, error) {
	out := make([][]byte, len(paths))
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		out[i] = b
	}
	return out, nil
}

func same(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
