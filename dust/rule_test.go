package dust

import (
	"errors"
	"testing"
)

func TestKey(t *testing.T) {
	set := NewSet([]HostRules{
		{Host: "shop.test", Rules: []Learned{
			{Rule: Rule{Kind: KindParam, Arg: "zsid"}, State: Active},
			{Rule: Rule{Kind: KindParam, Arg: "ref"}, State: Pinned},
			{Rule: Rule{Kind: KindParam, Arg: "id"}, State: Retired},
			{Rule: Rule{Kind: KindParam, Arg: "page"}, State: Candidate},
		}},
		{Host: "docs.test:8080", Rules: []Learned{
			{Rule: Rule{Kind: KindCase}, State: Active},
			{Rule: Rule{Kind: KindDupSeg}, State: Active},
			{Rule: Rule{Kind: KindIndex, Arg: "index.html"}, State: Active},
			{Rule: Rule{Kind: KindExt, Arg: ".htm"}, State: Active},
			{Rule: Rule{Kind: KindExt, Arg: ".html"}, State: Active},
			{Rule: Rule{Kind: KindSlash}, State: Active},
		}},
		{Host: "mirror.test", Rules: []Learned{
			{Rule: Rule{Kind: KindMirror, Arg: "docs.test:8080"}, State: Active},
			{Rule: Rule{Kind: KindParam, Arg: "x"}, State: Active}, // a mirror takes its target's rules, not its own
		}},
		{Host: "vetoed.test", Rules: []Learned{{Rule: Rule{Kind: KindCase}, State: Vetoed}}},
	})
	cases := []struct{ in, want string }{
		// Parameters: active and pinned ones go, whatever their place;
		// retired and candidate ones stay.
		{"http://shop.test/p?id=5&zsid=abc", "http://shop.test/p?id=5"},
		{"http://shop.test/p?ref=nav&zsid=abc&id=5", "http://shop.test/p?id=5"},
		{"http://shop.test/p?zsid=", "http://shop.test/p"},
		{"http://shop.test/list?page=2", "http://shop.test/list?page=2"},
		{"http://shop.test/p?zsidx=1", "http://shop.test/p?zsidx=1"}, // a prefix is another name
		// Path rules, in order: case, repeats, index, extension, slash.
		{"http://docs.test:8080/Guide/Intro.HTML", "http://docs.test:8080/guide/intro"},
		{"http://docs.test:8080/guide/guide/intro.htm", "http://docs.test:8080/guide/intro"},
		{"http://docs.test:8080/guide/", "http://docs.test:8080/guide"},
		{"http://docs.test:8080/guide/index.html", "http://docs.test:8080/guide"},
		{"http://docs.test:8080/Guide/INDEX.HTML", "http://docs.test:8080/guide"},
		{"http://docs.test:8080/", "http://docs.test:8080/"},
		{"http://docs.test:8080/index.html", "http://docs.test:8080/"},
		{"http://docs.test:8080/a.tar.gz", "http://docs.test:8080/a.tar.gz"},
		{"http://docs.test:8080/.htm", "http://docs.test:8080/.htm"},   // a dot file has no extension
		{"http://docs.test:8080/x?Q=A", "http://docs.test:8080/x?Q=A"}, // case is the path's only
		// A mirror is spelled on its target, under the target's rules.
		{"http://mirror.test/Guide/Intro.html", "http://docs.test:8080/guide/intro"},
		{"http://mirror.test/p?x=1", "http://docs.test:8080/p?x=1"},
		// Hosts without active rules, and what is no URL, are themselves.
		{"http://vetoed.test/A", "http://vetoed.test/A"},
		{"http://other.test/A?zsid=1", "http://other.test/A?zsid=1"},
		{"not a url", "not a url"},
	}
	for _, c := range cases {
		if got := set.Key(c.in); got != c.want {
			t.Errorf("Key(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	var empty *Set
	if got := empty.Key("http://a/B"); got != "http://a/B" {
		t.Errorf("nil Set: Key = %q", got)
	}
}

func TestParseRule(t *testing.T) {
	cases := []struct {
		in   string
		want Rule
		ok   bool
	}{
		{"param:zsid", Rule{KindParam, "zsid"}, true},
		{" case ", Rule{KindCase, ""}, true},
		{"ext:.htm", Rule{KindExt, ".htm"}, true},
		{"index:index.html", Rule{KindIndex, "index.html"}, true},
		{"slash", Rule{KindSlash, ""}, true},
		{"dupseg", Rule{KindDupSeg, ""}, true},
		{"mirror:docs.test:8080", Rule{KindMirror, "docs.test:8080"}, true},
		{"param", Rule{}, false},
		{"case:x", Rule{}, false},
		{"ext:htm", Rule{}, false},
		{"index:a/b", Rule{}, false},
		{"param:a&b", Rule{}, false},
		{"strip:x", Rule{}, false},
		{"", Rule{}, false},
	}
	for _, c := range cases {
		got, err := ParseRule(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseRule(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !errors.Is(err, ErrRule) {
			t.Errorf("ParseRule(%q): error %v does not wrap ErrRule", c.in, err)
		}
		if err == nil {
			if back, _ := ParseRule(got.String()); back != got {
				t.Errorf("ParseRule(%q).String() = %q does not read back", c.in, got.String())
			}
		}
	}
}

func TestHostRulesRecord(t *testing.T) {
	h := HostRules{Host: "shop.test", Incarnation: "i1", Revision: 2, Rules: []Learned{
		{Rule: Rule{Kind: KindParam, Arg: "zsid"}, State: Active, Support: 4, Examples: [][2]string{{"http://shop.test/?zsid=1", "http://shop.test/?zsid=2"}}},
	}}
	b, err := h.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeHostRules(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.V != RecordVersion || back.Host != h.Host || back.Revision != 2 || len(back.Rules) != 1 || back.Rules[0].Support != 4 {
		t.Errorf("DecodeHostRules(Encode()) = %+v", back)
	}
	for _, bad := range []struct {
		in   string
		want error
	}{
		{`{"v":2,"host":"a","rules":[]}`, ErrNewerRecord},
		{`{"v":1,"host":"a","rules":[{"kind":"nope","state":"active"}]}`, ErrRule},
		{`{"v":1,"rules":[]}`, nil},
		{`{`, nil},
	} {
		_, err := DecodeHostRules([]byte(bad.in))
		if err == nil || (bad.want != nil && !errors.Is(err, bad.want)) {
			t.Errorf("DecodeHostRules(%s) = %v, want %v", bad.in, err, bad.want)
		}
	}
}

// BenchmarkKey is the cost a dedup worker pays per URL for a crawl's
// rules, on a URL its host's rules leave as it is (the common case) and on
// one they rewrite, with a host without rules as the baseline.
func BenchmarkKey(b *testing.B) {
	set := NewSet([]HostRules{{Host: "shop.test", Rules: []Learned{
		{Rule: Rule{Kind: KindParam, Arg: "zsid"}, State: Active},
		{Rule: Rule{Kind: KindSlash}, State: Active}}}})
	for _, c := range []struct{ name, u string }{
		{"no rules for the host", "https://other.test/catalog/item/12345?color=red&size=9"},
		{"rules, unchanged", "https://shop.test/catalog/item/12345?color=red&size=9"},
		{"rules, rewritten", "https://shop.test/catalog/item/12345/?color=red&zsid=0af3c9&size=9"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = set.Key(c.u)
			}
		})
	}
}
