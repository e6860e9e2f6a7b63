package crawl

import "testing"

func TestCanonicalLink(t *testing.T) {
	// RFC 8288 §3: links are separated by commas, parameters by
	// semicolons; rel is a space-separated list of relation types,
	// compared case-insensitively.
	cases := []struct {
		in   []string
		want string
	}{
		{[]string{`<https://a.example/x>; rel="canonical"`}, "https://a.example/x"},
		{[]string{`<https://a.example/x>; rel=canonical`}, "https://a.example/x"},
		{[]string{`</next>; rel="next", </c>; rel="Canonical"`}, "/c"},
		{[]string{`</a>; rel="alternate canonical"; hreflang=en`}, "/a"},
		{[]string{`</style.css>; rel=preload`, `</c>; rel="canonical"`}, "/c"},
		{[]string{`</a,b>; rel="canonical"`}, "/a,b"},
		{[]string{`</x>; title="canonical"`}, ""},
		{[]string{`no angle brackets; rel=canonical`}, ""},
		{[]string{`<unterminated; rel=canonical`}, ""},
		{nil, ""},
	}
	for _, c := range cases {
		if got := canonicalLink(c.in); got != c.want {
			t.Errorf("canonicalLink(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
