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
// need a server other than the embedded one (an older release). It runs
// with JetStream on a free loopback port, storing in a temporary directory,
// and is killed when the test ends.
type External struct {
	// Version is what the binary reports, e.g. "2.9.10".
	Version string

	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// StartExternal starts the nats-server binary bin and waits until it
// accepts client connections.
func StartExternal(tb testing.TB, bin string) *External {
	tb.Helper()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		tb.Fatalf("natstest: %s --version: %v\n%s", bin, err, out)
	}
	version := strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "nats-server:")), "v")
	dir := tb.TempDir()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("natstest: %v", err)
		}
		e := &External{Version: version, port: port}
		if lastErr = e.start(bin, dir); lastErr == nil {
			tb.Cleanup(e.Stop)
			return e
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, "nats.log"))
	tb.Fatalf("natstest: start %s: %v\n%s", bin, lastErr, log)
	return nil
}

func (e *External) start(bin, dir string) error {
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(e.port), "-js", "-sd", filepath.Join(dir, "js"),
		"-l", filepath.Join(dir, "nats.log"))
	cmd.Dir = dir
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
			return errors.New("nats-server exited during start")
		default:
		}
		nc, err := nats.Connect(e.URL(), nats.Timeout(time.Second))
		if err == nil {
			nc.Close()
			return nil
		}
		if time.Now().After(deadline) {
			e.Stop()
			return fmt.Errorf("no connection within %v: %w", readyTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// URL returns the server's nats:// client URL.
func (e *External) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", e.port) }

// Stop kills the server and waits for it. It is safe to call more than once.
func (e *External) Stop() {
	if e.cmd == nil {
		return
	}
	_ = e.cmd.Process.Kill()
	<-e.done
	e.cmd = nil
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
