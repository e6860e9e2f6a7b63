package normalize

import "testing"

func TestScope(t *testing.T) {
	seeds := []string{"https://www.Example.co.uk/start", "http://docs.example.org:8080/", "http://192.0.2.7/", "https://user.github.io/"}
	cases := []struct {
		mode        ScopeMode
		allow, deny []string
		url         string
		want        bool
	}{
		// ScopeHost: the seeds' hosts, any scheme and port, case and IDN canonical.
		{ScopeHost, nil, nil, "https://www.example.co.uk/other", true},
		{ScopeHost, nil, nil, "http://WWW.EXAMPLE.CO.UK.:81/x", true},
		{ScopeHost, nil, nil, "https://docs.example.org/", true},
		{ScopeHost, nil, nil, "https://shop.example.co.uk/", false},
		{ScopeHost, nil, nil, "https://example.co.uk/", false},
		{ScopeHost, nil, nil, "http://0xc0.0.2.7/a", true}, // WHATWG IPv4 form of 192.0.2.7
		{ScopeHost, nil, nil, "mailto:x@www.example.co.uk", false},
		{ScopeHost, nil, nil, "/relative", false},
		{ScopeHost, nil, nil, "http://bad host/", false},
		// ScopeDomain: the seeds' registrable domains (public suffix list).
		{ScopeDomain, nil, nil, "https://shop.example.co.uk/", true},
		{ScopeDomain, nil, nil, "https://example.co.uk/", true},
		{ScopeDomain, nil, nil, "https://a.b.example.org/", true},
		{ScopeDomain, nil, nil, "https://example.com/", false},
		{ScopeDomain, nil, nil, "https://evilexample.co.uk/", false},
		{ScopeDomain, nil, nil, "https://other.co.uk/", false},                                     // co.uk is a public suffix
		{ScopeDomain, nil, nil, "https://other.github.io/", false},                                 // github.io is a (private) public suffix
		{ScopeDomain, nil, nil, "https://a.user.github.io/", true},                                 // under the seed's registrable user.github.io
		{ScopeDomain, nil, nil, "http://192.0.2.8/", false},                                        // an address is its own domain
		{ScopeDomain, nil, []string{"shop.example.co.uk"}, "https://x.shop.example.co.uk/", false}, // Deny wins
		// Allow adds domains, subdomains included; Deny wins over Allow.
		{ScopeHost, []string{"cdn.example.net"}, nil, "https://img.cdn.example.net/a.png", true},
		{ScopeHost, []string{"*.Example.NET."}, nil, "https://example.net/", true},
		{ScopeHost, []string{"example.net"}, []string{"private.example.net"}, "https://private.example.net/", false},
		{ScopeHost, []string{"bücher.example"}, nil, "https://xn--bcher-kva.example/", true},
		{ScopeHost, nil, []string{"example.org"}, "https://docs.example.org:8080/", false},
		// ScopeAny: everything but Deny.
		{ScopeAny, nil, nil, "https://anything.example/", true},
		{ScopeAny, nil, []string{".example"}, "https://anything.example/", false},
		{ScopeAny, nil, nil, "ftp://anything.example/", false},
	}
	for _, c := range cases {
		s, err := NewScope(ScopeOptions{Seeds: seeds, Mode: c.mode, Allow: c.allow, Deny: c.deny})
		if err != nil {
			t.Fatalf("NewScope(mode %d, allow %q, deny %q): %v", c.mode, c.allow, c.deny, err)
		}
		if got := s.In(c.url); got != c.want {
			t.Errorf("Scope{mode %d, allow %q, deny %q}.In(%q) = %v, want %v", c.mode, c.allow, c.deny, c.url, got, c.want)
		}
	}
}

func TestNewScopeErrors(t *testing.T) {
	for _, o := range []ScopeOptions{
		{}, // nothing in scope
		{Seeds: []string{"mailto:a@example.com"}}, // not http(s)
		{Seeds: []string{"/relative"}},            // not absolute
		{Seeds: []string{"http://bad host/"}},     // invalid host
		{Seeds: []string{"http://a/"}, Mode: 7},   // unknown mode
		{Seeds: []string{"http://a/"}, Allow: []string{""}},
		{Seeds: []string{"http://a/"}, Deny: []string{"exa mple.com"}},
		{Seeds: []string{"http://a/"}, Deny: []string{"example.com/path"}},
	} {
		if _, err := NewScope(o); err == nil {
			t.Errorf("NewScope(%+v) = nil error, want one", o)
		}
	}
}

func BenchmarkScopeIn(b *testing.B) {
	s, err := NewScope(ScopeOptions{Seeds: []string{"https://www.example.co.uk/"}, Mode: ScopeDomain})
	if err != nil {
		b.Fatal(err)
	}
	urls := []string{"https://shop.example.co.uk/a", "https://www.example.co.uk/b", "https://other.example/c"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.In(urls[i%len(urls)])
	}
}
