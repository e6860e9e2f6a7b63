package watch

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/sievecrawl/sieve/auth/authtest"
	"github.com/sievecrawl/sieve/config"
)

// TestLocalPageURL: where a command on this machine reaches the surface the
// settings serve: loopback for every interface, https with TLS.
func TestLocalPageURL(t *testing.T) {
	tlsConfig := authtest.NewCA(t, "page CA").WebConfig(t, "reader", "s3cret-pass")
	tests := []struct {
		name, addr, web string
		want, field     string
	}{
		{"loopback", "127.0.0.1:8080", "", "http://127.0.0.1:8080/", ""},
		{"every interface", ":8080", "", "http://127.0.0.1:8080/", ""},
		{"every IPv4 interface", "0.0.0.0:9090", "", "http://127.0.0.1:9090/", ""},
		{"every IPv6 interface", "[::]:8080", "", "http://127.0.0.1:8080/", ""},
		{"a name", "worker-1:8080", "", "http://worker-1:8080/", ""},
		{"IPv6", "[::1]:8080", "", "http://[::1]:8080/", ""},
		{"TLS", ":8080", tlsConfig, "https://127.0.0.1:8080/", ""},
		{"no server", "", "", "", "http.addr"},
		{"no port", "127.0.0.1", "", "", "http.addr"},
		{"a web config that does not exist", ":8080", filepath.Join(t.TempDir(), "none.yml"), "", "http.web_config_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LocalPageURL(config.HTTP{Addr: tt.addr, WebConfigFile: tt.web})
			var fe *config.FieldError
			if tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field) {
				t.Fatalf("LocalPageURL = %q, %v; want an error of %s", got, err, tt.field)
			}
			if tt.field == "" && (err != nil || got != tt.want) {
				t.Fatalf("LocalPageURL = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
