package urlfrontier

import (
	"bytes"
	"testing"
)

// FuzzDecodeEntry: the records of the queues' store are read back by
// every server; whatever bytes a key holds, decoding never panics, and a
// value it accepts encodes to one it decodes to the same entry.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(encodeEntry(&Entry{Meta: map[string][]string{"a": {"b", ""}, "c": nil}, Created: 1, Due: 2, Known: true}))
	f.Add(encodeEntry(&Entry{Completed: true}))
	f.Add(encodeEntry(&Entry{Created: 1})) // fresh: index-only
	f.Add(encodeQueue(&QueueState{Crawl: "c", Key: "k", Delay: 1000, HasDelay: true, Blocked: 5, Limit: 3, Next: 7,
		Queued: 2, Fetched: 1, Completed: 1, Leases: []LeaseCount{{Until: 9, N: 2}, {Until: 12, N: 1}}}))
	f.Add(encodeEntry(&Entry{Created: 1, Until: 2_000})) // leased
	f.Add([]byte{2, 0, 0, 0, 1, 1, 'a', 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Entry
		if err := decodeEntry(b, &e); err == nil {
			var again Entry
			if err := decodeEntry(encodeEntry(&e), &again); err != nil || !bytes.Equal(encodeEntry(&again), encodeEntry(&e)) {
				t.Fatalf("entry %q does not survive encoding: %v", b, err)
			}
		}
		if q, err := decodeQueue(b); err == nil {
			again, err := decodeQueue(encodeQueue(q))
			if err != nil || !bytes.Equal(encodeQueue(again), encodeQueue(q)) {
				t.Fatalf("queue %q does not survive encoding: %v", b, err)
			}
		}
	})
}

// FuzzParseKey: keys are taken apart by every server's summaries; a key
// built from any crawl, queue and URL parses back to them.
func FuzzParseKey(f *testing.F) {
	f.Add("DEFAULT", "example.com", "https://example.com/")
	f.Add("c", "a\x00b\x00", "u\x00\x01")
	f.Add("c", "", "")
	f.Fuzz(func(t *testing.T, crawl, queue, url string) {
		if bytes.IndexByte([]byte(crawl), 0) >= 0 {
			return // crawl ids are [A-Za-z0-9_-]
		}
		p, hasQueue, ok := parseKey(entryKey(crawl, queue, url))
		if !ok || !hasQueue || p.kind != kindURL || p.crawl != crawl || p.queue != queue || string(p.rest) != url ||
			p.part != partOf(crawl, queue) {
			t.Fatalf("entry key of %q %q %q parses to %+v %v %v", crawl, queue, url, p, hasQueue, ok)
		}
		p, hasQueue, ok = parseKey(queueKey(crawl, queue))
		if !ok || !hasQueue || p.kind != kindQueue || p.queue != queue || len(p.rest) != 0 {
			t.Fatalf("queue key of %q %q parses to %+v", crawl, queue, p)
		}
		_, _, _ = parseKey([]byte(url)) // never panics
	})
}
