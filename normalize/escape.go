package normalize

// Character classes of RFC 3986 §2, as bits in a table indexed by byte.
const (
	classUnreserved = 1 << iota // ALPHA / DIGIT / "-" / "." / "_" / "~" (§2.3)
	classPath                   // unreserved / sub-delims / ":" / "@" (pchar, §3.3)
	classQuery                  // pchar / "/" / "?" (§3.4)
	classHost                   // what Sieve keeps in a domain name: a-z 0-9 "-" "_" "."
	classClean                  // what clean looks at: controls, space, '\', '?', '#'
)

var classes = func() (t [256]uint8) {
	set := func(chars string, bits uint8) {
		for i := 0; i < len(chars); i++ {
			t[chars[i]] |= bits
		}
	}
	const (
		lower = "abcdefghijklmnopqrstuvwxyz"
		upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		digit = "0123456789"
	)
	set(lower+upper+digit+"-._~", classUnreserved|classPath|classQuery)
	set("!$&'()*+,;=:@", classPath|classQuery) // sub-delims, ":" and "@"
	set("/?", classQuery)
	set(lower+digit+"-_.", classHost)
	for c := 0; c <= ' '; c++ {
		t[c] |= classClean
	}
	set("\x7f\\?#", classClean)
	return t
}()

const upperHex = "0123456789ABCDEF"

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c|0x20 && c|0x20 <= 'f':
		return c | 0x20 - 'a' + 10, true
	}
	return 0, false
}

// appendEscaped appends s to dst with its percent-encoding normalized for a
// component whose raw characters are those of class:
//   - a triplet %XY that encodes an unreserved character is decoded (RFC
//     3986 §6.2.2.2); any other triplet is kept, with uppercase hex digits
//     (§6.2.2.1), so %2F never becomes '/';
//   - a '%' that does not start a triplet is encoded as %25, the only reading
//     an RFC 3986 parser can give it (crawler-commons BasicURLNormalizer does
//     the same);
//   - a byte outside class (space, '"', '<', '>', '[', ']', '^', '`', '{',
//     '|', '}', non-ASCII UTF-8 bytes) is percent-encoded (§2.1, and WHATWG's
//     percent-encode sets for the ones browsers encode).
//
// The result contains only class characters and uppercase triplets of
// non-unreserved bytes, so appendEscaped is idempotent.
func appendEscaped(dst []byte, s string, class uint8) []byte {
	run := 0 // start of the pending run of bytes copied as they are
	for i := 0; i < len(s); i++ {
		c := s[i]
		if classes[c]&class != 0 {
			continue
		}
		dst = append(dst, s[run:i]...)
		run = i + 1
		if c == '%' {
			if i+2 < len(s) {
				hi, ok1 := unhex(s[i+1])
				lo, ok2 := unhex(s[i+2])
				if ok1 && ok2 {
					if v := hi<<4 | lo; classes[v]&classUnreserved != 0 {
						dst = append(dst, v)
					} else {
						dst = append(dst, '%', upperHex[hi], upperHex[lo])
					}
					i += 2
					run = i + 1
					continue
				}
			}
			dst = append(dst, '%', '2', '5')
			continue
		}
		dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
	}
	return append(dst, s[run:]...)
}
