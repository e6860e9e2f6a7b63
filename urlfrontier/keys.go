package urlfrontier

import (
	"bytes"
	"encoding/binary"
	"hash/fnv"
)

// Partitions is the number of partitions of the queues' store: a queue
// lives in one, chosen by a hash of its crawl and key, so that a hand-out
// or an update is a read-modify-write of one partition (urlstore.Update),
// exact across servers, and partitions are written in parallel. It is
// part of the stored format: the keys carry it.
const Partitions = 32

// storeName is the queues' store in the stores' stream (its subjects are
// <prefix>.store.queues.<partition>).
const storeName = "queues"

// The store's keys, by kind (first byte); crawl ids hold no 0 byte, a
// queue key is escaped (queueEnc) so that its end is unambiguous and
// keys sort by it:
//
//	Q crawl 0 part(2) queue               the queue's state (QueueState)
//	U crawl 0 part(2) queue url           a URL's record (Entry), once
//	                                      fetched or scheduled
//	R crawl 0 part(2) queue due(8) url    a queued URL, by due time: its
//	                                      record again, so that a hand-out
//	                                      reads the index alone; for a URL
//	                                      never fetched, its only key (the
//	                                      value marked index-only)
//	N crawl 0 part(2) turn(8) queue       a queue that may hand out a URL
//	                                      from turn on (QueueState.Turn):
//	                                      the ready queues' index, empty
//	C crawl 0 part(2)                     the partition holds queues of
//	                                      the crawl (empty)
//	I part(2)                             the partition's ready queues
//	                                      are indexed (empty; format 3)
//	D crawl 0                             the crawl's default delay
//
// Every key of a queue is in the queue's partition, which is in each key
// so that deleting a crawl's keys of one partition (a prefix) touches no
// other: a key lives in one partition (package urlstore's rule). D lives in
// the partition of the crawl's empty queue key.
const (
	kindQueue   = 'Q'
	kindURL     = 'U'
	kindReady   = 'R'
	kindDefault = 'D'
	kindTurn    = 'N'
	kindCrawl   = 'C'
	kindIndexed = 'I'
)

// partOf is the partition of a queue.
func partOf(crawl, queue string) int {
	h := fnv.New32a()
	h.Write([]byte(crawl))
	h.Write([]byte{0})
	h.Write([]byte(queue))
	return int(h.Sum32() % Partitions)
}

// crawlPrefix is kind crawl 0 (part(2) when part >= 0).
func crawlPrefix(kind byte, crawl string, part int) []byte {
	b := make([]byte, 0, 4+len(crawl)+64)
	b = append(b, kind)
	b = append(b, crawl...)
	b = append(b, 0)
	if part >= 0 {
		b = binary.BigEndian.AppendUint16(b, uint16(part))
	}
	return b
}

// queueEnc appends q escaped: 0 becomes 0 0xff, and 0 1 ends it, so
// that no key is a prefix of another and the order is q's.
func queueEnc(b []byte, q string) []byte {
	for i := 0; i < len(q); i++ {
		b = append(b, q[i])
		if q[i] == 0 {
			b = append(b, 0xff)
		}
	}
	return append(b, 0, 1)
}

// queueDec reads an escaped queue key at the start of b, returning it and
// the rest; ok is false when b does not hold one.
func queueDec(b []byte) (q string, rest []byte, ok bool) {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			out = append(out, b[i])
			continue
		}
		if i+1 >= len(b) {
			return "", nil, false
		}
		switch b[i+1] {
		case 1:
			return string(out), b[i+2:], true
		case 0xff:
			out = append(out, 0)
			i++
		default:
			return "", nil, false
		}
	}
	return "", nil, false
}

// queuePrefix is kind crawl 0 part queue: every key of kind of a queue.
func queuePrefix(kind byte, crawl, queue string) []byte {
	return queueEnc(crawlPrefix(kind, crawl, partOf(crawl, queue)), queue)
}

func queueKey(crawl, queue string) []byte { return queuePrefix(kindQueue, crawl, queue) }

func entryKey(crawl, queue, url string) []byte {
	return append(queuePrefix(kindURL, crawl, queue), url...)
}

func readyKey(crawl, queue string, due int64, url string) []byte {
	b := binary.BigEndian.AppendUint64(queuePrefix(kindReady, crawl, queue), uint64(max(due, 0)))
	return append(b, url...)
}

func defaultKey(crawl string) []byte { return crawlPrefix(kindDefault, crawl, -1) }

// turnKey is a queue's key in the ready queues' index at turn.
func turnKey(crawl, queue string, turn int64) []byte {
	b := binary.BigEndian.AppendUint64(crawlPrefix(kindTurn, crawl, partOf(crawl, queue)), uint64(max(turn, 0)))
	return queueEnc(b, queue)
}

// parseTurn takes apart the rest of a turnKey after its crawl's prefix.
func parseTurn(rest []byte) (turn int64, queue string, ok bool) {
	if len(rest) < 8 {
		return 0, "", false
	}
	q, tail, ok := queueDec(rest[8:])
	return int64(binary.BigEndian.Uint64(rest)), q, ok && len(tail) == 0
}

func indexedKey(part int) []byte {
	return binary.BigEndian.AppendUint16([]byte{kindIndexed}, uint16(part))
}

// parsedKey is a key of the store taken apart.
type parsedKey struct {
	kind         byte
	crawl, queue string
	part         int
	rest         []byte // after the queue: url, or due and url
}

// parseKey takes a key apart as far as it goes: a prefix (kind crawl 0
// part) has no queue. ok is false for a key this package did not write.
func parseKey(k []byte) (p parsedKey, hasQueue, ok bool) {
	if len(k) < 2 {
		return p, false, false
	}
	p.kind = k[0]
	i := bytes.IndexByte(k[1:], 0)
	if i < 0 {
		return p, false, false
	}
	p.crawl = string(k[1 : 1+i])
	rest := k[2+i:]
	if p.kind == kindDefault {
		return p, false, len(rest) == 0
	}
	if len(rest) < 2 {
		return p, false, len(rest) == 0
	}
	p.part = int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if len(rest) == 0 {
		return p, false, true
	}
	p.queue, p.rest, ok = queueDec(rest)
	return p, ok, ok
}
