package normalize

import (
	"errors"
	"testing"
)

// rfcBase is the base URI of RFC 3986 §5.4.
const rfcBase = "http://a/b/c/d;p?q"

// rfcExamples are all the examples of RFC 3986 §5.4: rfc is the RFC's
// answer, want Sieve's canonical form of it (or the Reason it is rejected).
var rfcExamples = []struct {
	ref    string
	rfc    string
	want   string
	reason Reason
}{
	// §5.4.1 Normal Examples
	{ref: "g:h", rfc: "g:h", reason: ReasonScheme},
	{ref: "g", rfc: "http://a/b/c/g", want: "http://a/b/c/g"},
	{ref: "./g", rfc: "http://a/b/c/g", want: "http://a/b/c/g"},
	{ref: "g/", rfc: "http://a/b/c/g/", want: "http://a/b/c/g/"},
	{ref: "/g", rfc: "http://a/g", want: "http://a/g"},
	{ref: "//g", rfc: "http://g", want: "http://g/"},
	{ref: "?y", rfc: "http://a/b/c/d;p?y", want: "http://a/b/c/d;p?y"},
	{ref: "g?y", rfc: "http://a/b/c/g?y", want: "http://a/b/c/g?y"},
	{ref: "#s", rfc: "http://a/b/c/d;p?q#s", want: "http://a/b/c/d;p?q"},
	{ref: "g#s", rfc: "http://a/b/c/g#s", want: "http://a/b/c/g"},
	{ref: "g?y#s", rfc: "http://a/b/c/g?y#s", want: "http://a/b/c/g?y"},
	{ref: ";x", rfc: "http://a/b/c/;x", want: "http://a/b/c/;x"},
	{ref: "g;x", rfc: "http://a/b/c/g;x", want: "http://a/b/c/g;x"},
	{ref: "g;x?y#s", rfc: "http://a/b/c/g;x?y#s", want: "http://a/b/c/g;x?y"},
	{ref: "", rfc: "http://a/b/c/d;p?q", want: "http://a/b/c/d;p?q"},
	{ref: ".", rfc: "http://a/b/c/", want: "http://a/b/c/"},
	{ref: "./", rfc: "http://a/b/c/", want: "http://a/b/c/"},
	{ref: "..", rfc: "http://a/b/", want: "http://a/b/"},
	{ref: "../", rfc: "http://a/b/", want: "http://a/b/"},
	{ref: "../g", rfc: "http://a/b/g", want: "http://a/b/g"},
	{ref: "../..", rfc: "http://a/", want: "http://a/"},
	{ref: "../../", rfc: "http://a/", want: "http://a/"},
	{ref: "../../g", rfc: "http://a/g", want: "http://a/g"},
	// §5.4.2 Abnormal Examples
	{ref: "../../../g", rfc: "http://a/g", want: "http://a/g"},
	{ref: "../../../../g", rfc: "http://a/g", want: "http://a/g"},
	{ref: "/./g", rfc: "http://a/g", want: "http://a/g"},
	{ref: "/../g", rfc: "http://a/g", want: "http://a/g"},
	{ref: "g.", rfc: "http://a/b/c/g.", want: "http://a/b/c/g."},
	{ref: ".g", rfc: "http://a/b/c/.g", want: "http://a/b/c/.g"},
	{ref: "g..", rfc: "http://a/b/c/g..", want: "http://a/b/c/g.."},
	{ref: "..g", rfc: "http://a/b/c/..g", want: "http://a/b/c/..g"},
	{ref: "./../g", rfc: "http://a/b/g", want: "http://a/b/g"},
	{ref: "./g/.", rfc: "http://a/b/c/g/", want: "http://a/b/c/g/"},
	{ref: "g/./h", rfc: "http://a/b/c/g/h", want: "http://a/b/c/g/h"},
	{ref: "g/../h", rfc: "http://a/b/c/h", want: "http://a/b/c/h"},
	{ref: "g;x=1/./y", rfc: "http://a/b/c/g;x=1/y", want: "http://a/b/c/g;x=1/y"},
	{ref: "g;x=1/../y", rfc: "http://a/b/c/y", want: "http://a/b/c/y"},
	{ref: "g?y/./x", rfc: "http://a/b/c/g?y/./x", want: "http://a/b/c/g?y/./x"},
	{ref: "g?y/../x", rfc: "http://a/b/c/g?y/../x", want: "http://a/b/c/g?y/../x"},
	{ref: "g#s/./x", rfc: "http://a/b/c/g#s/./x", want: "http://a/b/c/g"},
	{ref: "g#s/../x", rfc: "http://a/b/c/g#s/../x", want: "http://a/b/c/g"},
	// "http:g": "http://a/b/c/g" is the RFC's backward-compatible answer,
	// which Resolve gives; the strict answer is checked in TestResolveRFCStrict.
	{ref: "http:g", rfc: "http://a/b/c/g", want: "http://a/b/c/g"},
}

// TestResolveRFC checks the resolution step alone against every example of
// RFC 3986 §5.4.1 and §5.4.2, recomposed by §5.3.
func TestResolveRFC(t *testing.T) {
	base := parseReference(rfcBase)
	for _, c := range rfcExamples {
		if got := resolve(base, parseReference(c.ref), false, true).String(); got != c.rfc {
			t.Errorf("resolve(%q, %q) = %q, want %q", rfcBase, c.ref, got, c.rfc)
		}
	}
}

// TestResolveRFCStrict: §5.4.2, "http:g" = "http:g" for strict parsers.
func TestResolveRFCStrict(t *testing.T) {
	base := parseReference(rfcBase)
	if got := resolve(base, parseReference("http:g"), true, true).String(); got != "http:g" {
		t.Errorf("resolve(%q, %q, strict) = %q, want %q", rfcBase, "http:g", got, "http:g")
	}
}

// TestResolve checks Resolve, resolution then canonicalization, on the same
// examples.
func TestResolve(t *testing.T) {
	n, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rfcExamples {
		got, err := n.Resolve(rfcBase, c.ref)
		checkResult(t, "Resolve", c.ref, got, err, c.want, c.reason)
		if c.reason == "" {
			// Resolving then canonicalizing is canonicalizing the RFC's answer.
			if u, err := n.URL(c.rfc); err != nil || u != got {
				t.Errorf("URL(%q) = %q, %v, want %q (= Resolve(%q, %q))", c.rfc, u, err, got, rfcBase, c.ref)
			}
		}
	}
}

// TestResolveLinks covers links as crawlers meet them, beyond §5.4.
func TestResolveLinks(t *testing.T) {
	n, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	const page = "https://docs.Example.org:443/en/3/library/os.html?x=1#top"
	cases := []struct {
		base, ref, want string
		reason          Reason
	}{
		// The colly measurement: a page and its own sections are one URL.
		{page, "#os.getcwd", "https://docs.example.org/en/3/library/os.html?x=1", ""},
		{page, "os.html#os.getcwd", "https://docs.example.org/en/3/library/os.html", ""},
		{page, "./os.html?utm_source=nav", "https://docs.example.org/en/3/library/os.html", ""},
		{page, "../../3/library/os.path.html", "https://docs.example.org/en/3/library/os.path.html", ""},
		{page, "HTTPS://DOCS.EXAMPLE.ORG/en/3/", "https://docs.example.org/en/3/", ""},
		{page, "  \n  sys.html\n", "https://docs.example.org/en/3/library/sys.html", ""},
		{page, `..\index.html`, "https://docs.example.org/en/3/index.html", ""}, // WHATWG: '\' is '/'
		{page, "//cdn.example.org/a.js", "https://cdn.example.org/a.js", ""},
		{page, "http://other.example/", "http://other.example/", ""},
		{page, "https:other.html", "https://docs.example.org/en/3/library/other.html", ""}, // RFC 3986 §5.2.2 non-strict
		{page, "http:other.html", "", ReasonNoHost},                                        // another scheme: absolute, no host
		{page, "mailto:docs@example.org", "", ReasonScheme},
		{page, "javascript:void(0)", "", ReasonScheme},
		{page, "tel:+15550100", "", ReasonScheme},
		{page, "data:image/png;base64,AAAA", "", ReasonScheme},
		{page, "http://exa mple.com/", "", ReasonHost},
		{page, "a\x00b", "", ReasonControl},
		// A base with an empty path (RFC 3986 §5.2.3, first case of merge).
		{"http://example.com", "a", "http://example.com/a", ""},
		{"http://example.com?q", "?r", "http://example.com/?r", ""},
		// The base is canonicalized along with the result.
		{"http://Example.com/a/%7Eb/c;jsessionid=1?utm_source=x", "", "http://example.com/a/~b/c", ""},
		{"http://Example.com/a/%7Eb/c;jsessionid=1?utm_source=x", "d", "http://example.com/a/~b/d", ""},
		// Invalid bases are reported as such, with the base as URL.
		{"/relative", "a", "", ReasonBase},
		{"mailto:x@example.com", "a", "", ReasonBase},
		{"http:/no-authority", "a", "", ReasonBase},
		{"http://bad host/", "a", "", ReasonBase},
		{"http://bad\x01/", "a", "", ReasonBase},
		{"http://example.com:99999/", "a", "", ReasonBase},
		{"http://bad host/", "http:g", "", ReasonBase}, // same scheme, no authority: relative
		// … unless the reference does not use it.
		{"http://bad host/", "http://good.example/", "http://good.example/", ""},
	}
	for _, c := range cases {
		got, err := n.Resolve(c.base, c.ref)
		checkResult(t, "Resolve", c.base+" + "+c.ref, got, err, c.want, c.reason)
		var e *Error
		if c.reason == ReasonBase && errors.As(err, &e) && e.URL != c.base {
			t.Errorf("Resolve(%q, %q): Error.URL = %q, want the base", c.base, c.ref, e.URL)
		}
	}
}
