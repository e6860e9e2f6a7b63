package main

import (
	"fmt"
	"net"

	"github.com/sievecrawl/sieve/config"
)

// pageNotice is the line that says where to watch the live page served at
// local (its URL on this machine): http.public_url when set. Otherwise, when
// http.addr is every interface, local opens only from this machine or
// container, so the line says where to look from elsewhere: in compose the
// crawler listened on :8080 and printed https://127.0.0.1:8080/, which from
// the host is not the page (Docker published another port) (issue 39,
// item 18).
func pageNotice(h config.HTTP, local string) string {
	if h.PublicURL != "" {
		return "watch it at " + h.PublicURL
	}
	host, port, err := net.SplitHostPort(h.Addr)
	if ip := net.ParseIP(host); err != nil || (host != "" && (ip == nil || !ip.IsUnspecified())) {
		return "watch it at " + local
	}
	return fmt.Sprintf("watch it at %s from this machine or container; from elsewhere at the address and port "+
		"that reach port %s here (compose: docker compose port SERVICE %s), which http.public_url prints here", local, port, port)
}
