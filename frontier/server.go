package frontier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sievecrawl/sieve/internal/lograte"
)

// MinServerVersion is the oldest nats-server that keeps the pipeline's
// guarantees. Older servers ignore a terminate with a reason (AckTerm with
// a body, which the worker uses for poison messages): the message is
// redelivered every AckWait, counted again, and the stream never drains.
// Servers before 2.10 also lose a work-queue stream's recent publishes on a
// crash more easily (no per-stream sync settings).
const MinServerVersion = "2.10.0"

// RestartSafeVersion is the oldest nats-server whose cluster nodes are
// known to keep their replicas when one is killed and restarted: earlier
// ones (2.11 included) can take a restarted node's recovered streams for
// orphans and delete them (nats-server#5382's class, fixed by #7540 and
// #7824, released in 2.12.5 and 2.14.0; there is no 2.13).
// docs/running.md, "NATS node restarts".
const RestartSafeVersion = "2.12.5"

// ReplicasWarning returns what to warn of at start when topo replicates
// its streams (Replicas > 1) on nc's server older than RestartSafeVersion,
// or "". It warns rather than refuses: a deployment running such servers
// keeps working until a node dies, and refusing would stop every worker
// at an upgrade of Sieve; the warning says what to upgrade and why.
func ReplicasWarning(nc *nats.Conn, topo Topology) string {
	return replicasWarning(nc.ConnectedServerVersion(), nc.ConnectedUrlRedacted(), topo.Replicas)
}

func replicasWarning(version, url string, replicas int) string {
	if replicas <= 1 || version == "" || atLeast(version, RestartSafeVersion) {
		return ""
	}
	return fmt.Sprintf("nats-server %s at %s, with frontier.replicas %d: a cluster node killed and restarted may "+
		"delete its replicas of Sieve's streams as orphans, for good (nats-server#5382; fixed in %s and 2.14.0): "+
		"upgrade the servers (docs/running.md, NATS node restarts)", version, url, replicas, RestartSafeVersion)
}

// ErrServerTooOld is matched (errors.Is) by the error CheckServer returns for
// a server older than MinServerVersion.
var ErrServerTooOld = errors.New("frontier: nats-server too old")

// ErrNotConnected is matched (errors.Is) by the error CheckServer returns
// when the connection has no server to ask.
var ErrNotConnected = errors.New("frontier: not connected to nats")

// ServerVersionError is the error for a server older than MinServerVersion.
type ServerVersionError struct {
	// URL is the server's address (credentials redacted).
	URL string
	// Version is the version the server reported.
	Version string
}

func (e *ServerVersionError) Error() string {
	return fmt.Sprintf("frontier: nats-server %s at %s is too old: Sieve needs nats-server %s or newer "+
		"(older servers ignore terminating a poison message, which then comes back forever)",
		e.Version, e.URL, MinServerVersion)
}

// Is makes errors.Is(err, ErrServerTooOld) true.
func (e *ServerVersionError) Is(target error) bool { return target == ErrServerTooOld }

// CheckServer returns nil if nc is connected to a nats-server of at least
// MinServerVersion, a *ServerVersionError if the server is older, and an
// error matching ErrNotConnected if nc is not connected. Call it once a
// connection is up, before the pipeline uses it.
func CheckServer(nc *nats.Conn) error {
	if nc == nil || !nc.IsConnected() {
		return ErrNotConnected
	}
	if v := nc.ConnectedServerVersion(); !atLeast(v, MinServerVersion) {
		return &ServerVersionError{URL: nc.ConnectedUrlRedacted(), Version: v}
	}
	return nil
}

// atLeast reports whether version v ("2.9.10", "2.11.0-RC.1") is at least
// min, comparing major, minor and patch numbers; an unparsable v is not.
func atLeast(v, min string) bool {
	have, ok := versionNumbers(v)
	if !ok {
		return false
	}
	want, _ := versionNumbers(min)
	for i := range have {
		if have[i] != want[i] {
			return have[i] > want[i]
		}
	}
	return true
}

// versionNumbers parses "major.minor.patch", ignoring anything after the
// patch number's digits.
func versionNumbers(v string) ([3]int, bool) {
	var out [3]int
	parts := strings.SplitN(v, ".", 3)
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, digits := 0, 0
		for _, c := range p {
			if c < '0' || c > '9' || digits == 6 {
				break
			}
			n, digits = n*10+int(c-'0'), digits+1
		}
		if digits == 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}

// WaitServer waits until nc is connected, then checks the server
// (CheckServer). While it waits it logs which servers it is waiting for
// and why the last attempt failed: each cause at once, then once a minute
// while it lasts. It returns ctx's error if ctx ends first, and the
// refusal if the client gives up (a server that refuses it again and
// again).
func WaitServer(ctx context.Context, nc *nats.Conn, log *slog.Logger) error {
	logged := false
	lines := lograte.New(time.Minute)
	for !nc.IsConnected() {
		if nc.IsClosed() {
			return fmt.Errorf("frontier: nats connection closed: %w", waitingError(nc))
		}
		// One line per cause a minute: a new cause (the server, first
		// unreachable, now refuses the client) at once, causes that
		// alternate once a minute each.
		err := waitingError(nc)
		lines.Log(log, slog.LevelWarn, err.Error(), "waiting for NATS", "error", err)
		logged = true
		if !sleep(ctx, 50*time.Millisecond) {
			return fmt.Errorf("%w (%w)", ctx.Err(), waitingError(nc))
		}
	}
	if logged {
		log.Info("connected to NATS", "url", nc.ConnectedUrlRedacted())
	}
	return CheckServer(nc)
}

// Connected returns nil while nc is connected, else an error matching
// ErrNotConnected that names the servers nc is trying and why the last
// attempt failed (when its dialer records it, as config's clients do): what
// a readiness check should say.
func Connected(nc *nats.Conn) error {
	if nc.IsConnected() {
		return nil
	}
	return waitingError(nc)
}

// dialErrorer is a connection's dialer that remembers why its last dial
// failed; config's NATS clients use one.
type dialErrorer interface {
	LastDialError() error
}

// waitingError describes a connection that is not up: the servers it is
// trying and, when its dialer records it, why the last attempt failed.
//
// A server that answers the dial but refuses the client (a wrong password,
// an unknown NKey, a token it does not know) leaves no dial error: its
// refusal is the connection's last error, and is said instead, so that
// a process that waits says why.
func waitingError(nc *nats.Conn) error {
	servers := strings.Join(redactedServers(nc), ", ")
	if d, ok := nc.Opts.CustomDialer.(dialErrorer); ok {
		if err := d.LastDialError(); err != nil {
			return fmt.Errorf("%w: waiting for %s: %w", ErrNotConnected, servers, err)
		}
	}
	if err := nc.LastError(); err != nil {
		return fmt.Errorf("%w: waiting for %s: refused: %w", ErrNotConnected, servers, err)
	}
	return fmt.Errorf("%w: waiting for %s", ErrNotConnected, servers)
}

// redactedServers lists the servers nc may connect to, without credentials.
func redactedServers(nc *nats.Conn) []string {
	var out []string
	for _, s := range nc.Servers() {
		out = append(out, redact(s))
	}
	if len(out) == 0 {
		out = []string{"nats"}
	}
	return out
}

// redact removes the user information of a server URL.
func redact(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return u
	}
	rest := u[i+3:]
	if j := strings.LastIndexByte(rest, '@'); j >= 0 {
		return u[:i+3] + rest[j+1:]
	}
	return u
}
