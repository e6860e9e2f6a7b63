package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/redistest"
)

// TestRedisClusterInitComesBack runs compose.yaml's redis-cluster-init
// command ("dedup-worker redis-cluster-init --replicas 1") on six
// real redis-server processes in cluster mode, through what `docker
// compose up`, `down` and `up` again do to them (issue 30): empty nodes
// form a cluster of 3 masters with a replica each; a second run changes
// nothing; nodes restarted on new ports with their nodes.conf and data
// (cluster_state:fail, their peers at old addresses: where the old init
// failed with "Node … is not empty") and then on one another's old ports
// (a network whose addresses were dealt out again) are met where they are
// now, and the cluster comes back with its node IDs and its keys.
func TestRedisClusterInitComesBack(t *testing.T) {
	init := readClusterCompose(t).Services["redis-cluster-init"]
	if len(init.Entrypoint) != 1 || init.Entrypoint[0] != "dedup-worker" || len(init.Command) == 0 {
		t.Fatalf("compose.yaml's redis-cluster-init runs %q %q, not a dedup-worker command", init.Entrypoint, init.Command)
	}
	nodes := redistest.StartClusterNodes(t, 6, redistest.ClusterOptions{AOF: true, NodeTimeout: 2 * time.Second})
	ctx := context.Background()
	addrs := func() []string {
		var out []string
		for _, s := range nodes {
			out = append(out, s.Addr)
		}
		return out
	}
	ids := func(t *testing.T) []string {
		t.Helper()
		var out []string
		for _, s := range nodes {
			id, err := s.Client().ClusterMyID(ctx).Result()
			if err != nil {
				t.Fatalf("CLUSTER MYID of %s: %v", s.Addr, err)
			}
			out = append(out, id)
		}
		return out
	}
	restart := func(port func(i int, old []string) int) func(t *testing.T) {
		return func(t *testing.T) {
			old := addrs()
			for _, s := range nodes {
				s.Stop()
			}
			for i, s := range nodes {
				s.StartAgainOn(port(i, old))
			}
			// The nodes came back where their peers do not look for
			// them: the cluster is not ok without the init.
			stale := 0
			for i, s := range nodes {
				text, err := s.Client().ClusterNodes(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				for j, a := range addrs() {
					if j != i && !strings.Contains(text, " "+a+"@") {
						stale++
					}
				}
			}
			if stale == 0 {
				t.Fatalf("after the restart every node knows every other's new address: the test shows nothing")
			}
		}
	}
	const keys = 300
	var wantIDs []string
	for _, tt := range []struct {
		name   string
		before func(t *testing.T)
		out    string // stdout begins with
	}{
		{"six empty nodes form a cluster", func(*testing.T) {}, "formed a Redis Cluster of 6 nodes, 3 masters"},
		{"a second run on the running cluster", func(*testing.T) {}, "the Redis Cluster is ok, 6 nodes, 3 masters: nothing to do"},
		{"restarted on new ports, nodes.conf kept", restart(func(int, []string) int { return 0 }),
			"met the 6 nodes at their addresses now"},
		{"restarted on one another's old ports", restart(func(i int, old []string) int {
			var port int
			fmt.Sscanf(old[(i+1)%len(old)][strings.LastIndex(old[(i+1)%len(old)], ":")+1:], "%d", &port)
			return port
		}), "met the 6 nodes at their addresses now"},
		{"a run after the restarts", func(*testing.T) {}, "the Redis Cluster is ok, 6 nodes, 3 masters: nothing to do"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.before(t)
			vars := map[string]string{"SIEVE_REDIS_URL": strings.Join(addrs(), ",")}
			code, out, errOut := runCLI(t, "", vars, init.Command...)
			if code != exitOK || !strings.HasPrefix(out, tt.out) {
				t.Fatalf("redis-cluster-init: exit %d, stdout %q, stderr %q; want exit 0 and %q", code, out, errOut, tt.out)
			}
			masters := 0
			for _, s := range nodes {
				info, err := s.Client().ClusterInfo(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				for _, want := range []string{"cluster_state:ok", "cluster_known_nodes:6", "cluster_slots_ok:16384", "cluster_size:3"} {
					if !strings.Contains(info, want) {
						t.Errorf("CLUSTER INFO of %s lacks %s:\n%s", s.Addr, want, info)
					}
				}
				role, err := s.Client().Info(ctx, "replication").Result()
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(role, "role:master") {
					masters++
				}
			}
			if masters != 3 {
				t.Errorf("%d masters, want 3 (each with its replica)", masters)
			}
			got := ids(t)
			if wantIDs == nil {
				wantIDs = got
			} else if strings.Join(got, " ") != strings.Join(wantIDs, " ") {
				t.Errorf("node IDs %q, want the cluster's own %q", got, wantIDs)
			}
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs()})
			defer c.Close()
			if tt.out == "formed a Redis Cluster of 6 nodes, 3 masters" {
				for i := range keys {
					if err := c.Set(ctx, fmt.Sprintf("url:%d", i), i, 0).Err(); err != nil {
						t.Fatalf("SET on the new cluster: %v", err)
					}
				}
			}
			for i := range keys {
				v, err := c.Get(ctx, fmt.Sprintf("url:%d", i)).Int()
				if err != nil || v != i {
					t.Fatalf("GET url:%d = %d, %v; want %d, kept across the restarts", i, v, err, i)
				}
			}
		})
	}
}
