package config

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLoaderGiven checks that the Loader tells settings given in a file, the
// environment or a flag from defaults, and fills Filter.Given.
func TestLoaderGiven(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sieve.yaml")
	if err := os.WriteFile(file, []byte("filter:\n  fpp: 0.02\n  shards:\nredis:\n  url: redis://x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		given []string // Filter.Given
	}{
		{name: "nothing given"},
		{name: "flag", args: []string{"--filter-capacity", "10000"}, given: []string{"capacity"}},
		{name: "flag equal to the default", args: []string{"--filter-capacity", "10000000"}, given: []string{"capacity"}},
		{name: "env", env: map[string]string{"SIEVE_FILTER_KIND": "cuckoo"}, given: []string{"kind"}},
		{name: "file (a null value is not given)", args: []string{"--config", file}, given: []string{"fpp"}},
		{name: "all three", args: []string{"--config", file, "--filter-growth", "3"}, env: map[string]string{"SIEVE_FILTER_TIGHTENING": "0.5"},
			given: []string{"fpp", "growth", "tightening"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Default()
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			l := NewLoader(fs, &cfg)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if err := l.Load(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.Filter.Given, tt.given) {
				t.Errorf("Filter.Given = %q, want %q", cfg.Filter.Given, tt.given)
			}
			for _, k := range tt.given {
				if !l.Given("filter." + k) {
					t.Errorf("Given(filter.%s) = false", k)
				}
			}
			if l.Given("filter.name") {
				t.Errorf("Given(filter.name) = true, never given")
			}
		})
	}
}

// TestLoaderOmit checks that a setting a command does not take has no
// flag, and that the file and the environment leave it at its default.
func TestLoaderOmit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sieve.yaml")
	if err := os.WriteFile(file, []byte("filter:\n  force: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Default()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	l := NewLoader(fs, &cfg, "filter.force")
	if err := fs.Parse([]string{"--filter-force"}); err == nil || !strings.Contains(err.Error(), "filter-force") {
		t.Errorf("Parse(--filter-force) = %v, want an undefined flag error", err)
	}
	if err := fs.Parse([]string{"--config", file}); err != nil {
		t.Fatal(err)
	}
	if err := l.Load(func(k string) (string, bool) { return "true", k == "SIEVE_FILTER_FORCE" }); err != nil {
		t.Fatal(err)
	}
	if cfg.Filter.Force || l.Given("filter.force") {
		t.Errorf("omitted filter.force = %v (given %v), want the default false", cfg.Filter.Force, l.Given("filter.force"))
	}
	var help bytes.Buffer
	l.PrintSettings(&help, fs)
	if strings.Contains(help.String(), "filter-force") {
		t.Errorf("help lists the omitted --filter-force")
	}
}
