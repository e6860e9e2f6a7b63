package urlfrontier

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sievecrawl/sieve/frontier"
)

// formatVersion is the "v" of a queue's state and the first byte of a
// URL's record; a reader refuses another.
const formatVersion = 2

// Entry is one URL of a queue, the value of its U key (entryKey): queued
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
}

// Flags of an encoded entry.
const (
	flagKnown     = 1
	flagCompleted = 2
)

// encodeEntry is a URL's record: binary, as it is stored once per URL.
//
//	version (1)  flags (1)  uvarint created  uvarint due
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
	e.Known, e.Completed = b[1]&flagKnown != 0, b[1]&flagCompleted != 0
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

// QueueState is a queue's settings, turn and counts, the value of its Q
// key (JSON, "v":2): one per queue, read into every server's RAM. A zero
// field is unset.
type QueueState struct {
	V     int    `json:"v"`
	Crawl string `json:"crawl"`
	Key   string `json:"key"`
	// Delay is the pause between two turns in milliseconds; unset
	// (HasDelay false): the crawl's default.
	Delay    int64 `json:"delay,omitempty"`
	HasDelay bool  `json:"has_delay,omitempty"`
	// Blocked is the Unix ms until which nothing is handed out.
	Blocked int64 `json:"blocked,omitempty"`
	// Limit is the most URLs the queue hands out to be fetched, counted
	// by Fetched and the URLs in process (SetCrawlLimit); 0: none.
	Limit uint32 `json:"limit,omitempty"`
	// Next is the Unix ms of the queue's next turn.
	Next int64 `json:"next,omitempty"`
	// Queued counts its URLs not completed (waiting, scheduled or in
	// process); Fetched its known updates (fetches); Completed those
	// that completed a URL.
	Queued    uint64 `json:"queued,omitempty"`
	Fetched   uint64 `json:"fetched,omitempty"`
	Completed uint64 `json:"completed,omitempty"`
	// Leases are the queue's URLs handed out, by hash (leaseID). A URL
	// whose lease ended is ready again; its known update removes it.
	// Leasing in the queue's state, which each hand-out writes anyway,
	// makes a hand-out one write per queue, not one per URL.
	Leases map[string]Lease `json:"leases,omitempty"`
}

// Lease is a URL handed out: until when, and what its known update needs
// of its record (its ready key's due time, its creation), so that the
// update reads nothing but the queue's state.
type Lease struct {
	Until   int64 `json:"u"`           // Unix ms
	Due     int64 `json:"d,omitempty"` // the record's Due
	Created int64 `json:"c,omitempty"` // the record's Created
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

func decodeQueue(b []byte) (*QueueState, error) {
	var q QueueState
	if err := json.Unmarshal(b, &q); err != nil {
		return nil, fmt.Errorf("%w: %v", errFormat, err)
	}
	if q.V != formatVersion || !frontier.ValidCrawl(q.Crawl) || len(q.Key) > frontier.MaxKeyBytes {
		return nil, fmt.Errorf("%w: queue v%d crawl %q", errFormat, q.V, q.Crawl)
	}
	return &q, nil
}

func encodeQueue(q *QueueState) []byte {
	b, err := json.Marshal(q)
	if err != nil {
		panic(err) // only plain fields: cannot fail
	}
	return b
}

func ms(t time.Time) int64 { return t.UnixMilli() }
