package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/rediscluster"
)

func clusterInitFlags(fs *flag.FlagSet) {
	fs.Int("replicas", 1, "replicas of each master when the nodes are empty and form a new cluster (a formed cluster keeps its own)")
	fs.Duration("wait", rediscluster.DefaultTimeout, "how long to wait for the nodes to answer and the cluster to reach state ok")
}

// cmdClusterInit is "dedup-worker redis-cluster-init": it makes the nodes
// of redis.url (an address list) one Redis Cluster in state ok
// (rediscluster.Ensure): formed if every node is empty, else met again at
// the addresses the nodes have now, as after `docker compose down` and
// `up` on a new network. It is compose.yaml's redis-cluster-init.
func cmdClusterInit(ctx context.Context, e env, fs *flag.FlagSet, cfg *config.Config) int {
	if !cfg.Redis.Enabled() {
		fmt.Fprintln(e.stderr, "dedup-worker redis-cluster-init: redis.url is not set: give the nodes, e.g. SIEVE_REDIS_URL=cluster-redis-1:6379,cluster-redis-2:6379,…")
		return exitUsage
	}
	replicas, err := strconv.Atoi(flagValue(fs, "replicas"))
	if err != nil || replicas < 0 {
		fmt.Fprintf(e.stderr, "dedup-worker redis-cluster-init: --replicas %s: want 0 or more\n", flagValue(fs, "replicas"))
		return exitUsage
	}
	wait, err := time.ParseDuration(flagValue(fs, "wait"))
	if err != nil {
		fmt.Fprintf(e.stderr, "dedup-worker redis-cluster-init: --wait: %v\n", err)
		return exitUsage
	}
	nodes, err := cfg.Redis.NodeOptions()
	if err != nil {
		fmt.Fprintf(e.stderr, "dedup-worker redis-cluster-init: %v\n", err)
		return exitUsage
	}
	res, err := rediscluster.Ensure(ctx, nodes, rediscluster.Options{Replicas: replicas, Timeout: wait})
	if err != nil {
		fmt.Fprintf(e.stderr, "dedup-worker redis-cluster-init: %v\n", err)
		return exitFail
	}
	masters := 0
	for _, n := range res.Nodes {
		if n.Master && n.Slots > 0 {
			masters++
		}
	}
	switch res.Action {
	case rediscluster.Formed:
		fmt.Fprintf(e.stdout, "formed a Redis Cluster of %d nodes, %d masters\n", len(res.Nodes), masters)
	case rediscluster.Met:
		fmt.Fprintf(e.stdout, "met the %d nodes at their addresses now: the cluster is back, %d masters\n", len(res.Nodes), masters)
	default:
		fmt.Fprintf(e.stdout, "the Redis Cluster is ok, %d nodes, %d masters: nothing to do\n", len(res.Nodes), masters)
	}
	for _, n := range res.Nodes {
		role := "master, " + strconv.Itoa(n.Slots) + " slots"
		if !n.Master {
			role = "replica of " + n.MasterID
		}
		fmt.Fprintf(e.stdout, "  %s\t%s\t%s\t%s\n", n.Addr, n.IP, n.ID, role)
	}
	return exitOK
}
