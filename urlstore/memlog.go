package urlstore

import (
	"context"
	"sync"
)

// MemLog is a Log in memory, for tests of what sits on a Store: the same
// ordering, compare-and-append and reading as the JetStream log, with no
// server. It is safe for concurrent use; the zero value is an empty log.
type MemLog struct {
	mu      sync.Mutex
	entries []Entry
	last    map[int]uint64
	grown   chan struct{} // closed and replaced at each append
}

var _ Log = (*MemLog)(nil)

func (l *MemLog) init() {
	if l.last == nil {
		l.last = map[int]uint64{}
		l.grown = make(chan struct{})
	}
}

// Append implements Log.
func (l *MemLog) Append(ctx context.Context, part int, last uint64, data []byte) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.init()
	if l.last[part] != last {
		return 0, ErrConflict
	}
	seq := uint64(len(l.entries)) + 1
	l.entries = append(l.entries, Entry{Seq: seq, Part: part, Data: append([]byte(nil), data...)})
	l.last[part] = seq
	close(l.grown)
	l.grown = make(chan struct{})
	return seq, nil
}

// Last implements Log.
func (l *MemLog) Last(ctx context.Context, part int) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.init()
	return l.last[part], ctx.Err()
}

// Read implements Log.
func (l *MemLog) Read(ctx context.Context, after uint64, caughtUp func(), fn func(Entry) error) error {
	l.mu.Lock()
	l.init()
	end := uint64(len(l.entries))
	l.mu.Unlock()
	if end <= after {
		caughtUp()
	}
	for {
		l.mu.Lock()
		var next []Entry
		if after < uint64(len(l.entries)) {
			next = l.entries[after:]
		}
		grown := l.grown
		n := uint64(len(l.entries))
		l.mu.Unlock()
		for _, e := range next {
			e.Pending = n - e.Seq
			if err := fn(e); err != nil {
				return err
			}
			after = e.Seq
			if after == end {
				caughtUp()
			}
		}
		if len(next) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-grown:
		}
	}
}

// ReadPart implements Log.
func (l *MemLog) ReadPart(ctx context.Context, part int, fn func(Entry) error) error {
	l.mu.Lock()
	entries := l.entries[:len(l.entries):len(l.entries)]
	l.mu.Unlock()
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.Part != part {
			continue
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// Len is the number of entries in the log.
func (l *MemLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}
