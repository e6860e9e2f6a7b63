package normalize

import (
	"errors"
	"strings"
	"testing"
)

// policyCase is one row of the policy table: raw input, and either the
// canonical form or the Reason it is rejected with. purell, when set, is
// what purell.NormalizeURLString gives with purellFlags: "=" when it agrees
// with want (the rule is purell's), else purell's own (differing) answer,
// which pins a documented departure (purell_test.go).
type policyCase struct {
	in     string
	want   string
	reason Reason
	purell string
}

// policyCases are the rules of the package documentation, in its order. The
// comment before each group cites the rule's source.
var policyCases = []policyCase{
	// Rule 1, WHATWG URL basic URL parser steps 1–3: leading and trailing C0
	// controls and spaces trimmed, tab/CR/LF removed anywhere.
	{in: "  http://example.com/a  ", want: "http://example.com/a"},
	{in: "\x00\x1f http://example.com/\x01", want: "http://example.com/"},
	{in: "http://exa\tmple.com/a\nb\r/c", want: "http://example.com/ab/c"},
	{in: "\nhttp://example.com/?q=a\tb#x\ny", want: "http://example.com/?q=ab"},
	// Rule 2, RFC 3986 §2 (no control characters), Go net/url: other control
	// bytes inside cannot be stripped.
	{in: "http://example.com/a\x00b", reason: ReasonControl},
	{in: "http://example.com/a\x7fb", reason: ReasonControl},
	{in: "http://exa\x1bmple.com/", reason: ReasonControl},
	{in: "\x7fhttp://example.com/", reason: ReasonControl},
	// Rule 3, WHATWG URL special-scheme states: '\' is '/' before the query.
	{in: `http:\\example.com\a\b`, want: "http://example.com/a/b"},
	{in: `http://example.com/a\..\b?x=\#\`, want: "http://example.com/b?x=%5C"},
	// Rule 5, RFC 3986 §3.1, §6.2.2.1: http and https only, lowercased.
	{in: "HTTP://example.com/", want: "http://example.com/", purell: "="},
	{in: "HtTpS://example.com/", want: "https://example.com/", purell: "="},
	{in: "mailto:someone@example.com", reason: ReasonScheme, purell: "mailto:someone@example.com"},
	{in: "javascript:void(0)", reason: ReasonScheme},
	{in: "JavaScript:alert(1)", reason: ReasonScheme},
	{in: "data:text/html,<p>x</p>", reason: ReasonScheme},
	{in: "tel:+1-555-0100", reason: ReasonScheme},
	{in: "ftp://example.com/file", reason: ReasonScheme},
	{in: "file:///etc/passwd", reason: ReasonScheme},
	{in: "//example.com/a", reason: ReasonScheme},    // network-path reference: no scheme
	{in: "/a/b", reason: ReasonScheme},               // relative reference
	{in: "example.com:8080/a", reason: ReasonScheme}, // "example.com" is a valid scheme name
	{in: "1http://example.com/", reason: ReasonScheme},
	// RFC 3986 §3.2, §3.3: no authority or an empty host.
	{in: "http:/example.com/", reason: ReasonNoHost},
	{in: "http:example.com", reason: ReasonNoHost},
	{in: "http://", reason: ReasonNoHost},
	{in: "http:///a", reason: ReasonNoHost},
	{in: "http://user@/a", reason: ReasonNoHost},
	{in: "http://:80/", reason: ReasonNoHost},
	// Rule 6, RFC 3986 §3.2.1, §7.5: userinfo removed (WHATWG splits at the last '@').
	{in: "http://user:pass@example.com/", want: "http://example.com/", purell: "http://user:pass@example.com/"},
	{in: "http://a@b@example.com/", want: "http://example.com/"},
	{in: "http://@example.com/", want: "http://example.com/"},
	// Rule 7, RFC 3986 §6.2.2.1: host case.
	{in: "http://WWW.Example.COM/", want: "http://www.example.com/", purell: "="},
	// Rule 7, WHATWG host parser + UTS #46: percent-decoded host, IDN to Punycode.
	{in: "http://%65xample.com/", want: "http://example.com/"},
	{in: "http://b%C3%BCcher.de/", want: "http://xn--bcher-kva.de/", purell: "="},
	{in: "http://bücher.de/", want: "http://xn--bcher-kva.de/", purell: "="},
	{in: "http://BÜCHER.de/", want: "http://xn--bcher-kva.de/", purell: "="},
	{in: "http://XN--BCHER-KVA.de/", want: "http://xn--bcher-kva.de/", purell: "="},
	{in: "http://ｅｘａｍｐｌｅ．ｃｏｍ/", want: "http://example.com/"}, // full-width letters and dot (UTS #46 mapping)
	{in: "http://例え.テスト/", want: "http://xn--r8jz45g.xn--zckzah/", purell: "="},
	{in: "http://faß.de/", want: "http://xn--fa-hia.de/", purell: "="}, // non-transitional: ß stays ß
	{in: "http://a\u3002b.com/", want: "http://a.b.com/"},              // U+3002 IDEOGRAPHIC FULL STOP maps to '.'
	{in: "http://a\u200db.com/", reason: ReasonHost},                   // ZWJ outside its context (CheckJoiners)
	{in: "http://xn--zz.com/", reason: ReasonHost},                     // Punycode that does not decode
	{in: "http://%zz.com/", reason: ReasonEscape},                      // a '%' in the host cannot be repaired
	{in: "http://a%/", reason: ReasonEscape},
	{in: "http://%C0%AF.com/", reason: ReasonEscape, purell: "http://xn--zn7ca.com/"}, // not UTF-8
	{in: "http://exa%2Fmple.com/", reason: ReasonHost},
	// Rule 8, crawler-commons BasicURLNormalizer: one trailing host dot removed.
	{in: "http://example.com./a", want: "http://example.com/a", purell: "http://example.com./a"},
	{in: "http://example.com.:8080/", want: "http://example.com:8080/"},
	{in: "http://example.com../", reason: ReasonHost},
	// Rule 9, RFC 1034 §3.1, RFC 1123 §2.1: hostname characters and lengths
	// ('_' kept: real hosts use it).
	{in: "http://my_host.example.com/", want: "http://my_host.example.com/", purell: "="},
	{in: "http://r3---sn-apo3qvuoxuxbt-j5pe.example/", want: "http://r3---sn-apo3qvuoxuxbt-j5pe.example/", purell: "="},
	{in: "http://exa mple.com/", reason: ReasonHost},
	{in: "http://exa!mple.com/", reason: ReasonHost, purell: "http://exa!mple.com/"},
	{in: "http://exa<mple.com/", reason: ReasonHost},
	{in: "http://.example.com/", reason: ReasonHost},
	{in: "http://a..b/", reason: ReasonHost, purell: "http://a..b/"},
	{in: "http://" + strings.Repeat("a", 64) + ".com/", reason: ReasonHost},
	{in: "http://" + strings.Repeat("a", 63) + ".com/", want: "http://" + strings.Repeat("a", 63) + ".com/"},
	{in: "http://" + strings.Repeat("abcdefg.", 32) + "com/", reason: ReasonHost}, // 259 bytes
	// Rule 10, WHATWG IPv4 parser (purell FlagDecodeDWORDHost, FlagDecodeOctalHost, FlagDecodeHexHost).
	{in: "http://192.168.0.1/", want: "http://192.168.0.1/", purell: "="},
	{in: "http://2130706433/", want: "http://127.0.0.1/", purell: "="},
	{in: "http://0x7f.1/", want: "http://127.0.0.1/", purell: "http://0x7f.1/"},
	{in: "http://0X7F000001/", want: "http://127.0.0.1/", purell: "="},
	{in: "http://0177.0.0.01/", want: "http://127.0.0.1/", purell: "="},
	{in: "http://127.1/", want: "http://127.0.0.1/"},
	{in: "http://%30%78%37%66.1/", want: "http://127.0.0.1/"}, // percent-decoded first
	{in: "http://1.2.3.4./", want: "http://1.2.3.4/"},
	{in: "http://256.0.0.1/", reason: ReasonHost, purell: "http://256.0.0.1/"},
	{in: "http://1.2.3.4.5/", reason: ReasonHost},
	{in: "http://4294967296/", reason: ReasonHost, purell: "http://0.0.0.0/"},
	{in: "http://08.1.1.1/", reason: ReasonHost},
	{in: "http://example.123/", reason: ReasonHost}, // ends in a number, not an address
	{in: "http://example.0x1/", reason: ReasonHost},
	{in: "http://0xg.com/", want: "http://0xg.com/", purell: "="},
	// Rule 11, RFC 5952 §4, RFC 3986 §3.2.2: IPv6 literals.
	{in: "http://[2001:DB8:0:0:0:0:0:1]/", want: "http://[2001:db8::1]/", purell: "http://[2001:db8:0:0:0:0:0:1]/"},
	{in: "http://[::FFFF:192.0.2.1]:8080/", want: "http://[::ffff:192.0.2.1]:8080/", purell: "="},
	{in: "https://[::1]:443/", want: "https://[::1]/", purell: "="},
	{in: "http://[fe80::1%25eth0]/", reason: ReasonHost},
	{in: "http://[v1.fe80::a]/", reason: ReasonHost},
	{in: "http://[192.0.2.1]/", reason: ReasonHost},
	{in: "http://[::1/", reason: ReasonHost},
	{in: "http://[::1]x/", reason: ReasonHost},
	// Rule 12, RFC 3986 §3.2.3, §6.2.3, WHATWG port state: ports.
	{in: "http://example.com:80/", want: "http://example.com/", purell: "="},
	{in: "https://example.com:443/", want: "https://example.com/", purell: "="},
	{in: "http://example.com:443/", want: "http://example.com:443/", purell: "="},
	{in: "https://example.com:80/", want: "https://example.com:80/", purell: "="},
	{in: "http://example.com:/", want: "http://example.com/", purell: "="},
	{in: "http://example.com:0080/", want: "http://example.com/", purell: "http://example.com:0080/"},
	{in: "http://example.com:08080/", want: "http://example.com:8080/"},
	{in: "http://example.com:65535/", want: "http://example.com:65535/", purell: "="},
	{in: "http://example.com:65536/", reason: ReasonPort, purell: "http://example.com:65536/"},
	{in: "http://example.com:8o/", reason: ReasonPort},
	{in: "http://example.com:80:80/", reason: ReasonPort},
	{in: "http://example.com:-1/", reason: ReasonPort},
	// Rule 13, RFC 3986 §6.2.3: empty path is "/".
	{in: "http://example.com", want: "http://example.com/", purell: "http://example.com"},
	{in: "http://example.com?q=1", want: "http://example.com/?q=1"},
	// Rule 14, RFC 3986 §6.2.2.2: decode unreserved characters only.
	{in: "http://example.com/%7Euser/%41%62%2D%2e%5F", want: "http://example.com/~user/Ab-._", purell: "="},
	{in: "http://example.com/?q=%7e%41", want: "http://example.com/?q=~A", purell: "="},
	{in: "http://example.com/a%2Fb", want: "http://example.com/a%2Fb", purell: "http://example.com/a/b"},
	{in: "http://example.com/a%2fb", want: "http://example.com/a%2Fb", purell: "http://example.com/a/b"},
	{in: "http://example.com/%21%24%26%27%28%29%2A%2B%2C%3B%3D%3A%40", want: "http://example.com/%21%24%26%27%28%29%2A%2B%2C%3B%3D%3A%40", purell: "http://example.com/!$&'()*+,;=:@"},
	{in: "http://example.com/?a=%26&b=%3D&c=%2B", want: "http://example.com/?a=%26&b=%3D&c=%2B", purell: "="},
	// Rule 14, RFC 3986 §6.2.2.1: uppercase hex in the escapes that remain.
	{in: "http://example.com/%e2%82%ac?q=%e2%82%ac", want: "http://example.com/%E2%82%AC?q=%E2%82%AC", purell: "="},
	{in: "http://example.com/%c3%a9", want: "http://example.com/%C3%A9", purell: "="},
	// Rule 14, RFC 3986 §2.1, WHATWG percent-encode sets, crawler-commons: encode what must be.
	{in: "http://example.com/a b/\"<>`{}|^[]", want: "http://example.com/a%20b/%22%3C%3E%60%7B%7D%7C%5E%5B%5D", purell: "http://example.com/a%20b/%22%3C%3E%60%7B%7D%7C%5E[]"},
	{in: "http://example.com/?q=a b&r=\"<>`{}|^[]", want: "http://example.com/?q=a%20b&r=%22%3C%3E%60%7B%7D%7C%5E%5B%5D"},
	{in: "http://example.com/café?q=ü", want: "http://example.com/caf%C3%A9?q=%C3%BC", purell: "="},
	{in: "http://example.com/!$&'()*+,;=:@?/?:@!$'()*+,;", want: "http://example.com/!$&'()*+,;=:@?/?:@!$'()*+,;", purell: "="},
	{in: "http://example.com/\xff", want: "http://example.com/%FF", purell: "="}, // not UTF-8: bytes encoded as they are
	// Rule 14, RFC 3986 §2.4, crawler-commons: a stray '%' is %25.
	{in: "http://example.com/100%/%zz/%4", want: "http://example.com/100%25/%25zz/%254"},
	{in: "http://example.com/?q=100%", want: "http://example.com/?q=100%25", purell: "http://example.com/?q=100%"},
	{in: "http://example.com/%25", want: "http://example.com/%25", purell: "="},
	// Rule 15, RFC 3986 §5.2.4, §6.2.2.3: dot segments.
	{in: "http://example.com/a/./b/../c", want: "http://example.com/a/c", purell: "="},
	{in: "http://example.com/a/b/..", want: "http://example.com/a/", purell: "="},
	{in: "http://example.com/a/b/.", want: "http://example.com/a/b/", purell: "="},
	{in: "http://example.com/../../a", want: "http://example.com/a", purell: "="},
	{in: "http://example.com/..", want: "http://example.com/", purell: "="},
	{in: "http://example.com/a/.b/..c/c.", want: "http://example.com/a/.b/..c/c.", purell: "="},
	{in: "http://example.com/a//../b", want: "http://example.com/a/b", purell: "="},
	// Rule 15, WHATWG single-dot and double-dot path segments: also %2E.
	{in: "http://example.com/a/%2E%2e/b/%2E", want: "http://example.com/b/", purell: "="},
	{in: "http://example.com/a/.%2E/b", want: "http://example.com/b", purell: "="},
	// Rule 16, RFC 3986 §6.2.2.1 (the path is case-sensitive), §6.2.3: path kept.
	{in: "http://example.com/A/B.HTML", want: "http://example.com/A/B.HTML", purell: "="},
	{in: "http://example.com/a/", want: "http://example.com/a/", purell: "="},
	{in: "http://example.com/a//b", want: "http://example.com/a//b", purell: "="},
	{in: "http://example.com/index.html", want: "http://example.com/index.html", purell: "="},
	{in: "http://www.example.com/", want: "http://www.example.com/", purell: "="},
	// Rule 17, Java Servlet URL rewriting, Apache Nutch: session path parameters.
	{in: "http://example.com/a/b;jsessionid=0123ABC", want: "http://example.com/a/b", purell: "http://example.com/a/b;jsessionid=0123ABC"},
	{in: "http://example.com/a/b;JSESSIONID=0123ABC?x=1", want: "http://example.com/a/b?x=1"},
	{in: "http://example.com/a;jsessionid=1/b", want: "http://example.com/a/b"},
	{in: "http://example.com/a;v=2;jsessionid=1;w=3", want: "http://example.com/a;v=2;w=3"},
	{in: "http://example.com/a;phpsessid=1", want: "http://example.com/a"},
	{in: "http://example.com/a;jsessionid", want: "http://example.com/a;jsessionid", purell: "="}, // no value: not a parameter
	{in: "http://example.com/a;x=1", want: "http://example.com/a;x=1", purell: "="},
	{in: "http://example.com/a/..;jsessionid=1/b", want: "http://example.com/b"},
	// Rule 18, RFC 3986 §3.5: the fragment is dropped.
	{in: "http://example.com/page.html#section", want: "http://example.com/page.html", purell: "="},
	{in: "http://example.com/#!/hashbang", want: "http://example.com/", purell: "="},
	{in: "http://example.com/a?q=1#", want: "http://example.com/a?q=1", purell: "="},
	// Rule 19, purell FlagRemoveEmptyQuerySeparator, Nutch: empty query and parameters.
	{in: "http://example.com/a?", want: "http://example.com/a", purell: "="},
	{in: "http://example.com/a?#x", want: "http://example.com/a", purell: "="},
	{in: "http://example.com/a?&&", want: "http://example.com/a", purell: "http://example.com/a?&&"},
	{in: "http://example.com/a?&b=2&&a=1&", want: "http://example.com/a?a=1&b=2", purell: "="},
	// Rule 20, crawler-commons queryParamsToRemove, browsers' query stripping: tracking parameters.
	{in: "http://example.com/a?utm_source=x&utm_medium=y&utm_campaign=z", want: "http://example.com/a"},
	{in: "http://example.com/a?id=7&UTM_Source=x&gclid=1&fbclid=2&msclkid=3", want: "http://example.com/a?id=7", purell: "http://example.com/a?UTM_Source=x&fbclid=2&gclid=1&id=7&msclkid=3"},
	{in: "http://example.com/a?utm%5Fsource=x&%75tm_term=y&id=7", want: "http://example.com/a?id=7"},
	{in: "http://example.com/a?utm_source", want: "http://example.com/a"},
	{in: "http://example.com/a?xutm_source=1&gclidx=2", want: "http://example.com/a?gclidx=2&xutm_source=1", purell: "="},
	{in: "http://example.com/a?q=utm_source%3Dx", want: "http://example.com/a?q=utm_source%3Dx", purell: "="},
	// Rule 21, Apache Nutch regex-normalize default: session parameters.
	{in: "http://example.com/a?PHPSESSID=0123&id=7&sid=9&jsessionid=5", want: "http://example.com/a?id=7", purell: "http://example.com/a?PHPSESSID=0123&id=7&jsessionid=5&sid=9"},
	{in: "http://example.com/a?ASPSESSIONIDQQGGGNCG=x&session_id=1&id=7", want: "http://example.com/a?id=7"},
	{in: "http://example.com/a?sidebar=1", want: "http://example.com/a?sidebar=1", purell: "="},
	// Rule 22, crawler-commons BasicURLNormalizer, Nutch QuerystringURLNormalizer: sorted by name, stably, not re-encoded.
	{in: "http://example.com/?c=3&b=2&a=1", want: "http://example.com/?a=1&b=2&c=3", purell: "="},
	{in: "http://example.com/?b=2&a=2&a=1&a=3", want: "http://example.com/?a=2&a=1&a=3&b=2", purell: "http://example.com/?a=1&a=2&a=3&b=2"},
	{in: "http://example.com/?b=x/y:z&a", want: "http://example.com/?a&b=x/y:z", purell: "http://example.com/?a=&b=x%2Fy%3Az"},
	{in: "http://example.com/?q=a+b&p=a%20b", want: "http://example.com/?p=a%20b&q=a+b", purell: "http://example.com/?p=a+b&q=a+b"},
	{in: "http://example.com/?a=1;b=2", want: "http://example.com/?a=1;b=2", purell: "="}, // ';' is no separator
	{in: "http://example.com/?B=1&a=2&_=3&A=4", want: "http://example.com/?A=4&B=1&_=3&a=2", purell: "="},
	{in: "http://example.com/?=x&a=1", want: "http://example.com/?=x&a=1", purell: "="},
	// Rule 23, sitemaps.org: at most 2,048 bytes, as given and canonical.
	{in: "http://example.com/" + strings.Repeat("a", 2048-19), want: "http://example.com/" + strings.Repeat("a", 2048-19)},
	{in: "http://example.com/" + strings.Repeat("a", 2048-18), reason: ReasonTooLong},
	{in: "http://example.com/" + strings.Repeat(" a", 700), reason: ReasonTooLong}, // 1,419 bytes, 2,819 canonical
	// All rules at once.
	{in: " HTTP://User@WWW.Example.COM.:0080/a/./b/../%7Ec/%2f;jsessionid=9?utm_source=x&b=2&a=%7e&&#top ", want: "http://www.example.com/a/~c/%2F?a=~&b=2"},
}

func TestURL(t *testing.T) {
	n, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range policyCases {
		got, err := n.URL(c.in)
		checkResult(t, "URL", c.in, got, err, c.want, c.reason)
	}
}

// checkResult compares one result with its expected canonical form or
// Reason.
func checkResult(tb testing.TB, fn, in, got string, err error, want string, reason Reason) {
	tb.Helper()
	if reason == "" {
		if err != nil {
			tb.Errorf("%s(%q) error %v, want %q", fn, in, err, want)
		} else if got != want {
			tb.Errorf("%s(%q) = %q, want %q", fn, in, got, want)
		}
		return
	}
	var e *Error
	if !errors.As(err, &e) || e.Reason != reason {
		tb.Errorf("%s(%q) = %q, %v, want reason %q", fn, in, got, err, reason)
		return
	}
	if got != "" || !errors.Is(err, reason.sentinel()) {
		tb.Errorf("%s(%q) = %q, %v: want \"\" and an error wrapping %v", fn, in, got, err, reason.sentinel())
	}
}

// TestURLIdempotent: the canonical form of every canonical form in the
// policy table is itself, and is returned as the same string.
func TestURLIdempotent(t *testing.T) {
	n, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range policyCases {
		if c.reason != "" {
			continue
		}
		got, err := n.URL(c.want)
		checkResult(t, "URL", c.want, got, err, c.want, "")
	}
}

func TestURLCanonicalDoesNotAllocate(t *testing.T) {
	n, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	const u = "https://www.example.com/docs/current/sql-select.html?a=1&b=2"
	allocs := testing.AllocsPerRun(100, func() {
		if got, err := n.URL(u); err != nil || got != u {
			t.Fatalf("URL(%q) = %q, %v, want %q", u, got, err, u)
		}
	})
	if allocs != 0 {
		t.Errorf("URL(%q) allocates %v times, want 0", u, allocs)
	}
}

func TestPackageURL(t *testing.T) {
	for _, c := range policyCases {
		got, err := URL(c.in)
		checkResult(t, "URL", c.in, got, err, c.want, c.reason)
	}
}

// TestConcurrentUse runs the policy table from several goroutines on one
// Normalizer (run with -race): it has no mutable state.
func TestConcurrentUse(t *testing.T) {
	n, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for _, c := range policyCases {
				got, err := n.URL(c.in)
				checkResult(t, "URL", c.in, got, err, c.want, c.reason)
			}
			for _, c := range rfcExamples {
				got, err := n.Resolve(rfcBase, c.ref)
				checkResult(t, "Resolve", c.ref, got, err, c.want, c.reason)
			}
		}()
	}
	for g := 0; g < 4; g++ {
		<-done
	}
}
