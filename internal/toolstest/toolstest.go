// Package toolstest finds the programs written by others that the tests
// check Sieve's output with (the Internet Archive's `warc`, webrecorder's
// `warcio`, Docker Compose), which test.sh installs into $SIEVE_TOOLS.
package toolstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Find returns the path of the program name: the first of rel (paths
// relative to $SIEVE_TOOLS) that is executable, else name on the PATH.
// A missing program skips the test, or fails it with CI=true.
func Find(t testing.TB, name string, rel ...string) string {
	t.Helper()
	if dir := Dir(); dir != "" {
		for _, r := range rel {
			if p := filepath.Join(dir, r); isExec(p) {
				return p
			}
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not installed (./test.sh installs it into $SIEVE_TOOLS)", name)
	}
	t.Skipf("%s is not installed; ./test.sh installs it", name)
	return ""
}

// Dir is $SIEVE_TOOLS, or where test.sh puts the tools by default.
func Dir() string {
	if dir := os.Getenv("SIEVE_TOOLS"); dir != "" {
		return dir
	}
	if dir := os.Getenv("XDG_CACHE_HOME"); dir != "" {
		return filepath.Join(dir, "sieve-tools")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".cache", "sieve-tools")
	}
	return ""
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}
