package crawl

import (
	"net/url"
	"testing"
)

func TestScope(t *testing.T) {
	seeds := newSeedSet([]string{"https://www.example.com/", "http://localhost:8080/start", "http://127.0.0.1:9/"})
	tests := []struct {
		scope Scope
		url   string
		want  bool
		why   string
	}{
		{Scope{}, "https://www.example.com/a", true, ""},
		{Scope{}, "http://WWW.Example.COM./a", true, ""},     // host case, trailing dot (RFC 1034 §3.1)
		{Scope{}, "http://www.example.com:8443/a", true, ""}, // any port, either scheme
		{Scope{}, "https://blog.example.com/", false, "off_host"},
		{Scope{}, "http://localhost:9999/", true, ""},
		{Scope{}, "http://127.0.0.1:1/", true, ""},
		{Scope{}, "http://127.0.0.2/", false, "off_host"},
		{Scope{}, "ftp://www.example.com/", false, "scheme"},
		{Scope{Mode: ScopeDomain}, "https://blog.example.com/", true, ""},
		{Scope{Mode: ScopeDomain}, "https://example.com/", true, ""},
		{Scope{Mode: ScopeDomain}, "https://example.org/", false, "off_domain"},
		{Scope{Mode: ScopeDomain}, "https://evil.co.uk/", false, "off_domain"},
		{Scope{Mode: ScopeAny}, "https://anything.test/", true, ""},
		{Scope{Mode: ScopeAny, Deny: []string{"ads.test"}}, "https://x.ads.test/", false, "denied"},
		{Scope{Mode: ScopeAny, Deny: []string{"ads.test"}}, "https://badads.test/", true, ""}, // suffix on a label boundary only
		{Scope{Allow: []string{"cdn.example.net"}}, "https://cdn.example.net/x", true, ""},
		{Scope{Allow: []string{"example.net"}, Deny: []string{"private.example.net"}}, "https://private.example.net/", false, "denied"},
	}
	for _, tc := range tests {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got, why := tc.scope.in(seeds, u); got != tc.want || why != tc.why {
			t.Errorf("%+v.in(%q) = %v, %q; want %v, %q", tc.scope, tc.url, got, why, tc.want, tc.why)
		}
	}
	for _, bad := range []Scope{{Mode: "hosts"}, {Allow: []string{"http://x/"}}, {Deny: []string{""}}} {
		if bad.Validate() == nil {
			t.Errorf("%+v.Validate() = nil, want an error", bad)
		}
	}
}
