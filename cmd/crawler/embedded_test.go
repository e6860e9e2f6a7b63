package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/pipeline"
)

// runCLI runs the crawler's entry point in this process.
func runCLI(tb testing.TB, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	tb.Helper()
	var out, errb bytes.Buffer
	code = run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestEmbeddedConfig checks the settings the embedded worker gets: the
// worker section as `dedup-worker run` reads it (worker.seen_cache 0 is no
// cache; issue 10 item 12 found it ignored), the snapshot in the data
// directory.
func TestEmbeddedConfig(t *testing.T) {
	tests := []struct {
		name      string
		flags     []string
		seenCache int    // of the worker options
		snapshot  string // relative to the data dir, "" for none
	}{
		{"defaults", nil, 1_000_000, "seen.bloom"},
		{"no seen cache", []string{"--worker-seen-cache", "0"}, -1, "seen.bloom"},
		{"cuckoo", []string{"--filter-kind", "cuckoo", "--worker-seen-cache", "10"}, 10, "seen.cuckoo"},
		{"redis", []string{"--redis-url", "redis://127.0.0.1:1"}, 1_000_000, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := loadSettings(t, append([]string{"--embedded", "--data-dir", "d"}, tt.flags...)...)
			cfg := embeddedConfig(s)
			if got := cfg.WorkerOptions().SeenCache; got != tt.seenCache {
				t.Errorf("SeenCache = %d, want %d", got, tt.seenCache)
			}
			want := ""
			if tt.snapshot != "" {
				want = filepath.Join("d", tt.snapshot)
			}
			if cfg.Filter.Snapshot != want {
				t.Errorf("snapshot %q, want %q", cfg.Filter.Snapshot, want)
			}
		})
	}
}

// loadSettings loads the crawler's settings from flags only.
func loadSettings(tb testing.TB, args ...string) settings {
	tb.Helper()
	s, err := parseSettings("run", args, func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatal(err)
	}
	return s.settings
}

// TestEmbeddedFilterErrors checks that a filter the embedded worker cannot
// open ends the run with the filter's own error and exit status 1 (issue 10
// item 1: it panicked).
func TestEmbeddedFilterErrors(t *testing.T) {
	policy := func(tb testing.TB) string {
		n, err := config.Default().Normalize.Normalizer()
		if err != nil {
			tb.Fatal(err)
		}
		return n.Version()
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		flags []string
		want  string
	}{
		{"corrupt", func(t *testing.T, dir string) {
			if err := os.WriteFile(crawlSnapshot(dir, "bloom"), []byte("SIEVEBF\n\x00\x01garbage"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, nil, "corrupt"},
		{"parameter mismatch", func(t *testing.T, dir string) {
			f := config.Default().Filter
			f.Capacity = 1000
			f.Snapshot = crawlSnapshot(dir, "bloom")
			sf, err := pipeline.OpenFilter(t.Context(), f, nil, policy(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := pipeline.SaveFilter(t.Context(), f, sf); err != nil {
				t.Fatal(err)
			}
		}, []string{"--filter-capacity", "2000"}, "initial_capacity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			args := append([]string{"run", "--embedded", "--data-dir", dir, "--seed", "http://127.0.0.1:1/", "--progress", "never"}, tt.flags...)
			code, _, stderr := runCLI(t, ctx, args...)
			if code != 1 || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, crawlSnapshot(dir, "bloom")) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and the filter's error (%q) naming the file", code, stderr, tt.want)
			}
		})
	}
}

// TestEmbeddedAdoptsStoredFilter checks that a data directory whose filter
// was made with other sizes (the worker's 10 million URLs, the embedded
// default before it was 100,000) starts, its filter's stored parameters
// adopted (issue 11: it failed with an initial_capacity mismatch).
func TestEmbeddedAdoptsStoredFilter(t *testing.T) {
	dir := t.TempDir()
	n, err := config.Default().Normalize.Normalizer()
	if err != nil {
		t.Fatal(err)
	}
	old := config.Default().Filter // capacity 10,000,000
	old.Snapshot = crawlSnapshot(dir, "bloom")
	sf, err := pipeline.OpenFilter(t.Context(), old, nil, n.Version())
	if err != nil {
		t.Fatal(err)
	}
	if err := pipeline.SaveFilter(t.Context(), old, sf); err != nil {
		t.Fatal(err)
	}
	sf.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	code, _, stderr := runCLI(t, ctx, "run", "--embedded", "--data-dir", dir, "--seed", "http://127.0.0.1:1/",
		"--progress", "never", "--idle-exit", "1s", "--crawl-max-retries", "0")
	if code != 0 || strings.Contains(stderr, "initial_capacity") {
		t.Errorf("exit %d, stderr:\n%s\nwant the run to start on the stored filter and end", code, stderr)
	}
}
