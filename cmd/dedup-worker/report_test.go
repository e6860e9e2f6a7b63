package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
)

// TestReportShowsParkedCrawls checks that `stats` names a crawl the
// answering worker parked (its filter cannot be opened), with the cause.
func TestReportShowsParkedCrawls(t *testing.T) {
	since := time.Date(2026, 11, 23, 20, 0, 0, 0, time.UTC)
	r := report{Worker: &frontier.Status{Ready: true, Started: since, Parked: map[string]frontier.ParkedCrawl{
		"bad": {Error: "crawl bad: open filter: dedup: corrupt snapshot", Since: since, Messages: 42},
	}}}
	var out bytes.Buffer
	printReport(&out, r, since.Add(time.Minute))
	want := regexp.MustCompile(`crawl bad +PARKED since 2026-11-23T20:00:00Z, 42 messages held back: crawl bad: open filter: dedup: corrupt snapshot`)
	if !want.Match(out.Bytes()) {
		t.Errorf("report:\n%s\nwant a line matching %s", out.String(), want)
	}
}

// TestReportMemoryPerItem: `stats` prints bytes per item only once a filter
// holds enough items for the ratio to mean something; before, it says the
// size is fixed and what it is per item at capacity. A filter sized for 10
// million URLs read 337,568.8 B/item with 107 in it (issue 39, item 18).
func TestReportMemoryPerItem(t *testing.T) {
	layer := []dedup.LayerStats{{Capacity: 10_000_000}}
	const mem = 36_119_552 // 10 million URLs at 1e-6
	cases := []struct {
		name  string
		stats dedup.Stats
		want  string
	}{
		{"empty", dedup.Stats{MemoryBytes: mem, Layers: layer},
			"fixed size, allocated for 10,000,000 items (3.6 B/item when full; B/item from 1,000 items)"},
		{"near empty (issue 39)", dedup.Stats{Items: 107, MemoryBytes: mem, BytesPerItem: float64(mem) / 107, Layers: layer},
			"fixed size, allocated for 10,000,000 items (3.6 B/item when full; B/item from 1,000 items)"},
		{"one short", dedup.Stats{Items: 999, MemoryBytes: mem, BytesPerItem: float64(mem) / 999, Layers: layer},
			"fixed size, allocated for 10,000,000 items (3.6 B/item when full; B/item from 1,000 items)"},
		{"enough items", dedup.Stats{Items: 1000, MemoryBytes: mem, BytesPerItem: float64(mem) / 1000, Layers: layer},
			"36119.6 B/item"},
		{"two layers", dedup.Stats{Items: 30, MemoryBytes: 3_000, Layers: []dedup.LayerStats{{Capacity: 1000}, {Capacity: 2000}}},
			"fixed size, allocated for 3,000 items (1.0 B/item when full; B/item from 1,000 items)"},
		{"no layers", dedup.Stats{Items: 5, MemoryBytes: 1024},
			"fixed size (B/item from 1,000 items)"},
	}
	for _, c := range cases {
		if got := memoryPerItem(&c.stats); got != c.want {
			t.Errorf("%s: memoryPerItem(%+v) = %q, want %q", c.name, c.stats, got, c.want)
		}
		var out bytes.Buffer
		printFilter(&out, &c.stats, "")
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("%s: printFilter:\n%s\nwant a memory line with %q", c.name, out.String(), c.want)
		}
	}
}
