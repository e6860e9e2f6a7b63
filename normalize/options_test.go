package normalize

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// TestDefaultOptions: the zero Options and the explicit defaults (in any
// order and case) are policy version 1.
func TestDefaultOptions(t *testing.T) {
	reversed := DefaultStripParams()
	for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
		reversed[i], reversed[j] = reversed[j], reversed[i]
	}
	upper := DefaultSessionParams()
	for i := range upper {
		upper[i] = strings.ToUpper(upper[i])
	}
	for _, o := range []Options{
		{},
		{StripParams: DefaultStripParams(), SessionParams: DefaultSessionParams(), MaxLength: DefaultMaxLength},
		{StripParams: reversed, SessionParams: upper},
		{StripParams: append(DefaultStripParams(), "gclid")}, // duplicates do not count
	} {
		n, err := New(o)
		if err != nil {
			t.Fatalf("New(%+v): %v", o, err)
		}
		if got := n.Version(); got != PolicyVersion {
			t.Errorf("New(%+v).Version() = %q, want %q", o, got, PolicyVersion)
		}
	}
}

// TestVersion pins the version of non-default options: a dedup filter
// stores it, so its spelling is a storage format.
func TestVersion(t *testing.T) {
	cases := []struct {
		o    Options
		want string
	}{
		{Options{MaxLength: 4096}, "1+61920da6"},
		{Options{StripParams: []string{}}, "1+91559b4b"},
		{Options{StripParams: []string{"ref", "utm_*"}, SessionParams: []string{}}, "1+3f1b8ea0"},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		n, err := New(c.o)
		if err != nil {
			t.Fatal(err)
		}
		got := n.Version()
		if !regexp.MustCompile(`^1\+[0-9a-f]{8}$`).MatchString(got) || seen[got] {
			t.Errorf("New(%+v).Version() = %q, want 1+<8 hex digits>, distinct", c.o, got)
		}
		seen[got] = true
		if got != c.want {
			t.Errorf("New(%+v).Version() = %q, want %q", c.o, got, c.want)
		}
	}
}

func TestOptionsLists(t *testing.T) {
	cases := []struct {
		o       Options
		in      string
		want    string
		comment string
	}{
		{Options{StripParams: []string{}}, "http://a/?utm_source=x&sid=1", "http://a/?utm_source=x", "empty non-nil: no tracking parameters stripped"},
		{Options{SessionParams: []string{}}, "http://a/b;jsessionid=1?sid=1&utm_source=x", "http://a/b;jsessionid=1?sid=1", "empty non-nil: no session parameters stripped"},
		{Options{StripParams: []string{"ref", "x-*"}}, "http://a/?ref=1&X-Trace=2&refx=3&utm_source=4", "http://a/?refx=3&utm_source=4", "custom list with a prefix replaces the defaults"},
		{Options{SessionParams: []string{"token"}}, "http://a/b;TOKEN=1;jsessionid=2?token=3", "http://a/b;jsessionid=2", "custom session list, path and query"},
		{Options{StripParams: []string{"utm%5Fsource"}}, "http://a/?utm_source=1", "http://a/", "names are normalized like queries"},
		{Options{StripParams: []string{"*"}}, "http://a/?x=1&y=2", "http://a/", "a bare '*' strips every parameter"},
	}
	for _, c := range cases {
		n, err := New(c.o)
		if err != nil {
			t.Fatalf("%s: New: %v", c.comment, err)
		}
		if got, err := n.URL(c.in); err != nil || got != c.want {
			t.Errorf("%s: URL(%q) = %q, %v, want %q", c.comment, c.in, got, err, c.want)
		}
	}
}

func TestMaxLength(t *testing.T) {
	n, err := New(Options{MaxLength: 30})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		in, want string
		reason   Reason
	}{
		{"http://example.com/123456789ab", "http://example.com/123456789ab", ""}, // 30 bytes
		{"http://example.com/123456789abc", "", ReasonTooLong},                   // 31 bytes
		{"http://example.com/a#fragment-too-long", "", ReasonTooLong},            // as given
		{"http://example.com/é/é/é", "", ReasonTooLong},                          // canonical: 37 bytes
	}
	for _, c := range cases {
		got, err := n.URL(c.in)
		checkResult(t, "URL", c.in, got, err, c.want, c.reason)
	}
	got, err := n.Resolve("http://example.com/", "a/b/c/d/e/f/g")
	checkResult(t, "Resolve", "a/b/c/d/e/f/g", got, err, "", ReasonTooLong)
}

func TestNewErrors(t *testing.T) {
	for _, o := range []Options{
		{MaxLength: -1},
		{StripParams: []string{""}},
		{StripParams: []string{"a=b"}},
		{SessionParams: []string{"a*b"}},
		{SessionParams: []string{"a&b"}},
	} {
		if n, err := New(o); err == nil || n != nil || !strings.HasPrefix(err.Error(), "normalize: ") {
			t.Errorf("New(%+v) = %v, %v, want nil and a normalize error", o, n, err)
		}
	}
}

func TestError(t *testing.T) {
	_, err := URL("mailto:someone@example.com")
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("URL(mailto:…) error %v is not an *Error", err)
	}
	if e.URL != "mailto:someone@example.com" || e.Reason != ReasonScheme || !errors.Is(err, ErrScheme) || errors.Unwrap(err) != ErrScheme {
		t.Errorf("URL(mailto:…) error = %#v", e)
	}
	if got, want := err.Error(), `normalize: scheme is not http or https: "mailto:someone@example.com"`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	// Underlying detail is kept (IDNA), and long URLs are shortened.
	_, err = URL("http://xn--zz.com/" + strings.Repeat("a", 300))
	if !errors.Is(err, ErrHost) || !strings.Contains(err.Error(), "idna") || len(err.Error()) > 320 {
		t.Errorf("URL(bad punycode) error = %v", err)
	}
	// Resolve: a bad base is ReasonBase, wrapping ErrBase, naming the cause.
	n, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = n.Resolve("http://bad host/", "a")
	if !errors.As(err, &e) || e.Reason != ReasonBase || !errors.Is(err, ErrBase) || !strings.Contains(err.Error(), "(host)") {
		t.Errorf("Resolve(bad base) error = %v", err)
	}
}

func TestReasons(t *testing.T) {
	seen := map[Reason]bool{}
	for _, r := range Reasons() {
		if seen[r] || !regexp.MustCompile(`^[a-z_]+$`).MatchString(string(r)) {
			t.Errorf("Reason %q: duplicate or not a lowercase label", r)
		}
		seen[r] = true
		if s := r.sentinel(); !strings.HasPrefix(s.Error(), "normalize: ") || (r != ReasonBase && s == ErrBase) {
			t.Errorf("Reason %q: sentinel %v", r, s)
		}
	}
}
