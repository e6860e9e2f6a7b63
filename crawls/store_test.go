package crawls_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/crawls/crawlstest"
	"github.com/sievecrawl/sieve/frontier"
)

// created is the clock of the unit tests' stores.
var created = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// memStore returns a Store on in-memory fakes, with its parts.
func memStore(tb testing.TB) (*crawls.Store, *crawlstest.Registry, *crawlstest.Queues) {
	tb.Helper()
	reg, q := &crawlstest.Registry{}, &crawlstest.Queues{}
	return crawls.New(reg, q, crawls.Options{Now: func() time.Time { return created }}), reg, q
}

var def = frontier.CrawlSettings{ExpectURLs: 10_000_000, FPP: 0.001, Kind: "bloom", Scope: "host", Granularity: 4}

// TestCreate pins a crawl's settings: the first creator's over the
// defaults, fixed after; a later creator giving another value is refused,
// naming both, and changes nothing.
func TestCreate(t *testing.T) {
	ctx := t.Context()
	s, reg, _ := memStore(t)
	first := frontier.CrawlSettings{ExpectURLs: 5000, RevisitAfter: time.Hour}
	want := frontier.CrawlSettings{ExpectURLs: 5000, FPP: 0.001, RevisitAfter: time.Hour, Granularity: 4, Kind: "bloom", Scope: "host"}
	rec, err := s.Create(ctx, "a", first, def)
	if err != nil || rec.Settings != want || !rec.Created.Equal(created) || rec.Incarnation == "" {
		t.Fatalf("Create(a) = %+v, %v; want settings %+v created %v, an incarnation", rec, err, want, created)
	}
	incarnation := rec.Incarnation
	for _, tt := range []struct {
		name  string
		id    string
		given frontier.CrawlSettings
		err   string // "" none
	}{
		{"nothing given", "a", frontier.CrawlSettings{}, ""},
		{"same values", "a", frontier.CrawlSettings{ExpectURLs: 5000, RevisitAfter: time.Hour}, ""},
		{"other size", "a", frontier.CrawlSettings{ExpectURLs: 6000}, "expect-urls 6000 given, but the crawl was created with expect-urls 5000"},
		{"other fpp", "a", frontier.CrawlSettings{FPP: 0.01}, "fpp 0.01 given, but the crawl was created with fpp 0.001"},
		{"other window", "a", frontier.CrawlSettings{RevisitAfter: 2 * time.Hour}, "revisit-after 2h0m0s given, but the crawl was created with revisit-after 1h0m0s"},
		{"other kind", "a", frontier.CrawlSettings{Kind: "cuckoo"}, "kind cuckoo given, but the crawl was created with kind bloom"},
		{"bad id", "bad id", frontier.CrawlSettings{}, "bad crawl id"},
	} {
		rec, err := s.Create(ctx, tt.id, tt.given, def)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: %v, want an error containing %q", tt.name, err, tt.err)
		case tt.err == "" && rec.Settings != want:
			t.Errorf("%s: record %+v, want settings %+v", tt.name, rec, want)
		}
	}
	if rec, err := reg.Get(ctx, "a"); err != nil || rec.Settings != want || rec.Incarnation != incarnation {
		t.Errorf("stored after refused creators: %+v, %v; want settings %+v, incarnation %q", rec, err, want, incarnation)
	}

	// A record from before crawls had settings (seeds only) takes the
	// first settings given.
	if _, err := s.Seed(ctx, "old", []string{"https://old.example/"}); err != nil {
		t.Fatal(err)
	}
	rec, err = s.Create(ctx, "old", frontier.CrawlSettings{FPP: 0.0001}, def)
	if err != nil || rec.Settings.FPP != 0.0001 || rec.Settings.ExpectURLs != def.ExpectURLs || len(rec.Seeds) != 1 || rec.Incarnation != "" {
		t.Errorf("settings for an old record: %+v, %v; want no incarnation (its URLs keep their IDs)", rec, err)
	}
}

// TestSeed checks what a seed call records and publishes, and that a
// refused one does neither.
func TestSeed(t *testing.T) {
	ctx := t.Context()
	for _, tt := range []struct {
		name     string
		id       string
		seeds    []string
		settings *frontier.CrawlSettings // SeedWith these over def; nil: Seed
		err      error
	}{
		{"one seed", "a", []string{"https://a.example/"}, nil, nil},
		{"with settings", "a", []string{"https://a.example/"}, &frontier.CrawlSettings{ExpectURLs: 7}, nil},
		{"no seed", "a", nil, nil, crawls.ErrBadSeed},
		{"relative", "a", []string{"https://a.example/", "/b"}, nil, crawls.ErrBadSeed},
		{"not http", "a", []string{"ftp://a.example/"}, nil, crawls.ErrBadSeed},
		{"no host", "a", []string{"https:///x"}, nil, crawls.ErrBadSeed},
		{"bad id", "a.b", []string{"https://a.example/"}, nil, crawls.ErrBadID},
		{"empty id", "", []string{"https://a.example/"}, nil, crawls.ErrBadID},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, reg, q := memStore(t)
			var err error
			if tt.settings != nil {
				_, err = s.SeedWith(ctx, tt.id, tt.seeds, *tt.settings, def)
			} else {
				_, err = s.Seed(ctx, tt.id, tt.seeds)
			}
			if !errors.Is(err, tt.err) {
				t.Fatalf("seed %q into %q: %v, want %v", tt.seeds, tt.id, err, tt.err)
			}
			list, _ := reg.List(ctx)
			if tt.err != nil {
				if len(list) != 0 || len(q.Discovered) != 0 {
					t.Errorf("refused seed left records %+v and messages %v", list, q.Discovered)
				}
				return
			}
			if len(list) != 1 || !slices.Equal(list[0].Seeds, tt.seeds) || (tt.settings != nil) != !list[0].Created.IsZero() {
				t.Errorf("records %+v; want one with seeds %q, created: %v", list, tt.seeds, tt.settings != nil)
			}
			if got := q.Discovered[tt.id]; len(got) != 1 || !slices.Equal(got[0], tt.seeds) || q.Ensured != 1 {
				t.Errorf("published %q (ensured %d); want one message of %q", got, q.Ensured, tt.seeds)
			}
		})
	}

	// Seeds merge; settings that conflict seed nothing.
	s, reg, q := memStore(t)
	for _, seeds := range [][]string{{"https://a.example/"}, {"https://b.example/", "https://a.example/"}} {
		if _, err := s.SeedWith(ctx, "m", seeds, frontier.CrawlSettings{ExpectURLs: 7}, def); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SeedWith(ctx, "m", []string{"https://c.example/"}, frontier.CrawlSettings{ExpectURLs: 8}, def); err == nil {
		t.Error("seeding with other settings: no error")
	}
	rec, _ := reg.Get(ctx, "m")
	if want := []string{"https://a.example/", "https://b.example/"}; !slices.Equal(rec.Seeds, want) || len(q.Discovered["m"]) != 2 {
		t.Errorf("seeds %q, messages %q; want %q in two messages", rec.Seeds, q.Discovered["m"], want)
	}
}

// TestDeleteInMemory runs the lifecycle on the fakes: a deleted crawl's
// queues and record go, another crawl's stay, an unknown crawl deletes
// what it has and reports no record, and the id names a new crawl at once.
func TestDeleteInMemory(t *testing.T) {
	ctx := t.Context()
	s, _, q := memStore(t)
	for _, id := range []string{"a", "b"} {
		if _, err := s.SeedWith(ctx, id, []string{"https://" + id + ".example/", "https://" + id + ".example/x"}, frontier.CrawlSettings{ExpectURLs: 5}, def); err != nil {
			t.Fatal(err)
		}
		q.Admit(id)
		if _, err := s.Seed(ctx, id, []string{"https://" + id + ".example/y"}); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := s.Describe(ctx, "a"); err != nil || d.Queued != 2 || d.Pending != 1 || d.Settings.ExpectURLs != 5 || len(d.Seeds) != 3 {
		t.Fatalf("Describe(a) = %+v, %v; want 2 queued, 1 pending", d, err)
	}
	d, err := s.Delete(ctx, "a")
	if err != nil || d.Record == nil || len(d.Record.Seeds) != 3 || d.URLs() != 2 || d.Queues.Discovered != 1 || d.Counts != nil {
		t.Fatalf("Delete(a) = %+v, %v; want its record, 2 URLs and 1 message", d, err)
	}
	if _, err := s.Describe(ctx, "a"); !errors.Is(err, crawls.ErrNotFound) {
		t.Errorf("Describe of a deleted crawl: %v, want ErrNotFound", err)
	}
	if list, err := s.List(ctx); err != nil || len(list) != 1 || list[0].ID != "b" || list[0].Queued != 2 {
		t.Errorf("List after deleting a: %+v, %v; want b as it was", list, err)
	}
	if d, err := s.Delete(ctx, "a"); err != nil || d.Record != nil || d.URLs() != 0 {
		t.Errorf("Delete of an unknown crawl = %+v, %v; want no record, nothing removed, no error", d, err)
	}
	if _, err := s.Delete(ctx, "no/such"); !errors.Is(err, crawls.ErrBadID) {
		t.Errorf("Delete of a bad id: %v, want ErrBadID", err)
	}
	// The id at once: a new crawl, with new settings and a new
	// incarnation.
	rec, err := s.SeedWith(ctx, "a", []string{"https://new.example/"}, frontier.CrawlSettings{ExpectURLs: 9}, def)
	if err != nil || rec.Settings.ExpectURLs != 9 || len(rec.Seeds) != 1 || rec.Incarnation == "" || rec.Incarnation == d.Record.Incarnation {
		t.Errorf("crawl a created again: %+v, %v; want a new incarnation (was %q)", rec, err, d.Record.Incarnation)
	}
}
