package main

import (
	"encoding/json"
	"errors"
	"flag"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/internal/toolstest"
)

// composeFile is the part of compose.yaml the test checks.
type composeFile struct {
	Services map[string]struct {
		Build       any               `yaml:"build"`
		Image       string            `yaml:"image"`
		Entrypoint  []string          `yaml:"entrypoint"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Ports       []string          `yaml:"ports"`
		Container   string            `yaml:"container_name"`
		Profiles    []string          `yaml:"profiles"`
		DependsOn   dependsOn         `yaml:"depends_on"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// dependsOn is a service's depends_on, in either of its forms: a list of
// services, or a map of services to conditions.
type dependsOn map[string]struct {
	Condition string `yaml:"condition"`
}

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.SequenceNode {
		var names []string
		if err := n.Decode(&names); err != nil {
			return err
		}
		*d = dependsOn{}
		for _, name := range names {
			(*d)[name] = struct {
				Condition string `yaml:"condition"`
			}{}
		}
		return nil
	}
	return n.Decode((*map[string]struct {
		Condition string `yaml:"condition"`
	})(d))
}

// envNames returns the environment variables a config struct reads, and a
// function loading a given environment into it.
func envNames(tb testing.TB, target any) (map[string]bool, *config.Loader) {
	tb.Helper()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	l := config.NewLoader(fs, target)
	names := map[string]bool{config.EnvPrefix + "CONFIG": true}
	for _, p := range l.Settings() {
		names[config.EnvPrefix+strings.ToUpper(strings.ReplaceAll(p, ".", "_"))] = true
	}
	return names, l
}

// TestComposeFile checks compose.yaml without Docker: the services and their
// wiring, and that every SIEVE_* variable is one the program reads and holds
// a valid value.
func TestComposeFile(t *testing.T) {
	c := readCompose(t)
	if _, err := os.Stat(filepath.Join(repoRoot, "Dockerfile")); err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	for _, name := range []string{"redis", "nats", "dedup-worker", "crawler"} {
		s, ok := c.Services[name]
		if !ok {
			t.Fatalf("compose.yaml has no service %q", name)
		}
		if s.Healthcheck == nil {
			t.Errorf("service %s has no health check", name)
		}
	}
	redis := c.Services["redis"]
	if cmd := strings.Join(redis.Command, " "); !strings.Contains(cmd, "--appendonly yes") {
		t.Errorf("redis command %q: want AOF on (--appendonly yes)", cmd)
	}
	nats := c.Services["nats"]
	if cmd := strings.Join(nats.Command, " "); !strings.Contains(cmd, "--jetstream") || !strings.Contains(cmd, "--store_dir /data") {
		t.Errorf("nats command %q: want JetStream storing in /data", cmd)
	}
	for _, svc := range []string{"redis", "nats"} {
		v := c.Services[svc].Volumes
		if len(v) == 0 || !strings.HasSuffix(v[0], ":/data") {
			t.Errorf("service %s volumes %q: want a named volume on /data", svc, v)
			continue
		}
		if vol, _, _ := strings.Cut(v[0], ":"); c.Volumes == nil || !hasKey(c.Volumes, vol) {
			t.Errorf("service %s uses volume %q, not declared under volumes", svc, vol)
		}
	}

	crawlerEnv, _ := envNames(t, &settings{})
	cfg := config.Default()
	workerEnv, workerLoader := envNames(t, &cfg)
	for name, known := range map[string]map[string]bool{"dedup-worker": workerEnv, "crawler": crawlerEnv} {
		s := c.Services[name]
		if s.Build == nil {
			t.Errorf("service %s is not built from the project's Dockerfile", name)
		}
		if s.Container != "" || slices.ContainsFunc(s.Ports, fixedHostPort) {
			t.Errorf("service %s sets container_name or fixed host ports %q: --scale %s=N would fail", name, s.Ports, name)
		}
		if len(s.Entrypoint) == 0 || s.Entrypoint[0] != name {
			t.Errorf("service %s entrypoint %q: want the %s binary", name, s.Entrypoint, name)
		}
		var unknown []string
		for k := range s.Environment {
			if strings.HasPrefix(k, config.EnvPrefix) && !known[k] {
				unknown = append(unknown, k)
			}
		}
		slices.Sort(unknown)
		if len(unknown) > 0 {
			t.Errorf("service %s sets variables %s does not read: %q", name, name, unknown)
		}
		if s.Environment["SIEVE_NATS_URL"] != "nats://nats:4222" {
			t.Errorf("service %s: SIEVE_NATS_URL = %q, want the nats service", name, s.Environment["SIEVE_NATS_URL"])
		}
	}
	// The values load and validate as the programs would, with the files
	// the credentials service writes.
	dir := composeCredentials(t)
	lookup := func(env map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := env[k]; return inMount(v, dir), ok }
	}
	if err := workerLoader.Load(lookup(c.Services["dedup-worker"].Environment)); err != nil {
		t.Errorf("dedup-worker environment: %v", err)
	} else if err := cfg.Validate(); err != nil {
		t.Errorf("dedup-worker environment: %v", err)
	}
	cs := defaultSettings()
	_, crawlerLoader := envNames(t, &cs)
	if err := crawlerLoader.Load(lookup(c.Services["crawler"].Environment)); err != nil {
		t.Errorf("crawler environment: %v", err)
	} else if err := errors.Join(cs.Config.Validate(), cs.validate()); err != nil {
		t.Errorf("crawler environment: %v", err)
	}
	w := c.Services["dedup-worker"]
	if w.DependsOn["redis"].Condition != "service_healthy" || w.DependsOn["nats"].Condition != "service_healthy" {
		t.Errorf("dedup-worker must wait for healthy redis and nats: %+v", w.DependsOn)
	}
	if c.Services["crawler"].Environment["SIEVE_REDIS_URL"] != w.Environment["SIEVE_REDIS_URL"] {
		t.Errorf("crawler and dedup-worker disagree on Redis")
	}
	if c.Services["crawler"].Environment["SIEVE_FRONTIER_PARTITIONS"] != w.Environment["SIEVE_FRONTIER_PARTITIONS"] {
		t.Errorf("crawler and dedup-worker disagree on the frontier partitions")
	}
}

// repoRoot is the repository's root, where compose.yaml is.
var repoRoot = filepath.Join("..", "..")

// readCompose reads compose.yaml as written (no profile applied).
func readCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return c
}

func hasKey(m map[string]any, k string) bool { _, ok := m[k]; return ok }

// TestComposeConfigAccepted has Docker Compose itself (built by test.sh
// from the Go module proxy; no Docker engine needed) load compose.yaml with
// each of its profiles, as `docker compose --profile P config` does: it
// must accept the file without a warning and resolve exactly the services
// that run without a profile or in P.
func TestComposeConfigAccepted(t *testing.T) {
	raw := readCompose(t)
	for _, profile := range composeProfiles {
		t.Run("profile="+profile, func(t *testing.T) {
			var want []string
			for name, s := range raw.Services {
				if len(s.Profiles) == 0 || slices.Contains(s.Profiles, profile) {
					want = append(want, name)
				}
			}
			got := slices.Sorted(maps.Keys(composeConfig(t, profile)))
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("docker compose resolves services %q, want %q", got, want)
			}
		})
	}
}

// composeProfiles are compose.yaml's profiles: none, and each named one.
var composeProfiles = []string{"", "monitoring", "cluster"}

// resolvedService is a service as `docker compose config --format json`
// resolves it: anchors merged, defaults filled in.
type resolvedService struct {
	Build       any                `json:"build"`
	Entrypoint  []string           `json:"entrypoint"`
	Command     []string           `json:"command"`
	Environment map[string]*string `json:"environment"`
	Profiles    []string           `json:"profiles"`
	Restart     string             `json:"restart"`
	Healthcheck *struct {
		Test []string `json:"test"`
	} `json:"healthcheck"`
}

// env returns the service's environment with the variables set.
func (s resolvedService) env() map[string]string {
	out := map[string]string{}
	for k, v := range s.Environment {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

// composeConfig has Docker Compose itself (built by test.sh from the Go
// module proxy; no Docker engine needed) load compose.yaml with profile
// (none if empty), as `docker compose --profile P config` does, and
// returns the services it resolves. It must accept the file without a
// warning.
func composeConfig(t testing.TB, profile string) map[string]resolvedService {
	t.Helper()
	bin := toolstest.Find(t, "docker-compose", "bin/docker-compose")
	args := []string{"--project-directory", repoRoot, "-f", filepath.Join(repoRoot, "compose.yaml")}
	if profile != "" {
		args = append(args, "--profile", profile)
	}
	cmd := exec.Command(bin, append(args, "config", "--format", "json")...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("docker compose config: %v\n%s", err, stderr.String())
	}
	var resolved struct {
		Services map[string]resolvedService `json:"services"`
	}
	if err := json.Unmarshal(out, &resolved); err != nil {
		t.Fatalf("docker compose config output: %v", err)
	}
	return resolved.Services
}

// allServices resolves compose.yaml under every profile: each service once.
func allServices(t testing.TB) map[string]resolvedService {
	t.Helper()
	all := map[string]resolvedService{}
	for _, profile := range composeProfiles {
		maps.Copy(all, composeConfig(t, profile))
	}
	return all
}

// sieveProgram names the Sieve program a service runs and its command
// ("crawler", "run"), or "" for a service of another image.
func sieveProgram(s resolvedService) (program, command string) {
	if s.Build == nil || len(s.Entrypoint) != 1 || len(s.Command) == 0 {
		return "", ""
	}
	return s.Entrypoint[0], s.Command[0]
}

// fixedHostPort reports whether a short port syntax ("[ip:][host:]container")
// names a host port, which two replicas cannot both bind; "127.0.0.1::8080"
// lets Docker pick one per replica.
func fixedHostPort(spec string) bool {
	parts := strings.Split(spec, ":")
	return len(parts) >= 2 && parts[len(parts)-2] != ""
}
