//go:build unix

package credentials_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sievecrawl/sieve/credentials"
)

// TestGenerateOwners: each secret goes to its reader (compose runs
// Generate as root for Sieve, uid 10001, and Prometheus, 65534); the CA
// key stays the generating user's. It needs root, which chown does.
func TestGenerateOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	dir := t.TempDir()
	o := options(dir)
	o.Owner, o.Tokens[0].Owner = 10001, 65534
	if _, err := credentials.Generate(o); err != nil {
		t.Fatal(err)
	}
	for name, uid := range map[string]int{"server-key.pem": 10001, "tokens.csv": 10001, "token-ops": 10001,
		"token-prometheus": 65534, "ca-key.pem": 0, "web.yml": 0} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := int(st.Sys().(*syscall.Stat_t).Uid); got != uid {
			t.Errorf("%s owned by %d, want %d", name, got, uid)
		}
	}
}
