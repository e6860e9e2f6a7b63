package normalize

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// ScopeMode says which hosts a crawl's seeds bring into scope.
type ScopeMode int

const (
	// ScopeHost admits the seeds' hosts exactly (any port or scheme). It
	// is the zero value.
	ScopeHost ScopeMode = iota
	// ScopeDomain admits every host whose registrable domain (public
	// suffix + 1 label, golang.org/x/net/publicsuffix) is a seed's:
	// docs.example.co.uk with a seed on www.example.co.uk.
	ScopeDomain
	// ScopeAny admits every host; only ScopeOptions.Deny limits the crawl.
	ScopeAny
)

// ScopeOptions configures a Scope.
type ScopeOptions struct {
	Seeds []string  // absolute http(s) URLs the crawl starts from
	Mode  ScopeMode // which hosts the seeds admit; zero is ScopeHost
	// Allow lists domains in scope besides those of Mode, subdomains
	// included ("example.org" admits "a.example.org").
	Allow []string
	// Deny lists domains never in scope, subdomains included. Deny wins
	// over Mode and Allow.
	Deny []string
}

// Scope answers whether a URL belongs to a crawl. It is immutable and safe
// for concurrent use.
type Scope struct {
	mode    ScopeMode
	hosts   map[string]bool // ScopeHost: the seeds' hosts
	domains []string        // ScopeDomain: the seeds' registrable domains
	allow   []string
	deny    []string
}

// NewScope returns the Scope of o, or an error naming the invalid seed or
// domain.
func NewScope(o ScopeOptions) (*Scope, error) {
	if o.Mode < ScopeHost || o.Mode > ScopeAny {
		return nil, fmt.Errorf("normalize: scope: unknown mode %d", o.Mode)
	}
	if o.Mode != ScopeAny && len(o.Seeds) == 0 && len(o.Allow) == 0 {
		return nil, errors.New("normalize: scope: no seeds and no allowed domains")
	}
	s := &Scope{mode: o.Mode, hosts: map[string]bool{}}
	for _, seed := range o.Seeds {
		var buf [256]byte
		h, ok := hostOf(buf[:0], seed)
		if !ok {
			return nil, fmt.Errorf("normalize: scope: seed %q is not an absolute http(s) URL with a valid host", seed)
		}
		host := string(h)
		s.hosts[host] = true
		if d := registrable(host); !contains(s.domains, d) {
			s.domains = append(s.domains, d)
		}
	}
	var err error
	if s.allow, err = scopeDomains("Allow", o.Allow); err != nil {
		return nil, err
	}
	if s.deny, err = scopeDomains("Deny", o.Deny); err != nil {
		return nil, err
	}
	return s, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// scopeDomains canonicalizes domain names ("Example.org.", "*.example.org"
// and ".example.org" all become "example.org").
func scopeDomains(field string, names []string) ([]string, error) {
	var out []string
	for _, name := range names {
		d := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(name), "*"), ".")
		if d == "" {
			return nil, fmt.Errorf("normalize: scope: %s: empty domain %q", field, name)
		}
		var buf [256]byte
		h, reason, _ := appendHost(buf[:0], d)
		if reason != "" {
			return nil, fmt.Errorf("normalize: scope: %s: invalid domain %q", field, name)
		}
		out = append(out, string(h))
	}
	return out, nil
}

// registrable returns the registrable domain of a canonical host, or the
// host itself for an IP address, a single label or a public suffix.
func registrable(host string) string {
	if host == "" || host[0] == '[' || isIPv4(host) {
		return host
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(host)
	if err != nil {
		return host
	}
	return d
}

func isIPv4(host string) bool {
	for i := 0; i < len(host); i++ {
		if c := host[i]; (c < '0' || c > '9') && c != '.' {
			return false
		}
	}
	return true
}

// under reports whether host is domain or one of its subdomains.
func under(host []byte, domain string) bool {
	if len(host) == len(domain) {
		return string(host) == domain
	}
	return len(host) > len(domain) && host[len(host)-len(domain)-1] == '.' &&
		string(host[len(host)-len(domain):]) == domain
}

func underAny(host []byte, domains []string) bool {
	for _, d := range domains {
		if under(host, d) {
			return true
		}
	}
	return false
}

// In reports whether the URL u (absolute; canonical or not) is in scope. A
// URL that is not a valid http(s) URL is not.
func (s *Scope) In(u string) bool {
	var buf [256]byte
	host, ok := hostOf(buf[:0], u)
	if !ok {
		return false
	}
	switch {
	case underAny(host, s.deny):
		return false
	case underAny(host, s.allow):
		return true
	case s.mode == ScopeAny:
		return true
	case s.mode == ScopeHost:
		return s.hosts[string(host)]
	}
	// ScopeDomain: a cheap suffix test first, then the registrable domain,
	// which a longer public suffix (a.compute.example.com) can change.
	if !underAny(host, s.domains) {
		return false
	}
	return contains(s.domains, registrable(string(host)))
}

// hostOf appends the canonical host of the absolute http(s) URL u to dst.
func hostOf(dst []byte, u string) ([]byte, bool) {
	c, ok := clean(u)
	if !ok {
		return dst, false
	}
	r := parseReference(c)
	if !isHTTP(r.scheme) || !r.hasAuthority {
		return dst, false
	}
	a := r.authority
	if i := strings.LastIndexByte(a, '@'); i >= 0 {
		a = a[i+1:]
	}
	if len(a) > 0 && a[0] == '[' {
		if i := strings.IndexByte(a, ']'); i >= 0 {
			a = a[:i+1]
		}
	} else if i := strings.IndexByte(a, ':'); i >= 0 {
		a = a[:i]
	}
	if a == "" {
		return dst, false
	}
	dst, reason, _ := appendHost(dst, a)
	return dst, reason == ""
}
