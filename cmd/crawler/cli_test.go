package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sievecrawl/sieve/config"
)

// TestCLIUsage checks what the crawler prints for bad or help flags.
func TestCLIUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		inOut    string
		notInOut string
		inErr    string
		errLines int // at most, 0: any
	}{
		// Issue 10 item 6: a mistyped flag printed 191 lines of usage.
		{name: "mistyped flag", args: []string{"run", "--crawl-max-dept", "3"}, code: 2,
			inErr: "crawler run: flag provided but not defined: -crawl-max-dept\nRun 'crawler run --help' for every setting.\n", errLines: 2},
		{name: "bad value", args: []string{"run", "--crawl-max-depth", "x"}, code: 2, inErr: "crawl-max-depth", errLines: 2},
		{name: "run help", args: []string{"run", "--help"}, code: 0, inOut: "--json"},
		// Issue 10 item 6: --json was listed under seed, which ignores it.
		{name: "seed help", args: []string{"seed", "--help"}, code: 0, inOut: "--crawl-id", notInOut: "--json "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, t.Context(), tt.args...)
			if code != tt.code || !strings.Contains(out, tt.inOut) || !strings.Contains(errOut, tt.inErr) ||
				(tt.notInOut != "" && strings.Contains(out, tt.notInOut)) {
				t.Errorf("exit %d, want %d; stdout (want %q, not %q):\n%s\nstderr (want %q):\n%s", code, tt.code, tt.inOut, tt.notInOut, out, tt.inErr, errOut)
			}
			if n := strings.Count(errOut, "\n"); tt.errLines > 0 && n > tt.errLines {
				t.Errorf("stderr has %d lines, want at most %d:\n%s", n, tt.errLines, errOut)
			}
		})
	}
}

// TestSharedConfigFile checks that the crawler reads the file the dedup
// worker reads too (cmd/dedup-worker's TestCLIUsage reads the same one),
// and that a typo in it is still an error (issue 10 item 6).
func TestSharedConfigFile(t *testing.T) {
	env := func(path string) func(string) (string, bool) {
		return func(k string) (string, bool) { return path, k == config.EnvPrefix+"CONFIG" }
	}
	inv, err := parseSettings("run", nil, env("../../config/testdata/shared.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if inv.Crawl.ID != "shared" || inv.Filter.Capacity != 200_000 || inv.Worker.Batch != 32 || !inv.Embedded {
		t.Errorf("settings from the shared file: crawl %q, capacity %d, batch %d, embedded %v", inv.Crawl.ID, inv.Filter.Capacity, inv.Worker.Batch, inv.Embedded)
	}
	typo := filepath.Join(t.TempDir(), "typo.yaml")
	if err := os.WriteFile(typo, []byte("crawl:\n  max_dept: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := parseSettings("run", nil, env(typo)); err == nil || !strings.Contains(err.Error(), "crawl.max_dept") {
		t.Errorf("a typo in the crawl section: %v, want an error naming crawl.max_dept", err)
	}
}

// TestCrawlerKeys checks that config.CrawlerKeys, which the dedup worker
// skips in a shared file, are exactly the crawler's own top-level keys.
func TestCrawlerKeys(t *testing.T) {
	top := func(target any) []string {
		_, l := envNames(t, target)
		var keys []string
		for _, p := range l.Settings() {
			k, _, _ := strings.Cut(p, ".")
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		return keys
	}
	shared := top(&config.Config{})
	var own []string
	for _, k := range top(&settings{}) {
		if !slices.Contains(shared, k) {
			own = append(own, k)
		}
	}
	slices.Sort(own)
	if want := config.CrawlerKeys(); !slices.Equal(own, want) {
		t.Errorf("the crawler's own top-level keys are %q, config.CrawlerKeys() %q", own, want)
	}
}

// TestFetchEventsSetting checks crawl.fetch_events: fetch events are
// published with an external NATS and skipped in the embedded mode unless
// asked for, and a value other than on, off or empty is refused.
func TestFetchEventsSetting(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	for _, tc := range []struct {
		args []string
		skip bool
	}{
		{nil, false},
		{[]string{"--embedded"}, true},
		{[]string{"--embedded", "--crawl-fetch-events", "on"}, false},
		{[]string{"--crawl-fetch-events", "off"}, true},
	} {
		inv, err := parseSettings("run", tc.args, noEnv)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if got := inv.crawlOptions().SkipFetchEvents; got != tc.skip {
			t.Errorf("%q: fetch events skipped %v, want %v", tc.args, got, tc.skip)
		}
	}
	if _, err := parseSettings("run", []string{"--crawl-fetch-events", "yes"}, noEnv); err == nil || !strings.Contains(err.Error(), "crawl.fetch_events") {
		t.Errorf("crawl.fetch_events yes: %v, want an error naming the setting", err)
	}
}
