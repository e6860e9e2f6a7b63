package urlstore

import (
	"context"
	"errors"
	"time"
)

// ErrConflict is the error of an append whose expected last sequence was
// not the partition's: another writer appended meanwhile.
var ErrConflict = errors.New("urlstore: partition changed meanwhile")

// Entry is one entry of the log: a batch appended to a partition.
type Entry struct {
	Seq  uint64 // its sequence, growing over the whole log
	Part int
	Data []byte // an encoded Batch
	// Time is when the log stored it.
	Time time.Time
	// Pending is how many entries follow it in the log when it was read
	// (0: it is the last), for reporting the progress of a catch-up.
	Pending uint64
	// Prev is the sequence of the entry of Part it was appended after
	// (Append's last; 0: the partition's first), kept with it by the log
	// when Chained. A follower that holds another as Part's last has
	// missed entries (trimmed, or lost): it checks, never skips a hole.
	Prev    uint64
	Chained bool
}

// Log is the replicated, ordered record of every change of a store, in
// partitions: the truth that every Store sharing it applies to its local
// index, and rebuilds it from. Declared here, where it is used; the
// JetStream stream is one (frontier.StoreLog), MemLog the in-memory twin.
//
// Sequences grow over the whole log, not per partition; a partition's
// last sequence is the sequence of its last entry (0: it has none).
type Log interface {
	// Append stores data as the next entry of part if the sequence of
	// part's last entry is last, returning the new entry's sequence, or
	// ErrConflict if it was another. Any other error leaves it unknown
	// whether the entry was stored. The entry keeps last as its Prev
	// (Chained), so that each entry names the one it follows.
	Append(ctx context.Context, part int, last uint64, data []byte) (uint64, error)
	// Last returns the sequence of part's last entry (0: none).
	Last(ctx context.Context, part int) (uint64, error)
	// Read calls fn with every entry after sequence after, in order,
	// and goes on with each new one until ctx ends (returning nil) or fn
	// returns an error (which Read returns). caughtUp is called once,
	// after fn had every entry the log held when Read began.
	Read(ctx context.Context, after uint64, caughtUp func(), fn func(Entry) error) error
	// ReadPart calls fn with every entry of part, in order, up to the
	// last the log held when it began, then returns.
	ReadPart(ctx context.Context, part int, fn func(Entry) error) error
	// Trim removes part's entries whose sequence is below before,
	// keeping the entry at before and every later one (so Last and the
	// compare-and-append are unchanged). Store.Compact calls it once a
	// snapshot holds what it removes.
	Trim(ctx context.Context, part int, before uint64) error
}
