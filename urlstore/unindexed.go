package urlstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// Append appends b to partition p of log without a local index, retrying
// when another writer appended meanwhile: for a process that changes a
// store but does not keep one (a command deleting a crawl). Operations
// take effect when each store applies the entry, in log order, so this is
// as exact as a Store's Write.
func Append(ctx context.Context, log Log, p int, b *Batch) error {
	if b.Len() == 0 {
		return nil
	}
	if err := b.check(); err != nil {
		return err
	}
	entry := logged(b.data)
	for {
		last, err := log.Last(ctx, p)
		if err != nil {
			return fmt.Errorf("urlstore: partition %d: %w", p, err)
		}
		_, err = log.Append(ctx, p, last, entry)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrConflict) {
			return fmt.Errorf("urlstore: append to partition %d: %w", p, err)
		}
	}
}

// Lookup returns key's value as the entries of partition p leave it,
// reading them all from log without a local index: for a command asking
// about one key while the processes that keep stores hold their
// directories. It costs a read of the partition's whole log, and needs
// all of it: not for a store whose log is compacted (Compact), whose
// early entries are in a snapshot instead.
func Lookup(ctx context.Context, log Log, p int, key []byte) ([]byte, bool, error) {
	var value []byte
	var ok bool
	err := log.ReadPart(ctx, p, func(e Entry) error {
		err := decodeBatch(e.Data, func(op operation) error {
			switch op.kind {
			case opSet:
				if bytes.Equal(op.key, key) {
					value, ok = op.value, true
				}
			case opSetIfAbsent:
				if !ok && bytes.Equal(op.key, key) {
					value, ok = op.value, true
				}
			case opDelete:
				if bytes.Equal(op.key, key) {
					value, ok = nil, false
				}
			case opDeletePrefix:
				if bytes.HasPrefix(key, op.key) {
					value, ok = nil, false
				}
			}
			return nil
		})
		if errors.Is(err, ErrBadBatch) {
			return nil // skipped by every store alike
		}
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("urlstore: read partition %d: %w", p, err)
	}
	return bytes.Clone(value), ok, nil
}
