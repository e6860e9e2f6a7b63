package natstest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/sievecrawl/sieve/internal/toolstest"
)

// serverModule is the module whose version go.mod requires, embedded by
// Server and built into a binary by ModuleBinary.
const serverModule = "github.com/nats-io/nats-server/v2"

// ModuleVersion returns the version of nats-server this module requires
// ("2.15.2"): the server that Server embeds and ModuleBinary builds.
func ModuleVersion() string { return server.VERSION }

// ModuleBinary returns the path of a nats-server binary of the version
// this module requires (ModuleVersion): the very server Server embeds,
// run as a process so that a test can kill it with SIGKILL. The binary is
// built on first use with `go build` from the module cache (or the Go
// module proxy, as any dependency) into $SIEVE_TOOLS/bin/nats-server-VERSION,
// where test.sh builds it too, and kept there. A failed build fails tb.
func ModuleBinary(tb testing.TB) string {
	tb.Helper()
	version := "v" + ModuleVersion()
	dir := filepath.Join(toolstest.Dir(), "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatalf("natstest: %v", err)
	}
	bin := filepath.Join(dir, "nats-server-"+version)
	if isExecutable(bin) {
		return bin
	}
	// Packages tested at once may all want it: one builds, the others
	// wait for it.
	lock, err := os.OpenFile(bin+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		tb.Fatalf("natstest: %v", err)
	}
	defer lock.Close() // unlocks
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		tb.Fatalf("natstest: lock %s: %v", lock.Name(), err)
	}
	if isExecutable(bin) {
		return bin
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		tb.Fatalf("natstest: building nats-server %s needs the go command: %v", version, err)
	}
	tb.Logf("natstest: building nats-server %s into %s (once; it takes a minute or two)", version, bin)
	tmp := bin + ".tmp" + strconv.Itoa(os.Getpid())
	// Run in the package's directory, inside this module, so that go.mod
	// and go.sum choose the version and its dependencies.
	cmd := exec.Command(goTool, "build", "-o", tmp, serverModule)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		tb.Fatalf("natstest: go build %s: %v\n%s", serverModule, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		tb.Fatalf("natstest: %v", err)
	}
	return bin
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// ProcessCluster is a JetStream cluster of nats-server processes on
// loopback, owned by a test: every node routes to every other, each has
// its own name (n1, n2, …), ports and store directory, and each can be
// killed with SIGKILL and started again with all three, as a node of a
// real deployment restarted by its supervisor would be. Its methods are
// meant for the test goroutine.
type ProcessCluster struct {
	// Nodes are the servers, named n1, n2, …
	Nodes []*External
	mesh
}

// StartProcessCluster starts n nats-server processes of the binary bin
// (at least 3) as one JetStream cluster and waits until JetStream answers
// through every node. The processes are killed when the test ends.
func StartProcessCluster(tb testing.TB, bin string, n int) *ProcessCluster {
	tb.Helper()
	if n < 3 {
		tb.Fatalf("natstest: a JetStream cluster needs at least 3 servers, got %d", n)
	}
	version := binaryVersion(tb, bin)
	cl := &cluster{name: "natstest"}
	c := &ProcessCluster{mesh: mesh{tb: tb}}
	for i := 0; i < n; i++ {
		var ports [3]int
		for j := range ports {
			p, err := freePort()
			if err != nil {
				tb.Fatalf("natstest: %v", err)
			}
			ports[j] = p
		}
		cl.ports = append(cl.ports, ports[1])
		e := &External{Version: version, tb: tb, bin: bin, dir: tb.TempDir(), name: "n" + strconv.Itoa(i+1),
			cluster: cl, port: ports[0], route: ports[1], monitor: ports[2]}
		c.Nodes = append(c.Nodes, e)
		c.nodes = append(c.nodes, e)
	}
	for _, e := range c.Nodes {
		if err := e.start(); err != nil {
			tb.Fatalf("natstest: start cluster node %s: %v\n%s", e.name, err, readLog(e.dir))
		}
		tb.Cleanup(e.Kill)
	}
	c.WaitReady()
	c.waitPeers()
	return c
}

// waitPeers waits until the meta leader sees every other node as a current
// peer: before, a replicated stream may find "no suitable peers for
// placement".
func (c *ProcessCluster) waitPeers() {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	for {
		var current int
		if i, err := c.MetaLeader(ctx); err == nil {
			if info, err := c.Nodes[i].Jsz(ctx); err == nil && info.Meta != nil {
				for _, p := range info.Meta.Replicas {
					if p.Current && !p.Offline {
						current++
					}
				}
			}
		}
		if current == len(c.Nodes)-1 {
			return
		}
		select {
		case <-ctx.Done():
			c.tb.Fatalf("natstest: the meta leader does not see %d current peers within %v", len(c.Nodes)-1, clusterReadyTimeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Jsz returns the server's JetStream report (its /jsz with every account
// and stream): its view of the meta group and of each stream it holds a
// replica of. Only a node of a ProcessCluster serves one.
func (e *External) Jsz(ctx context.Context) (*server.JSInfo, error) {
	if e.monitor == 0 {
		return nil, fmt.Errorf("natstest: %s serves no monitoring port", e.name)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.MonitorURL()+"/jsz?accounts=true&streams=true", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("natstest: jsz of %s: %w", e.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("natstest: jsz of %s: %s", e.name, resp.Status)
	}
	var info server.JSInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return nil, fmt.Errorf("natstest: jsz of %s: %w", e.name, err)
	}
	return &info, nil
}

// MetaLeader returns the index in Nodes of the JetStream meta leader, as
// the first running node that knows one says.
func (c *ProcessCluster) MetaLeader(ctx context.Context) (int, error) {
	var last error = ErrNoLeader
	for _, e := range c.Nodes {
		if !e.Running() {
			continue
		}
		info, err := e.Jsz(ctx)
		if err != nil {
			last = err
			continue
		}
		if info.Meta == nil || info.Meta.Leader == "" {
			continue
		}
		for i, l := range c.Nodes {
			if l.name == info.Meta.Leader {
				return i, nil
			}
		}
		return 0, fmt.Errorf("natstest: meta group led by unknown server %q", info.Meta.Leader)
	}
	return 0, fmt.Errorf("natstest: no meta leader: %w", last)
}
