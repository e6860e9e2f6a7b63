package urlfrontier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/urlstore"
)

// formatVersion is the "v" of a queue's state and the first byte of a
// URL's record; a reader refuses another. It is the deployment's format
// of serve's values (urlstore.Options.Formats, recorded in the snapshots'
// manifest): a build whose formatVersion is older than the recorded one
// refuses to start, and one running meets a newer value and stops
// (checkValue), never skipping what a newer server wrote.
const formatVersion = 2

// checkValue is the format gate of the values serve stores: a URL's
// record or a queue's state of a version above formatVersion
// (urlstore.Newer) stops the store before its entry is applied
// (urlstore.ErrNewerFormat).
func checkValue(k, v []byte) error {
	if len(k) == 0 || len(v) == 0 {
		return nil
	}
	switch k[0] {
	case kindURL, kindReady, kindQueue:
		if urlstore.Newer(v[0], formatVersion) {
			return fmt.Errorf("%w: a stored value of serve's format %d, this build reads up to %d", urlstore.ErrNewerFormat, v[0], formatVersion)
		}
	}
	return nil
}

// Entry is one URL of a queue, the value of its U key (entryKey), or of
// its R key alone while it waits for its first fetch (putEntry): queued
// (waiting for its first fetch, or scheduled for a refetch at Due) or
// completed (fetched, never handed out again; kept with its metadata).
// Its crawl, queue and URL are in the key. A URL is ready when it is
// queued, Due (Unix milliseconds; 0: at once) has passed and its queue
// holds no running lease of it (QueueState.Leases).
type Entry struct {
	Crawl string
	URL   string
	Key   string
	Meta  map[string][]string
	// Created is when it was first stored (Unix seconds).
	Created int64
	Due     int64
	// Known says a known update scheduled it for a refetch at Due.
	Known bool
	// Completed says a known update without a refetch date completed it.
	Completed bool

	// indexOnly says the record was read from the ready index alone: it
	// has no U key (see putEntry).
	indexOnly bool
}

// fresh reports whether e is a URL waiting for its first fetch, due at
// once: such a record is stored in the ready index only (putEntry).
func (e *Entry) fresh() bool { return !e.Known && !e.Completed && e.Due == 0 }

// indexOnlyValue reports whether an encoded entry is marked index-only,
// without decoding it.
func indexOnlyValue(v []byte) bool { return len(v) >= 2 && v[1]&flagIndexOnly != 0 }

// Flags of an encoded entry.
const (
	flagKnown     = 1
	flagCompleted = 2
	// flagIndexOnly marks a record stored under its R key alone (a fresh
	// URL's); without it an R key's value is a copy of the U key's.
	flagIndexOnly = 4
)

// encodeEntry is a URL's record: binary, as it is stored once per URL.
//
//	version (1)  flags (1: known, completed, index only)
//	uvarint created  uvarint due
//	uvarint metadata keys, then per key: uvarint len, key,
//	  uvarint values, then per value: uvarint len, value
//
// Keys are written in sorted order, so equal entries encode alike.
func encodeEntry(e *Entry) []byte {
	b := make([]byte, 0, 16+metaSize(e.Meta))
	var flags byte
	if e.Known {
		flags |= flagKnown
	}
	if e.Completed {
		flags |= flagCompleted
	}
	if e.fresh() {
		flags |= flagIndexOnly
	}
	b = append(b, formatVersion, flags)
	b = binary.AppendUvarint(b, uint64(max(e.Created, 0)))
	b = binary.AppendUvarint(b, uint64(max(e.Due, 0)))
	b = binary.AppendUvarint(b, uint64(len(e.Meta)))
	for _, k := range slices.Sorted(maps.Keys(e.Meta)) {
		b = appendString(b, k)
		b = binary.AppendUvarint(b, uint64(len(e.Meta[k])))
		for _, v := range e.Meta[k] {
			b = appendString(b, v)
		}
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func metaSize(m map[string][]string) int {
	n := 0
	for k, vs := range m {
		n += len(k) + 2
		for _, v := range vs {
			n += len(v) + 2
		}
	}
	return n
}

var errFormat = errors.New("urlfrontier: bad stored value")

// decodeEntry reads a record written by encodeEntry into e (whose Crawl,
// URL and Key the caller sets from the key). It never panics; metadata
// beyond frontier's bounds is refused as the puts are.
func decodeEntry(b []byte, e *Entry) error {
	if len(b) < 2 || b[0] != formatVersion {
		return fmt.Errorf("%w: entry version", errFormat)
	}
	e.Known, e.Completed, e.indexOnly = b[1]&flagKnown != 0, b[1]&flagCompleted != 0, b[1]&flagIndexOnly != 0
	rest := b[2:]
	num := func() (uint64, error) {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return 0, fmt.Errorf("%w: entry number", errFormat)
		}
		rest = rest[n:]
		return v, nil
	}
	str := func() (string, error) {
		n, err := num()
		if err != nil || n > uint64(len(rest)) {
			return "", fmt.Errorf("%w: entry string", errFormat)
		}
		s := string(rest[:n])
		rest = rest[n:]
		return s, nil
	}
	for _, t := range []*int64{&e.Created, &e.Due} {
		v, err := num()
		if err != nil {
			return err
		}
		if v > 1<<62 {
			return fmt.Errorf("%w: entry time", errFormat)
		}
		*t = int64(v)
	}
	keys, err := num()
	if err != nil {
		return err
	}
	if keys > frontier.MaxMetaKeys {
		return fmt.Errorf("%w: %d metadata keys", errFormat, keys)
	}
	e.Meta = nil
	values := 0
	for range keys {
		k, err := str()
		if err != nil {
			return err
		}
		n, err := num()
		if err != nil {
			return err
		}
		if values += int(min(n, frontier.MaxMetaValues+1)); values > frontier.MaxMetaValues {
			return fmt.Errorf("%w: metadata values", errFormat)
		}
		vs := make([]string, 0, n)
		for range n {
			v, err := str()
			if err != nil {
				return err
			}
			vs = append(vs, v)
		}
		if e.Meta == nil {
			e.Meta = make(map[string][]string, keys)
		}
		if _, dup := e.Meta[k]; dup {
			return fmt.Errorf("%w: metadata key %q twice", errFormat, k)
		}
		e.Meta[k] = vs
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d bytes after the entry", errFormat, len(rest))
	}
	return nil
}

// QueueState is a queue's settings, turn, counts and leases, the value of
// its Q key (encodeQueue): one per queue, read into every server's RAM. A
// zero field is unset.
type QueueState struct {
	V     int // formatVersion
	Crawl string
	Key   string
	// Delay is the pause between two turns in milliseconds; unset
	// (HasDelay false): the crawl's default.
	Delay    int64
	HasDelay bool
	// Blocked is the Unix ms until which nothing is handed out.
	Blocked int64
	// Limit is the most URLs the queue hands out to be fetched, counted
	// by Fetched and the URLs in process (SetCrawlLimit); 0: none.
	Limit uint32
	// Next is the Unix ms of the queue's next turn.
	Next int64
	// Queued counts its URLs not completed (waiting, scheduled or in
	// process); Fetched its known updates (fetches); Completed its
	// completed URLs (each held with its record), so that Queued plus
	// Completed is every URL it holds (CountURLs).
	Queued    uint64
	Fetched   uint64
	Completed uint64
	// Leases are the queue's URLs handed out, by hash (leaseID). A URL
	// whose lease ended is ready again; its known update removes it.
	// Leasing in the queue's state, which each hand-out writes anyway,
	// makes a hand-out one write per queue, not one per URL.
	Leases map[string]Lease
}

// Lease is a URL handed out: until when, and what its known update needs
// of its record (its ready key's due time, its creation), so that the
// update reads nothing but the queue's state.
type Lease struct {
	Until   int64 // Unix ms
	Due     int64 // the record's Due
	Created int64 // the record's Created
}

// leased reports whether u is handed out at now.
func (q *QueueState) leased(u string, now int64) (until int64, ok bool) {
	l, ok := q.Leases[leaseID(u)]
	return l.Until, ok && l.Until > now
}

// inProcess counts the running leases at now.
func (q *QueueState) inProcess(now int64) int {
	n := 0
	for _, l := range q.Leases {
		if l.Until > now {
			n++
		}
	}
	return n
}

// flagHasDelay is the flag of a queue state with a delay of its own.
const flagHasDelay = 1

// encodeQueue is a queue's state: binary, as it is written with every
// change to the queue (each put, hand-out and acknowledgement of its URLs)
// and decoded by every server that applies the change. In JSON, its
// decoding took 4% of a fill's CPU, and a state with ten leases, named by
// 16 hex digits with each field named, ~600 bytes.
//
//	version (1)  flags (1)  uvarint len, crawl  uvarint len, key
//	uvarint delay, blocked, limit, next, queued, fetched, completed
//	uvarint leases, then per lease in leaseID order:
//	  leaseID (8)  uvarint until, due, created
func encodeQueue(q *QueueState) []byte {
	b := make([]byte, 0, 32+len(q.Crawl)+len(q.Key)+24*len(q.Leases))
	var flags byte
	if q.HasDelay {
		flags |= flagHasDelay
	}
	b = append(b, formatVersion, flags)
	b = appendString(b, q.Crawl)
	b = appendString(b, q.Key)
	for _, v := range []int64{q.Delay, q.Blocked, int64(q.Limit), q.Next} {
		b = binary.AppendUvarint(b, uint64(max(v, 0)))
	}
	for _, v := range []uint64{q.Queued, q.Fetched, q.Completed} {
		b = binary.AppendUvarint(b, v)
	}
	b = binary.AppendUvarint(b, uint64(len(q.Leases)))
	for _, id := range slices.Sorted(maps.Keys(q.Leases)) {
		l := q.Leases[id]
		b = append(b, id...)
		for _, v := range []int64{l.Until, l.Due, l.Created} {
			b = binary.AppendUvarint(b, uint64(max(v, 0)))
		}
	}
	return b
}

// decodeQueue reads a state written by encodeQueue. It never panics and
// refuses what encodeQueue would not write.
func decodeQueue(b []byte) (*QueueState, error) {
	if len(b) < 2 || b[0] != formatVersion || b[1]&^flagHasDelay != 0 {
		return nil, fmt.Errorf("%w: queue version", errFormat)
	}
	q := &QueueState{V: formatVersion, HasDelay: b[1]&flagHasDelay != 0}
	rest := b[2:]
	var err error
	num := func() uint64 {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			err = fmt.Errorf("%w: queue number", errFormat)
			rest = nil
			return 0
		}
		rest = rest[n:]
		return v
	}
	str := func() string {
		n := num()
		if n > uint64(len(rest)) {
			err = fmt.Errorf("%w: queue string", errFormat)
			rest = nil
			return ""
		}
		s := string(rest[:n])
		rest = rest[n:]
		return s
	}
	when := func() int64 {
		v := num()
		if v > 1<<62 {
			err = fmt.Errorf("%w: queue time", errFormat)
		}
		return int64(v)
	}
	q.Crawl, q.Key = str(), str()
	q.Delay, q.Blocked = when(), when()
	if limit := num(); limit <= 1<<32-1 {
		q.Limit = uint32(limit)
	} else {
		err = fmt.Errorf("%w: queue limit", errFormat)
	}
	q.Next = when()
	q.Queued, q.Fetched, q.Completed = num(), num(), num()
	leases := num()
	if err == nil && leases > uint64(len(rest))/leaseBytes {
		err = fmt.Errorf("%w: %d leases", errFormat, leases)
	}
	var last string
	for i := uint64(0); err == nil && i < leases; i++ {
		if len(rest) < 8 {
			err = fmt.Errorf("%w: lease id", errFormat)
			break
		}
		id := string(rest[:8])
		rest = rest[8:]
		if i > 0 && id <= last {
			err = fmt.Errorf("%w: leases out of order", errFormat)
			break
		}
		last = id
		l := Lease{Until: when(), Due: when(), Created: when()}
		if q.Leases == nil {
			q.Leases = make(map[string]Lease, leases)
		}
		q.Leases[id] = l
	}
	switch {
	case err != nil:
		return nil, err
	case len(rest) != 0:
		return nil, fmt.Errorf("%w: %d bytes after the queue", errFormat, len(rest))
	case !frontier.ValidCrawl(q.Crawl) || len(q.Key) > frontier.MaxKeyBytes:
		return nil, fmt.Errorf("%w: queue crawl %q", errFormat, q.Crawl)
	}
	return q, nil
}

// leaseBytes is the least a lease takes: its id and three numbers.
const leaseBytes = 8 + 3

func ms(t time.Time) int64 { return t.UnixMilli() }
