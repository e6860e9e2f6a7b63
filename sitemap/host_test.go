package sitemap

import (
	"net/url"
	"testing"
)

// TestAllowed pins the host rule (sitemaps.org, "Sitemap file location" and
// "Sitemaps & Cross Submits") and its two departures: scheme and path are
// not compared.
func TestAllowed(t *testing.T) {
	const sm = "https://www.example.com/catalog/sitemap.xml"
	cases := []struct {
		loc, sitemap, robots string // robots "" for none
		want                 bool
	}{
		{"https://www.example.com/catalog/item", sm, "", true},
		{"https://WWW.Example.COM./x", sm, "", true},      // case and trailing dot
		{"http://www.example.com/images/a", sm, "", true}, // scheme and path not compared
		{"https://www.example.com:443/x", sm, "", true},   // default port
		{"https://www.example.com:8443/x", sm, "", false}, // another port, another server
		{"https://example.com/x", sm, "", false},          // another host
		{"https://shop.example.com/x", sm, "", false},     // a subdomain is another host
		{"https://evil.example/x", sm, "https://www.example.com/robots.txt", false},
		// Cross submit: a sitemap hosted elsewhere, referenced by the robots.txt of the host it lists.
		{"https://www.example.com/x", "https://cdn.example.net/sitemaps/www.xml", "https://www.example.com/robots.txt", true},
		{"https://cdn.example.net/x", "https://cdn.example.net/sitemaps/www.xml", "https://www.example.com/robots.txt", true},
		{"https://other.example/x", "https://cdn.example.net/sitemaps/www.xml", "https://www.example.com/robots.txt", false},
		{"mailto:a@www.example.com", sm, "", false},
	}
	for _, c := range cases {
		var robots *url.URL
		if c.robots != "" {
			robots = mustURL(t, c.robots)
		}
		if got := Allowed(mustURL(t, c.loc), mustURL(t, c.sitemap), robots); got != c.want {
			t.Errorf("Allowed(%q, %q, %q) = %v, want %v", c.loc, c.sitemap, c.robots, got, c.want)
		}
	}
	if Allowed(nil, mustURL(t, sm), nil) || Allowed(mustURL(t, sm), nil, nil) {
		t.Errorf("Allowed with a nil URL = true, want false")
	}
}

func mustURL(tb testing.TB, s string) *url.URL {
	tb.Helper()
	u, err := url.Parse(s)
	if err != nil {
		tb.Fatal(err)
	}
	return u
}
