package main

import (
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/pipeline"
)

// The tests in this file check compose.yaml as operators use it (issue
// 30), with Docker Compose's own loader resolving anchors and profiles.

// TestComposeCrawlsSizedAlike: every service that can create a crawl, in
// every profile, would create it with the same filter (kind, expected URLs,
// false-positive bound), and those settings are the one shared block
// x-crawl-create. A crawler creates the crawl its run crawls, and `docker
// compose run crawler seed` any crawl, with its filter section as the
// defaults (crawlSettings); a dedup worker meeting a crawl without a record
// sizes its filter from its own section (pipeline.CrawlFilter). The issue:
// the workers said cap=10000000, the crawler service had no filter
// settings, and a seed created crawl default for 100,000 URLs.
func TestComposeCrawlsSizedAlike(t *testing.T) {
	var block struct {
		Create map[string]string `yaml:"x-crawl-create"`
	}
	data, err := os.ReadFile(filepath.Join(repoRoot, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &block); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	for _, k := range []string{"SIEVE_FILTER_KIND", "SIEVE_FILTER_CAPACITY", "SIEVE_FILTER_FPP"} {
		if block.Create[k] == "" {
			t.Errorf("x-crawl-create lacks %s", k)
		}
	}
	creators := map[string]frontier.CrawlSettings{} // by service
	programs := map[string]int{}
	for name, s := range allServices(t) {
		program, command := sieveProgram(s)
		if command != "run" {
			continue
		}
		env := s.env()
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		switch program {
		case "crawler":
			cs := defaultSettings()
			_, l := envNames(t, &cs)
			if err := l.Load(lookup); err != nil {
				t.Fatalf("%s environment: %v", name, err)
			}
			given, def := cs.crawlSettings()
			st := given.Or(def)
			creators[name] = frontier.CrawlSettings{Kind: st.Kind, ExpectURLs: st.ExpectURLs, FPP: st.FPP}
		case "dedup-worker":
			cfg := config.Default()
			_, l := envNames(t, &cfg)
			if err := l.Load(lookup); err != nil {
				t.Fatalf("%s environment: %v", name, err)
			}
			f := pipeline.CrawlFilter(cfg.Filter, "default", frontier.CrawlSettings{})
			creators[name] = frontier.CrawlSettings{Kind: f.Kind, ExpectURLs: f.Capacity, FPP: f.FPP}
		default:
			continue
		}
		programs[program]++
		for k, v := range block.Create {
			if env[k] != v {
				t.Errorf("service %s: %s = %q, x-crawl-create's %q", name, k, env[k], v)
			}
		}
	}
	// The default and the cluster profile each have both.
	if programs["crawler"] < 2 || programs["dedup-worker"] < 2 {
		t.Fatalf("services that create crawls: %v; want the crawlers and workers of both profiles", creators)
	}
	names := slices.Sorted(maps.Keys(creators))
	for _, n := range names[1:] {
		if creators[n] != creators[names[0]] {
			t.Errorf("service %s creates crawls with %+v, %s with %+v", n, creators[n], names[0], creators[names[0]])
		}
	}
}

// composeCommand is a `docker compose` command line: its global options
// (which may take a value), then the subcommand.
var composeCommand = regexp.MustCompile(`docker compose((?:\s+(?:--profile|-f|--file|-p|--project-name|--project-directory|--env-file)\s+\S+|\s+-\S+)*)\s+(\w[\w-]*)(.*)`)

// TestComposeRunLeavesScaleAlone: every documented `docker compose run`
// (README, docs, compose.yaml, scripts) takes --no-deps. Without it Compose
// brings the service's dependencies to the state compose.yaml describes:
// `run --rm crawler seed` (and cluster-crawler's) scaled the dedup workers
// back to 1, as their crawler service depends on them (issue 30).
func TestComposeRunLeavesScaleAlone(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	scripts, _ := filepath.Glob(filepath.Join(repoRoot, "*.sh"))
	files = append(append(files, scripts...), filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "ARCHITECTURE.md"),
		filepath.Join(repoRoot, "compose.yaml"), filepath.Join(repoRoot, "Dockerfile"))
	runs := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range composeCommand.FindAllStringSubmatch(line, -1) {
				if m[2] != "run" {
					continue
				}
				runs++
				if !slices.Contains(strings.Fields(m[3]), "--no-deps") {
					t.Errorf("%s:%d: %q: want --no-deps, which leaves the running services as scaled", filepath.Base(f), i+1, strings.TrimSpace(line))
				}
			}
		}
	}
	if runs == 0 {
		t.Fatal("no `docker compose run` found in the docs: the test checks nothing")
	}
}

// TestComposeHealthAndMonitoring: every long-running service of every
// profile has a health check, a Sieve service's asking /readyz on its
// SIEVE_HTTP_ADDR port (crawlers serve it too); Prometheus scrapes every
// Sieve service of every profile on that port (the cluster profile's
// too); the Dockerfile's module cache mount is where the golang image
// keeps modules (GOPATH /go), so that builds reuse it.
func TestComposeHealthAndMonitoring(t *testing.T) {
	var prom struct {
		ScrapeConfigs []struct {
			DNS []struct {
				Names []string `yaml:"names"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	data, err := os.ReadFile(filepath.Join(repoRoot, "monitoring", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &prom); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	scraped := map[string]int{} // service → port
	for _, sc := range prom.ScrapeConfigs {
		for _, d := range sc.DNS {
			for _, n := range d.Names {
				scraped[n] = d.Port
			}
		}
	}
	sieve := 0
	for name, s := range allServices(t) {
		if s.Restart == "no" {
			continue // a one-shot, as redis-cluster-init
		}
		if s.Healthcheck == nil || len(s.Healthcheck.Test) == 0 || s.Healthcheck.Test[0] == "NONE" {
			t.Errorf("long-running service %s has no health check", name)
			continue
		}
		program, command := sieveProgram(s)
		if program == "" || command != "run" {
			continue
		}
		sieve++
		addr := s.env()["SIEVE_HTTP_ADDR"]
		_, p, err := net.SplitHostPort(addr)
		port, perr := strconv.Atoi(p)
		if err != nil || perr != nil {
			t.Errorf("service %s: SIEVE_HTTP_ADDR %q: %v", name, addr, err)
			continue
		}
		// The program's health command asks the /readyz of the address
		// SIEVE_HTTP_ADDR gives (TestComposeCredentialsServe runs it).
		if check := s.Healthcheck.Test; !slices.Equal(check, []string{"CMD", program, "health"}) {
			t.Errorf("service %s health check %q: want [CMD %s health]", name, check, program)
		}
		if got, ok := scraped[name]; !ok || got != port {
			t.Errorf("prometheus.yml scrapes %s on port %d (listed %v), want its /metrics port %d", name, got, ok, port)
		}
	}
	if sieve < 4 {
		t.Errorf("%d Sieve services found; want the workers and crawlers of both profiles", sieve)
	}

	dockerfile, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	target := regexp.MustCompile(`--mount=type=cache,target=(\S+)`)
	goRuns := 0
	for _, run := range strings.Split(strings.ReplaceAll(string(dockerfile), "\\\n", " "), "\n") {
		if !strings.HasPrefix(run, "RUN ") || !strings.Contains(run, " go ") {
			continue
		}
		goRuns++
		var targets []string
		for _, m := range target.FindAllStringSubmatch(run, -1) {
			targets = append(targets, m[1])
		}
		if !slices.Contains(targets, "/go/pkg/mod") || slices.ContainsFunc(targets, func(t string) bool { return strings.HasPrefix(t, "/root/go") }) {
			t.Errorf("Dockerfile %q caches %q: want the module cache at /go/pkg/mod (the golang image's GOMODCACHE)", run, targets)
		}
	}
	if goRuns == 0 {
		t.Error("Dockerfile runs no go command")
	}
}
