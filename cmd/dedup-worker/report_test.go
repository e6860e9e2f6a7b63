package main

import (
	"bytes"
	"regexp"
	"testing"
	"time"

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
