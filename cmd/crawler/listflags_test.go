package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sievecrawl/sieve/config"
)

// TestListFlagsAccumulate pins issue 39, item 17 on the crawler's own
// settings: `crawler run --seed A --seed B` crawled only B. Every list
// flag the crawler takes (config.Loader.Lists), given twice, holds the
// values of both.
func TestListFlagsAccumulate(t *testing.T) {
	fs := flag.NewFlagSet("crawler", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	s := defaultSettings()
	lists := config.NewLoader(fs, &s).Lists()
	for _, want := range []string{"seed", "crawl.allow_domains", "crawl.deny_domains", "normalize.strip_params", "urlfrontier.client_roles"} {
		if !slices.Contains(lists, want) {
			t.Errorf("Lists() = %q, want it to hold %s", lists, want)
		}
	}
	for _, path := range lists {
		name := "--" + strings.NewReplacer(".", "-", "_", "-").Replace(path)
		s := defaultSettings()
		fs := flag.NewFlagSet("crawler", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		l := config.NewLoader(fs, &s)
		args := []string{name, "https://a.example/", name, "https://b.example/,https://c.example/"}
		if err := fs.Parse(args); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if err := l.Load(nil); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		want := []string{"https://a.example/", "https://b.example/", "https://c.example/"}
		if got := listAt(t, s, path); !slices.Equal(got, want) {
			t.Errorf("%q: %s = %q, want %q", args, path, got, want)
		}
	}
}

// listAt reads the list at a YAML path of v, through its YAML form.
func listAt(tb testing.TB, v any, path string) []string {
	tb.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	var node any = map[string]any{}
	if err := yaml.Unmarshal(b, &node); err != nil {
		tb.Fatal(err)
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := node.(map[string]any)
		if !ok {
			tb.Fatalf("%s: no mapping at %q", path, k)
		}
		node = m[k]
	}
	items, _ := node.([]any)
	var out []string
	for _, it := range items {
		out = append(out, it.(string))
	}
	return out
}
