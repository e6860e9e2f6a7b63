package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sievecrawl/sieve/redistest"
)

// TestForgetCommand imports URLs into a cuckoo filter (in Redis and in a
// memory-mode snapshot), forgets some, and checks that exactly those read
// as new again and are admitted again by a later import; a Bloom filter is
// refused with why and what to use instead.
func TestForgetCommand(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	places := []struct {
		name string
		env  map[string]string
	}{
		{"redis", map[string]string{"SIEVE_REDIS_URL": srv.URL(), "SIEVE_FILTER_NAME": "forget-test"}},
		{"snapshot", map[string]string{"SIEVE_FILTER_SNAPSHOT": filepath.Join(t.TempDir(), "seen.cuckoo")}},
	}
	for _, pl := range places {
		t.Run(pl.name, func(t *testing.T) {
			env := map[string]string{"SIEVE_FILTER_KIND": "cuckoo", "SIEVE_FILTER_CAPACITY": "10000"}
			for k, v := range pl.env {
				env[k] = v
			}
			run := func(stdin string, args ...string) (int, string, string) {
				t.Helper()
				return runCLI(t, stdin, env, args...)
			}
			if code, out, errOut := run("", "forget", "https://a.example/"); code != exitFail || !strings.Contains(errOut, "does not exist") {
				t.Errorf("forget before the filter exists: exit %d, %q %q; want exit 1, does not exist", code, out, errOut)
			}
			urls := "https://a.example/\nhttps://b.example/\nhttps://c.example/\n"
			if code, out, errOut := run(urls, "import", "-"); code != exitOK || !strings.Contains(out, "3 new") {
				t.Fatalf("import: exit %d, %q, %q", code, out, errOut)
			}
			code, out, errOut := run("", "forget", "HTTPS://A.example:443/", "https://never.example/", "mailto:x@example.com")
			want := "forgotten\thttps://a.example/\nabsent\thttps://never.example/\nrejected scheme\tmailto:x@example.com\n"
			if code != exitFail || out != want {
				t.Errorf("forget: exit %d, stdout %q (stderr %q); want exit 1 (a rejected URL) and %q", code, out, errOut, want)
			}
			code, out, _ = run("", "check", "https://a.example/", "https://b.example/")
			if want := "new\thttps://a.example/\nseen\thttps://b.example/\n"; code != exitOK || out != want {
				t.Errorf("check after forget: exit %d, %q; want %q", code, out, want)
			}
			if code, out, errOut := run(urls, "import", "-"); code != exitOK || !strings.Contains(out, "1 new, 2 already seen") {
				t.Errorf("import after forget: exit %d, %q, %q; want the forgotten URL admitted again, once", code, out, errOut)
			}
		})
	}
	t.Run("bloom refuses", func(t *testing.T) {
		env := map[string]string{"SIEVE_REDIS_URL": srv.URL(), "SIEVE_FILTER_NAME": "forget-bloom"}
		if code, out, errOut := runCLI(t, "https://a.example/\n", env, "import", "-"); code != exitOK {
			t.Fatalf("import: exit %d, %q, %q", code, out, errOut)
		}
		code, out, errOut := runCLI(t, "", env, "forget", "https://a.example/")
		for _, want := range []string{"cannot forget", "bits are shared", "cuckoo", "--revisit-after"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("forget on a Bloom filter: stderr lacks %q:\n%s", want, errOut)
			}
		}
		if code != exitUsage || out != "" {
			t.Errorf("forget on a Bloom filter: exit %d, stdout %q; want exit %d and nothing", code, out, exitUsage)
		}
	})
}
