package urlstore

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// updateReader is the Reader of Read, and so of each run of an Update's
// fn and of Store.Scan: its reads go through two iterators made at its
// first read and kept until fn returns, one for Gets, one for Scans,
// instead of Pebble's setup of one read per call.
//
// Gets use the table filters of every level. Pebble's DB.Get skips the
// last level's (L6) filters, assuming a key looked up is most likely
// there; an Update's Gets are mostly the opposite, a put asking whether a
// URL it has never seen is stored. L6 holds most of the data, so each such
// Get read an index and a data block from the largest level: measured
// in process with 20,000 queues, the fill fell from 53,522 to 34,752
// URLs/s between the first and fourth million (0.65×); with L6 filters it
// ran at 75,640 then 61,997. A filter costs 10 bits per key, in the
// block cache like the blocks it saves.
//
// The iterators see the database as it was at the first read: inside an
// Update the partition's keys do not change until fn returns, and fn
// reads only those.
type updateReader struct {
	s         *Store
	get, scan *pebble.Iterator
}

func (r *updateReader) Get(key []byte) ([]byte, bool, error) {
	k := userKey(key)
	if r.get == nil {
		it, err := r.s.db.NewIter(&pebble.IterOptions{UseL6Filters: true})
		if err != nil {
			return nil, false, fmt.Errorf("urlstore: get: %w", err)
		}
		r.get = it
	}
	if !r.get.SeekPrefixGE(k) || !bytes.Equal(r.get.Key(), k) {
		if err := r.get.Error(); err != nil {
			return nil, false, fmt.Errorf("urlstore: get: %w", err)
		}
		return nil, false, nil
	}
	return bytes.Clone(r.get.Value()), true, nil
}

func (r *updateReader) Scan(prefix []byte, fn func(key, value []byte) bool) error {
	lo := userKey(prefix)
	hi := prefixEnd(lo)
	if r.scan == nil {
		it, err := r.s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return fmt.Errorf("urlstore: scan: %w", err)
		}
		r.scan = it
	} else {
		r.scan.SetBounds(lo, hi)
	}
	for r.scan.First(); r.scan.Valid(); r.scan.Next() {
		if !fn(r.scan.Key()[1:], r.scan.Value()) {
			break
		}
	}
	if err := r.scan.Error(); err != nil {
		return fmt.Errorf("urlstore: scan: %w", err)
	}
	return nil
}

// close releases the iterators (and the memtables and tables they pin).
func (r *updateReader) close() {
	for _, it := range []*pebble.Iterator{r.get, r.scan} {
		if it != nil {
			it.Close()
		}
	}
	r.get, r.scan = nil, nil
}

// Read runs fn with a reader of the whole store whose reads share two
// iterators (as an Update's do), for many reads in a row: a hand-out
// reading the ready URLs of hundreds of queues. fn sees the database as
// it was at its first read, and must not keep the reader.
func (s *Store) Read(fn func(r Reader) error) error {
	r := &updateReader{s: s}
	defer r.close()
	return fn(r)
}
