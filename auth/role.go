package auth

import "fmt"

// Role is what a client may do. Roles are ordered: a role allows what every
// lower one does. The zero value, None, allows nothing.
type Role int

// The roles, lowest first.
const (
	// None is no role: a client that proved nothing.
	None Role = iota
	// Read sees: listings, statistics, URL statuses, the live page and
	// metrics.
	Read
	// Crawl is Read and what a fetcher needs: taking URLs and putting
	// them back or putting new ones.
	Crawl
	// Admin is Crawl and changing the frontier: deleting crawls and
	// queues, purging, blocking, pausing, delays, limits, the log level.
	Admin
)

var roleNames = [...]string{None: "none", Read: "read", Crawl: "crawl", Admin: "admin"}

// String returns the role's name as ParseRole reads it.
func (r Role) String() string {
	if r < 0 || int(r) >= len(roleNames) {
		return fmt.Sprintf("Role(%d)", int(r))
	}
	return roleNames[r]
}

// Allows reports whether a client of role r may make a call that needs
// role need.
func (r Role) Allows(need Role) bool { return need > None && r >= need }

// ParseRole reads a role's name: read, crawl or admin.
func ParseRole(s string) (Role, error) {
	for r := Read; r <= Admin; r++ {
		if roleNames[r] == s {
			return r, nil
		}
	}
	return None, fmt.Errorf("unknown role %q (want read, crawl or admin)", s)
}
