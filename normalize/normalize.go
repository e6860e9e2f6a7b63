package normalize

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// PolicyVersion names the canonicalization rules of this package (the table
// in the package documentation). It changes whenever a rule changes the
// canonical form of any URL, so that a dedup filter filled under one policy
// is not silently reused under another. See Normalizer.Version.
const PolicyVersion = "1"

// DefaultMaxLength is the longest URL, in bytes, accepted by default: the
// limit most search engines and sitemaps (sitemaps.org) use.
const DefaultMaxLength = 2048

// Options configures a Normalizer. The zero value is the default policy.
type Options struct {
	// StripParams are the tracking query parameters to remove, matched
	// ASCII case-insensitively after percent-encoding normalization; an
	// entry ending in '*' is a prefix. nil means DefaultStripParams; an
	// empty non-nil slice removes none.
	StripParams []string
	// SessionParams are the session-identifier parameters to remove, from
	// the query and from ";name=value" path parameters. nil means
	// DefaultSessionParams; an empty non-nil slice removes none.
	SessionParams []string
	// MaxLength is the longest URL accepted, in bytes, both as given and in
	// canonical form. 0 means DefaultMaxLength.
	MaxLength int
}

// Normalizer turns URLs into their canonical form under a fixed policy. It
// is immutable and safe for concurrent use.
type Normalizer struct {
	query   paramSet // StripParams ∪ SessionParams, removed from queries
	path    paramSet // SessionParams, removed as path parameters
	maxLen  int
	version string
}

// New returns a Normalizer for o, or an error naming the invalid field.
func New(o Options) (*Normalizer, error) {
	if o.MaxLength < 0 {
		return nil, fmt.Errorf("normalize: MaxLength %d is negative", o.MaxLength)
	}
	if o.MaxLength == 0 {
		o.MaxLength = DefaultMaxLength
	}
	if o.StripParams == nil {
		o.StripParams = DefaultStripParams()
	}
	if o.SessionParams == nil {
		o.SessionParams = DefaultSessionParams()
	}
	strip, err := canonicalParams("StripParams", o.StripParams)
	if err != nil {
		return nil, err
	}
	session, err := canonicalParams("SessionParams", o.SessionParams)
	if err != nil {
		return nil, err
	}
	n := &Normalizer{
		query:  newParamSet(strip, session),
		path:   newParamSet(session),
		maxLen: o.MaxLength,
	}
	n.version = version(strip, session, o.MaxLength)
	return n, nil
}

// version is PolicyVersion for the default options, else PolicyVersion, '+'
// and 8 hex digits of a SHA-256 over the canonical options.
func version(strip, session []string, maxLen int) string {
	defStrip, _ := canonicalParams("", DefaultStripParams())
	defSession, _ := canonicalParams("", DefaultSessionParams())
	if slices.Equal(strip, defStrip) && slices.Equal(session, defSession) && maxLen == DefaultMaxLength {
		return PolicyVersion
	}
	h := sha256.New()
	fmt.Fprintf(h, "strip=%q\nsession=%q\nmax=%d\n", strip, session, maxLen)
	return PolicyVersion + "+" + hex.EncodeToString(h.Sum(nil))[:8]
}

// Version returns the policy version this Normalizer applies: PolicyVersion
// with default options, "PolicyVersion+<hash of the options>" otherwise.
// Store it with anything filled with canonical URLs.
func (n *Normalizer) Version() string { return n.version }

var defaultNormalizer = sync.OnceValue(func() *Normalizer {
	n, err := New(Options{})
	if err != nil {
		panic(err) // the defaults are valid; TestDefaultOptions checks them
	}
	return n
})

// URL returns the canonical form of the absolute URL raw under the default
// policy (Options{}). See Normalizer.URL.
func URL(raw string) (string, error) { return defaultNormalizer().URL(raw) }

// URL returns the canonical form of the absolute http or https URL raw, or
// an *Error saying why it is rejected. The canonical form of a canonical URL
// is itself (returned without allocating).
func (n *Normalizer) URL(raw string) (string, error) {
	if len(raw) > n.maxLen {
		return "", reject(raw, ReasonTooLong)
	}
	s, ok := clean(raw)
	if !ok {
		return "", reject(raw, ReasonControl)
	}
	var buf [256]byte
	out, reason, err := n.appendCanonical(buf[:0], parseReference(s))
	if reason != "" {
		return "", rejectWith(raw, reason, err)
	}
	if len(out) > n.maxLen {
		return "", reject(raw, ReasonTooLong)
	}
	if string(out) == raw {
		return raw, nil
	}
	return string(out), nil
}

// Resolve resolves the reference ref (an href, possibly relative) against
// base, the absolute URL of the page it was found on or the page's
// <base href> (itself first resolved against the page), by RFC 3986 §5.2,
// and returns the canonical form of the result. A ref that equals its
// base's scheme and has no authority ("http:g") is read as relative, the
// backward-compatible reading of §5.2.2 that browsers use.
//
// An invalid base is reported as an *Error with ReasonBase and the base as
// its URL; any other error is about ref.
func (n *Normalizer) Resolve(base, ref string) (string, error) {
	if len(base) > n.maxLen {
		return "", rejectBase(base, ReasonTooLong)
	}
	b, ok := clean(base)
	if !ok {
		return "", rejectBase(base, ReasonControl)
	}
	br := parseReference(b)
	if !isHTTP(br.scheme) {
		return "", rejectBase(base, ReasonScheme)
	}
	if !br.hasAuthority {
		return "", rejectBase(base, ReasonNoHost)
	}
	if len(ref) > n.maxLen {
		return "", reject(ref, ReasonTooLong)
	}
	r, ok := clean(ref)
	if !ok {
		return "", reject(ref, ReasonControl)
	}
	rr := parseReference(r)
	t := resolve(br, rr, false, false)
	var buf [256]byte
	out, reason, err := n.appendCanonical(buf[:0], t)
	if reason != "" {
		fromBase := !rr.hasAuthority && (rr.scheme == "" || strings.EqualFold(rr.scheme, br.scheme))
		if fromBase && (reason == ReasonNoHost || reason == ReasonHost || reason == ReasonPort || reason == ReasonEscape) {
			// The authority, where the error is, came from the base.
			return "", rejectBase(base, reason)
		}
		return "", rejectWith(ref, reason, err)
	}
	if len(out) > n.maxLen {
		return "", reject(ref, ReasonTooLong)
	}
	if string(out) == ref {
		return ref, nil
	}
	return string(out), nil
}

func isHTTP(scheme string) bool {
	return strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https")
}

func rejectWith(url string, reason Reason, detail error) *Error {
	e := reject(url, reason)
	if detail != nil {
		e.Err = fmt.Errorf("%w: %w", e.Err, detail)
	}
	return e
}

func rejectBase(base string, reason Reason) *Error {
	return &Error{URL: base, Reason: ReasonBase, Err: fmt.Errorf("%w (%s)", ErrBase, reason)}
}

// appendCanonical appends the canonical form of the absolute reference t to
// dst. On failure it returns the Reason and, if any, an underlying error.
func (n *Normalizer) appendCanonical(dst []byte, t reference) ([]byte, Reason, error) {
	var defaultPort int
	switch {
	case len(t.scheme) == 4 && strings.EqualFold(t.scheme, "http"):
		dst, defaultPort = append(dst, "http://"...), 80
	case len(t.scheme) == 5 && strings.EqualFold(t.scheme, "https"):
		dst, defaultPort = append(dst, "https://"...), 443
	default:
		return dst, ReasonScheme, nil
	}
	if !t.hasAuthority {
		return dst, ReasonNoHost, nil
	}
	// Userinfo is dropped (WHATWG, and RFC 3986 §7.5 deprecates credentials
	// in URLs). WHATWG splits at the last '@'.
	a := t.authority
	if i := strings.LastIndexByte(a, '@'); i >= 0 {
		a = a[i+1:]
	}
	host, port, hasPort := a, "", false
	if len(a) > 0 && a[0] == '[' {
		if i := strings.IndexByte(a, ']'); i >= 0 {
			host = a[:i+1]
			switch rest := a[i+1:]; {
			case rest == "":
			case rest[0] == ':':
				port, hasPort = rest[1:], true
			default:
				return dst, ReasonHost, nil
			}
		}
	} else if i := strings.IndexByte(a, ':'); i >= 0 {
		host, port, hasPort = a[:i], a[i+1:], true
	}
	if host == "" {
		return dst, ReasonNoHost, nil
	}
	dst, reason, err := appendHost(dst, host)
	if reason != "" {
		return dst, reason, err
	}
	if hasPort && port != "" {
		// WHATWG port state: decimal digits, leading zeros allowed, at
		// most 65535; the scheme's default port is dropped (RFC 3986 §6.2.3).
		v := 0
		for i := 0; i < len(port); i++ {
			c := port[i]
			if c < '0' || c > '9' {
				return dst, ReasonPort, nil
			}
			if v = v*10 + int(c-'0'); v > 65535 {
				return dst, ReasonPort, nil
			}
		}
		if v != defaultPort {
			dst = append(dst, ':')
			dst = strconv.AppendInt(dst, int64(v), 10)
		}
	}
	dst = n.appendPath(dst, t.dir, t.path)
	if t.hasQuery && t.query != "" {
		dst = n.appendQuery(dst, t.query)
	}
	return dst, "", nil
}

// appendPath appends the canonical form of the absolute (or empty) path
// dir+path (dir is empty or ends in '/'): "/" for an empty path (RFC 3986
// §6.2.3), percent-encoding normalized per segment (appendEscaped), session
// path parameters removed, then dot segments removed (§6.2.2.3; after
// decoding, so "%2E%2E" counts as "..", as in WHATWG). The case of the path
// is never changed.
func (n *Normalizer) appendPath(dst []byte, dir, path string) []byte {
	root := len(dst)
	dst = append(dst, '/')
	p, rest := dir, path
	if p == "" {
		p, rest = rest, ""
	}
	if p == "" {
		return dst
	}
	if p[0] == '/' {
		p = p[1:]
	}
	for {
		if p == "" && rest != "" {
			// dir is done (it ends in '/'): go on with path.
			p, rest = rest, ""
		}
		seg := p
		i := strings.IndexByte(p, '/')
		if i >= 0 {
			seg = p[:i]
		}
		start := len(dst)
		dst = appendEscaped(dst, seg, classPath)
		if !n.path.empty() && indexByte(dst[start:], ';') >= 0 {
			dst = n.stripPathParams(dst, start)
		}
		switch s := dst[start:]; {
		case len(s) == 1 && s[0] == '.':
			dst = dst[:start]
		case len(s) == 2 && s[0] == '.' && s[1] == '.':
			dst = dst[:start]
			if start-1 > root {
				dst = dst[:root+lastIndexByte(dst[root:start-1], '/')+1]
			}
		default:
			if i >= 0 {
				dst = append(dst, '/')
			}
		}
		if i < 0 {
			return dst
		}
		p = p[i+1:]
	}
}

func lastIndexByte(b []byte, c byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == c {
			return i
		}
	}
	return -1
}

// stripPathParams removes from the segment dst[start:] every ";name=value"
// parameter whose name is a session parameter (";jsessionid=…").
func (n *Normalizer) stripPathParams(dst []byte, start int) []byte {
	seg := dst[start:]
	first := indexByte(seg, ';')
	w := start + first // write position
	for r := first; r < len(seg); {
		end := r + 1
		for end < len(seg) && seg[end] != ';' {
			end++
		}
		param := seg[r+1 : end] // without the leading ';'
		if eq := indexByte(param, '='); eq >= 0 && n.path.match(param[:eq]) {
			r = end
			continue
		}
		w += copy(dst[w:], seg[r:end])
		r = end
	}
	return dst[:w]
}

// span is one query parameter in the scratch buffer of appendQuery.
type span struct{ start, key, end int }

// appendQuery appends '?' and the canonical query, or nothing if no
// parameter remains. Parameters are split on '&' only; empty ones ("a&&b")
// are dropped; each has its percent-encoding normalized (appendEscaped);
// tracking and session parameters are removed; the rest are sorted by name,
// stably (values of a repeated name keep their order), bytes compared as
// they are, never decoded or re-encoded.
func (n *Normalizer) appendQuery(dst []byte, q string) []byte {
	var scratchBuf [256]byte
	var spanBuf [16]span
	scratch, spans := scratchBuf[:0], spanBuf[:0]
	sorted := true
	for len(q) > 0 {
		piece := q
		i := strings.IndexByte(q, '&')
		if i >= 0 {
			piece, q = q[:i], q[i+1:]
		} else {
			q = ""
		}
		if piece == "" {
			continue
		}
		start := len(scratch)
		scratch = appendEscaped(scratch, piece, classQuery)
		key := indexByte(scratch[start:], '=')
		if key < 0 {
			key = len(scratch) - start
		}
		if n.query.match(scratch[start : start+key]) {
			scratch = scratch[:start]
			continue
		}
		sp := span{start, start + key, len(scratch)}
		if len(spans) > 0 && compareKeys(scratch, spans[len(spans)-1], sp) > 0 {
			sorted = false
		}
		spans = append(spans, sp)
	}
	if len(spans) == 0 {
		return dst
	}
	if !sorted {
		// Stable: equal names keep their order (spans are in input order).
		slices.SortFunc(spans, func(a, b span) int {
			if c := compareKeys(scratch, a, b); c != 0 {
				return c
			}
			return a.start - b.start
		})
	}
	dst = append(dst, '?')
	for i, sp := range spans {
		if i > 0 {
			dst = append(dst, '&')
		}
		dst = append(dst, scratch[sp.start:sp.end]...)
	}
	return dst
}

func compareKeys(buf []byte, a, b span) int {
	return bytes.Compare(buf[a.start:a.key], buf[b.start:b.key])
}
