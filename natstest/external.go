package natstest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// ExternalBinary returns the path of an installed nats-server binary (on
// PATH, or Debian's /usr/sbin/nats-server), skipping tb when there is none,
// or failing it when the environment variable CI is "true".
func ExternalBinary(tb testing.TB) string {
	tb.Helper()
	if path, err := exec.LookPath("nats-server"); err == nil {
		return path
	}
	const debian = "/usr/sbin/nats-server"
	if _, err := os.Stat(debian); err == nil {
		return debian
	}
	msg := "natstest: nats-server not found on PATH or at " + debian + " (install it: apt-get install nats-server, or run ./test.sh)"
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// External is a nats-server process started from a binary, for tests that
// need a server other than the embedded one (an older release, or a node
// that dies by SIGKILL). It runs with JetStream on a free loopback port,
// storing in a temporary directory, and is killed when the test ends. Its
// methods are meant for the test goroutine.
type External struct {
	// Version is what the binary reports, e.g. "2.9.10".
	Version string

	tb      testing.TB
	bin     string
	dir     string   // the store ("js") and the log ("nats.log") are in it
	name    string   // server name ("": the server makes one up)
	cluster *cluster // nil: a standalone server
	port    int
	route   int // the cluster (route) port, in a cluster
	monitor int // the HTTP monitoring port, in a cluster
	cmd     *exec.Cmd
	done    chan struct{}
}

// StartExternal starts the nats-server binary bin and waits until it
// accepts client connections.
func StartExternal(tb testing.TB, bin string) *External {
	tb.Helper()
	version := binaryVersion(tb, bin)
	dir := tb.TempDir()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("natstest: %v", err)
		}
		e := &External{Version: version, tb: tb, bin: bin, dir: dir, port: port}
		if lastErr = e.start(); lastErr == nil {
			tb.Cleanup(e.Kill)
			return e
		}
	}
	tb.Fatalf("natstest: start %s: %v\n%s", bin, lastErr, readLog(dir))
	return nil
}

// binaryVersion runs bin --version: "nats-server: v2.11.17" is "2.11.17".
func binaryVersion(tb testing.TB, bin string) string {
	tb.Helper()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		tb.Fatalf("natstest: %s --version: %v\n%s", bin, err, out)
	}
	return strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "nats-server:")), "v")
}

func readLog(dir string) []byte {
	log, _ := os.ReadFile(filepath.Join(dir, "nats.log"))
	return log
}

func (e *External) args() []string {
	args := []string{"-a", "127.0.0.1", "-p", strconv.Itoa(e.port), "-js", "-sd", filepath.Join(e.dir, "js"),
		"-l", filepath.Join(e.dir, "nats.log")}
	if e.name != "" {
		args = append(args, "--name", e.name)
	}
	if c := e.cluster; c != nil {
		var routes []string
		for _, u := range c.routes() {
			routes = append(routes, u.String())
		}
		args = append(args, "--cluster_name", c.name,
			"--cluster", "nats://127.0.0.1:"+strconv.Itoa(e.route),
			"--routes", strings.Join(routes, ","),
			"-m", strconv.Itoa(e.monitor))
	}
	return args
}

func (e *External) start() error {
	cmd := exec.Command(e.bin, e.args()...)
	cmd.Dir = e.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	e.cmd, e.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(e.done) }()
	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case <-e.done:
			e.cmd = nil
			return errors.New("nats-server exited during start")
		default:
		}
		nc, err := nats.Connect(e.URL(), nats.Timeout(time.Second))
		if err == nil {
			nc.Close()
			return nil
		}
		if time.Now().After(deadline) {
			e.Kill()
			return fmt.Errorf("no connection within %v: %w", readyTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// URL returns the server's nats:// client URL. It stays the same across
// restarts.
func (e *External) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", e.port) }

// MonitorURL returns the base of the server's HTTP monitoring endpoints
// (/jsz, /healthz), in a ProcessCluster; "" for a standalone server.
func (e *External) MonitorURL() string {
	if e.monitor == 0 {
		return ""
	}
	return fmt.Sprintf("http://127.0.0.1:%d", e.monitor)
}

// Name returns the server's name, as JetStream reports it (a stream's
// leader, a peer); "" for a standalone server.
func (e *External) Name() string { return e.name }

// Running reports whether the process is up.
func (e *External) Running() bool { return e.cmd != nil }

// Log returns what the server has logged so far, across restarts.
func (e *External) Log() string { return string(readLog(e.dir)) }

// Kill kills the process with SIGKILL, as a crash or an OOM kill would, and
// waits for it: nothing is flushed, the store stays as it was. It is safe
// to call more than once.
func (e *External) Kill() {
	if e.cmd == nil {
		return
	}
	_ = e.cmd.Process.Signal(syscall.SIGKILL)
	<-e.done
	e.cmd = nil
}

// StartAgain starts a killed server with the same name, ports and store
// directory, and waits until it accepts client connections.
func (e *External) StartAgain() {
	e.tb.Helper()
	var err error
	deadline := time.Now().Add(readyTimeout)
	for {
		if err = e.start(); err == nil {
			return
		}
		if time.Now().After(deadline) { // the port may linger briefly
			e.tb.Fatalf("natstest: start %s again on port %d: %v\n%s", e.name, e.port, err, readLog(e.dir))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ClosedAddr returns a loopback host:port nothing listens on (a port the
// kernel just handed out and took back), for tests of an unreachable server.
func ClosedAddr(tb testing.TB) string {
	tb.Helper()
	port, err := freePort()
	if err != nil {
		tb.Fatalf("natstest: %v", err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}
