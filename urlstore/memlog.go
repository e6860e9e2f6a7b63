package urlstore

import (
	"context"
	"sync"
	"time"
)

// MemLog is a Log in memory, for tests of what sits on a Store: the same
// ordering, compare-and-append and reading as the JetStream log, with no
// server. It is safe for concurrent use; the zero value is an empty log.
type MemLog struct {
	mu      sync.Mutex
	entries []Entry
	last    map[int]uint64
	trimmed map[int]uint64 // part → entries below are gone (Trim)
	grown   chan struct{}  // closed and replaced at each append
	// Now, if set, is the clock of the entries' Time (tests of a trim's
	// horizon); time.Now otherwise.
	Now func() time.Time
}

var _ Log = (*MemLog)(nil)

func (l *MemLog) init() {
	if l.last == nil {
		l.last = map[int]uint64{}
		l.trimmed = map[int]uint64{}
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
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	// Data is never nil: nil marks a trimmed entry.
	l.entries = append(l.entries, Entry{Seq: seq, Part: part, Data: append([]byte{}, data...), Time: now(), Prev: last, Chained: true})
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
			if e.Data == nil { // trimmed
				after = e.Seq
				if after == end {
					caughtUp()
				}
				continue
			}
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
		if e.Part != part || e.Data == nil {
			continue
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// Trim implements Log: the entries go, their sequences stay taken.
func (l *MemLog) Trim(ctx context.Context, part int, before uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.init()
	for i := l.trimmed[part]; i+1 < before && i < uint64(len(l.entries)); i++ {
		if l.entries[i].Part == part {
			l.entries[i] = Entry{Seq: i + 1, Part: part}
		}
	}
	l.trimmed[part] = max(l.trimmed[part], min(before-1, uint64(len(l.entries))))
	return nil
}

// Len is the number of entries in the log, trimmed ones included.
func (l *MemLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// Live is the number of entries in the log that Trim left.
func (l *MemLog) Live() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.entries {
		if e.Data != nil {
			n++
		}
	}
	return n
}
