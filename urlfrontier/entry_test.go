package urlfrontier

import (
	"bytes"
	"encoding/binary"
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
		{Crawl: "c", Key: "k\x00\xff", Leases: []LeaseCount{
			{Until: 1, N: 1}, {Until: 1_764_000_060_000, N: 2}, {Until: 1_764_000_061_000, N: 1 << 40},
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
	good := encodeQueue(&QueueState{Crawl: "c", Key: "k", Leases: []LeaseCount{{Until: 5, N: 1}}})
	for name, b := range map[string][]byte{
		"empty":           nil,
		"JSON":            []byte(`{"v":2,"crawl":"c","key":"k"}`),
		"unknown flag":    append([]byte{formatVersion, 0x80}, good[2:]...),
		"truncated":       good[:len(good)-1],
		"trailing bytes":  append(bytes.Clone(good), 0),
		"bad crawl":       encodeQueue(&QueueState{Crawl: "a b"}),
		"too many leases": append(bytes.Clone(good[:len(good)-3]), 0xff, 0xff, 0xff, 0xff, 0x0f),
		"zero count":      encodeQueue(&QueueState{Crawl: "c", Leases: []LeaseCount{{Until: 5}}}),
		"same end twice":  encodeQueue(&QueueState{Crawl: "c", Leases: []LeaseCount{{Until: 5, N: 1}, {Until: 5, N: 1}}}),
		"newer version":   append([]byte{formatVersion + 1}, good[1:]...),
	} {
		if q, err := decodeQueue(b); err == nil {
			t.Errorf("%s: %x decoded as %+v", name, b, q)
		}
	}
}

// TestQueueStateFormat2: a state written by format 2, its leases named,
// reads as format 3's counts, ends in order, so that a server upgraded
// mid-lease counts its URLs in process; it writes format 3 back.
func TestQueueStateFormat2(t *testing.T) {
	b := []byte{formatV2, flagHasDelay, 1, 'c', 1, 'k'}
	for _, v := range []uint64{1500, 0, 0, 7, 3, 1, 0} { // delay, blocked, limit, next, queued, fetched, completed
		b = binary.AppendUvarint(b, v)
	}
	b = binary.AppendUvarint(b, 3)
	for i, until := range []uint64{9_000, 5_000, 9_000} {
		b = append(b, "lease-0"...)
		b = append(b, byte(i))
		for _, v := range []uint64{until, 0, 1} {
			b = binary.AppendUvarint(b, v)
		}
	}
	got, err := decodeQueue(b)
	if err != nil {
		t.Fatal(err)
	}
	want := &QueueState{V: formatVersion, Crawl: "c", Key: "k", Delay: 1500, HasDelay: true, Next: 7, Queued: 3, Fetched: 1,
		Leases: []LeaseCount{{Until: 5_000, N: 1}, {Until: 9_000, N: 2}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("format 2 read as %+v, want %+v", got, want)
	}
	if again := encodeQueue(got); again[0] != formatVersion {
		t.Fatalf("written back as format %d", again[0])
	}
}

// TestLeaseCounts: a queue's leases are counts by their end; a known
// update takes its URL's off; ended ones stop counting and go at the next
// lease; beyond maxLeaseCounts the nearest merge into the later end, and
// a release still finds the merged count, so the total stays exact.
func TestLeaseCounts(t *testing.T) {
	var q QueueState
	q.lease(10_000, 3, 0)
	q.lease(20_000, 2, 0)
	q.lease(10_000, 1, 0)
	if n := q.inProcess(0); n != 6 {
		t.Fatalf("in process %d, want 6", n)
	}
	q.release(10_000, 0)
	q.release(10_000, 15_000) // ended: not counted anyway
	if n := q.inProcess(0); n != 5 {
		t.Fatalf("after a release: %d in process, want 5", n)
	}
	if n := q.inProcess(10_000); n != 2 {
		t.Fatalf("at 10 s: %d in process, want 2 (the 20 s ones)", n)
	}
	q.lease(30_000, 1, 10_000)
	if want := []LeaseCount{{20_000, 2}, {30_000, 1}}; !reflect.DeepEqual(q.Leases, want) {
		t.Fatalf("after an ended count: %v, want %v", q.Leases, want)
	}

	q = QueueState{}
	for i := range maxLeaseCounts + 10 {
		q.lease(int64(i+1)*1000, 1, 0)
	}
	if len(q.Leases) != maxLeaseCounts || q.inProcess(0) != maxLeaseCounts+10 {
		t.Fatalf("%d counts holding %d, want %d holding %d", len(q.Leases), q.inProcess(0), maxLeaseCounts, maxLeaseCounts+10)
	}
	for i := range maxLeaseCounts + 10 {
		q.release(int64(i+1)*1000, 0)
	}
	if len(q.Leases) != 0 {
		t.Fatalf("every lease released, counts left: %v", q.Leases)
	}
}

// TestEntryLease: a leased record keeps its lease's end and its own due
// time; its ready key is at the end of the lease; the lease runs until
// then.
func TestEntryLease(t *testing.T) {
	e := &Entry{Created: 5, Due: 7_000, Known: true, Until: 60_000}
	var got Entry
	if err := decodeEntry(encodeEntry(e), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, e) {
		t.Fatalf("decoded %+v, want %+v", got, *e)
	}
	fresh := &Entry{Created: 5, Until: 60_000}
	if fresh.fresh() || indexOnlyValue(encodeEntry(fresh)) {
		t.Fatal("a leased URL is not fresh: its record needs its U key")
	}
	if e.at() != 60_000 || e.lease(59_999) != 60_000 || e.lease(60_000) != 0 {
		t.Fatalf("at %d, lease %d then %d", e.at(), e.lease(59_999), e.lease(60_000))
	}
	v2 := encodeEntry(&Entry{Created: 5, Due: 7_000})
	v2[0] = formatV2
	if err := decodeEntry(v2, &got); err != nil || got.Until != 0 || got.Due != 7_000 {
		t.Fatalf("format 2 entry: %+v, %v", got, err)
	}
	bad := encodeEntry(e)
	bad[0] = formatV2
	if err := decodeEntry(bad, &got); err == nil {
		t.Fatal("format 2 entry with a lease accepted")
	}
}
