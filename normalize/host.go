package normalize

import (
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// idnaProfile is WHATWG's "domain to ASCII" (https://url.spec.whatwg.org/#concept-domain-to-ascii)
// with beStrict false: UTS #46 non-transitional processing, CheckHyphens off
// (labels like "r3---sn-x" are real), CheckBidi and CheckJoiners on,
// UseSTD3ASCIIRules and VerifyDnsLength off (Sieve checks characters and
// lengths itself, after the mapping).
var idnaProfile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.Transitional(false),
	idna.CheckHyphens(false),
	idna.StrictDomainName(false),
	idna.VerifyDNSLength(false),
)

// appendHost appends the canonical form of host (the authority without
// userinfo and port, not empty) to dst.
func appendHost(dst []byte, host string) ([]byte, Reason, error) {
	if host[0] == '[' {
		return appendIPv6(dst, host)
	}
	start := len(dst)
	viaIDNA := false
	for i := 0; i < len(host); i++ {
		c := host[i]
		if c == '%' || c >= utf8.RuneSelf {
			// Slow path: WHATWG percent-decodes the host, then maps it to
			// ASCII with IDNA (full-width letters, uppercase non-ASCII,
			// U+3002 as a dot, …).
			h, reason := decodeHost(host)
			if reason != "" {
				return dst, reason, nil
			}
			a, err := idnaProfile.ToASCII(h)
			if err != nil {
				return dst, ReasonHost, err
			}
			dst, host, viaIDNA = dst[:start], a, true
			break
		}
		dst = append(dst, lowerASCII(c))
	}
	if viaIDNA {
		for i := 0; i < len(host); i++ {
			dst = append(dst, lowerASCII(host[i]))
		}
	}
	h := dst[start:]
	for _, c := range h {
		if classes[c]&classHost == 0 {
			return dst, ReasonHost, nil
		}
	}
	// One trailing dot names the same host (an absolute DNS name).
	if len(h) > 1 && h[len(h)-1] == '.' {
		h = h[:len(h)-1]
		dst = dst[:len(dst)-1]
	}
	if len(h) > 253 {
		return dst, ReasonHost, nil
	}
	hasACE := false
	for rest := h; ; {
		i := indexByte(rest, '.')
		label := rest
		if i >= 0 {
			label = rest[:i]
		}
		if len(label) == 0 || len(label) > 63 {
			return dst, ReasonHost, nil
		}
		if len(label) >= 4 && label[0] == 'x' && label[1] == 'n' && label[2] == '-' && label[3] == '-' {
			hasACE = true
		}
		if i < 0 {
			if endsInNumber(label) {
				return appendIPv4(dst[:start], string(h))
			}
			break
		}
		rest = rest[i+1:]
	}
	if hasACE && !viaIDNA {
		// A Punycode label must decode to a valid U-label (UTS #46 §4.1).
		s := string(h)
		if a, err := idnaProfile.ToASCII(s); err != nil || a != s {
			return dst, ReasonHost, err
		}
	}
	return dst, "", nil
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// decodeHost percent-decodes a host. A '%' that does not start a triplet,
// or a result that is not UTF-8, cannot be repaired (ReasonEscape).
func decodeHost(host string) (string, Reason) {
	if strings.IndexByte(host, '%') < 0 {
		if !utf8.ValidString(host) {
			return "", ReasonHost
		}
		return host, ""
	}
	b := make([]byte, 0, len(host))
	for i := 0; i < len(host); i++ {
		c := host[i]
		if c != '%' {
			b = append(b, c)
			continue
		}
		if i+2 >= len(host) {
			return "", ReasonEscape
		}
		hi, ok1 := unhex(host[i+1])
		lo, ok2 := unhex(host[i+2])
		if !ok1 || !ok2 {
			return "", ReasonEscape
		}
		b = append(b, hi<<4|lo)
		i += 2
	}
	if !utf8.Valid(b) {
		return "", ReasonEscape
	}
	return string(b), ""
}

// endsInNumber is WHATWG's "ends in a number checker" for the last label:
// all ASCII digits, or a 0x-prefixed hexadecimal number.
func endsInNumber(label []byte) bool {
	allDigits := true
	for _, c := range label {
		if c < '0' || c > '9' {
			allDigits = false
			break
		}
	}
	if allDigits {
		return true
	}
	_, ok := ipv4Number(string(label))
	return ok
}

// ipv4Number is WHATWG's IPv4 number parser: decimal, 0x-prefixed
// hexadecimal or 0-prefixed octal. Values above 2³² fail.
func ipv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(s) >= 2 && s[0] == '0' && s[1]|0x20 == 'x':
		s, base = s[2:], 16
	case len(s) >= 2 && s[0] == '0':
		s, base = s[1:], 8
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		d, ok := unhex(s[i])
		if !ok || uint64(d) >= base {
			return 0, false
		}
		v = v*base + uint64(d)
		if v > 1<<32 {
			return 0, false
		}
	}
	return v, true
}

// appendIPv4 parses host with WHATWG's IPv4 parser (1–4 parts, each
// decimal, octal or hex, the last filling the remaining bytes) and appends
// it in dotted-decimal form, the form purell's FlagDecodeDWORDHost,
// FlagDecodeOctalHost and FlagDecodeHexHost also produce.
func appendIPv4(dst []byte, host string) ([]byte, Reason, error) {
	var parts [4]uint64
	n := 0
	for rest := host; ; n++ {
		if n == 4 {
			return dst, ReasonHost, nil
		}
		part := rest
		i := strings.IndexByte(rest, '.')
		if i >= 0 {
			part = rest[:i]
		}
		v, ok := ipv4Number(part)
		if !ok {
			return dst, ReasonHost, nil
		}
		parts[n] = v
		if i < 0 {
			n++
			break
		}
		rest = rest[i+1:]
	}
	var ip uint64
	for i := 0; i < n-1; i++ {
		if parts[i] > 255 {
			return dst, ReasonHost, nil
		}
		ip |= parts[i] << (8 * (3 - i))
	}
	last := parts[n-1]
	if last >= 1<<(8*(5-n)) {
		return dst, ReasonHost, nil
	}
	ip |= last
	for i := 3; i >= 0; i-- {
		dst = strconv.AppendUint(dst, ip>>(8*i)&0xff, 10)
		if i > 0 {
			dst = append(dst, '.')
		}
	}
	return dst, "", nil
}

// appendIPv6 appends an IP literal ("[…]", RFC 3986 §3.2.2) in the RFC 5952
// text form: lowercase, zeros compressed. IPvFuture and zone identifiers
// (RFC 6874) are not fetchable by a crawler and are rejected.
func appendIPv6(dst []byte, host string) ([]byte, Reason, error) {
	if len(host) < 3 || host[len(host)-1] != ']' {
		return dst, ReasonHost, nil
	}
	inner := host[1 : len(host)-1]
	if strings.IndexByte(inner, '%') >= 0 || inner[0]|0x20 == 'v' {
		return dst, ReasonHost, nil
	}
	a, err := netip.ParseAddr(inner)
	if err != nil || !a.Is6() {
		return dst, ReasonHost, err
	}
	dst = append(dst, '[')
	dst = a.AppendTo(dst)
	return append(dst, ']'), "", nil
}
