package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/redistest"
)

// testConfig is a configuration for tests: small filter, fast retries,
// status server on a free port.
func testConfig(natsURL, redisURL string) config.Config {
	cfg := config.Default()
	cfg.NATS.URL = natsURL
	cfg.NATS.ReconnectWait = 50 * time.Millisecond
	cfg.Redis.URL = redisURL
	cfg.Filter.Capacity = 100_000
	cfg.Filter.FPP = 1e-7
	cfg.Filter.Shards = 4
	cfg.Frontier.AckWait = 3 * time.Second
	cfg.Frontier.DuplicateWindow = time.Minute
	cfg.Worker.BackoffMin = 10 * time.Millisecond
	cfg.Worker.BackoffMax = 500 * time.Millisecond
	cfg.Worker.FetchWait = 50 * time.Millisecond
	cfg.Worker.StatsInterval = 50 * time.Millisecond
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.Log.Level = "debug"
	return cfg
}

// testLogger writes the worker's log to the test log.
type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Logf("%s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

// startMain boots a Main in-process and returns it with a function that
// stops it as SIGTERM would.
func startMain(tb testing.TB, cfg config.Config) (*Main, func() error) {
	tb.Helper()
	return startMainLog(tb, cfg, testWriter{tb})
}

// startMainLog is startMain with the log written to log.
func startMainLog(tb testing.TB, cfg config.Config, log io.Writer) (*Main, func() error) {
	tb.Helper()
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	m := &Main{Config: cfg, Logger: newLogger(log, cfg.Log)}
	if err := m.Open(); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- m.Run(ctx) }()
	stopped := false
	var runErr error
	stop := func() error {
		if stopped {
			return runErr
		}
		stopped = true
		cancel()
		select {
		case runErr = <-errc:
		case <-time.After(60 * time.Second):
			runErr = fmt.Errorf("Main.Run did not return")
		}
		if err := m.Close(); err != nil && runErr == nil {
			runErr = err
		}
		return runErr
	}
	tb.Cleanup(func() { _ = stop() })
	return m, stop
}

func get(tb testing.TB, url string) (int, string) {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// harness is the pipeline's real services for a test.
type harness struct {
	nats  *natstest.Server
	redis *redistest.Server
	js    jetstream.JetStream
	topo  frontier.Topology
}

func newHarness(tb testing.TB) *harness {
	tb.Helper()
	h := &harness{
		nats:  natstest.Start(tb, natstest.Options{}),
		redis: redistest.Start(tb, redistest.Options{AOF: true}),
	}
	h.js = h.nats.JetStream()
	h.topo = testConfig("", "").Frontier.Topology()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.topo.Ensure(ctx, h.js); err != nil {
		tb.Fatal(err)
	}
	return h
}

func (h *harness) publish(tb testing.TB, d frontier.Discovered) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.topo.PublishDiscovered(ctx, h.js, d); err != nil {
		tb.Fatal(err)
	}
}

// drained reports whether every discovered message published so far was
// acknowledged.
func (h *harness) drained(tb testing.TB) bool {
	return natstest.Drained(h.js, h.topo.DiscoveredStream(), h.topo.Consumer())
}

// frontierURLs reads (and removes) every URL on the frontier.
func (h *harness) frontierURLs(tb testing.TB) []string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := h.js.CreateOrUpdateConsumer(ctx, h.topo.FrontierStream(), jetstream.ConsumerConfig{
		Durable: "test-reader", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: h.topo.WithDefaults().Prefix + ".frontier.>",
	})
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for {
		batch, err := c.Fetch(1000, jetstream.FetchMaxWait(300*time.Millisecond))
		if err != nil {
			tb.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			e, err := frontier.DecodeEntry(m.Data())
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, e.URL)
			_ = m.Ack()
		}
		if n == 0 {
			return out
		}
	}
}

func page(i int, links ...string) frontier.Discovered {
	return frontier.Discovered{Crawl: "t", URL: fmt.Sprintf("https://site.example/p/%d", i), Depth: 1, Links: links}
}

func TestMainServesAndCommandsReport(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(h.nats.URL(), h.redis.URL())
	m, stop := startMain(t, cfg)
	base := "http://" + m.Addr()

	if code, body := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d %s", code, body)
	}
	waitFor(t, 10*time.Second, "/readyz 200", func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK })

	h.publish(t, page(1, "/a", "/b", "/b#x", "mailto:x@y.example", "/c?utm_source=z"))
	h.publish(t, page(2, "/a", "/d"))
	waitFor(t, 10*time.Second, "the discovered stream to drain", func() bool { return h.drained(t) })
	// The counts reach Redis within a stats interval.
	waitFor(t, 5*time.Second, "shared counts", func() bool {
		var rep report
		_, body := get(t, base+"/stats")
		return json.Unmarshal([]byte(body), &rep) == nil && rep.Shared != nil && rep.Shared.Totals.Pages == 2
	})

	_, body := get(t, base+"/stats")
	var rep report
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatalf("/stats: %v\n%s", err, body)
	}
	tot := rep.Shared.Totals
	if tot.Links != 7 || tot.Admitted != 4 || tot.Duplicates != 2 || tot.Rejected["scheme"] != 1 {
		t.Errorf("/stats totals %+v, want links 7, admitted 4 (a b c d), duplicates 2, rejected scheme 1", tot)
	}
	if rep.Filter == nil || rep.Filter.Items != 4 || rep.Streams == nil || rep.Streams.FrontierStored != 4 || rep.Worker == nil || !rep.Worker.Ready {
		t.Errorf("/stats filter %+v streams %+v worker %+v", rep.Filter, rep.Streams, rep.Worker)
	}
	_, metrics := get(t, base+"/metrics")
	for _, want := range []string{"sieve_dedup_admitted_total 4", "sieve_dedup_links_total 7", `sieve_dedup_rejected_total{reason="scheme"} 1`,
		"sieve_filter_items 4", `sieve_dedup_dependency_up{dependency="filter"} 1`, "go_goroutines"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// The commands see the same state, from Redis and NATS.
	env := func(stdin string) (env, *bytes.Buffer, *bytes.Buffer) {
		var out, errb bytes.Buffer
		return env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, lookupEnv: func(k string) (string, bool) {
			switch k {
			case "SIEVE_REDIS_URL":
				return h.redis.URL(), true
			case "SIEVE_NATS_URL":
				return h.nats.URL(), true
			case "SIEVE_FILTER_CAPACITY":
				return "100000", true
			case "SIEVE_FILTER_FPP":
				return "1e-7", true
			case "SIEVE_FILTER_SHARDS":
				return "4", true
			case "SIEVE_FILTER_NAME": // crawl t's filter
				return config.Default().Filter.Name + ":t", true
			}
			return "", false
		}}, &out, &errb
	}
	ctx := context.Background()

	e, out, errb := env("")
	if code := cli(ctx, []string{"stats", "--json"}, e); code != exitOK {
		t.Fatalf("stats --json exit %d: %s", code, errb)
	}
	var cliRep report
	if err := json.Unmarshal(out.Bytes(), &cliRep); err != nil || cliRep.Shared == nil || cliRep.Shared.Totals.Admitted != 4 ||
		cliRep.Filter == nil || cliRep.Filter.Items != 4 || cliRep.Streams == nil || cliRep.Streams.FrontierQueued != 4 {
		t.Errorf("stats --json: %v\n%s%s", err, out, errb)
	}
	e, out, errb = env("")
	if code := cli(ctx, []string{"stats"}, e); code != exitOK {
		t.Fatalf("stats exit %d: %s", code, errb)
	}
	for _, want := range []string{"admitted", "site.example", "FILTER", "QUEUES", "4 stored ever"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stats table lacks %q:\n%s", want, out)
		}
	}

	e, out, errb = env("https://site.example/zzz\n")
	code := cli(ctx, []string{"check", "--base", "https://site.example/p/1", "/a#frag", "HTTPS://SITE.example/d", "javascript:x"}, e)
	wantCheck := "seen\thttps://site.example/a\nseen\thttps://site.example/d\nrejected scheme\tjavascript:x\n"
	if code != exitFail || out.String() != wantCheck {
		t.Errorf("check exit %d, output:\n%s\nwant exit 1 and:\n%s%s", code, out, wantCheck, errb)
	}

	path := filepath.Join(t.TempDir(), "known.txt")
	if err := os.WriteFile(path, []byte("https://site.example/a\nhttps://site.example/known1\n# comment\n\nhttps://site.example/known2#x\nftp://x.example/\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e, out, errb = env("")
	if code := cli(ctx, []string{"import", path}, e); code != exitOK {
		t.Fatalf("import exit %d: %s", code, errb)
	}
	if want := "imported 4 URLs: 2 new, 1 already seen, 1 rejected (scheme 1)\n"; out.String() != want {
		t.Errorf("import output %q, want %q", out, want)
	}
	// Imported URLs are seen, and never enqueued.
	h.publish(t, page(3, "/known1", "/known2", "/e"))
	waitFor(t, 10*time.Second, "the discovered stream to drain", func() bool { return h.drained(t) })
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	urls := h.frontierURLs(t)
	sort.Strings(urls)
	got := strings.Join(urls, " ")
	if want := "https://site.example/a https://site.example/b https://site.example/c https://site.example/d https://site.example/e"; got != want {
		t.Errorf("frontier %s\nwant %s", got, want)
	}
}

// TestMainWaitsForRedisCredentials starts a worker whose Redis password
// the server refuses: the log says so at once, naming the server's answer
// (WRONGPASS), and /readyz is 503 with that reason, where before the worker
// was ready until its first batch failed (issue 39, item 10). The worker
// waits rather than exits: once the server accepts the password (its ACL
// changed; nothing restarted), it becomes ready by itself.
func TestMainWaitsForRedisCredentials(t *testing.T) {
	h := &harness{nats: natstest.Start(t, natstest.Options{}), redis: redistest.Start(t, redistest.Options{Password: "right"})}
	cfg := testConfig(h.nats.URL(), "redis://:wrong@"+h.redis.Addr)
	refused := &logWatch{want: "refused the credentials (redis.password, or the user and password of redis.url): WRONGPASS"}
	leaked := &logWatch{want: ":wrong@"}
	m, _ := startMainLog(t, cfg, io.MultiWriter(refused, leaked, testWriter{t}))
	base := "http://" + m.Addr()
	start := time.Now()
	waitFor(t, 5*time.Second, "the log to say Redis refused the credentials: WRONGPASS", refused.seen.Load)
	t.Logf("the refusal was logged %v after the start", time.Since(start).Round(time.Millisecond))
	var body string
	waitFor(t, 5*time.Second, "/readyz 503 naming WRONGPASS", func() bool {
		var code int
		code, body = get(t, base+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "WRONGPASS")
	})
	if strings.Contains(body, ":wrong@") || leaked.seen.Load() {
		t.Errorf("the password is shown: /readyz %s", body)
	}
	if err := h.redis.Client().ConfigSet(context.Background(), "requirepass", "wrong").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "/readyz 200 once Redis accepts the password", func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK })
}

func TestMainRidesOutRedisRestart(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(h.nats.URL(), h.redis.URL())
	cfg.Redis.Timeout = time.Second
	m, stop := startMain(t, cfg)
	base := "http://" + m.Addr()
	waitFor(t, 10*time.Second, "/readyz 200", func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK })

	want := map[string]bool{}
	pub := func(from, to int) {
		for i := from; i < to; i++ {
			var links []string
			for j := 0; j < 20; j++ {
				u := fmt.Sprintf("/q/%d", (i*13+j*7)%500)
				links = append(links, u)
				want["https://site.example"+u] = true
			}
			h.publish(t, page(i, links...))
		}
	}
	pub(0, 20)
	waitFor(t, 10*time.Second, "the discovered stream to drain", func() bool { return h.drained(t) })

	h.redis.Kill()
	pub(20, 60)
	waitFor(t, 15*time.Second, "/readyz 503 naming the filter", func() bool {
		code, body := get(t, base+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "filter unavailable")
	})
	if h.drained(t) {
		t.Fatal("messages were acknowledged while Redis was down")
	}
	h.redis.StartAgain()
	waitFor(t, 30*time.Second, "the discovered stream to drain after Redis came back", func() bool { return h.drained(t) })
	waitFor(t, 10*time.Second, "/readyz 200 again", func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK })
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	urls := h.frontierURLs(t)
	seen := map[string]bool{}
	for _, u := range urls {
		if seen[u] {
			t.Errorf("%s enqueued twice", u)
		}
		seen[u] = true
		if !want[u] {
			t.Errorf("%s enqueued, not expected", u)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("frontier has %d URLs, want %d", len(seen), len(want))
	}
}

func TestMainMemoryModeSnapshot(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(h.nats.URL(), "")
	cfg.Filter.Snapshot = filepath.Join(t.TempDir(), "seen.snap")
	_, stop := startMain(t, cfg)
	h.publish(t, page(1, "/a", "/b"))
	waitFor(t, 10*time.Second, "drain", func() bool { return h.drained(t) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	snap := pipeline.CrawlSnapshot(cfg.Filter.Snapshot, "t") // crawl t's filter
	if _, err := os.Stat(snap); err != nil {
		t.Fatalf("no snapshot after stop: %v", err)
	}
	// A second run continues from the snapshot: /a and /b are seen.
	m2, stop2 := startMain(t, cfg)
	h.publish(t, page(2, "/a", "/b", "/c"))
	waitFor(t, 10*time.Second, "drain", func() bool { return h.drained(t) })
	_, body := get(t, "http://"+m2.Addr()+"/stats")
	var rep report
	if err := json.Unmarshal([]byte(body), &rep); err != nil || rep.Shared == nil {
		t.Fatalf("/stats: %v %s", err, body)
	}
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	urls := h.frontierURLs(t)
	sort.Strings(urls)
	if got := strings.Join(urls, " "); got != "https://site.example/a https://site.example/b https://site.example/c" {
		t.Errorf("frontier %s", got)
	}
	// check reads the snapshot in memory mode.
	var out, errb bytes.Buffer
	e := env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, lookupEnv: func(k string) (string, bool) {
		if k == "SIEVE_FILTER_SNAPSHOT" {
			return snap, true
		}
		if k == "SIEVE_FILTER_CAPACITY" {
			return "100000", true
		}
		if k == "SIEVE_FILTER_FPP" {
			return "1e-7", true
		}
		return "", false
	}}
	if code := cli(context.Background(), []string{"check", "https://site.example/c", "https://site.example/z"}, e); code != exitOK {
		t.Fatalf("check exit %d: %s", code, errb.String())
	}
	if want := "seen\thttps://site.example/c\nnew\thttps://site.example/z\n"; out.String() != want {
		t.Errorf("check = %q, want %q", out.String(), want)
	}
}

func TestMainOnRedisCluster(t *testing.T) {
	h := newHarness(t)
	cluster := redistest.StartCluster(t, 3)
	cfg := testConfig(h.nats.URL(), strings.Join(cluster.Addrs, ","))
	m, stop := startMain(t, cfg)
	want := map[string]bool{}
	for i := 0; i < 30; i++ {
		var links []string
		for j := 0; j < 20; j++ {
			p := fmt.Sprintf("/c/%d", (i*7+j)%200)
			links = append(links, p)
			want["https://site.example"+p] = true
		}
		h.publish(t, page(i, links...))
	}
	waitFor(t, 20*time.Second, "the discovered stream to drain", func() bool { return h.drained(t) })
	waitFor(t, 5*time.Second, "shared counts", func() bool {
		var rep report
		_, body := get(t, "http://"+m.Addr()+"/stats")
		return json.Unmarshal([]byte(body), &rep) == nil && rep.Shared != nil && rep.Shared.Totals.Pages == 30 &&
			rep.Shared.Totals.Admitted == int64(len(want)) && rep.Filter != nil && rep.Filter.Items == uint64(len(want))
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := h.frontierURLs(t)
	seen := map[string]bool{}
	for _, u := range got {
		if seen[u] || !want[u] {
			t.Errorf("%s enqueued twice or unexpectedly", u)
		}
		seen[u] = true
	}
	if len(seen) != len(want) {
		t.Errorf("frontier has %d URLs, want %d", len(seen), len(want))
	}
}

// logWatch is a log that remembers whether a line held want.
type logWatch struct {
	want string
	seen atomic.Bool
}

func (w *logWatch) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(w.want)) {
		w.seen.Store(true)
	}
	return len(p), nil
}
