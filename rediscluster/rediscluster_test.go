package rediscluster

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/redistest"
)

func TestParseNodes(t *testing.T) {
	for _, tt := range []struct {
		name, text string
		want       []line
	}{
		// Redis 7's CLUSTER NODES: ip:port@cport, a hostname after a comma
		// when one is announced, slot ranges and single slots.
		{"master with ranges", "07c3 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460 7000\n",
			[]line{{id: "07c3", addr: "127.0.0.1:30001", self: true, master: true, slots: 5462}}},
		{"replica, hostname", "e7d1 10.0.0.5:6379@16379,redis-4 slave 07c3 0 1700000000 4 connected",
			[]line{{id: "e7d1", addr: "10.0.0.5:6379", masterID: "07c3"}}},
		// A slot being migrated is served by its owner, counted there.
		{"migrating slot not counted", "07c3 127.0.0.1:30001@40001 master - 0 0 1 connected 0-9 [10->-e7d1]",
			[]line{{id: "07c3", addr: "127.0.0.1:30001", master: true, slots: 10}}},
		// A node met at an address it is not at yet, or unreachable.
		{"failing and handshake", "a1 127.0.0.1:1@10001 master,fail - 0 0 1 disconnected\nb2 127.0.0.1:2@10002 handshake - 0 0 0 connected",
			[]line{{id: "a1", addr: "127.0.0.1:1", master: true, failing: true}, {id: "b2", addr: "127.0.0.1:2", failing: true}}},
	} {
		got, err := parseNodes(tt.text)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: parseNodes = %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}

// TestEnsureForms forms clusters of empty nodes with and without replicas
// and checks the slots are split whole among the masters; and refuses
// what cannot be a cluster.
func TestEnsureForms(t *testing.T) {
	ctx := context.Background()
	single := redistest.Start(t, redistest.Options{})
	for _, tt := range []struct {
		name     string
		nodes    int
		replicas int
		err      string // the error contains; "" for none
	}{
		{"three masters", 3, 0, ""},
		{"three masters, a replica each", 6, 1, ""},
		{"too few nodes for three masters with replicas", 4, 1, "at least 3"},
		{"a server with cluster mode off", 0, 0, ErrNotCluster.Error()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var opts []*redis.Options
			for _, s := range redistest.StartClusterNodes(t, tt.nodes, redistest.ClusterOptions{NodeTimeout: 2 * time.Second}) {
				opts = append(opts, &redis.Options{Addr: s.Addr})
			}
			if tt.nodes == 0 {
				opts = []*redis.Options{{Addr: single.Addr}}
			}
			res, err := Ensure(ctx, opts, Options{Replicas: tt.replicas, Timeout: time.Minute})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Ensure = %v, want an error with %q", err, tt.err)
				}
				if tt.nodes == 0 && !errors.Is(err, ErrNotCluster) {
					t.Errorf("Ensure = %v, want ErrNotCluster", err)
				}
				return
			}
			if err != nil || res.Action != Formed {
				t.Fatalf("Ensure = %+v, %v; want formed", res, err)
			}
			slots, masters, replicas := 0, map[string]bool{}, map[string]int{}
			for _, n := range res.Nodes {
				if n.Master {
					slots += n.Slots
					masters[n.ID] = true
				} else {
					replicas[n.MasterID]++
				}
			}
			if slots != Slots || len(masters) != tt.nodes/(1+tt.replicas) {
				t.Errorf("%d masters serving %d slots, want %d serving %d", len(masters), slots, tt.nodes/(1+tt.replicas), Slots)
			}
			if tt.replicas > 0 && len(replicas) != len(masters) {
				t.Errorf("replicas of %d masters, want every one of %d", len(replicas), len(masters))
			}
			for id, n := range replicas {
				if !masters[id] || n != tt.replicas {
					t.Errorf("master %s has %d replicas, want %d", id, n, tt.replicas)
				}
			}
		})
	}
}
