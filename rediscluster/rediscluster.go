// Package rediscluster forms a Redis Cluster from its nodes' addresses, and
// brings back one whose nodes restarted at other addresses. It is what
// compose.yaml's redis-cluster-init service runs, as
// "dedup-worker redis-cluster-init", on every `docker compose up`.
//
// # Forming
//
// A node that knows no other node and serves no hash slot is empty. When
// every node is, Ensure forms a cluster as `redis-cli --cluster create`
// does: the first n/(1+Replicas) nodes are masters, master k serving the
// contiguous slots [k·16384/m, (k+1)·16384/m) (CLUSTER ADDSLOTSRANGE); every
// node takes its own config epoch 1…n first (CLUSTER SET-CONFIG-EPOCH), so
// no two masters contend for one; every node meets every other; once each
// knows all n, the other nodes replicate the masters in turn (replica j of
// the list replicates master j mod m).
//
// # Coming back
//
// A node keeps its cluster in its nodes.conf: node IDs, slots, epochs and
// the addresses it last knew. A node restarted at another address (a
// compose network recreated by `down` then `up`, its volume kept) keeps
// its ID, slots and data, but the others look for it at its old address
// and mark it failing: cluster_state:fail, and `redis-cli --cluster
// create` refuses the nodes as not empty. A CLUSTER MEET from a node's new
// address mends this: when the handshake reveals an ID the receiving node
// knows, Redis drops the handshake and moves the known node to the new
// address. So when any node is not empty, Ensure makes every node meet
// every other at its address now, n·(n−1) MEETs (30 for six nodes), which
// needs no gossip to spread and is harmless where an address is already
// right. It forms nothing and moves no slot: the cluster comes back as it
// was, with its IDs, slots, replicas and data. An empty node among them
// (its volume lost) joins as a master serving no slot; Ensure leaves it so.
//
// Addresses are resolved first, since CLUSTER MEET takes an IP: a node
// configured as redis-1:6379 is met at whatever address redis-1 has now.
// A cluster whose every node already reports cluster_state:ok and knows
// every other at its address now is left alone: Ensure sends no command
// that changes anything. In every other case it waits until that holds.
package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// DefaultTimeout bounds Ensure when Options.Timeout is zero: long enough
// for a master marked failing to be cleared (twice cluster-node-timeout).
const DefaultTimeout = 2 * time.Minute

// ErrNotCluster is wrapped by the error for a node whose cluster mode is
// off (cluster-enabled no).
var ErrNotCluster = errors.New("rediscluster: cluster mode is off")

// Options shapes what Ensure forms. The zero value forms masters only and
// waits DefaultTimeout.
type Options struct {
	// Replicas is the number of replicas of each master when a cluster is
	// formed; a formed cluster keeps the replicas it has.
	Replicas int
	// Timeout bounds Ensure as a whole.
	Timeout time.Duration
}

// Action is what Ensure did.
type Action string

// The actions of Ensure.
const (
	// Formed: every node was empty; they now form a new cluster.
	Formed Action = "formed"
	// Met: the nodes held a cluster, which each node now knows at the
	// addresses its nodes have now.
	Met Action = "met"
	// Nothing: the cluster was ok, every node known where it is.
	Nothing Action = "nothing"
)

// Node is one node of the cluster as Ensure leaves it.
type Node struct {
	// Addr is the node's address as configured; IP the address it was
	// resolved to and met at.
	Addr, IP string
	// ID is the node's cluster ID.
	ID string
	// Master is true for a master; MasterID names a replica's master.
	Master   bool
	MasterID string
	// Slots counts the hash slots it serves.
	Slots int
}

// Result is what Ensure did and the cluster it left.
type Result struct {
	Action Action
	Nodes  []Node
}

// Ensure makes the nodes one Redis Cluster in state ok, each knowing every
// other at its address now: forming it if every node is empty, else
// meeting every node at its address (see the package doc). nodes are the
// client options of each node (config.Redis.NodeOptions). It waits at
// most o.Timeout for the nodes to answer and the cluster to settle.
func Ensure(ctx context.Context, nodes []*redis.Options, o Options) (Result, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Replicas < 0 {
		return Result{}, fmt.Errorf("rediscluster: %d replicas", o.Replicas)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	ns := make([]*node, len(nodes))
	for i, opt := range nodes {
		n, err := dial(ctx, opt)
		if err != nil {
			closeAll(ns)
			return Result{}, err
		}
		ns[i] = n
	}
	defer closeAll(ns)

	views := make([]view, len(ns))
	empty := 0
	for i, n := range ns {
		v, err := n.view(ctx)
		if err != nil {
			return Result{}, err
		}
		views[i] = v
		if v.empty() {
			empty++
		}
	}
	action := Nothing
	switch {
	case settled(ns, views) == nil:
	case empty == len(ns):
		action = Formed
		if err := form(ctx, ns, o.Replicas); err != nil {
			return Result{}, err
		}
	default:
		action = Met
		if err := meetAll(ctx, ns); err != nil {
			return Result{}, err
		}
	}
	views, err := waitSettled(ctx, ns)
	if err != nil {
		return Result{}, err
	}
	res := Result{Action: action}
	for i, n := range ns {
		me := views[i].self()
		res.Nodes = append(res.Nodes, Node{Addr: n.addr, IP: n.ip, ID: me.id, Master: me.master, MasterID: me.masterID, Slots: me.slots})
	}
	return res, nil
}

// node is one configured node: its address as given, resolved, and a
// client.
type node struct {
	addr string // as configured
	ip   string // ip:port it is met at
	host string
	port string
	c    *redis.Client
}

// dial resolves the node's address and waits until it answers PING.
func dial(ctx context.Context, opt *redis.Options) (*node, error) {
	host, port, err := net.SplitHostPort(opt.Addr)
	if err != nil {
		return nil, fmt.Errorf("rediscluster: node address %q: %w", opt.Addr, err)
	}
	n := &node{addr: opt.Addr, port: port}
	var last error
	for {
		if n.host == "" {
			if n.host, last = resolve(ctx, host); last == nil {
				n.ip = net.JoinHostPort(n.host, port)
				o := *opt
				n.c = redis.NewClient(&o)
			}
		}
		if n.c != nil {
			if last = n.c.Ping(ctx).Err(); last == nil {
				return n, nil
			}
		}
		if err := pause(ctx); err != nil {
			if n.c != nil {
				n.c.Close()
			}
			return nil, fmt.Errorf("rediscluster: node %s does not answer: %w", opt.Addr, errors.Join(last, err))
		}
	}
}

// resolve returns host's address, an IPv4 one if it has one: CLUSTER MEET
// takes an IP, not a name.
func resolve(ctx context.Context, host string) (string, error) {
	if ip := net.ParseIP(host); ip != nil {
		return ip.String(), nil
	}
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return "", err
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("%s has no address", host)
	}
	for _, a := range addrs {
		if a.IP.To4() != nil {
			return a.IP.String(), nil
		}
	}
	return addrs[0].IP.String(), nil
}

func closeAll(ns []*node) {
	for _, n := range ns {
		if n != nil && n.c != nil {
			_ = n.c.Close()
		}
	}
}

// pause waits a moment between polls, or returns ctx's error.
func pause(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(100 * time.Millisecond):
		return nil
	}
}

// form forms a new cluster of empty nodes (package doc, "Forming").
func form(ctx context.Context, ns []*node, replicas int) error {
	masters := len(ns) / (1 + replicas)
	if masters < 3 {
		return fmt.Errorf("rediscluster: %d nodes with %d replicas each make %d masters; a Redis Cluster needs at least 3", len(ns), replicas, masters)
	}
	for i, n := range ns {
		if err := n.c.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("rediscluster: set the config epoch of %s: %w", n.addr, err)
		}
	}
	for k, n := range ns[:masters] {
		lo, hi := k*Slots/masters, (k+1)*Slots/masters-1
		if err := n.c.ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			return fmt.Errorf("rediscluster: give slots %d-%d to %s: %w", lo, hi, n.addr, err)
		}
	}
	if err := meetAll(ctx, ns); err != nil {
		return err
	}
	ids := make([]string, masters)
	for k, n := range ns[:masters] {
		id, err := n.c.ClusterMyID(ctx).Result()
		if err != nil {
			return fmt.Errorf("rediscluster: id of %s: %w", n.addr, err)
		}
		ids[k] = id
	}
	for j, n := range ns[masters:] {
		master := ids[j%masters]
		// The replica must know its master first: retry while gossip
		// spreads the meetings.
		for {
			err := n.c.ClusterReplicate(ctx, master).Err()
			if err == nil {
				break
			}
			if perr := pause(ctx); perr != nil {
				return fmt.Errorf("rediscluster: make %s a replica of %s: %w", n.addr, ns[j%masters].addr, errors.Join(err, perr))
			}
		}
	}
	return nil
}

// meetAll makes every node meet every other at its address now.
func meetAll(ctx context.Context, ns []*node) error {
	for _, from := range ns {
		for _, to := range ns {
			if from == to {
				continue
			}
			if err := from.c.ClusterMeet(ctx, to.host, to.port).Err(); err != nil {
				return fmt.Errorf("rediscluster: %s meets %s at %s: %w", from.addr, to.addr, to.ip, err)
			}
		}
	}
	return nil
}

// waitSettled polls the nodes until settled holds, returning their views.
func waitSettled(ctx context.Context, ns []*node) ([]view, error) {
	for {
		views := make([]view, len(ns))
		var err error
		for i, n := range ns {
			if views[i], err = n.view(ctx); err != nil {
				break
			}
		}
		if err == nil {
			if err = settled(ns, views); err == nil {
				return views, nil
			}
		}
		if perr := pause(ctx); perr != nil {
			return nil, fmt.Errorf("rediscluster: the cluster did not settle: %w", errors.Join(err, perr))
		}
	}
}

// settled returns nil if every node reports cluster_state:ok and knows
// every node, by ID, at its address now, none failing and none in a
// handshake; else why not.
func settled(ns []*node, views []view) error {
	at := map[string]string{} // node ID → its address now
	for i, v := range views {
		me := v.self()
		if me.id == "" {
			return fmt.Errorf("%s: no myself in CLUSTER NODES", ns[i].addr)
		}
		at[me.id] = ns[i].ip
	}
	for i, v := range views {
		if !v.ok {
			return fmt.Errorf("%s: cluster_state is not ok", ns[i].addr)
		}
		if len(v.nodes) != len(ns) {
			return fmt.Errorf("%s knows %d nodes, want %d", ns[i].addr, len(v.nodes), len(ns))
		}
		for _, l := range v.nodes {
			switch {
			case l.failing:
				return fmt.Errorf("%s sees node %s at %s failing or unreached", ns[i].addr, l.id, l.addr)
			case at[l.id] == "":
				return fmt.Errorf("%s knows node %s at %s, which is none of the configured nodes", ns[i].addr, l.id, l.addr)
			case !l.self && l.addr != at[l.id]:
				// A node's own address may be unknown to it (it learns
				// it from a MEET); the others' must be right.
				return fmt.Errorf("%s knows node %s at %s, not at %s", ns[i].addr, l.id, l.addr, at[l.id])
			}
		}
	}
	return nil
}

// view is one node's CLUSTER INFO and CLUSTER NODES.
type view struct {
	ok    bool
	nodes []line
}

// line is one line of CLUSTER NODES.
type line struct {
	id, addr string
	self     bool
	master   bool
	masterID string
	// failing: fail, fail?, noaddr or in a handshake.
	failing bool
	slots   int
}

func (v view) self() line {
	for _, l := range v.nodes {
		if l.self {
			return l
		}
	}
	return line{}
}

// empty reports whether the node knows no other node and serves no slot.
func (v view) empty() bool { return len(v.nodes) == 1 && v.self().slots == 0 }

func (n *node) view(ctx context.Context) (view, error) {
	info, err := n.c.ClusterInfo(ctx).Result()
	if err != nil {
		if strings.Contains(err.Error(), "cluster support disabled") {
			return view{}, fmt.Errorf("%w on %s (start it with --cluster-enabled yes)", ErrNotCluster, n.addr)
		}
		return view{}, fmt.Errorf("rediscluster: cluster info of %s: %w", n.addr, err)
	}
	text, err := n.c.ClusterNodes(ctx).Result()
	if err != nil {
		return view{}, fmt.Errorf("rediscluster: cluster nodes of %s: %w", n.addr, err)
	}
	v := view{ok: strings.Contains(info, "cluster_state:ok")}
	v.nodes, err = parseNodes(text)
	if err != nil {
		return view{}, fmt.Errorf("rediscluster: cluster nodes of %s: %w", n.addr, err)
	}
	return v, nil
}

// parseNodes reads CLUSTER NODES: per line an ID, ip:port@cport[,hostname],
// flags, the master's ID or "-", ping and pong times, config epoch, link
// state and the slots served (single slots and lo-hi ranges; slots being
// migrated, in brackets, are not counted).
func parseNodes(text string) ([]line, error) {
	var out []line
	for _, s := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(s)
		if len(f) < 8 {
			return nil, fmt.Errorf("line %q: want at least 8 fields", s)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		flags := strings.Split(f[2], ",")
		l := line{id: f[0], addr: addr, self: slices.Contains(flags, "myself"), master: slices.Contains(flags, "master"),
			masterID: strings.TrimPrefix(f[3], "-")}
		for _, bad := range []string{"fail", "fail?", "noaddr", "handshake"} {
			l.failing = l.failing || slices.Contains(flags, bad)
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue
			}
			lo, hi, isRange := strings.Cut(r, "-")
			a, err := strconv.Atoi(lo)
			if err != nil {
				return nil, fmt.Errorf("line %q: slot %q", s, r)
			}
			b := a
			if isRange {
				if b, err = strconv.Atoi(hi); err != nil {
					return nil, fmt.Errorf("line %q: slot %q", s, r)
				}
			}
			l.slots += b - a + 1
		}
		out = append(out, l)
	}
	return out, nil
}
