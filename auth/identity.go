package auth

import (
	"crypto/x509"
	"fmt"
	"strings"
)

// Identities maps the names a client certificate carries (its subject
// common name, DNS, URI and e-mail subject alternative names) to roles.
// The zero value maps none.
type Identities map[string]Role

// ParseIdentities reads entries of the form "name=role", as the settings
// list them: "fetcher-1=crawl", "spiffe://sieve/ops=admin".
func ParseIdentities(entries []string) (Identities, error) {
	ids := Identities{}
	for _, e := range entries {
		i := strings.LastIndexByte(e, '=')
		if i <= 0 {
			return nil, fmt.Errorf("identity %q: want name=role", e)
		}
		name, roleName := strings.TrimSpace(e[:i]), strings.TrimSpace(e[i+1:])
		role, err := ParseRole(roleName)
		if err != nil {
			return nil, fmt.Errorf("identity %q: %w", e, err)
		}
		if _, dup := ids[name]; dup {
			return nil, fmt.Errorf("identity %q given twice", name)
		}
		ids[name] = role
	}
	return ids, nil
}

// Role returns the highest role any of cert's names maps to, and the name
// that gave it (the common name when none does, for the logs).
func (ids Identities) Role(cert *x509.Certificate) (string, Role) {
	best, role := cert.Subject.CommonName, None
	try := func(name string) {
		if r, ok := ids[name]; ok && name != "" && r > role {
			best, role = name, r
		}
	}
	try(cert.Subject.CommonName)
	for _, n := range cert.DNSNames {
		try(n)
	}
	for _, u := range cert.URIs {
		try(u.String())
	}
	for _, n := range cert.EmailAddresses {
		try(n)
	}
	return best, role
}
