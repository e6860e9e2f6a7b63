package frontier_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sievecrawl/sieve/frontier"
)

// richLinks is a version 2 message whose links carry every attribute.
var richLinks = frontier.Discovered{Crawl: "c", URL: "https://example.com/", Links: []string{"/a", "/b", "/c", "/d"},
	Attrs: []frontier.LinkAttrs{
		{I: 1, Kind: frontier.LinkSitemap},
		{I: 2, Key: "partners", Meta: frontier.Metadata{"lang": {"en", "fr"}, "empty": {}}},
		{I: 3, Kind: frontier.LinkExternal, Key: "other.example:8080"},
	}}

func TestDiscoveredRoundTrip(t *testing.T) {
	tests := []frontier.Discovered{
		{Crawl: "default", URL: "https://example.com/a/", Depth: 1, Base: "/b/", Links: []string{"c.html", "../d?x=1", "https://other.example/"}},
		{Crawl: "c-1_x", Kind: frontier.KindSeed, Links: []string{"https://example.com/"}},
		{Crawl: "c", URL: "https://example.com/old", Kind: frontier.KindRedirect, Depth: 3, Links: []string{"/new"}},
		{Crawl: "c", URL: "https://example.com/"}, // no links
		richLinks,
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
		d.V = frontier.Version
		if !reflect.DeepEqual(got, d) {
			t.Errorf("DecodeDiscovered(%s) = %+v, want %+v", data, got, d)
		}
	}
}

// TestWireFormatV2 pins the version 2 encoding, byte for byte: crawlers and
// workers of different builds share it, and the streams keep it.
func TestWireFormatV2(t *testing.T) {
	tests := []struct {
		name string
		msg  interface{ Encode() ([]byte, error) }
		want string
	}{
		// Plain links: the version 1 layout with "v":2, no attrs.
		{"plain page", frontier.Discovered{Crawl: "default", URL: "https://example.com/a/", Base: "/b/", Depth: 1, Kind: frontier.KindPage, Links: []string{"c"}},
			`{"v":2,"crawl":"default","url":"https://example.com/a/","base":"/b/","depth":1,"kind":"page","links":["c"]}`},
		// Links with attributes: the sparse attrs list, by index.
		{"attributed links", richLinks,
			`{"v":2,"crawl":"c","url":"https://example.com/","depth":0,"links":["/a","/b","/c","/d"],"attrs":[` +
				`{"i":1,"kind":"sitemap"},{"i":2,"key":"partners","meta":{"empty":[],"lang":["en","fr"]}},` +
				`{"i":3,"kind":"external","key":"other.example:8080"}]}`},
		// An entry of a plain link: the version 1 layout with "v":2.
		{"plain entry", frontier.Entry{Crawl: "default", URL: "https://example.com/c", Depth: 2, From: "https://example.com/a/"},
			`{"v":2,"crawl":"default","url":"https://example.com/c","depth":2,"from":"https://example.com/a/"}`},
		// An entry with every field.
		{"full entry", frontier.Entry{Crawl: "default", URL: "https://example.com/c", Depth: 2, From: "https://example.com/a/",
			Kind: frontier.LinkSitemap, Key: "partners", Meta: frontier.Metadata{"lang": {"en"}}},
			`{"v":2,"crawl":"default","url":"https://example.com/c","depth":2,"from":"https://example.com/a/","kind":"sitemap","key":"partners","meta":{"lang":["en"]}}`},
	}
	for _, tt := range tests {
		data, err := tt.msg.Encode()
		if err != nil || string(data) != tt.want {
			t.Errorf("%s: Encode = %s, %v, want %s", tt.name, data, err, tt.want)
		}
	}
}

// TestReadVersion1 pins that messages of format 1, as earlier builds wrote
// them and streams may still hold, read with the version 2 defaults.
func TestReadVersion1(t *testing.T) {
	discovered := []struct {
		data string
		want frontier.Discovered
		kind frontier.LinkKind // of every link
	}{
		// A page: its links are plain, keyed by host.
		{`{"v":1,"crawl":"default","url":"https://example.com/a/","base":"/b/","depth":1,"kind":"page","links":["c"]}`,
			frontier.Discovered{V: 1, Crawl: "default", URL: "https://example.com/a/", Base: "/b/", Depth: 1, Kind: frontier.KindPage, Links: []string{"c"}},
			frontier.LinkPlain},
		// A redirect: its link is a redirect.
		{`{"v":1,"crawl":"c","url":"https://example.com/old","depth":3,"kind":"redirect","links":["/new"]}`,
			frontier.Discovered{V: 1, Crawl: "c", URL: "https://example.com/old", Depth: 3, Kind: frontier.KindRedirect, Links: []string{"/new"}},
			frontier.LinkRedirect},
		// Seeds are plain links.
		{`{"v":1,"crawl":"c","depth":0,"kind":"seed","links":["https://example.com/"]}`,
			frontier.Discovered{V: 1, Crawl: "c", Kind: frontier.KindSeed, Links: []string{"https://example.com/"}},
			frontier.LinkPlain},
		// Version 2 fields in a version 1 message are ignored, even invalid ones.
		{`{"v":1,"crawl":"c","url":"https://e/","links":["a"],"attrs":[{"i":7,"kind":"bogus"}]}`,
			frontier.Discovered{V: 1, Crawl: "c", URL: "https://e/", Links: []string{"a"}},
			frontier.LinkPlain},
	}
	for _, tt := range discovered {
		got, err := frontier.DecodeDiscovered([]byte(tt.data), frontier.Limits{})
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("DecodeDiscovered(%s) = %+v, %v, want %+v", tt.data, got, err, tt.want)
			continue
		}
		for i := range got.Links {
			if l := got.Link(i); l.Kind != tt.kind || l.Key != "" || l.Meta != nil {
				t.Errorf("DecodeDiscovered(%s).Link(%d) = %+v, want kind %q, no key, no metadata", tt.data, i, l, tt.kind)
			}
		}
	}

	entries := []struct {
		data string
		want frontier.Entry
	}{
		// The version 1 layout.
		{`{"v":1,"crawl":"default","url":"https://example.com/c","depth":2,"from":"https://example.com/a/"}`,
			frontier.Entry{V: 1, Crawl: "default", URL: "https://example.com/c", Depth: 2, From: "https://example.com/a/"}},
		// Version 2 fields in a version 1 entry are ignored.
		{`{"v":1,"crawl":"c","url":"https://Example.com:8080/","depth":0,"kind":"bogus","key":"k","meta":{"":[]}}`,
			frontier.Entry{V: 1, Crawl: "c", URL: "https://Example.com:8080/"}},
	}
	for _, tt := range entries {
		got, err := frontier.DecodeEntry([]byte(tt.data))
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("DecodeEntry(%s) = %+v, %v, want %+v", tt.data, got, err, tt.want)
			continue
		}
		if got.LinkKind() != frontier.LinkPlain || got.QueueKey() != frontier.HostKey(got.URL) {
			t.Errorf("DecodeEntry(%s): kind %q, queue key %q, want link and the host", tt.data, got.LinkKind(), got.QueueKey())
		}
	}
}

// checkPoison fails unless err is a *PoisonError with the reason, counted
// from the start (PoisonReasons).
func checkPoison(tb testing.TB, what string, err error, reason string) {
	tb.Helper()
	var pe *frontier.PoisonError
	if !errors.As(err, &pe) {
		tb.Fatalf("%s = %v, want a *PoisonError", what, err)
	}
	if pe.Reason != reason {
		tb.Errorf("%s reason = %q, want %q (%v)", what, pe.Reason, reason, err)
	}
	if !errors.Is(err, frontier.ErrPoison) {
		tb.Errorf("%s: error %v does not match ErrPoison", what, err)
	}
	if !slices.Contains(frontier.PoisonReasons(), pe.Reason) {
		tb.Errorf("%s: reason %q is not in PoisonReasons, so its counter starts late", what, pe.Reason)
	}
}

// Oversized version 2 fields.
var (
	longKey      = strings.Repeat("k", frontier.MaxKeyBytes+1)
	maxKey       = strings.Repeat("k", frontier.MaxKeyBytes)
	manyNames    = metaJSON(frontier.MaxMetaKeys+1, 1, 1)
	manyValues   = metaJSON(1, frontier.MaxMetaValues+1, 1)
	bigValues    = metaJSON(2, 2, frontier.MaxMetaBytes/4)
	boundedNames = metaJSON(frontier.MaxMetaKeys, 1, 1)
)

// metaJSON returns a JSON metadata object of names names, each with values
// values of size bytes.
func metaJSON(names, values, size int) string {
	var b strings.Builder
	b.WriteByte('{')
	for n := range names {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"n` + strings.Repeat("x", n) + `":[`)
		for v := range values {
			if v > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"` + strings.Repeat("v", size) + `"`)
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
	return b.String()
}

func TestDecodeDiscoveredPoison(t *testing.T) {
	big := `{"v":1,"crawl":"c","url":"https://e/","links":["` + strings.Repeat("x", 2000) + `"]}`
	many := `{"v":1,"crawl":"c","url":"https://e/","links":["a","b","c","d"]}`
	v2 := func(attrs string) string {
		return `{"v":2,"crawl":"c","url":"https://e/","links":["a","b"],"attrs":[` + attrs + `]}`
	}
	tests := []struct {
		name, data, reason string
	}{
		{"empty", ``, frontier.PoisonMalformed},
		{"not json", `hello`, frontier.PoisonMalformed},
		{"truncated", `{"v":1,"crawl":"c","url":"x","links":["a"`, frontier.PoisonMalformed},
		{"links not strings", `{"v":1,"crawl":"c","url":"https://e/","links":[1,2]}`, frontier.PoisonMalformed},
		{"array", `[1,2,3]`, frontier.PoisonMalformed},
		{"no version", `{"crawl":"c","url":"https://e/","links":[]}`, frontier.PoisonVersion},
		{"future version", `{"v":3,"crawl":"c","url":"https://e/","links":[]}`, frontier.PoisonVersion},
		{"no crawl", `{"v":1,"url":"https://e/","links":[]}`, frontier.PoisonCrawl},
		{"crawl with dot", `{"v":1,"crawl":"a.b","url":"https://e/","links":[]}`, frontier.PoisonCrawl},
		{"crawl wildcard", `{"v":1,"crawl":"*","url":"https://e/","links":[]}`, frontier.PoisonCrawl},
		// A link kind is not a message kind.
		{"unknown kind", `{"v":2,"crawl":"c","url":"https://e/","kind":"sitemap","links":[]}`, frontier.PoisonKind},
		{"page without url", `{"v":1,"crawl":"c","links":["https://e/"]}`, frontier.PoisonURL},
		{"negative depth", `{"v":1,"crawl":"c","url":"https://e/","depth":-1,"links":[]}`, frontier.PoisonDepth},
		{"huge depth", `{"v":1,"crawl":"c","url":"https://e/","depth":99999999,"links":[]}`, frontier.PoisonDepth},
		{"too large", big, frontier.PoisonTooLarge},
		{"too many links", many, frontier.PoisonTooManyLinks},
		// Attrs name links by index, each at most once, in order.
		{"attrs past the links", v2(`{"i":2,"key":"k"}`), frontier.PoisonMalformed},
		{"attrs negative index", v2(`{"i":-1,"key":"k"}`), frontier.PoisonMalformed},
		{"attrs twice", v2(`{"i":0,"key":"k"},{"i":0,"key":"l"}`), frontier.PoisonMalformed},
		{"attrs out of order", v2(`{"i":1,"key":"k"},{"i":0,"key":"l"}`), frontier.PoisonMalformed},
		{"attrs not objects", v2(`1`), frontier.PoisonMalformed},
		{"unknown link kind", v2(`{"i":0,"kind":"image"}`), frontier.PoisonKind},
		{"link kind is a message kind", v2(`{"i":0,"kind":"page"}`), frontier.PoisonKind},
		{"long key", v2(`{"i":1,"key":"` + longKey + `"}`), frontier.PoisonKey},
		{"metadata names", v2(`{"i":0,"meta":` + manyNames + `}`), frontier.PoisonMeta},
		{"metadata values", v2(`{"i":0,"meta":` + manyValues + `}`), frontier.PoisonMeta},
		{"metadata bytes", v2(`{"i":0,"meta":` + bigValues + `}`), frontier.PoisonMeta},
		{"empty metadata name", v2(`{"i":0,"meta":{"":["x"]}}`), frontier.PoisonMeta},
		{"metadata not strings", v2(`{"i":0,"meta":{"a":[1]}}`), frontier.PoisonMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := frontier.DecodeDiscovered([]byte(tt.data), frontier.Limits{MaxBytes: 1 << 14, MaxLinks: 3})
			if tt.reason == frontier.PoisonTooLarge {
				_, err = frontier.DecodeDiscovered([]byte(tt.data), frontier.Limits{MaxBytes: 1024, MaxLinks: 3})
			}
			checkPoison(t, "DecodeDiscovered("+truncate(tt.data)+")", err, tt.reason)
		})
	}
}

func truncate(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// TestDecodeBounds pins that fields at their bounds are accepted.
func TestDecodeBounds(t *testing.T) {
	tests := []string{
		`{"v":2,"crawl":"c","url":"https://e/","links":["a"],"attrs":[{"i":0,"key":"` + maxKey + `","meta":` + boundedNames + `}]}`,
		`{"v":2,"crawl":"c","url":"https://e/","links":["a"],"attrs":[{"i":0,"meta":` + metaJSON(1, frontier.MaxMetaValues, 1) + `}]}`,
		`{"v":2,"crawl":"c","url":"https://e/","links":["a"],"attrs":[{"i":0,"meta":` + metaJSON(1, 1, frontier.MaxMetaBytes-1) + `}]}`,
	}
	for _, data := range tests {
		if _, err := frontier.DecodeDiscovered([]byte(data), frontier.Limits{}); err != nil {
			t.Errorf("DecodeDiscovered(%s) = %v, want it accepted", truncate(data), err)
		}
	}
}

func TestDecodeEntryPoison(t *testing.T) {
	v2 := func(extra string) string { return `{"v":2,"crawl":"c","url":"https://e/","depth":1` + extra + `}` }
	tests := []struct {
		name, data, reason string
	}{
		{"not json", `hello`, frontier.PoisonMalformed},
		{"url not a string", `{"v":2,"crawl":"c","url":1}`, frontier.PoisonMalformed},
		{"no version", `{"crawl":"c","url":"https://e/"}`, frontier.PoisonVersion},
		{"future version", `{"v":3,"crawl":"c","url":"https://e/"}`, frontier.PoisonVersion},
		{"bad crawl", `{"v":2,"crawl":"a.b","url":"https://e/"}`, frontier.PoisonCrawl},
		{"no url", `{"v":2,"crawl":"c"}`, frontier.PoisonURL},
		{"negative depth", `{"v":2,"crawl":"c","url":"https://e/","depth":-1}`, frontier.PoisonDepth},
		{"too large", `{"v":2,"crawl":"c","url":"https://e/` + strings.Repeat("x", frontier.DefaultMaxBytes) + `"}`, frontier.PoisonTooLarge},
		{"unknown link kind", v2(`,"kind":"seed"`), frontier.PoisonKind},
		{"long key", v2(`,"key":"` + longKey + `"`), frontier.PoisonKey},
		{"metadata names", v2(`,"meta":` + manyNames), frontier.PoisonMeta},
		{"metadata values", v2(`,"meta":` + manyValues), frontier.PoisonMeta},
		{"metadata bytes", v2(`,"meta":` + bigValues), frontier.PoisonMeta},
		{"metadata not a map", v2(`,"meta":["a"]`), frontier.PoisonMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := frontier.DecodeEntry([]byte(tt.data))
			checkPoison(t, "DecodeEntry("+truncate(tt.data)+")", err, tt.reason)
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

// TestAddLink pins that Add records attributes only for links that are not
// plain, and Link gives back what Add was given.
func TestAddLink(t *testing.T) {
	tests := []struct {
		name  string
		kind  frontier.Kind
		link  frontier.Link
		attrs []frontier.LinkAttrs // what Add records
		back  frontier.Link        // what Link returns
	}{
		{"plain link", frontier.KindPage, frontier.Link{URL: "/a"},
			nil, frontier.Link{URL: "/a", Kind: frontier.LinkPlain}},
		// The default kind, spelled out, is still plain.
		{"explicit default kind", frontier.KindPage, frontier.Link{URL: "/a", Kind: frontier.LinkPlain},
			nil, frontier.Link{URL: "/a", Kind: frontier.LinkPlain}},
		{"redirect in a redirect message", frontier.KindRedirect, frontier.Link{URL: "/a", Kind: frontier.LinkRedirect},
			nil, frontier.Link{URL: "/a", Kind: frontier.LinkRedirect}},
		// A plain link in a redirect message is not the default.
		{"plain in a redirect message", frontier.KindRedirect, frontier.Link{URL: "/a", Kind: frontier.LinkPlain},
			[]frontier.LinkAttrs{{I: 1, Kind: frontier.LinkPlain}}, frontier.Link{URL: "/a", Kind: frontier.LinkPlain}},
		{"sitemap", frontier.KindSeed, frontier.Link{URL: "/a", Kind: frontier.LinkSitemap},
			[]frontier.LinkAttrs{{I: 1, Kind: frontier.LinkSitemap}}, frontier.Link{URL: "/a", Kind: frontier.LinkSitemap}},
		{"key and metadata", frontier.KindPage, frontier.Link{URL: "/a", Key: "k", Meta: frontier.Metadata{"a": {"b"}}},
			[]frontier.LinkAttrs{{I: 1, Key: "k", Meta: frontier.Metadata{"a": {"b"}}}},
			frontier.Link{URL: "/a", Kind: frontier.LinkPlain, Key: "k", Meta: frontier.Metadata{"a": {"b"}}}},
		// Empty metadata is none.
		{"empty metadata", frontier.KindPage, frontier.Link{URL: "/a", Meta: frontier.Metadata{}},
			nil, frontier.Link{URL: "/a", Kind: frontier.LinkPlain}},
	}
	for _, tt := range tests {
		d := frontier.Discovered{Crawl: "c", URL: "https://e/", Kind: tt.kind}
		d.Add(frontier.Link{URL: "/first"}) // so that indexes are not all 0
		d.Add(tt.link)
		if !reflect.DeepEqual(d.Attrs, tt.attrs) {
			t.Errorf("%s: Add(%+v) recorded %+v, want %+v", tt.name, tt.link, d.Attrs, tt.attrs)
		}
		if got := d.Link(1); !reflect.DeepEqual(got, tt.back) {
			t.Errorf("%s: Link(1) = %+v, want %+v", tt.name, got, tt.back)
		}
		if got := d.Link(0); got.Kind != d.LinkKind() || got.Key != "" || got.Meta != nil {
			t.Errorf("%s: Link(0) = %+v, want a plain link", tt.name, got)
		}
	}
}

// TestEntryFor pins the mapping from a discovered link to its frontier
// entry, which the dedup worker publishes.
func TestEntryFor(t *testing.T) {
	redirect := frontier.Discovered{Crawl: "r", URL: "https://e/old", Depth: 4, Kind: frontier.KindRedirect, Links: []string{"/new"}}
	tests := []struct {
		name string
		d    frontier.Discovered
		i    int
		want frontier.Entry
	}{
		// A plain link: the version 1 entry.
		{"plain", richLinks, 0, frontier.Entry{Crawl: "c", URL: "https://example.com/a", Depth: 1, From: "https://example.com/"}},
		{"kind", richLinks, 1, frontier.Entry{Crawl: "c", URL: "https://example.com/a", Depth: 1, From: "https://example.com/",
			Kind: frontier.LinkSitemap}},
		{"key and metadata", richLinks, 2, frontier.Entry{Crawl: "c", URL: "https://example.com/a", Depth: 1, From: "https://example.com/",
			Key: "partners", Meta: frontier.Metadata{"lang": {"en", "fr"}, "empty": {}}}},
		{"kind and key", richLinks, 3, frontier.Entry{Crawl: "c", URL: "https://example.com/a", Depth: 1, From: "https://example.com/",
			Kind: frontier.LinkExternal, Key: "other.example:8080"}},
		// A redirect keeps its depth and says it is a redirect.
		{"redirect", redirect, 0, frontier.Entry{Crawl: "r", URL: "https://example.com/a", Depth: 4, From: "https://e/old",
			Kind: frontier.LinkRedirect}},
	}
	for _, tt := range tests {
		got := tt.d.EntryFor(tt.i, "https://example.com/a")
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: EntryFor(%d) = %+v, want %+v", tt.name, tt.i, got, tt.want)
		}
	}
}

func TestSplit(t *testing.T) {
	d := frontier.Discovered{Crawl: "c", URL: "https://e/", Links: []string{"1", "2", "3", "4", "5"},
		Attrs: []frontier.LinkAttrs{{I: 1, Key: "k1"}, {I: 2, Key: "k2"}, {I: 4, Kind: frontier.LinkSitemap}}}
	parts := d.Split(2)
	if len(parts) != 3 {
		t.Fatalf("Split(2) gave %d parts, want 3", len(parts))
	}
	var all []frontier.Link
	for _, p := range parts {
		if p.URL != d.URL || p.Crawl != d.Crawl || len(p.Links) > 2 {
			t.Errorf("part %+v", p)
		}
		if _, err := p.Encode(); err != nil {
			t.Fatal(err)
		}
		for i := range p.Links {
			all = append(all, p.Link(i))
		}
	}
	// Every link keeps its attributes.
	for i, l := range all {
		if want := d.Link(i); !reflect.DeepEqual(l, want) {
			t.Errorf("link %d after Split = %+v, want %+v", i, l, want)
		}
	}
	if len(all) != len(d.Links) {
		t.Errorf("parts hold %d links, want %d", len(all), len(d.Links))
	}
	if got := d.Split(0); len(got) != 1 {
		t.Errorf("Split(0) gave %d parts, want 1 (default limit)", len(got))
	}
}

func TestHostKey(t *testing.T) {
	tests := []struct{ url, want string }{
		{"https://example.com/a", "example.com"},
		// Lower case, as the crawler's politeness keys hosts.
		{"https://EXAMPLE.com/", "example.com"},
		// A port other than the scheme's default is part of the key.
		{"https://example.com:8443/", "example.com:8443"},
		{"http://example.com:443/", "example.com:443"},
		// The default port is not (RFC 3986 §6.2.3: the same server).
		{"http://example.com:80/", "example.com"},
		{"https://example.com:443/", "example.com"},
		{"http://[::1]:8080/", "[::1]:8080"},
		{"http://[::1]/", "[::1]"},
		{"https://user@example.com/", "example.com"},
		{"mailto:me@example.com", ""},
		{"http://%zz/", ""}, // does not parse
	}
	for _, tt := range tests {
		if got := frontier.HostKey(tt.url); got != tt.want {
			t.Errorf("HostKey(%q) = %q, want %q", tt.url, got, tt.want)
		}
	}
}

func TestEntryAccessors(t *testing.T) {
	tests := []struct {
		e        frontier.Entry
		key      string
		linkKind frontier.LinkKind
	}{
		{frontier.Entry{URL: "https://Example.com:8080/a"}, "example.com:8080", frontier.LinkPlain},
		{frontier.Entry{URL: "https://example.com/", Key: "partners", Kind: frontier.LinkSitemap}, "partners", frontier.LinkSitemap},
	}
	for _, tt := range tests {
		if got := tt.e.QueueKey(); got != tt.key {
			t.Errorf("%+v.QueueKey() = %q, want %q", tt.e, got, tt.key)
		}
		if got := tt.e.LinkKind(); got != tt.linkKind {
			t.Errorf("%+v.LinkKind() = %q, want %q", tt.e, got, tt.linkKind)
		}
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

// TestEntryIDPinned pins the frontier entry's ID with and without a crawl
// incarnation (values computed with Python hashlib): workers of a crawl
// must agree on it, and a crawl created again under a deleted crawl's id
// must not share it.
func TestEntryIDPinned(t *testing.T) {
	tests := []struct{ crawl, incarnation, url, want string }{
		{"web", "", "https://example.com/", "Mb6bsFDs7zbaq-xEnWGDeA"},
		{"web", "T0K3N", "https://example.com/", "cqxtM4VxmCZ9cpuussaIZg"},
	}
	for _, tt := range tests {
		if got := frontier.EntryIDIn(tt.crawl, tt.incarnation, tt.url); got != tt.want {
			t.Errorf("EntryIDIn(%q, %q, %q) = %q, want %q", tt.crawl, tt.incarnation, tt.url, got, tt.want)
		}
	}
	if frontier.EntryIDIn("web", "", "https://example.com/") != frontier.EntryID("web", "https://example.com/") {
		t.Error("EntryIDIn without an incarnation is not EntryID")
	}
}

func FuzzDecodeDiscovered(f *testing.F) {
	f.Add([]byte(`{"v":1,"crawl":"c","url":"https://e/","links":["a","b"]}`))
	f.Add([]byte(`{"v":1,"crawl":"c","kind":"seed","links":["https://e/"]}`))
	f.Add([]byte(`{"v":1,"crawl":"c","url":"https://e/","depth":-1}`))
	f.Add([]byte(`{"v":1,"crawl":"c","url":"\u0000","links":["\ud800"]}`))
	f.Add([]byte(`{"v":2,"crawl":"c","url":"https://e/","links":["a","b"],"attrs":[{"i":0,"kind":"sitemap"},{"i":1,"key":"k","meta":{"a":["b"],"c":[]}}]}`))
	f.Add([]byte(`{"v":2,"crawl":"c","url":"https://e/","kind":"redirect","links":["a"],"attrs":[{"i":0,"kind":"link","meta":{"a":null}}]}`))
	f.Add([]byte(`{"v":2,"crawl":"c","url":"https://e/","links":["a"],"attrs":[]}`))
	f.Add([]byte(`{"v":1,"crawl":"c","url":"https://e/","links":["a"],"attrs":[{"i":3}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := frontier.DecodeDiscovered(data, frontier.Limits{MaxBytes: 8192, MaxLinks: 50})
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
		// Re-encoding a version 1 message makes it version 2, meaning the
		// same: every link keeps its kind, key and metadata.
		want := d
		want.V = frontier.Version
		if !reflect.DeepEqual(d2, want) {
			t.Fatalf("re-decoded %+v, first %+v", d2, d)
		}
		for i := range d.Links {
			l, l2 := d.Link(i), d2.Link(i)
			if !reflect.DeepEqual(l, l2) || !l.Kind.Known() || l.Kind == "" {
				t.Fatalf("link %d: %+v, re-decoded %+v", i, l, l2)
			}
			e := d.EntryFor(i, "https://e/x")
			data, err := e.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if back, err := frontier.DecodeEntry(data); err != nil || back.LinkKind() != l.Kind {
				t.Fatalf("entry of link %d (%s) = %+v, %v", i, data, back, err)
			}
		}
		// Split keeps every link with its attributes.
		var n int
		for _, p := range d.Split(3) {
			for i := range p.Links {
				if l, want := p.Link(i), d.Link(n); !reflect.DeepEqual(l, want) {
					t.Fatalf("link %d after Split = %+v, want %+v", n, l, want)
				}
				n++
			}
		}
		if n != len(d.Links) {
			t.Fatalf("Split kept %d of %d links", n, len(d.Links))
		}
	})
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add([]byte(`{"v":1,"crawl":"default","url":"https://example.com/c","depth":2,"from":"https://example.com/a/"}`))
	f.Add([]byte(`{"v":2,"crawl":"default","url":"https://example.com/c","depth":2,"from":"https://example.com/a/","kind":"sitemap","key":"partners","meta":{"lang":["en"]}}`))
	f.Add([]byte(`{"v":2,"crawl":"c","url":"http://[::1]:80/","depth":0,"meta":{}}`))
	f.Add([]byte(`{"v":2,"crawl":"c","url":"https://e/","depth":0,"kind":"bogus"}`))
	f.Add([]byte(`{"v":1,"crawl":"c","url":"https://e/","depth":0,"key":"k"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := frontier.DecodeEntry(data)
		if err != nil {
			if !errors.Is(err, frontier.ErrPoison) {
				t.Fatalf("DecodeEntry error %v is not poison", err)
			}
			return
		}
		again, err := e.Encode()
		if err != nil {
			t.Fatalf("Encode of a decoded entry: %v", err)
		}
		e2, err := frontier.DecodeEntry(again)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", again, err)
		}
		want := e
		want.V = frontier.Version
		if !reflect.DeepEqual(e2, want) {
			t.Fatalf("re-decoded %+v, first %+v", e2, e)
		}
		if e2.QueueKey() != e.QueueKey() || len(e.QueueKey()) > frontier.MaxKeyBytes && e.Key != "" {
			t.Fatalf("queue key %q, re-decoded %q", e.QueueKey(), e2.QueueKey())
		}
		var topo frontier.Topology
		if p := topo.EntryPartition(e); p < 0 || p >= frontier.DefaultPartitions {
			t.Fatalf("EntryPartition(%+v) = %d", e, p)
		}
	})
}
