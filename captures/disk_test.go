package captures

import (
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/urlstore"
	"github.com/sievecrawl/sieve/warc"
)

var at = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// typical is a page's capture as the archive stores it.
func typical() warc.Capture {
	return warc.Capture{Date: at, Digest: "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ", ETag: `"5f3a-1"`,
		LastModified: "Tue, 24 Nov 2026 10:00:00 GMT", PayloadURL: "https://www.example.com/a.html", PayloadDate: at,
		File: "sieve-20261125120000000-00001-crawler-1-12345.warc.gz", Offset: 123456, Status: 200}
}

// TestCaptureEncoding pins the stored format (a change needs a new
// version byte) and checks that every kind of capture comes back whole.
func TestCaptureEncoding(t *testing.T) {
	c := typical()
	got := hex.EncodeToString(encodeCapture(c, c.PayloadURL))
	// version, flags (payload at the URL and the date, SHA-1), date
	// (zigzag seconds, nanoseconds), the 20 digest bytes, ETag,
	// Last-Modified, file, offset, status: worked out by hand.
	const want = "01" + "07" + "80b7b6b00d" + "00" + "da39a3ee5e6b4b0d3255bfef95601890afd80709" +
		"08" + "22356633612d3122" +
		"1d" + "5475652c203234204e6f7620323032362031303a30303a303020474d54" +
		"35" + "73696576652d32303236313132353132303030303030302d30303030312d637261776c65722d312d31323334352e776172632e677a" +
		"c0c407" + "c801"
	if got != want {
		t.Errorf("encodeCapture = %s, want %s (the stored format changed: bump captureVersion)", got, want)
	}
	other := c
	other.PayloadURL, other.PayloadDate = "https://www.example.com/b.html", at.Add(-time.Hour)
	odd := c
	odd.Digest, odd.Date, odd.PayloadDate = "sha256:abc", at.Add(time.Nanosecond), at.Add(time.Nanosecond)
	for _, tc := range []struct {
		name string
		c    warc.Capture
		u    string
	}{
		{"typical", c, c.PayloadURL},
		{"a digest's first", c, ""},
		{"payload elsewhere", other, c.PayloadURL},
		{"other digest, nanoseconds", odd, c.PayloadURL},
		{"empty", warc.Capture{Date: at, PayloadDate: at}, ""},
	} {
		b := encodeCapture(tc.c, tc.u)
		back, err := decodeCapture(b, tc.u)
		if err != nil || !reflect.DeepEqual(back, tc.c) {
			t.Errorf("%s: decodeCapture(encodeCapture(%+v)) = %+v, %v", tc.name, tc.c, back, err)
		}
	}
	if n := len(encodeCapture(c, c.PayloadURL)); n > 130 {
		t.Errorf("a typical capture takes %d bytes, want at most 130", n)
	}
}

// TestKeyLayout pins the keys (a change moves every stored capture).
func TestKeyLayout(t *testing.T) {
	for _, tc := range []struct {
		got  []byte
		want string
	}{
		// 'u' "c1" 0 partition (FNV-1a of the host mod 64: 11) SHA-256[:16]
		{urlKey("c1", "https://www.example.com/a.html"), "75" + "6331" + "00" + "000b" + "fe389474f1dc35aefbbe974d4d130f0a"},
		// 'd' "c1" 0 partition (of the digest: 21) SHA-256[:16]
		{digestKey("c1", "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"), "64" + "6331" + "00" + "0015" + "68761f656b77ed3f2d3573daa242233a"},
	} {
		if h := hex.EncodeToString(tc.got); h != tc.want {
			t.Errorf("key %s, want %s", h, tc.want)
		}
	}
	if p := keyPart(urlKey("c1", "https://www.example.com/b.html")); p != hostPart("https://www.example.com/") {
		t.Errorf("a host's URLs are in partitions %d and %d", p, hostPart("https://www.example.com/"))
	}
}

// TestDiskSharedAndRestarted: two crawlers' stores share captures through
// the log, and one opened again on its directory applies only what it
// missed. A second store on a held directory opens beside it.
func TestDiskSharedAndRestarted(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	log, err := frontier.OpenStoreLog(t.Context(), srv.JetStream(), frontier.Topology{}, StoreName)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "captures")
	a, err := OpenDisk(t.Context(), dir, log, urlstore.Options{Logf: t.Logf}, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenDisk(t.Context(), dir, log, urlstore.Options{Logf: t.Logf}, false) // the same data dir: takes captures.1
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := typical()
	for i := range 50 {
		c.Offset = int64(i)
		if err := a.Put(t.Context(), "c1", c.PayloadURL+"?"+string(rune('a'+i%26))+string(rune('a'+i/26)), c); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	if err := b.Put(t.Context(), "c1", "https://other.example/", c); err != nil {
		t.Fatal(err)
	}
	a, err = OpenDisk(t.Context(), dir, log, urlstore.Options{Logf: t.Logf}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got := a.Stats().Applied; got != 1 {
		t.Errorf("reopened store applied %d entries, want the 1 written while it was closed", got)
	}
	got, ok, err := a.Last(t.Context(), "c1", "https://other.example/")
	if err != nil || !ok || got.File != c.File {
		t.Errorf("Last of the other crawler's capture = %+v %v %v", got, ok, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok, _ := b.Last(t.Context(), "c1", c.PayloadURL+"?aa"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second store never saw the first's captures")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// FuzzDecodeCapture: decoding never panics, and what decodes encodes back
// to a capture that decodes alike.
func FuzzDecodeCapture(f *testing.F) {
	c := typical()
	f.Add(encodeCapture(c, c.PayloadURL), c.PayloadURL)
	f.Add(encodeCapture(c, ""), "")
	f.Fuzz(func(t *testing.T, b []byte, u string) {
		got, err := decodeCapture(b, u)
		if err != nil {
			return
		}
		again, err := decodeCapture(encodeCapture(got, u), u)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("decoded %+v, encoded and decoded again %+v, %v", got, again, err)
		}
	})
}

// TestDiskCompacts: an archiving crawler's store compacts the captures'
// log once what was written since the last snapshot is as large as it
// (CompactRatio), so revisits do not grow the log without end; a store on
// an empty directory (a new crawler, or a command reading captures)
// restores the snapshot and finds every URL's last capture.
func TestDiskCompacts(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	js := srv.JetStream()
	log, err := frontier.OpenStoreLog(t.Context(), js, frontier.Topology{}, StoreName)
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := frontier.OpenStoreSnapshots(t.Context(), js, frontier.Topology{}, StoreName)
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64 // minutes after at; the store's compaction loop reads it too
	o := urlstore.Options{Logf: t.Logf, Snapshots: snaps, CompactEvery: time.Minute,
		Now: func() time.Time { return at.Add(time.Duration(clock.Load()) * time.Minute) }}
	a, err := OpenDisk(t.Context(), t.TempDir(), log, o, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	const urls, rounds = 200, 8
	c := typical()
	snapshots := 0
	for round := range rounds {
		for i := range urls {
			c.Offset, c.Date = int64(round*urls+i), at.Add(time.Duration(round)*time.Hour)
			if err := a.Put(t.Context(), "c1", fmt.Sprintf("https://www.example.com/%d.html", i), c); err != nil {
				t.Fatal(err)
			}
		}
		got, err := a.Compact(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got.Snapshot != "" {
			snapshots++
		}
		clock.Add(1)
	}
	info := storeStreamInfo(t, js)
	// Rounds whose snapshot the ratio held back stay in the log longer,
	// but the first two rounds are gone (but for a trim point in each of
	// the two partitions, the host's and the digest's).
	written := rounds*urls + 1 // and the digest's first capture
	if snapshots < 2 || snapshots == rounds || info.State.Msgs > uint64(written-2*urls+2) {
		t.Errorf("%d snapshots in %d rounds, the log keeps %d of %d entries; want some rounds held back by the ratio and the first two trimmed",
			snapshots, rounds, info.State.Msgs, written)
	}
	b, err := OpenDisk(t.Context(), t.TempDir(), log, urlstore.Options{Logf: t.Logf, Snapshots: snaps}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := range urls {
		u := fmt.Sprintf("https://www.example.com/%d.html", i)
		got, ok, err := b.Last(t.Context(), "c1", u)
		if want := int64((rounds-1)*urls + i); err != nil || !ok || got.Offset != want {
			t.Fatalf("restored Last(%s) = offset %d, %v, %v; want the last round's %d", u, got.Offset, ok, err, want)
		}
	}
	if _, ok, err := b.ByDigest(t.Context(), "c1", c.Digest); err != nil || !ok {
		t.Errorf("restored ByDigest = %v, %v; want the first capture", ok, err)
	}
}

// storeStreamInfo returns the stores' log stream's info.
func storeStreamInfo(t *testing.T, js jetstream.JetStream) *jetstream.StreamInfo {
	t.Helper()
	st, err := js.Stream(t.Context(), frontier.Topology{}.StoreStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestCaptureFormatGate: a capture of a newer version stops the store
// (urlstore.ErrNewerFormat); this build's captures, and bytes past the
// versions, do not.
func TestCaptureFormatGate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value []byte
		newer bool
	}{
		{"this build's", encodeCapture(warc.Capture{Date: time.Unix(1_764_000_000, 0), Digest: "sha1:AAAA"}, "http://x.test/"), false},
		{"a newer version", []byte{captureVersion + 1, 0}, true},
		{"the last version a build may take", []byte{63}, true},
		{"not a version", []byte{200}, false},
		{"empty", nil, false},
	} {
		err := checkCapture([]byte("k"), tc.value)
		if got := errors.Is(err, urlstore.ErrNewerFormat); got != tc.newer {
			t.Errorf("%s: checkCapture = %v, want newer %v", tc.name, err, tc.newer)
		}
	}
}
