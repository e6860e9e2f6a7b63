package crawl_test

import (
	"fmt"
	"net/netip"

	"github.com/sievecrawl/sieve/crawl"
)

// The fetcher refuses to connect to these addresses (after DNS resolution)
// unless a seed is on them or they are allowed explicitly.
func ExampleForbidden() {
	for _, a := range []string{"93.184.215.14", "127.0.0.1", "10.1.2.3", "169.254.169.254", "::ffff:192.168.0.1", "2606:4700::1111"} {
		fmt.Println(a, crawl.Forbidden(netip.MustParseAddr(a)))
	}
	// Output:
	// 93.184.215.14 false
	// 127.0.0.1 true
	// 10.1.2.3 true
	// 169.254.169.254 true
	// ::ffff:192.168.0.1 true
	// 2606:4700::1111 false
}
