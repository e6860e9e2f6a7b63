package crawl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
)

// ErrForbiddenAddress is returned (wrapped in an *AddressError) when a host
// resolves to an address the crawler must not contact: loopback, private,
// link-local (which includes the 169.254.169.254 cloud metadata endpoint),
// shared (100.64.0.0/10, Alibaba's metadata endpoint), unspecified, multicast
// or reserved.
var ErrForbiddenAddress = errors.New("crawl: forbidden address")

// AddressError describes a refused connection: the host that was asked for and
// the address it resolved to.
type AddressError struct {
	Host string
	Addr netip.Addr
}

func (e *AddressError) Error() string {
	return fmt.Sprintf("crawl: %s resolves to forbidden address %s", e.Host, e.Addr)
}

// Unwrap returns ErrForbiddenAddress.
func (e *AddressError) Unwrap() error { return ErrForbiddenAddress }

// special lists the IPv4 and IPv6 ranges that netip's predicates do not cover
// but a crawler must not reach either.
var special = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network" (RFC 791)
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space, CGNAT (RFC 6598); 100.100.100.200 is Alibaba's metadata endpoint
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments (RFC 6890)
	netip.MustParsePrefix("192.0.2.0/24"),    // TEST-NET-1 (RFC 5737)
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking (RFC 2544)
	netip.MustParsePrefix("198.51.100.0/24"), // TEST-NET-2
	netip.MustParsePrefix("203.0.113.0/24"),  // TEST-NET-3
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, includes broadcast (RFC 1112)
	netip.MustParsePrefix("2001:db8::/32"),   // documentation (RFC 3849)
	netip.MustParsePrefix("100::/64"),        // discard-only (RFC 6666)
}

// Forbidden reports whether a crawler must not connect to addr unless told
// otherwise.
func Forbidden(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() ||
		addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast() || addr.IsMulticast() ||
		addr.IsUnspecified() {
		return true
	}
	for _, p := range special {
		if p.Contains(addr) {
			return true
		}
	}
	if addr.Is6() {
		b := addr.As16()
		// NAT64 (64:ff9b::/96, RFC 6052) and 6to4 (2002::/16, RFC 3056)
		// embed an IPv4 address that may itself be forbidden.
		if netip.MustParsePrefix("64:ff9b::/96").Contains(addr) {
			return Forbidden(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		}
		if b[0] == 0x20 && b[1] == 0x02 {
			return Forbidden(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
		}
	}
	return false
}

// guard decides which connections the fetcher may open. The check runs in
// net.Dialer.ControlContext, after DNS resolution and for every address tried,
// so neither a DNS answer nor a redirect can lead the crawler to a forbidden
// address. guard is safe for concurrent use.
type guard struct {
	mu       sync.RWMutex
	hosts    map[string]bool // lower-case host names (no port) allowed to resolve anywhere
	prefixes []netip.Prefix  // forbidden-range addresses allowed anyway
}

// newGuard builds a guard from allow entries: each is a host name, an IP
// address or a CIDR prefix.
func newGuard(allow []string) (*guard, error) {
	g := &guard{hosts: map[string]bool{}}
	for _, a := range allow {
		if err := g.allow(a); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// allow adds one host name, IP address or CIDR prefix.
func (g *guard) allow(entry string) error {
	entry = strings.TrimSpace(entry)
	if entry == "" {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if p, err := netip.ParsePrefix(entry); err == nil {
		g.prefixes = append(g.prefixes, p.Masked())
		return nil
	}
	if a, err := netip.ParseAddr(strings.Trim(entry, "[]")); err == nil {
		g.prefixes = append(g.prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		return nil
	}
	if strings.ContainsAny(entry, "/:@ ") {
		return fmt.Errorf("crawl: allowed address %q is neither a host name, an IP address nor a CIDR prefix", entry)
	}
	g.hosts[strings.ToLower(strings.TrimSuffix(entry, "."))] = true
	return nil
}

// allowHostOf allows the host of a seed URL's authority (host or host:port).
func (g *guard) allowHostOf(hostport string) {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "" {
		return
	}
	if a, err := netip.ParseAddr(host); err == nil {
		g.mu.Lock()
		g.prefixes = append(g.prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		g.mu.Unlock()
		return
	}
	g.mu.Lock()
	g.hosts[strings.ToLower(strings.TrimSuffix(host, "."))] = true
	g.mu.Unlock()
}

// check returns nil if host may be reached at addr.
func (g *guard) check(host string, addr netip.Addr) error {
	addr = addr.Unmap()
	if !Forbidden(addr) {
		return nil
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.hosts[strings.ToLower(strings.TrimSuffix(host, "."))] {
		return nil
	}
	for _, p := range g.prefixes {
		if p.Contains(addr) {
			return nil
		}
	}
	return &AddressError{Host: host, Addr: addr}
}

type dialHostKey struct{}

// dialContext returns a DialContext function for http.Transport that refuses
// forbidden addresses.
func (g *guard) dialContext(d *net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	dd := *d
	dd.ControlContext = func(ctx context.Context, network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("crawl: dial address %q: %w", address, err)
		}
		host, _ := ctx.Value(dialHostKey{}).(string)
		return g.check(host, ap.Addr())
	}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			host = address
		}
		return dd.DialContext(context.WithValue(ctx, dialHostKey{}, host), network, address)
	}
}
