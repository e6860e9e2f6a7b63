package normalize

import "strings"

// reference is a URI reference split into its five components (RFC 3986 §3
// and Appendix B). The has* flags tell an empty component from an undefined
// one ("http://a/?" has an empty query, "http://a/" none).
type reference struct {
	scheme       string
	authority    string
	dir          string // set by resolve only: the path is dir+path (RFC 3986 §5.2.3)
	path         string
	query        string
	fragment     string
	hasAuthority bool
	hasQuery     bool
	hasFragment  bool
}

// clean prepares raw text the way the WHATWG URL parser does before parsing
// (https://url.spec.whatwg.org/#concept-basic-url-parser, steps 1–3): it
// trims leading and trailing C0 controls and spaces and removes every tab, CR
// and LF. For http(s) URLs it also turns '\' into '/' before the query, as
// WHATWG's special-scheme states do. Any other control byte (U+0000–U+001F,
// U+007F) left inside is an error: WHATWG would percent-encode it, but no
// real link contains one and net/url refuses them. clean allocates only when
// it has to remove or replace a byte inside the text.
func clean(s string) (string, bool) {
	for len(s) > 0 && s[0] <= ' ' {
		s = s[1:]
	}
	for len(s) > 0 && s[len(s)-1] <= ' ' {
		s = s[:len(s)-1]
	}
	rewrite := false
	inQuery := false // past the first '?' or '#': backslashes stay
	for i := 0; i < len(s); i++ {
		c := s[i]
		if classes[c]&classClean == 0 {
			continue
		}
		switch {
		case c == ' ':
		case c == '\t' || c == '\n' || c == '\r':
			rewrite = true
		case c < ' ' || c == 0x7f:
			return "", false
		case c == '\\' && !inQuery:
			rewrite = true
		case c == '?' || c == '#':
			inQuery = true
		}
	}
	if !rewrite {
		return s, true
	}
	b := make([]byte, 0, len(s))
	inQuery = false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\t' || c == '\n' || c == '\r':
		case c == '\\' && !inQuery:
			b = append(b, '/')
		default:
			if c == '?' || c == '#' {
				inQuery = true
			}
			b = append(b, c)
		}
	}
	return string(b), true
}

// parseReference splits s into its components following the regular
// expression of RFC 3986 Appendix B. It never fails: the components are
// validated when they are canonicalized. A candidate scheme that is not
// ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) (§3.1) is not a scheme, and the
// whole text is then a relative reference, as in the WHATWG parser.
func parseReference(s string) reference {
	var r reference
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ':' {
			if validScheme(s[:i]) {
				r.scheme, s = s[:i], s[i+1:]
			}
			break
		}
		if c == '/' || c == '?' || c == '#' {
			break
		}
	}
	if len(s) >= 2 && s[0] == '/' && s[1] == '/' {
		s = s[2:]
		i := 0
		for i < len(s) && s[i] != '/' && s[i] != '?' && s[i] != '#' {
			i++
		}
		r.authority, r.hasAuthority, s = s[:i], true, s[i:]
	}
	if i := strings.IndexByte(s, '#'); i >= 0 {
		r.fragment, r.hasFragment, s = s[i+1:], true, s[:i]
	}
	if i := strings.IndexByte(s, '?'); i >= 0 {
		r.query, r.hasQuery, s = s[i+1:], true, s[:i]
	}
	r.path = s
	return r
}

func validScheme(s string) bool {
	if s == "" || !isAlpha(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isAlpha(c) && !('0' <= c && c <= '9') && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isAlpha(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// resolve transforms the reference r against base into a target URI, the
// algorithm of RFC 3986 §5.2.2. base must have a scheme. With strict false,
// a reference whose scheme equals the base's ("http:g") is read as relative,
// the backward-compatible reading §5.2.2 permits and browsers use.
//
// With exact false, resolve skips the work canonicalization redoes anyway,
// and allocates nothing: dot segments stay, and the merged path of a
// relative-path reference (§5.2.3) stays in two parts, the base's directory
// in t.dir and the reference's path in t.path.
func resolve(base, r reference, strict, exact bool) reference {
	if !strict && r.scheme != "" && strings.EqualFold(r.scheme, base.scheme) {
		r.scheme = ""
	}
	dots := func(path string) string {
		if exact {
			return removeDotSegments(path)
		}
		return path
	}
	var t reference
	switch {
	case r.scheme != "":
		t = r
		t.path = dots(r.path)
	case r.hasAuthority:
		t = r
		t.scheme = base.scheme
		t.path = dots(r.path)
	default:
		t.scheme = base.scheme
		t.authority, t.hasAuthority = base.authority, base.hasAuthority
		switch {
		case r.path == "":
			t.dir, t.path = base.dir, base.path
			if r.hasQuery {
				t.query, t.hasQuery = r.query, true
			} else {
				t.query, t.hasQuery = base.query, base.hasQuery
			}
		case r.path[0] == '/':
			t.path = dots(r.path)
			t.query, t.hasQuery = r.query, r.hasQuery
		case exact:
			t.path = removeDotSegments(merge(base, r.path))
			t.query, t.hasQuery = r.query, r.hasQuery
		default:
			t.dir, t.path = mergeDir(base), r.path
			t.query, t.hasQuery = r.query, r.hasQuery
		}
	}
	t.fragment, t.hasFragment = r.fragment, r.hasFragment
	return t
}

// merge is RFC 3986 §5.2.3: the base path up to its last '/', then the
// reference path.
func merge(base reference, path string) string {
	return mergeDir(base) + path
}

// mergeDir is the first part of merge: "/" for a base with an authority and
// an empty path, else the base path up to and including its last '/'.
func mergeDir(base reference) string {
	if base.hasAuthority && base.path == "" {
		return "/"
	}
	return base.path[:strings.LastIndexByte(base.path, '/')+1]
}

// removeDotSegments is RFC 3986 §5.2.4. It returns path itself, without
// allocating, when path has no "." or ".." segment.
func removeDotSegments(path string) string {
	if !hasDotSegment(path) {
		return path
	}
	in := path
	out := make([]byte, 0, len(in))
	for len(in) > 0 {
		switch {
		case strings.HasPrefix(in, "../"): // A
			in = in[3:]
		case strings.HasPrefix(in, "./"): // A
			in = in[2:]
		case strings.HasPrefix(in, "/./"): // B
			in = in[2:]
		case in == "/.": // B
			in = "/"
		case strings.HasPrefix(in, "/../"): // C
			in = in[3:]
			out = popSegment(out)
		case in == "/..": // C
			in = "/"
			out = popSegment(out)
		case in == "." || in == "..": // D
			in = ""
		default: // E
			i := strings.IndexByte(in[1:], '/') + 1
			if i == 0 {
				i = len(in)
			}
			out = append(out, in[:i]...)
			in = in[i:]
		}
	}
	return string(out)
}

// popSegment removes the last segment and its preceding '/' (if any) from out.
func popSegment(out []byte) []byte {
	for i := len(out) - 1; i >= 0; i-- {
		if out[i] == '/' {
			return out[:i]
		}
	}
	return out[:0]
}

// hasDotSegment reports whether path has a complete "." or ".." segment.
func hasDotSegment(path string) bool {
	for i := 0; i < len(path); i++ {
		if path[i] != '.' || (i > 0 && path[i-1] != '/') {
			continue
		}
		j := i + 1
		if j < len(path) && path[j] == '.' {
			j++
		}
		if j == len(path) || path[j] == '/' {
			return true
		}
	}
	return false
}

// String recomposes the components, RFC 3986 §5.3.
func (r reference) String() string {
	var b strings.Builder
	if r.scheme != "" {
		b.WriteString(r.scheme)
		b.WriteByte(':')
	}
	if r.hasAuthority {
		b.WriteString("//")
		b.WriteString(r.authority)
	}
	b.WriteString(r.dir)
	b.WriteString(r.path)
	if r.hasQuery {
		b.WriteByte('?')
		b.WriteString(r.query)
	}
	if r.hasFragment {
		b.WriteByte('#')
		b.WriteString(r.fragment)
	}
	return b.String()
}
