package normalize

import (
	"errors"
	"net/url"
	"slices"
	"testing"
)

// fuzzBases are the pages FuzzURL resolves its input against.
var fuzzBases = []string{
	rfcBase,
	"https://Example.COM:443/x/y/?q#f",
	"http://[::1]:8080/a%2Fb/c;jsessionid=1",
	"http://example.com",
}

// FuzzURL checks, for any input, as a URL and as a link on each of
// fuzzBases: no panic; deterministic (same result twice); a rejection is an
// *Error with a known Reason wrapping its sentinel; a result is idempotent
// (its canonical form is itself), no longer than the limit, and parses with
// net/url as an http(s) URL with a host; and Resolve equals canonicalizing
// the RFC 3986 §5.2 resolution. The input is also the base of fuzzRefs.
func FuzzURL(f *testing.F) {
	for _, c := range policyCases {
		f.Add(c.in)
	}
	for _, c := range rfcExamples {
		f.Add(c.ref)
	}
	n, err := New(Options{})
	if err != nil {
		f.Fatal(err)
	}
	small, err := New(Options{MaxLength: 64, StripParams: []string{"a*"}, SessionParams: []string{"s"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, n := range []*Normalizer{n, small} {
			got, err := n.URL(in)
			checkProperties(t, n, "URL", in, got, err)
			if again, err2 := n.URL(in); again != got || reasonOf(err2) != reasonOf(err) {
				t.Fatalf("URL(%q) = %q, %v, then %q, %v: not deterministic", in, got, err, again, err2)
			}
			for _, base := range fuzzBases {
				got, err := n.Resolve(base, in)
				checkProperties(t, n, "Resolve", in, got, err)
				if again, err2 := n.Resolve(base, in); again != got || reasonOf(err2) != reasonOf(err) {
					t.Fatalf("Resolve(%q, %q) = %q, %v, then %q, %v: not deterministic", base, in, got, err, again, err2)
				}
				if err != nil {
					continue
				}
				b, _ := clean(base)
				r, _ := clean(in)
				target := resolve(parseReference(b), parseReference(r), false, true).String()
				if len(target) > n.maxLen {
					continue // the resolution may be longer than the limit, its canonical form not
				}
				if u, err := n.URL(target); err != nil || u != got {
					t.Fatalf("Resolve(%q, %q) = %q, but URL(%q) = %q, %v", base, in, got, target, u, err)
				}
			}
			// The input as the base of a few references.
			for _, ref := range fuzzRefs {
				got, err := n.Resolve(in, ref)
				checkProperties(t, n, "Resolve", in+" + "+ref, got, err)
			}
		}
	})
}

// fuzzRefs are the references FuzzURL resolves against its input.
var fuzzRefs = []string{"", "g", "../x/./y?b=1&a=2#f", "//h.example/p", "?q"}

func reasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func checkProperties(t *testing.T, n *Normalizer, fn, in, got string, err error) {
	t.Helper()
	if err != nil {
		var e *Error
		if !errors.As(err, &e) || !slices.Contains(Reasons(), e.Reason) || !errors.Is(err, e.Reason.sentinel()) || got != "" {
			t.Fatalf("%s(%q) = %q, %v: want an *Error with a known Reason", fn, in, got, err)
		}
		return
	}
	if len(got) > n.maxLen {
		t.Fatalf("%s(%q) = %q: %d bytes, limit %d", fn, in, got, len(got), n.maxLen)
	}
	if again, err := n.URL(got); err != nil || again != got {
		t.Fatalf("%s(%q) = %q, but URL(%q) = %q, %v: not idempotent", fn, in, got, got, again, err)
	}
	u, err := url.Parse(got)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" || u.User != nil {
		t.Fatalf("%s(%q) = %q: net/url reads %#v, %v", fn, in, got, u, err)
	}
}
