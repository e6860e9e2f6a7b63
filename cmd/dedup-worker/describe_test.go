package main

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sievecrawl/sieve/redistest"
)

// TestCommandsNeedOnlyTheFilterName creates filters of each kind with a
// small capacity (import --filter-capacity 10000), in Redis and in a
// snapshot file, then runs the other commands with only the filter's name
// and place (issue 11, "filters describe themselves"): check and stats
// adopt the stored parameters and write nothing; a conflicting setting is an
// error naming both values; a setting given equal to the stored one is
// reported as applying only at creation; --filter-force is refused by check
// and stats and logged by import.
func TestCommandsNeedOnlyTheFilterName(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	dir := t.TempDir()
	type place struct {
		env   map[string]string
		state func() map[string]string
	}
	places := map[string]place{
		"redis": {map[string]string{"SIEVE_REDIS_URL": srv.URL()}, func() map[string]string { return redistest.Dump(t, srv.Client()) }},
		"snapshot": {map[string]string{"SIEVE_HTTP_ADDR": ""}, func() map[string]string {
			data, err := os.ReadFile(filepath.Join(dir, "seen"))
			if err != nil {
				t.Fatal(err)
			}
			return map[string]string{"seen": string(data)}
		}},
	}
	for name, pl := range places {
		for _, kind := range []string{"bloom", "cuckoo"} {
			t.Run(name+" "+kind, func(t *testing.T) {
				env := maps.Clone(pl.env)
				env["SIEVE_FILTER_NAME"] = "describe-" + kind
				if name == "snapshot" {
					env["SIEVE_FILTER_SNAPSHOT"] = filepath.Join(dir, "seen")
					os.Remove(env["SIEVE_FILTER_SNAPSHOT"])
				}
				run := func(stdin string, args ...string) (int, string, string) {
					t.Helper()
					return runCLI(t, stdin, env, args...)
				}
				urls := "https://a.example/\nhttps://b.example/\n"
				if code, out, errOut := run(urls, "import", "--filter-kind", kind, "--filter-capacity", "10000", "-"); code != exitOK || !strings.Contains(out, "2 new") {
					t.Fatalf("import: exit %d, %q, %q", code, out, errOut)
				}
				before := pl.state()
				for _, tt := range []struct {
					name string
					args []string
					code int
					out  string   // stdout contains
					err  []string // stderr contains
				}{
					{"check with the name only", []string{"check", "https://a.example/", "https://c.example/"}, exitOK,
						"seen\thttps://a.example/\nnew\thttps://c.example/\n", nil},
					{"stats with the name only", []string{"stats", "--json"}, exitOK, `"kind": "` + kind + `"`, nil},
					{"check with a conflicting capacity", []string{"check", "--filter-capacity", "10000000", "https://a.example/"}, exitFail,
						"", []string{"filter.capacity", "initial_capacity=10000,", "initial_capacity=10000000"}},
					{"check with the other kind", []string{"check", "--filter-kind", other(kind), "https://a.example/"}, exitFail,
						"", []string{kind, other(kind)}},
					{"check with the stored capacity given", []string{"check", "--filter-capacity", "10000", "https://a.example/"}, exitOK,
						"seen\thttps://a.example/", []string{"only applies when a filter is created", "filter.capacity"}},
					{"check --filter-force", []string{"check", "--filter-force", "https://a.example/"}, exitUsage,
						"", []string{"filter-force"}},
					{"stats --filter-force", []string{"stats", "--filter-force"}, exitUsage, "", []string{"filter-force"}},
				} {
					code, out, errOut := run("", tt.args...)
					if code != tt.code || !strings.Contains(out, tt.out) {
						t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d and %q", tt.name, code, out, errOut, tt.code, tt.out)
					}
					for _, w := range tt.err {
						if !strings.Contains(errOut, w) {
							t.Errorf("%s: stderr %q lacks %q", tt.name, errOut, w)
						}
					}
				}
				if after := pl.state(); !maps.Equal(before, after) {
					t.Errorf("check and stats changed what is stored")
				}
				// The writing commands adopt too, and log --filter-force.
				code, out, errOut := run("https://c.example/\n", "import", "--filter-force", "-")
				if code != exitOK || !strings.Contains(out, "1 new") || !strings.Contains(errOut, "filter.force") {
					t.Errorf("import --filter-force: exit %d, %q, %q; want 1 new and filter.force logged", code, out, errOut)
				}
				if kind == "cuckoo" {
					if code, out, errOut := run("", "forget", "https://c.example/"); code != exitOK || out != "forgotten\thttps://c.example/\n" {
						t.Errorf("forget with the name only: exit %d, %q, %q", code, out, errOut)
					}
				}
			})
		}
	}
}

func other(kind string) string {
	if kind == "bloom" {
		return "cuckoo"
	}
	return "bloom"
}

// TestDataDirNeedsNoFilterSettings: check and stats on a data directory
// whose cuckoo snapshot was made with a small capacity, and no report left
// beside it, need only --data-dir: the kind from the file there, the sizes
// stored in it.
func TestDataDirNeedsNoFilterSettings(t *testing.T) {
	dir := t.TempDir()
	made := map[string]string{"SIEVE_FILTER_SNAPSHOT": filepath.Join(dir, "seen.cuckoo"), "SIEVE_HTTP_ADDR": ""}
	if code, out, errOut := runCLI(t, "https://a.example/\n", made, "import", "--filter-kind", "cuckoo", "--filter-capacity", "5000", "-"); code != exitOK {
		t.Fatalf("import: exit %d, %q, %q", code, out, errOut)
	}
	before, err := os.ReadFile(filepath.Join(dir, "seen.cuckoo"))
	if err != nil {
		t.Fatal(err)
	}
	none := map[string]string{"SIEVE_HTTP_ADDR": ""}
	if code, out, errOut := runCLI(t, "", none, "check", "--data-dir", dir, "https://a.example/"); code != exitOK || out != "seen\thttps://a.example/\n" {
		t.Errorf("check --data-dir: exit %d, %q, %q; want seen", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "", none, "stats", "--data-dir", dir, "--json"); code != exitOK || !strings.Contains(out, `"kind": "cuckoo"`) {
		t.Errorf("stats --data-dir: exit %d, %q, %q; want the cuckoo filter", code, out, errOut)
	}
	if after, err := os.ReadFile(filepath.Join(dir, "seen.cuckoo")); err != nil || string(after) != string(before) {
		t.Errorf("check and stats changed the snapshot file (%v)", err)
	}
}
