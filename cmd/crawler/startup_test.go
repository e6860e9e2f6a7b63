package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/testsite"
)

// TestReadyzWhileWaitingForNATS pins the last gap of issue 10 item 5: a
// long-running process that waits for NATS says so in /readyz at once. A
// crawler and a dedup worker start with nothing listening at the NATS
// address: each serves /healthz 200 and /readyz 503 naming the address and
// the cause within a few seconds (the crawler's used to come up only once
// NATS did; the worker's answered nothing for 5 s, then "nats
// unavailable"), and the crawler's "watch it at" address is the one that
// answers. Then NATS starts on that address: both become ready and the
// crawl runs to its end.
func TestReadyzWhileWaitingForNATS(t *testing.T) {
	crawler, worker := crawlerBinary(t), workerBinary(t)
	site := startSite(t, testsite.Options{Pages: 40, Latency: time.Millisecond})
	natsAddr := natstest.ClosedAddr(t)
	const maxDepth = 4
	env := []string{"SIEVE_NATS_URL=nats://" + natsAddr, "SIEVE_REDIS_URL=", "SIEVE_NATS_RECONNECT_WAIT=100ms"}

	workerAddr := natstest.ClosedAddr(t) // a free port
	started := time.Now()
	w := startProc(t, "dedup-worker", worker, []string{"run", "--http-addr", workerAddr, "--filter-capacity", "100000"}, env)
	c := startProc(t, "crawler", crawler, append([]string{"run", "--json", "--http-addr", natstest.ClosedAddr(t),
		"--seed", site.URL, "--idle-exit", "2s"}, testRunFlags(maxDepth)...), env)
	crawlerURL := watchURL(t, c, 10*time.Second)
	workerURL := "http://" + workerAddr + "/"

	// Both answer at once, and /readyz's reasons (not only its details)
	// name what they wait for.
	for _, p := range []struct {
		name, url string
		proc      *proc
	}{{"crawler", crawlerURL, c}, {"dedup-worker", workerURL, w}} {
		code, body := getURL(p.url + "readyz")
		for ; code != http.StatusServiceUnavailable || !namesWait(body, natsAddr); code, body = getURL(p.url + "readyz") {
			if time.Now().After(started.Add(5 * time.Second)) {
				t.Fatalf("%s /readyz while NATS is down = %d %q, want 503 whose not_ready names %s and the cause (connection refused) within 5 s of its start; log:\n%s",
					p.name, code, body, natsAddr, p.proc.logTail())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if code, body := getURL(p.url + "healthz"); code != http.StatusOK {
			t.Errorf("%s /healthz while NATS is down = %d %q, want 200", p.name, code, body)
		}
	}

	_, port, _ := net.SplitHostPort(natsAddr)
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Start(t, natstest.Options{Port: n})
	for _, p := range []struct {
		name, url string
		proc      *proc
	}{{"crawler", crawlerURL, c}, {"dedup-worker", workerURL, w}} {
		deadline := time.Now().Add(20 * time.Second)
		for code, body := getURL(p.url + "readyz"); code != http.StatusOK; code, body = getURL(p.url + "readyz") {
			if p.name == "crawler" && exited(c) {
				break // done already: its summary below says how it went
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s /readyz with NATS up = %d %q, want 200 within 20 s; log:\n%s", p.name, code, body, p.proc.logTail())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	c.wait(t, 60*time.Second)
	sum := c.summary(t)
	if sum.End != "frontier empty" {
		t.Errorf("crawler ended with %q, want \"frontier empty\"", sum.End)
	}
	checkPlan(t, site, maxDepth, 2, 1)
	w.cmd.Process.Signal(syscall.SIGTERM)
	w.wait(t, 30*time.Second)
}

// namesWait reports whether a /readyz body gives, among its reasons, the
// NATS address a process waits for and why it cannot connect.
func namesWait(body, addr string) bool {
	var r struct {
		NotReady map[string]string `json:"not_ready"`
	}
	if json.Unmarshal([]byte(body), &r) != nil {
		return false
	}
	for _, why := range r.NotReady {
		if strings.Contains(why, addr) && strings.Contains(why, "connection refused") {
			return true
		}
	}
	return false
}

// watchURL waits for the crawler to print where its watch page is.
func watchURL(tb testing.TB, p *proc, d time.Duration) string {
	tb.Helper()
	deadline := time.Now().Add(d)
	for {
		b, _ := os.ReadFile(p.log)
		for line := range strings.Lines(string(b)) {
			if u, ok := strings.CutPrefix(strings.TrimSpace(line), "watch it at "); ok {
				return u
			}
		}
		if time.Now().After(deadline) || exited(p) {
			tb.Fatalf("%s printed no \"watch it at\" line in %v; log:\n%s", p.name, d, p.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exited reports whether the process has ended.
func exited(p *proc) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// getURL returns a GET's status and body; a request that fails, or gets no
// answer in 2 s, reads as status 0 with the error as its body.
func getURL(url string) (int, string) {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
