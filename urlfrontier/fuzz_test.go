package urlfrontier

import (
	"bytes"
	"testing"
)

// FuzzDecodeEntry: the values of the buckets are read back by every
// server; whatever bytes a key holds, decoding never panics, and a value
// it accepts encodes to one it decodes to the same entry.
func FuzzDecodeEntry(f *testing.F) {
	f.Add([]byte(`{"v":1,"crawl":"DEFAULT","url":"https://example.com/","key":"example.com","meta":{"a":["b"]},"created":1,"due":2,"known":true}`))
	f.Add([]byte(`{"v":1,"crawl":"c","key":"k","delay":1000,"has_delay":true,"blocked":5,"limit":3,"next":7,"fetched":1,"completed":1,"leases":{"0123":9}}`))
	f.Add([]byte(`{"v":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if e, err := decodeEntry(b); err == nil {
			again, err := decodeEntry(encode(e))
			if err != nil || !bytes.Equal(encode(again), encode(e)) {
				t.Fatalf("entry %q does not survive encoding: %v", b, err)
			}
		}
		if q, err := decodeQueue(b); err == nil {
			again, err := decodeQueue(encode(q))
			if err != nil || !bytes.Equal(encode(again), encode(q)) {
				t.Fatalf("queue %q does not survive encoding: %v", b, err)
			}
		}
	})
}
