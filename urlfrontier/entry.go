package urlfrontier

import (
	"cmp"
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
//
// Format 3 leases a URL in its own record (Entry.Until) and counts a
// queue's leases by their end (QueueState.Leases); format 2 named each
// lease in its queue's state. A format-3 server reads format 2's values:
// a format-2 state's leases become counts, and the URLs they named are
// ready again at once (handed out a second time, as when a lease ends),
// a cost paid once, at the upgrade.
const formatVersion = 3

// formatV2 is the format before leases moved onto the URLs.
const formatV2 = 2

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
// queued and its ready key's time (at: Due, Unix milliseconds, 0: at
// once; or the end of its lease, Until) has passed.
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
	// Until is the end of the URL's last lease (Unix ms; 0: not handed
	// out since its last update). A hand-out moves the URL's ready key to
	// Until, so that it is not ready while it runs and is ready again,
	// with no timer, when it ends without a known update.
	Until int64

	// indexOnly says the record was read from the ready index alone: it
	// has no U key (see putEntry).
	indexOnly bool
}

// fresh reports whether e is a URL waiting for its first fetch, due at
// once: such a record is stored in the ready index only (putEntry).
func (e *Entry) fresh() bool { return !e.Known && !e.Completed && e.Due == 0 && e.Until == 0 }

// at is the time of e's ready key: the end of its lease once handed out,
// else its due time.
func (e *Entry) at() int64 {
	if e.Until > 0 {
		return e.Until
	}
	return e.Due
}

// lease is the end of e's running lease at now (Unix ms), or 0.
func (e *Entry) lease(now int64) int64 {
	if e.Until > now {
		return e.Until
	}
	return 0
}

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
	// flagLeased says the record holds Until (format 3).
	flagLeased = 8
)

// encodeEntry is a URL's record: binary, as it is stored once per URL.
//
//	version (1)  flags (1: known, completed, index only, leased)
//	uvarint created  uvarint due  [uvarint until, when leased]
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
	if e.Until > 0 {
		flags |= flagLeased
	}
	b = append(b, formatVersion, flags)
	b = binary.AppendUvarint(b, uint64(max(e.Created, 0)))
	b = binary.AppendUvarint(b, uint64(max(e.Due, 0)))
	if e.Until > 0 {
		b = binary.AppendUvarint(b, uint64(e.Until))
	}
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
	if len(b) < 2 || (b[0] != formatVersion && b[0] != formatV2) {
		return fmt.Errorf("%w: entry version", errFormat)
	}
	flags := b[1]
	if flags&^(flagKnown|flagCompleted|flagIndexOnly|flagLeased) != 0 || (b[0] == formatV2 && flags&flagLeased != 0) {
		return fmt.Errorf("%w: entry flags %#x", errFormat, flags)
	}
	e.Known, e.Completed, e.indexOnly = flags&flagKnown != 0, flags&flagCompleted != 0, flags&flagIndexOnly != 0
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
	times := []*int64{&e.Created, &e.Due}
	e.Until = 0
	if flags&flagLeased != 0 {
		times = append(times, &e.Until)
	}
	for _, t := range times {
		v, err := num()
		if err != nil {
			return err
		}
		if v > 1<<62 {
			return fmt.Errorf("%w: entry time", errFormat)
		}
		*t = int64(v)
	}
	if flags&flagLeased != 0 && e.Until == 0 {
		return fmt.Errorf("%w: a lease without its end", errFormat)
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
// key (encodeQueue): one per queue. A zero field is unset. Its size does
// not grow with the queue's URLs or leases.
type QueueState struct {
	V     int // the format it was read in (formatVersion); 0: a new state
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
	// Turn is the time of the queue's key in the ready queues' index
	// (turnKey): when it may next hand out a URL (0: never, as it
	// stands). Every write of the state sets it (updateTx.turnOf).
	Turn int64
	// Leases counts the URLs handed out by the end of their leases,
	// earliest first: each lease itself is in its URL's record
	// (Entry.Until), so a hand-out of k URLs adds one count, a known
	// update of a leased URL takes one off, and a count whose end has
	// passed goes at the state's next write (its URLs are ready again).
	// Hand-outs of one GetURLs share a count; beyond maxLeaseCounts the
	// two nearest ends merge into the later, which may count a URL in
	// process until that later end: fewer hand-outs for a while, never
	// more.
	Leases []LeaseCount
}

// stored says the state was read from the store (not new).
func (q *QueueState) stored() bool { return q.V != 0 }

// LeaseCount is how many URLs of a queue are leased until Until (Unix ms).
type LeaseCount struct {
	Until int64
	N     uint64
}

// maxLeaseCounts bounds a queue state's lease counts.
const maxLeaseCounts = 64

// inProcess counts the running leases at now.
func (q *QueueState) inProcess(now int64) int {
	n := uint64(0)
	for _, l := range q.Leases {
		if l.Until > now {
			n += l.N
		}
	}
	return int(min(n, 1<<31))
}

// lease counts n URLs handed out until until, dropping the counts that
// ended by now.
func (q *QueueState) lease(until int64, n int, now int64) {
	q.Leases = slices.DeleteFunc(q.Leases, func(l LeaseCount) bool { return l.Until <= now })
	i, found := slices.BinarySearchFunc(q.Leases, until, func(l LeaseCount, t int64) int { return cmp.Compare(l.Until, t) })
	if found {
		q.Leases[i].N += uint64(n)
	} else {
		q.Leases = slices.Insert(q.Leases, i, LeaseCount{Until: until, N: uint64(n)})
	}
	q.bound()
}

// bound merges lease counts beyond maxLeaseCounts, the pair nearest in
// time into the later.
func (q *QueueState) bound() {
	for len(q.Leases) > maxLeaseCounts {
		j := 0
		for k := 1; k+1 < len(q.Leases); k++ {
			if q.Leases[k+1].Until-q.Leases[k].Until < q.Leases[j+1].Until-q.Leases[j].Until {
				j = k
			}
		}
		q.Leases[j+1].N += q.Leases[j].N
		q.Leases = slices.Delete(q.Leases, j, j+1)
	}
}

// release takes off the count of a lease running until until at now (a
// known update or a deletion of its URL): the first count ending at or
// after it, where it is counted even after merges.
func (q *QueueState) release(until, now int64) {
	if until <= now {
		return
	}
	for i := range q.Leases {
		if q.Leases[i].Until >= until && q.Leases[i].N > 0 {
			q.Leases[i].N--
			if q.Leases[i].N == 0 {
				q.Leases = slices.Delete(q.Leases, i, i+1)
			}
			return
		}
	}
}

// flagHasDelay is the flag of a queue state with a delay of its own.
const flagHasDelay = 1

// encodeQueue is a queue's state: binary, as it is written with every
// change to the queue (each put, hand-out and acknowledgement of its URLs)
// and decoded by every server that applies the change. In JSON, its
// decoding took 4% of a fill's CPU.
//
//	version (1)  flags (1)  uvarint len, crawl  uvarint len, key
//	uvarint delay, blocked, limit, next, queued, fetched, completed, turn
//	uvarint lease counts, then per count, earliest first:
//	  uvarint until (the first; then the gap to the one before), n
func encodeQueue(q *QueueState) []byte {
	b := make([]byte, 0, 32+len(q.Crawl)+len(q.Key)+8*len(q.Leases))
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
	for _, v := range []uint64{q.Queued, q.Fetched, q.Completed, uint64(max(q.Turn, 0))} {
		b = binary.AppendUvarint(b, v)
	}
	b = binary.AppendUvarint(b, uint64(len(q.Leases)))
	last := int64(0)
	for _, l := range q.Leases {
		b = binary.AppendUvarint(b, uint64(max(l.Until-last, 0)))
		b = binary.AppendUvarint(b, l.N)
		last = l.Until
	}
	return b
}

// decodeQueue reads a state written by encodeQueue, or by format 2 (whose
// named leases become counts). It never panics and refuses what
// encodeQueue would not write.
func decodeQueue(b []byte) (*QueueState, error) {
	if len(b) < 2 || (b[0] != formatVersion && b[0] != formatV2) || b[1]&^flagHasDelay != 0 {
		return nil, fmt.Errorf("%w: queue version", errFormat)
	}
	v2 := b[0] == formatV2
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
	if !v2 {
		q.Turn = when()
	}
	leases := num()
	least := uint64(2) // bytes of a count (format 2: of a named lease)
	if v2 {
		least = 8 + 3
	}
	if err == nil && leases > uint64(len(rest))/least {
		err = fmt.Errorf("%w: %d leases", errFormat, leases)
	}
	if v2 {
		// Per lease: its id (8 bytes) and uvarint until, due, created.
		counts := map[int64]uint64{}
		for i := uint64(0); err == nil && i < leases; i++ {
			if len(rest) < 8 {
				err = fmt.Errorf("%w: lease id", errFormat)
				break
			}
			rest = rest[8:]
			until := when()
			when()
			when()
			counts[until]++
		}
		for _, t := range slices.Sorted(maps.Keys(counts)) {
			q.Leases = append(q.Leases, LeaseCount{Until: t, N: counts[t]})
		}
		q.bound()
	} else {
		until := int64(0)
		for i := uint64(0); err == nil && i < leases; i++ {
			gap, n := when(), num()
			if (i > 0 && gap == 0) || n == 0 || until+gap > 1<<62 {
				err = fmt.Errorf("%w: lease counts", errFormat)
				break
			}
			until += gap
			q.Leases = append(q.Leases, LeaseCount{Until: until, N: n})
		}
		if len(q.Leases) > maxLeaseCounts {
			err = fmt.Errorf("%w: %d lease counts", errFormat, len(q.Leases))
		}
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
func ms(t time.Time) int64 { return t.UnixMilli() }
