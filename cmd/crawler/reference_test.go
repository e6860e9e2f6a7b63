package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/sievecrawl/sieve/config"
)

//go:generate go test -run ^TestConfigurationReference$ -update-reference .

var updateReference = flag.Bool("update-reference", false, "rewrite docs/configuration.md from the settings")

const referencePath = "../../docs/configuration.md"

// configurationReference renders docs/configuration.md from the crawler's
// settings, which hold the dedup worker's (config.Config) and the crawler's
// own.
func configurationReference() []byte {
	var b bytes.Buffer
	b.WriteString(`# Configuration reference

<!-- Generated from the settings by ` + "`go generate ./cmd/crawler`" + `; do not edit. -->

Every setting is a YAML key, an environment variable and a flag: ` + "`filter.fpp`" + ` =
` + "`SIEVE_FILTER_FPP`" + ` = ` + "`--filter-fpp`" + `. Flags override the environment, which overrides the
file (` + "`--config FILE`" + ` or ` + "`SIEVE_CONFIG`" + `). Both programs read the same file: the dedup worker
skips the crawler's own keys. ` + "`crawler run --help`" + ` and ` + "`dedup-worker run --help`" + ` print the same
list. Durations are Go durations (` + "`90s`" + `, ` + "`5m`" + `), bytes take a unit (` + "`64MiB`" + `). A list is
comma-separated, and a list flag given again adds to it: ` + "`--seed A --seed B,C`" + ` seeds A, B and C.
`)
	s := defaultSettings()
	fs := flag.NewFlagSet("crawler", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	l := config.NewLoader(fs, &s)
	crawlerOnly := map[string]bool{}
	for _, k := range config.CrawlerKeys() {
		crawlerOnly[k] = true
	}
	l.WriteReference(&b, func(path string) string {
		top, _, _ := strings.Cut(path, ".")
		if crawlerOnly[top] {
			return "crawler only"
		}
		return ""
	})
	return b.Bytes()
}

// TestConfigurationReference checks that docs/configuration.md is the
// reference the settings generate: a setting added, renamed or given another
// default or help fails it until `go generate ./cmd/crawler` is run.
func TestConfigurationReference(t *testing.T) {
	want := configurationReference()
	if *updateReference {
		if err := os.WriteFile(referencePath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("%v (run go generate ./cmd/crawler)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not current: run go generate ./cmd/crawler", referencePath)
	}
	for _, key := range []string{"`filter.fpp`", "`crawl.host_delay`", "`redis.url`", "`nats.url`"} {
		if !bytes.Contains(want, []byte(key)) {
			t.Errorf("the reference lacks %s", key)
		}
	}
}
