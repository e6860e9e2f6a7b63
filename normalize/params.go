package normalize

import (
	"fmt"
	"strings"
)

// DefaultStripParams returns the tracking parameters removed from queries by
// default: campaign and click identifiers that name no resource. An entry
// ending in '*' is a prefix. The list is part of policy version 1.
func DefaultStripParams() []string {
	return []string{
		"utm_*",                                               // Google Analytics campaign tags (utm_source, utm_medium, …)
		"gclid", "gclsrc", "dclid", "gbraid", "wbraid", "_gl", // Google Ads, Google linker
		"fbclid",           // Facebook
		"msclkid",          // Microsoft Advertising
		"mc_cid", "mc_eid", // Mailchimp
		"yclid",           // Yandex
		"igshid",          // Instagram
		"twclid",          // Twitter/X
		"ttclid",          // TikTok
		"li_fat_id",       // LinkedIn
		"_hsenc", "_hsmi", // HubSpot
		"mkt_tok", // Marketo
	}
}

// DefaultSessionParams returns the session-identifier parameters removed by
// default, from the query and from ";name=value" path parameters
// (";jsessionid=…"). An entry ending in '*' is a prefix. The list is part of
// policy version 1; Apache Nutch's default regex normalizer strips the same
// family ((l|j|bv_)?(sid|phpsessid|sessionid)).
func DefaultSessionParams() []string {
	return []string{
		"jsessionid",    // Java servlets
		"phpsessid",     // PHP
		"aspsessionid*", // classic ASP (ASPSESSIONIDxxxxxxxx)
		"sid", "sessionid", "session_id", "sessid",
		"cfid", "cftoken", // ColdFusion
		"oscsid", // osCommerce
	}
}

// paramSet matches parameter names, ASCII case-insensitively, against exact
// names and prefixes. It is read-only after newParamSet.
type paramSet struct {
	exact    map[string]struct{}
	maxExact int
	prefixes []string
}

// canonicalParams lowercases, validates, sorts and de-duplicates names.
func canonicalParams(field string, names []string) ([]string, error) {
	out := make([]string, 0, len(names))
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		n := strings.ToLower(string(appendEscaped(nil, name, classQuery)))
		base := strings.TrimSuffix(n, "*")
		if n == "" || strings.ContainsAny(base, "*=&") {
			return nil, fmt.Errorf("normalize: %s: invalid parameter name %q", field, name)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sortStrings(out)
	return out, nil
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func newParamSet(lists ...[]string) paramSet {
	p := paramSet{exact: map[string]struct{}{}}
	for _, list := range lists {
		for _, n := range list {
			if prefix, ok := strings.CutSuffix(n, "*"); ok {
				p.prefixes = append(p.prefixes, prefix)
				continue
			}
			p.exact[n] = struct{}{}
			p.maxExact = max(p.maxExact, len(n))
		}
	}
	return p
}

func (p *paramSet) empty() bool { return len(p.exact) == 0 && len(p.prefixes) == 0 }

// match reports whether name (normalized percent-encoding, any case) is in p.
func (p *paramSet) match(name []byte) bool {
	for _, prefix := range p.prefixes {
		if len(name) >= len(prefix) && equalFoldLower(name[:len(prefix)], prefix) {
			return true
		}
	}
	if len(name) > p.maxExact {
		return false
	}
	var buf [64]byte
	var lower []byte
	if len(name) <= len(buf) {
		lower = buf[:len(name)]
	} else {
		lower = make([]byte, len(name))
	}
	for i, c := range name {
		lower[i] = lowerASCII(c)
	}
	_, ok := p.exact[string(lower)]
	return ok
}

// equalFoldLower reports whether b equals the lowercase s, ASCII
// case-insensitively.
func equalFoldLower(b []byte, s string) bool {
	for i, c := range b {
		if lowerASCII(c) != s[i] {
			return false
		}
	}
	return true
}
