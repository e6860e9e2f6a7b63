package crawl

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// ScopeMode says which hosts a crawl follows links to, relative to its seeds.
type ScopeMode string

// The scope modes.
const (
	// ScopeHost follows links to the seeds' host names only (any port,
	// either scheme). The default.
	ScopeHost ScopeMode = "host"
	// ScopeDomain follows links to every host of the seeds' registrable
	// domains (eTLD+1 by the Public Suffix List): www.example.com and
	// blog.example.com for a seed on example.com.
	ScopeDomain ScopeMode = "domain"
	// ScopeAny follows links to any host (still subject to Deny and to the
	// address guard).
	ScopeAny ScopeMode = "any"
)

// Scope decides which URLs a crawl follows. Allow and Deny hold domain
// patterns: "example.org" matches example.org and all its subdomains.
// A URL is in scope when its host is not denied, and is allowed by Mode or
// matched by Allow. The zero value is ScopeHost with no lists.
type Scope struct {
	Mode  ScopeMode
	Allow []string
	Deny  []string
}

// Validate reports a mode or pattern that cannot work.
func (s Scope) Validate() error {
	switch s.Mode {
	case "", ScopeHost, ScopeDomain, ScopeAny:
	default:
		return fmt.Errorf("crawl: scope mode %q: want host, domain or any", s.Mode)
	}
	for _, p := range append(append([]string(nil), s.Allow...), s.Deny...) {
		if p = normHost(p); p == "" || strings.ContainsAny(p, "/:@ *") {
			return fmt.Errorf("crawl: scope pattern %q: want a domain such as example.org", p)
		}
	}
	return nil
}

// seedSet is what a Scope needs to know of a crawl's seeds.
type seedSet struct {
	mode    ScopeMode // the crawl's recorded scope; "": the crawler's
	hosts   map[string]bool
	domains map[string]bool
}

func newSeedSet(seeds []string) seedSet {
	s := seedSet{hosts: map[string]bool{}, domains: map[string]bool{}}
	for _, raw := range seeds {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			continue
		}
		h := normHost(u.Hostname())
		s.hosts[h] = true
		s.domains[registrable(h)] = true
	}
	return s
}

// In reports whether u is in scope for a crawl with the given seeds, and if
// not, why: "off_host", "off_domain", "denied" or "scheme".
func (s Scope) in(seeds seedSet, u *url.URL) (bool, string) {
	if u.Scheme != "http" && u.Scheme != "https" {
		return false, "scheme"
	}
	h := normHost(u.Hostname())
	for _, p := range s.Deny {
		if matchDomain(h, normHost(p)) {
			return false, "denied"
		}
	}
	for _, p := range s.Allow {
		if matchDomain(h, normHost(p)) {
			return true, ""
		}
	}
	mode := s.Mode
	if seeds.mode != "" {
		mode = seeds.mode
	}
	switch mode {
	case ScopeAny:
		return true, ""
	case ScopeDomain:
		if seeds.domains[registrable(h)] {
			return true, ""
		}
		return false, "off_domain"
	default:
		if seeds.hosts[h] {
			return true, ""
		}
		return false, "off_host"
	}
}

func normHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(strings.TrimSpace(h), "[]")), ".")
}

func matchDomain(host, pattern string) bool {
	return host == pattern || strings.HasSuffix(host, "."+pattern)
}

// registrable returns host's eTLD+1, or host itself for an IP address, a
// single label (localhost) or a public suffix.
func registrable(host string) string {
	if net.ParseIP(host) != nil {
		return host
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(host)
	if err != nil {
		return host
	}
	return d
}
