package frontier_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sievecrawl/sieve/frontier"
)

func TestDiscoveredRoundTrip(t *testing.T) {
	tests := []frontier.Discovered{
		{Crawl: "default", URL: "https://example.com/a/", Depth: 1, Base: "/b/", Links: []string{"c.html", "../d?x=1", "https://other.example/"}},
		{Crawl: "c-1_x", Kind: frontier.KindSeed, Links: []string{"https://example.com/"}},
		{Crawl: "c", URL: "https://example.com/old", Kind: frontier.KindRedirect, Depth: 3, Links: []string{"/new"}},
		{Crawl: "c", URL: "https://example.com/", Links: nil},
	}
	for _, d := range tests {
		data, err := d.Encode()
		if err != nil {
			t.Fatalf("Encode(%+v): %v", d, err)
		}
		got, err := frontier.DecodeDiscovered(data, frontier.Limits{})
		if err != nil {
			t.Fatalf("DecodeDiscovered(%s): %v", data, err)
		}
		if got.V != frontier.Version || got.Crawl != d.Crawl || got.URL != d.URL || got.Base != d.Base ||
			got.Depth != d.Depth || got.Kind != d.Kind || strings.Join(got.Links, "\n") != strings.Join(d.Links, "\n") {
			t.Errorf("round trip of %+v = %+v", d, got)
		}
	}
}

// TestDiscoveredWireFormat pins the JSON field names, which crawlers and
// workers of different builds share.
func TestDiscoveredWireFormat(t *testing.T) {
	d := frontier.Discovered{Crawl: "default", URL: "https://example.com/a/", Base: "/b/", Depth: 1, Kind: frontier.KindPage, Links: []string{"c"}}
	data, _ := d.Encode()
	want := `{"v":1,"crawl":"default","url":"https://example.com/a/","base":"/b/","depth":1,"kind":"page","links":["c"]}`
	if string(data) != want {
		t.Errorf("Encode = %s, want %s", data, want)
	}
	e := frontier.Entry{Crawl: "default", URL: "https://example.com/c", Depth: 2, From: "https://example.com/a/"}
	data, _ = e.Encode()
	want = `{"v":1,"crawl":"default","url":"https://example.com/c","depth":2,"from":"https://example.com/a/"}`
	if string(data) != want {
		t.Errorf("Entry.Encode = %s, want %s", data, want)
	}
	back, err := frontier.DecodeEntry(data)
	if err != nil || back.URL != e.URL || back.Depth != 2 || back.From != e.From || back.Crawl != "default" {
		t.Errorf("DecodeEntry(%s) = %+v, %v", data, back, err)
	}
}

func TestDecodeDiscoveredPoison(t *testing.T) {
	big := `{"v":1,"crawl":"c","url":"https://e/","links":["` + strings.Repeat("x", 2000) + `"]}`
	many := `{"v":1,"crawl":"c","url":"https://e/","links":["a","b","c","d"]}`
	tests := []struct {
		name, data, reason string
	}{
		{"empty", ``, frontier.PoisonMalformed},
		{"not json", `hello`, frontier.PoisonMalformed},
		{"truncated", `{"v":1,"crawl":"c","url":"x","links":["a"`, frontier.PoisonMalformed},
		{"links not strings", `{"v":1,"crawl":"c","url":"https://e/","links":[1,2]}`, frontier.PoisonMalformed},
		{"array", `[1,2,3]`, frontier.PoisonMalformed},
		{"no version", `{"crawl":"c","url":"https://e/","links":[]}`, frontier.PoisonVersion},
		{"future version", `{"v":2,"crawl":"c","url":"https://e/","links":[]}`, frontier.PoisonVersion},
		{"no crawl", `{"v":1,"url":"https://e/","links":[]}`, frontier.PoisonCrawl},
		{"crawl with dot", `{"v":1,"crawl":"a.b","url":"https://e/","links":[]}`, frontier.PoisonCrawl},
		{"crawl wildcard", `{"v":1,"crawl":"*","url":"https://e/","links":[]}`, frontier.PoisonCrawl},
		{"unknown kind", `{"v":1,"crawl":"c","url":"https://e/","kind":"sitemap","links":[]}`, frontier.PoisonKind},
		{"page without url", `{"v":1,"crawl":"c","links":["https://e/"]}`, frontier.PoisonURL},
		{"negative depth", `{"v":1,"crawl":"c","url":"https://e/","depth":-1,"links":[]}`, frontier.PoisonDepth},
		{"huge depth", `{"v":1,"crawl":"c","url":"https://e/","depth":99999999,"links":[]}`, frontier.PoisonDepth},
		{"too large", big, frontier.PoisonTooLarge},
		{"too many links", many, frontier.PoisonTooManyLinks},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := frontier.DecodeDiscovered([]byte(tt.data), frontier.Limits{MaxBytes: 1024, MaxLinks: 3})
			var pe *frontier.PoisonError
			if !errors.As(err, &pe) {
				t.Fatalf("DecodeDiscovered(%.40q) = %v, want a *PoisonError", tt.data, err)
			}
			if pe.Reason != tt.reason {
				t.Errorf("DecodeDiscovered(%.40q) reason = %q, want %q (%v)", tt.data, pe.Reason, tt.reason, err)
			}
			if !errors.Is(err, frontier.ErrPoison) {
				t.Errorf("error %v does not match ErrPoison", err)
			}
		})
	}
}

func TestLinkDepth(t *testing.T) {
	tests := []struct {
		kind        frontier.Kind
		depth, want int
	}{
		{"", 2, 3},
		{frontier.KindPage, 0, 1},
		{frontier.KindRedirect, 2, 2},
		{frontier.KindSeed, 0, 0},
	}
	for _, tt := range tests {
		d := frontier.Discovered{Kind: tt.kind, Depth: tt.depth}
		if got := d.LinkDepth(); got != tt.want {
			t.Errorf("Discovered{Kind: %q, Depth: %d}.LinkDepth() = %d, want %d", tt.kind, tt.depth, got, tt.want)
		}
	}
}

func TestSplit(t *testing.T) {
	d := frontier.Discovered{Crawl: "c", URL: "https://e/", Links: []string{"1", "2", "3", "4", "5"}}
	parts := d.Split(2)
	if len(parts) != 3 {
		t.Fatalf("Split(2) gave %d parts, want 3", len(parts))
	}
	var all []string
	for _, p := range parts {
		if p.URL != d.URL || p.Crawl != d.Crawl || len(p.Links) > 2 {
			t.Errorf("part %+v", p)
		}
		all = append(all, p.Links...)
	}
	if strings.Join(all, "") != "12345" {
		t.Errorf("parts' links = %v", all)
	}
	if got := d.Split(0); len(got) != 1 {
		t.Errorf("Split(0) gave %d parts, want 1 (default limit)", len(got))
	}
}

// TestMsgIDPinned pins the frontier message ID (values computed with
// Python hashlib, independently of this code): it is how JetStream
// recognises a republished URL, also across worker versions.
func TestMsgIDPinned(t *testing.T) {
	tests := []struct{ url, want string }{
		{"https://example.com/", "DxFdsGK3wN0DCxaHjJnepQ"},
		{"https://example.com/a?b=c", "4FEvKRgNEa3MI487rhr5Xw"},
	}
	for _, tt := range tests {
		if got := frontier.MsgID(tt.url); got != tt.want {
			t.Errorf("MsgID(%q) = %q, want %q", tt.url, got, tt.want)
		}
	}
}

func FuzzDecodeDiscovered(f *testing.F) {
	f.Add([]byte(`{"v":1,"crawl":"c","url":"https://e/","links":["a","b"]}`))
	f.Add([]byte(`{"v":1,"crawl":"c","kind":"seed","links":["https://e/"]}`))
	f.Add([]byte(`{"v":1,"crawl":"c","url":"https://e/","depth":-1}`))
	f.Add([]byte(`{"v":1,"crawl":"c","url":"\u0000","links":["\ud800"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := frontier.DecodeDiscovered(data, frontier.Limits{MaxBytes: 4096, MaxLinks: 50})
		if err != nil {
			if !errors.Is(err, frontier.ErrPoison) {
				t.Fatalf("DecodeDiscovered error %v is not poison", err)
			}
			return
		}
		again, err := d.Encode()
		if err != nil {
			t.Fatalf("Encode of a decoded message: %v", err)
		}
		d2, err := frontier.DecodeDiscovered(again, frontier.Limits{MaxBytes: 1 << 20, MaxLinks: 50})
		if err != nil {
			t.Fatalf("re-decoding %s: %v", again, err)
		}
		if d2.URL != d.URL || d2.Crawl != d.Crawl || len(d2.Links) != len(d.Links) || d2.LinkDepth() != d.LinkDepth() {
			t.Fatalf("re-decoded %+v, first %+v", d2, d)
		}
	})
}
