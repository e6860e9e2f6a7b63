package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sievecrawl/sieve/auth"
	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/credentials"
	"github.com/sievecrawl/sieve/natstest"
)

// clusterCompose is the part of compose.yaml's cluster profile the test
// checks.
type clusterCompose struct {
	Services map[string]struct {
		Build       any               `yaml:"build"`
		Image       string            `yaml:"image"`
		Profiles    []string          `yaml:"profiles"`
		Entrypoint  []string          `yaml:"entrypoint"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
	} `yaml:"services"`
}

// TestComposeClusterProfile checks compose.yaml's cluster profile without
// Docker (docker compose config checks its syntax): 3 NATS nodes routed to
// one another, 6 Redis Cluster nodes joined as 3 masters with a replica
// each, and workers whose environment loads and validates with replicas 3,
// routes and wait_replicas on, over every node. Each NATS node keeps the
// server name it had as service nats-N, its identity in the cluster.
func TestComposeClusterProfile(t *testing.T) {
	c := readClusterCompose(t)
	nats := []string{"cluster-nats-1", "cluster-nats-2", "cluster-nats-3"}
	redisNodes := []string{"cluster-redis-1", "cluster-redis-2", "cluster-redis-3", "cluster-redis-4", "cluster-redis-5", "cluster-redis-6"}
	for _, name := range slices.Concat(nats, redisNodes, []string{"redis-cluster-init", "cluster-dedup-worker", "cluster-crawler"}) {
		s, ok := c.Services[name]
		if !ok {
			t.Fatalf("compose.yaml has no service %q", name)
		}
		if !slices.Contains(s.Profiles, "cluster") {
			t.Errorf("service %s is not in the cluster profile: %q", name, s.Profiles)
		}
	}
	volumes := map[string]string{}
	for _, name := range nats {
		cmd := strings.Join(c.Services[name].Command, " ")
		for _, want := range []string{"--jetstream", "--name " + strings.TrimPrefix(name, "cluster-"), "--cluster_name sieve",
			"--routes nats://cluster-nats-1:6222,nats://cluster-nats-2:6222,nats://cluster-nats-3:6222"} {
			if !strings.Contains(cmd, want) {
				t.Errorf("%s command %q lacks %q", name, cmd, want)
			}
		}
	}
	for _, name := range slices.Concat(nats, redisNodes) {
		v := c.Services[name].Volumes
		if len(v) != 1 {
			t.Errorf("%s volumes %q: want its own", name, v)
			continue
		}
		if other, ok := volumes[v[0]]; ok {
			t.Errorf("%s and %s share volume %s", name, other, v[0])
		}
		volumes[v[0]] = name
	}
	for _, name := range redisNodes {
		if cmd := strings.Join(c.Services[name].Command, " "); !strings.Contains(cmd, "--cluster-enabled yes") || !strings.Contains(cmd, "--appendonly yes") {
			t.Errorf("%s command %q: want cluster mode and the AOF", name, cmd)
		}
	}
	// redis-cluster-init is this program's redis-cluster-init (tested
	// through down and up by TestRedisClusterInitComesBack, which runs the
	// command written here), on every Redis node the workers use.
	init := c.Services["redis-cluster-init"]
	if cmd := strings.Join(slices.Concat(init.Entrypoint, init.Command), " "); init.Build == nil || cmd != "dedup-worker redis-cluster-init --replicas 1" {
		t.Errorf("redis-cluster-init runs %q (built here: %v); want the image's dedup-worker redis-cluster-init --replicas 1", cmd, init.Build != nil)
	}

	w := c.Services["cluster-dedup-worker"]
	cfg := config.Default()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	l := config.NewLoader(fs, &cfg)
	// Its files are the credentials service's (cmd/crawler's
	// TestComposeCredentials runs that command; any will do here).
	dir := t.TempDir()
	if _, err := credentials.Generate(credentials.Options{Dir: dir, Names: []string{"cluster-dedup-worker"},
		Tokens: []credentials.Token{{Name: "prometheus", Role: auth.Read}}}); err != nil {
		t.Fatal(err)
	}
	inMount := func(v string) string {
		if rest, ok := strings.CutPrefix(v, "/credentials/"); ok {
			return filepath.Join(dir, rest)
		}
		return v
	}
	if err := l.Load(func(k string) (string, bool) { v, ok := w.Environment[k]; return inMount(v), ok }); err != nil {
		t.Fatalf("cluster-dedup-worker environment: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("cluster-dedup-worker environment: %v", err)
	}
	if cfg.Frontier.Replicas != 3 || cfg.Frontier.Routes == 0 || cfg.Redis.WaitReplicas != 1 || !cfg.Redis.IsCluster() {
		t.Errorf("cluster-dedup-worker: replicas %d, routes %d, wait_replicas %d, Redis Cluster %v; want 3, > 0, 1, true",
			cfg.Frontier.Replicas, cfg.Frontier.Routes, cfg.Redis.WaitReplicas, cfg.Redis.IsCluster())
	}
	for _, n := range nats {
		if !strings.Contains(cfg.NATS.URL, "nats://"+n+":4222") {
			t.Errorf("cluster-dedup-worker nats.url %q lacks %s", cfg.NATS.URL, n)
		}
	}
	for _, n := range redisNodes {
		if !strings.Contains(cfg.Redis.URL, n+":6379") {
			t.Errorf("cluster-dedup-worker redis.url %q lacks %s", cfg.Redis.URL, n)
		}
	}
	cr := c.Services["cluster-crawler"]
	for _, k := range []string{"SIEVE_NATS_URL", "SIEVE_REDIS_URL", "SIEVE_FRONTIER_PARTITIONS", "SIEVE_FRONTIER_REPLICAS"} {
		if cr.Environment[k] != w.Environment[k] {
			t.Errorf("cluster-crawler %s = %q, cluster-dedup-worker's %q", k, cr.Environment[k], w.Environment[k])
		}
	}
	if init.Environment["SIEVE_REDIS_URL"] != w.Environment["SIEVE_REDIS_URL"] {
		t.Errorf("redis-cluster-init forms %q, the workers use %q", init.Environment["SIEVE_REDIS_URL"], w.Environment["SIEVE_REDIS_URL"])
	}
	if w.DependsOn["redis-cluster-init"].Condition != "service_completed_successfully" {
		t.Errorf("cluster-dedup-worker must wait for the Redis Cluster to be created: %+v", w.DependsOn)
	}
	// Its HTTP surface on every interface, over TLS behind tokens, with the
	// files of the credentials volume (issue 29).
	tls, _, err := cfg.HTTP.Web()
	if warning, xerr := cfg.HTTP.Exposure(); cfg.HTTP.Insecure || !tls || !cfg.HTTP.Authenticates() || err != nil || xerr != nil || warning != "" {
		t.Errorf("cluster-dedup-worker http: insecure %v, TLS %v (%v), tokens %v; exposure %q %v: want TLS and tokens, no warning",
			cfg.HTTP.Insecure, tls, err, cfg.HTTP.Authenticates(), warning, xerr)
	}
	for _, name := range []string{"cluster-dedup-worker", "cluster-crawler"} {
		s := c.Services[name]
		if !slices.Contains(s.Volumes, "credentials:/credentials:ro") || s.DependsOn["credentials"].Condition != "service_completed_successfully" {
			t.Errorf("%s: volumes %q, depends_on %+v: want the credentials volume read-only, after the credentials service completed", name, s.Volumes, s.DependsOn)
		}
		if _, ok := s.Environment["SIEVE_HTTP_INSECURE"]; ok {
			t.Errorf("%s sets SIEVE_HTTP_INSECURE", name)
		}
	}
}

// TestComposeContainerNames checks that no service's containers can be
// taken for another's: Compose names them PROJECT-SERVICE-N, so services
// redis and redis-1 gave src-redis-1 (the default profile's Redis) and
// src-redis-1-1 (a cluster node), one kill away from the wrong one
// (issue 39, item 18).
func TestComposeContainerNames(t *testing.T) {
	c := readClusterCompose(t)
	for a := range c.Services {
		for b := range c.Services {
			if rest, ok := strings.CutPrefix(a, b+"-"); ok && strings.Trim(rest, "0123456789") == "" {
				t.Errorf("services %s and %s: %s's first container (PROJECT-%s-1) reads as %s's replica %s", a, b, a, a, b, rest)
			}
		}
	}
}

// TestComposeNATSVersion checks that compose ships the nats-server the
// tests run: go.mod's, embedded by natstest and built by
// natstest.ModuleBinary for TestClusterNodeRestartKeepsReplicas. Compose
// shipped 2.11 while the tests ran 2.15, and 2.11 dropped a restarted
// node's replicas (issue 39, item 1; docs/running.md).
func TestComposeNATSVersion(t *testing.T) {
	c := readClusterCompose(t)
	want := "nats:" + natstest.ModuleVersion() + "-alpine"
	n := 0
	for name, s := range c.Services {
		if !strings.HasPrefix(s.Image, "nats:") {
			continue
		}
		n++
		if s.Image != want {
			t.Errorf("service %s runs %s; the tests run nats-server %s (go.mod): want %s", name, s.Image, natstest.ModuleVersion(), want)
		}
	}
	if n != 4 {
		t.Errorf("%d services run a nats image, want 4 (nats, cluster-nats-1..3)", n)
	}
}

// readClusterCompose reads compose.yaml as written (anchors merged).
func readClusterCompose(tb testing.TB) clusterCompose {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "compose.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	var c clusterCompose
	if err := yaml.Unmarshal(data, &c); err != nil {
		tb.Fatalf("compose.yaml: %v", err)
	}
	return c
}
