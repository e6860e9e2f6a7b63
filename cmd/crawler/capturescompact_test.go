package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/captures"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/urlstore"
	"github.com/sievecrawl/sieve/warc"
)

// TestCapturesCommandAfterCompaction: once a crawler has compacted the
// captures' log, a capture written before the trim is no longer in the log
// (the log alone does not find it), and `crawler captures` finds it all
// the same, through a store of its own restored from the snapshot.
func TestCapturesCommandAfterCompaction(t *testing.T) {
	ctx := t.Context()
	ns := natstest.Start(t, natstest.Options{})
	js := ns.JetStream()
	topo := frontier.Topology{}
	log, err := frontier.OpenStoreLog(ctx, js, topo, captures.StoreName)
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := frontier.OpenStoreSnapshots(ctx, js, topo, captures.StoreName)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	crawler, err := captures.OpenDisk(ctx, t.TempDir(), log,
		urlstore.Options{Logf: t.Logf, Snapshots: snaps, CompactEvery: time.Minute, Now: func() time.Time { return now }, CompactRatio: -1}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer crawler.Close()
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	put := func(u, file string) {
		c := warc.Capture{Date: at, Digest: "sha1:" + strings.Repeat("A", 32), PayloadURL: u, PayloadDate: at, File: file, Offset: 4242, Status: 200}
		if err := crawler.Put(ctx, "default", u, c); err != nil {
			t.Fatal(err)
		}
	}
	// Round 1: the page kept, then another of its host (its partition's
	// last entry, where the trim stops); rounds 2 and 3 revisit the other.
	put("https://old.example/kept", "round-1.warc.gz")
	for round, file := range []string{"round-1.warc.gz", "round-2.warc.gz", "round-3.warc.gz"} {
		put("https://old.example/other", file)
		if c, err := crawler.Compact(ctx); err != nil || c.Snapshot == "" {
			t.Fatalf("Compact of round %d = %+v, %v", round+1, c, err)
		}
		now = now.Add(time.Minute)
	}
	if c, err := crawler.Compact(ctx); err != nil || c.Trimmed == 0 {
		t.Fatalf("Compact a period after round 3 = %+v, %v; want the announced trim", c, err)
	}
	if _, ok, err := (captures.Unindexed{Log: log}).Last(ctx, "default", "https://old.example/kept"); err != nil || ok {
		t.Fatalf("the log alone finds the trimmed capture (%v, %v): nothing was trimmed", ok, err)
	}
	code, out, errOut := runCLI(t, ctx, "captures", "--nats-url", ns.URL(), "--data-dir", t.TempDir(), "--json", "https://old.example/kept")
	if code != 0 || !strings.Contains(out, `"f": "round-1.warc.gz"`) {
		t.Errorf("captures after the log's trim: exit %d\n%s\n%s", code, out, errOut)
	}
}
