package watch

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"gopkg.in/yaml.v3"
)

// The shipped Grafana dashboard and the compose profile that provisions it.
var (
	dashboardPath = filepath.Join("..", "monitoring", "grafana", "dashboards", "sieve.json")
	composePath   = filepath.Join("..", "compose.yaml")
)

var (
	metricRef = regexp.MustCompile(`\b(sieve_[a-z0-9_]+)\b`)
	byClause  = regexp.MustCompile(`\bby\s*\(([^)]*)\)`)
	matcher   = regexp.MustCompile(`\{([^}]*)\}`)
	labelName = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
)

// dashboardQueries returns every PromQL expression of the dashboard: panel
// targets and template variable queries.
func dashboardQueries(tb testing.TB) []string {
	tb.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		tb.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		tb.Fatalf("%s: %v", dashboardPath, err)
	}
	var out []string
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			tb.Errorf("dashboard panel %q queries nothing", p.Title)
		}
		for _, t := range p.Targets {
			out = append(out, t.Expr)
		}
	}
	for _, v := range d.Templating.List {
		out = append(out, v.Definition)
	}
	return out
}

// checkDashboard checks that every metric the dashboard queries is in mf (a
// real process's /metrics), with every label the query selects or groups by
// (Prometheus's own target labels aside).
func checkDashboard(t *testing.T, mf map[string]*dto.MetricFamily) {
	t.Helper()
	queries := dashboardQueries(t)
	if len(queries) < 20 {
		t.Fatalf("dashboard has %d queries; expected the full dashboard", len(queries))
	}
	labelsOf := func(name string) ([]string, bool) {
		f, ok := mf[name]
		if !ok {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, cut := strings.CutSuffix(name, suffix); cut {
					if f, ok = mf[base]; ok && f.GetType() == dto.MetricType_HISTOGRAM {
						break
					}
				}
			}
		}
		if !ok {
			return nil, false
		}
		var labels []string
		for _, m := range f.Metric {
			for _, l := range m.Label {
				labels = append(labels, l.GetName())
			}
		}
		return labels, true
	}
	seen := map[string]bool{}
	for _, q := range queries {
		var names []string
		var have []string
		for _, m := range metricRef.FindAllStringSubmatch(q, -1) {
			labels, ok := labelsOf(m[1])
			if !ok {
				t.Errorf("dashboard queries %s, which /metrics does not have (query %q)", m[1], q)
				continue
			}
			names = append(names, m[1])
			have = append(have, labels...)
			seen[m[1]] = true
		}
		if len(names) == 0 {
			t.Errorf("dashboard query %q names no sieve metric", q)
			continue
		}
		var want []string
		for _, m := range byClause.FindAllStringSubmatch(q, -1) {
			for l := range strings.SplitSeq(m[1], ",") {
				want = append(want, strings.TrimSpace(l))
			}
		}
		for _, m := range matcher.FindAllStringSubmatch(q, -1) {
			for _, l := range labelName.FindAllStringSubmatch(m[1], -1) {
				want = append(want, l[1])
			}
		}
		for _, l := range want {
			if l == "" || l == "instance" || l == "job" || l == "le" {
				continue
			}
			if !slices.Contains(have, l) {
				t.Errorf("dashboard query %q uses label %q, which %v do not have", q, l, names)
			}
		}
	}
	t.Logf("dashboard: %d queries over %d metrics, all in /metrics", len(queries), len(seen))
}

// TestComposeMonitoring checks the compose file's monitoring profile: both
// services in it, the files they mount present, and Prometheus scraping the
// port the workers and crawlers serve on.
func TestComposeMonitoring(t *testing.T) {
	b, err := os.ReadFile(composePath)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]struct {
			Profiles    []string          `yaml:"profiles"`
			Volumes     []string          `yaml:"volumes"`
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", composePath, err)
	}
	for _, name := range []string{"prometheus", "grafana"} {
		s, ok := c.Services[name]
		if !ok || !slices.Contains(s.Profiles, "monitoring") {
			t.Errorf("compose service %s: missing or not in the monitoring profile", name)
		}
		for _, v := range s.Volumes {
			if src, _, ok := strings.Cut(v, ":"); ok && strings.HasPrefix(src, "./") {
				if _, err := os.Stat(filepath.Join("..", src)); err != nil {
					t.Errorf("compose service %s mounts %s: %v", name, src, err)
				}
			}
		}
	}
	b, err = os.ReadFile(filepath.Join("..", "monitoring", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		ScrapeConfigs []struct {
			Job string `yaml:"job_name"`
			DNS []struct {
				Names []string `yaml:"names"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	scraped := map[string]int{}
	for _, sc := range p.ScrapeConfigs {
		for _, d := range sc.DNS {
			for _, n := range d.Names {
				scraped[n] = d.Port
			}
		}
	}
	for _, name := range []string{"dedup-worker", "crawler"} {
		addr := c.Services[name].Environment["SIEVE_HTTP_ADDR"]
		if port, ok := scraped[name]; !ok || addr != ":"+itoa(port) {
			t.Errorf("service %s serves on %q; prometheus scrapes port %d (scraped: %v)", name, addr, port, ok)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
