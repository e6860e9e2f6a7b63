package main

import (
	"strings"
	"testing"

	"github.com/sievecrawl/sieve/config"
)

// TestPageNotice pins where the crawler says to watch its page: compose's
// crawler listens on :8080 in its container and printed
// https://127.0.0.1:8080/, which from the host is not the page (issue 39,
// item 18).
func TestPageNotice(t *testing.T) {
	const local = "https://127.0.0.1:8080/"
	for _, tt := range []struct {
		name     string
		h        config.HTTP
		want     string // the line starts with it
		fromHere bool   // and says the address opens from this machine only
	}{
		{name: "loopback: the page's own URL", h: config.HTTP{Addr: "127.0.0.1:8080"}, want: "watch it at " + local},
		{name: "one interface: the page's own URL", h: config.HTTP{Addr: "10.1.2.3:8080"}, want: "watch it at " + local},
		{name: "every interface (compose)", h: config.HTTP{Addr: ":8080"}, want: "watch it at " + local + " from this machine or container", fromHere: true},
		{name: "every interface, IPv6", h: config.HTTP{Addr: "[::]:8080"}, want: "watch it at " + local + " from this machine or container", fromHere: true},
		{name: "every interface, IPv4", h: config.HTTP{Addr: "0.0.0.0:8080"}, want: "watch it at " + local + " from this machine or container", fromHere: true},
		{name: "public URL", h: config.HTTP{Addr: ":8080", PublicURL: "https://127.0.0.1:49153/"}, want: "watch it at https://127.0.0.1:49153/"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := pageNotice(tt.h, local)
			if !strings.HasPrefix(got, tt.want) {
				t.Fatalf("pageNotice(%+v) = %q, want it to start with %q", tt.h, got, tt.want)
			}
			if hint := strings.Contains(got, "docker compose port SERVICE 8080") && strings.Contains(got, "http.public_url"); hint != tt.fromHere {
				t.Errorf("pageNotice(%+v) = %q: says where to look from elsewhere %v, want %v", tt.h, got, hint, tt.fromHere)
			}
		})
	}
}
