package warc

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tool finds a program the tests read WARC files with, written by others:
// in $SIEVE_TOOLS (where test.sh installs them) or on the PATH. With
// CI=true a missing tool fails the test.
func tool(t *testing.T, name string, rel ...string) string {
	t.Helper()
	if dir := os.Getenv("SIEVE_TOOLS"); dir != "" {
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

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// verifyWithIA runs the Internet Archive's `warc verify` on files and fails
// the test unless it finds every file valid.
func verifyWithIA(t *testing.T, files ...string) {
	t.Helper()
	bin := tool(t, "ia-warc", "bin/ia-warc")
	out, err := exec.Command(bin, append([]string{"verify", "--json"}, files...)...).CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if err != nil || !validAll(out, len(files)) {
		t.Fatalf("warc verify: %v\n%s", err, out)
	}
}

// validAll reports whether `warc verify --json` output says n files are
// valid, every record read, and logs no error.
func validAll(out []byte, n int) bool {
	valid := 0
	for _, line := range bytes.Split(out, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e struct {
			Level          string `json:"level"`
			Valid          *bool  `json:"valid"`
			Errors         int    `json:"errors"`
			AllRecordsRead *bool  `json:"allRecordsRead"`
		}
		if err := json.Unmarshal(line, &e); err != nil || e.Level == "ERROR" {
			return false
		}
		if e.Valid != nil {
			if !*e.Valid || e.Errors != 0 || e.AllRecordsRead == nil || !*e.AllRecordsRead {
				return false
			}
			valid++
		}
	}
	return valid == n
}

// cdxIndex runs webrecorder's `warcio cdx-index` on file and returns its
// lines.
func cdxIndex(t *testing.T, file string) []string {
	t.Helper()
	bin := tool(t, "warcio", "node_modules/.bin/warcio")
	out, err := exec.Command(bin, "cdx-index", file).Output()
	if err != nil {
		t.Fatalf("warcio cdx-index: %v", err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}
