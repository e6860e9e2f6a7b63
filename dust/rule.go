package dust

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Kind is the kind of a rewrite rule: which difference between two
// spellings of a URL it says does not matter on a host.
type Kind string

// The kinds of rules, after the DUST rules real sites need (Bar-Yossef,
// Keidar, Schonfeld, TWEB 2009; Dasgupta et al., KDD 2008).
const (
	// KindParam: the query parameter Arg names no page: any value, or
	// none, is the same page (session ids, campaign and referrer tags).
	// An Arg "name=value" says only that value is the same as none (a
	// default: lang=en, p=1).
	KindParam Kind = "param"
	// KindCase: the path's letter case does not matter (a case-insensitive
	// server).
	KindCase Kind = "case"
	// KindExt: the extension Arg of a path's last segment (".htm") may be
	// dropped: /a.htm, /a.html and /a name one page once both extensions
	// have a rule.
	KindExt Kind = "ext"
	// KindIndex: a last segment named Arg ("index.html") is its
	// directory: /d/index.html is /d/.
	KindIndex Kind = "index"
	// KindSlash: a trailing slash does not matter: /d/ is /d.
	KindSlash Kind = "slash"
	// KindDupSeg: a path segment repeated at once is one segment:
	// /guide/guide/intro is /guide/intro (relative links gone wrong).
	KindDupSeg Kind = "dupseg"
	// KindMirror: this host serves the pages of host Arg under the same
	// paths; its URLs are spelled on Arg.
	KindMirror Kind = "mirror"
)

// order is the order in which a host's rules rewrite a URL: the host
// first (a mirror takes its target's rules), then the path from the
// outside in, then the query.
var order = []Kind{KindMirror, KindCase, KindDupSeg, KindIndex, KindExt, KindSlash, KindParam}

// Rule is one rewrite rule of a host.
type Rule struct {
	Kind Kind   `json:"kind"`
	Arg  string `json:"arg,omitempty"`
}

// String is the rule as ParseRule reads it: "param:zsid", "case",
// "mirror:docs.example:8080".
func (r Rule) String() string {
	if r.Arg == "" {
		return string(r.Kind)
	}
	return string(r.Kind) + ":" + r.Arg
}

// ErrRule is wrapped by ParseRule's errors.
var ErrRule = errors.New("dust: bad rule")

// ParseRule reads a rule written as Rule.String writes it.
func ParseRule(s string) (Rule, error) {
	k, arg, _ := strings.Cut(strings.TrimSpace(s), ":")
	r := Rule{Kind: Kind(k), Arg: arg}
	switch r.Kind {
	case KindCase, KindSlash, KindDupSeg:
		if arg != "" {
			return Rule{}, fmt.Errorf("%w: %q takes no argument", ErrRule, s)
		}
	case KindParam, KindMirror:
		if arg == "" {
			return Rule{}, fmt.Errorf("%w: %q needs an argument", ErrRule, s)
		}
	case KindExt:
		if !strings.HasPrefix(arg, ".") || len(arg) < 2 || strings.ContainsAny(arg, "/?#") {
			return Rule{}, fmt.Errorf("%w: %q: an extension is .name", ErrRule, s)
		}
	case KindIndex:
		if arg == "" || strings.ContainsAny(arg, "/?#") {
			return Rule{}, fmt.Errorf("%w: %q: an index is a file name", ErrRule, s)
		}
	default:
		return Rule{}, fmt.Errorf("%w: %q: unknown kind (param, case, ext, index, slash, dupseg, mirror)", ErrRule, s)
	}
	bad := " \t\n&="
	if r.Kind == KindParam {
		name, _, _ := strings.Cut(arg, "=")
		if name == "" {
			return Rule{}, fmt.Errorf("%w: %q needs a parameter name", ErrRule, s)
		}
		bad = " \t\n&"
	}
	if strings.ContainsAny(arg, bad) && r.Kind != KindMirror {
		return Rule{}, fmt.Errorf("%w: %q", ErrRule, s)
	}
	return r, nil
}

// Rules are a host's active rules, compiled for Rewrite. The zero value
// rewrites nothing.
type Rules struct {
	mirror string // host this one mirrors
	lower  bool
	dupseg bool
	slash  bool
	index  []string
	ext    []string
	params []string
}

// Compile compiles a host's active rules.
func Compile(rules []Rule) Rules {
	var c Rules
	for _, r := range rules {
		switch r.Kind {
		case KindMirror:
			c.mirror = r.Arg
		case KindCase:
			c.lower = true
		case KindDupSeg:
			c.dupseg = true
		case KindSlash:
			c.slash = true
		case KindIndex:
			c.index = appendNew(c.index, r.Arg)
		case KindExt:
			c.ext = appendNew(c.ext, r.Arg)
		case KindParam:
			c.params = appendNew(c.params, r.Arg)
		}
	}
	return c
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// Empty reports whether the rules rewrite nothing.
func (c Rules) Empty() bool {
	return c.mirror == "" && !c.lower && !c.dupseg && !c.slash && len(c.index) == 0 && len(c.ext) == 0 && len(c.params) == 0
}

// URL is a canonical URL split into the parts rules rewrite. Its fields
// are the raw (escaped) strings of the canonical form.
type URL struct {
	Scheme, Host, Path, Query string
}

// Split splits a canonical absolute URL (no fragment, as package
// normalize writes it).
func Split(u string) (URL, bool) {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok || scheme == "" {
		return URL{}, false
	}
	rest, _, _ = strings.Cut(rest, "#")
	host, pathQuery := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		host, pathQuery = rest[:i], rest[i:]
	}
	if host == "" {
		return URL{}, false
	}
	path, query, _ := strings.Cut(pathQuery, "?")
	if path == "" {
		path = "/"
	}
	return URL{Scheme: scheme, Host: host, Path: path, Query: query}, true
}

// String joins the parts.
func (u URL) String() string {
	s := u.Scheme + "://" + u.Host + u.Path
	if u.Query != "" {
		s += "?" + u.Query
	}
	return s
}

// rewritePath applies the path rules in order.
func (c Rules) rewritePath(p string) string {
	if c.lower {
		p = strings.ToLower(p)
	}
	if c.dupseg {
		p = collapseRepeats(p)
	}
	if len(c.index) > 0 {
		if i := strings.LastIndexByte(p, '/'); i >= 0 && slices.Contains(c.index, p[i+1:]) {
			p = p[:i+1]
		}
	}
	if len(c.ext) > 0 {
		i := strings.LastIndexByte(p, '/')
		last := p[i+1:]
		if j := strings.LastIndexByte(last, '.'); j > 0 && slices.Contains(c.ext, last[j:]) {
			p = p[:i+1+j]
		}
	}
	if c.slash && len(p) > 1 {
		p = strings.TrimRight(p, "/")
		if p == "" {
			p = "/"
		}
	}
	return p
}

// collapseRepeats drops every path segment equal to the one before it.
func collapseRepeats(p string) string {
	segs := strings.Split(p, "/")
	out := segs[:1]
	for i := 1; i < len(segs); i++ {
		if segs[i] != "" && segs[i] == segs[i-1] {
			continue
		}
		out = append(out, segs[i])
	}
	return strings.Join(out, "/")
}

// rewriteQuery drops the parameters the rules name, keeping the others in
// their order.
func (c Rules) rewriteQuery(q string) string {
	if len(c.params) == 0 || q == "" {
		return q
	}
	named := false
	for _, p := range c.params {
		name, _, _ := strings.Cut(p, "=")
		if strings.Contains(q, name) {
			named = true
			break
		}
	}
	if !named {
		return q // the common case costs no allocation
	}
	parts := strings.Split(q, "&")
	out := parts[:0]
	for _, p := range parts {
		name, _, _ := strings.Cut(p, "=")
		if slices.Contains(c.params, name) || slices.Contains(c.params, p) {
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, "&")
}

// rewrite applies c (but not a mirror's target's rules) to u.
func (c Rules) rewrite(u URL) URL {
	if c.mirror != "" {
		u.Host = c.mirror
	}
	u.Path = c.rewritePath(u.Path)
	u.Query = c.rewriteQuery(u.Query)
	return u
}

// ParseHostRule reads a rule of a host as a crawl's settings write it:
// "host rule" ("shop.example:8080 param:zsid"); the host "*" is every
// host.
func ParseHostRule(s string) (HostRule, error) {
	host, rule, ok := strings.Cut(strings.TrimSpace(s), " ")
	if !ok || host == "" {
		return HostRule{}, fmt.Errorf("%w: %q: want \"host rule\"", ErrRule, s)
	}
	r, err := ParseRule(rule)
	if err != nil {
		return HostRule{}, err
	}
	if host == "*" {
		host = ""
	}
	return HostRule{Host: strings.ToLower(host), Rule: r}, nil
}

// String is the rule as ParseHostRule reads it.
func (h HostRule) String() string {
	host := h.Host
	if host == "" {
		host = "*"
	}
	return host + " " + h.Rule.String()
}
