package urlfrontier

import (
	"bytes"
	"reflect"
	"testing"
)

// TestQueueStateEncoding: every field of a queue's state comes back from
// its encoding, at zero and at its bounds; leases are written in one
// order, so equal states encode alike; what encodeQueue never writes is
// refused.
func TestQueueStateEncoding(t *testing.T) {
	for _, q := range []*QueueState{
		{Crawl: "DEFAULT"},
		{Crawl: "c", Key: "www.example.com", Delay: 1500, HasDelay: true, Blocked: 1_764_000_000_000, Limit: 1<<32 - 1,
			Next: 1_764_000_001_000, Queued: 1 << 40, Fetched: 7, Completed: 3},
		{Crawl: "c", Key: "k\x00\xff", Leases: map[string]Lease{
			leaseID("https://a/1"): {Until: 1_764_000_060_000, Due: 0, Created: 1_764_000_000},
			leaseID("https://a/2"): {Until: 1_764_000_060_000, Due: 1_764_100_000_000, Created: 1},
			leaseID("https://a/3"): {Until: 1},
		}},
	} {
		q.V = formatVersion
		b := encodeQueue(q)
		got, err := decodeQueue(b)
		if err != nil {
			t.Fatalf("decode %+v: %v", q, err)
		}
		if !reflect.DeepEqual(got, q) {
			t.Errorf("decoded %+v, want %+v", got, q)
		}
		if again := encodeQueue(got); !bytes.Equal(again, b) {
			t.Errorf("%+v encodes as %x then %x", q, b, again)
		}
	}
	good := encodeQueue(&QueueState{Crawl: "c", Key: "k", Leases: map[string]Lease{leaseID("u"): {Until: 5}}})
	for name, b := range map[string][]byte{
		"empty":           nil,
		"JSON":            []byte(`{"v":2,"crawl":"c","key":"k"}`),
		"unknown flag":    append([]byte{formatVersion, 0x80}, good[2:]...),
		"truncated":       good[:len(good)-1],
		"trailing bytes":  append(bytes.Clone(good), 0),
		"bad crawl":       encodeQueue(&QueueState{Crawl: "a b"}),
		"too many leases": append(bytes.Clone(good[:len(good)-12]), 0xff, 0xff, 0xff, 0xff, 0x0f),
	} {
		if q, err := decodeQueue(b); err == nil {
			t.Errorf("%s: %x decoded as %+v", name, b, q)
		}
	}
}
