package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/crawls"
	"github.com/sievecrawl/sieve/pipeline"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/testsite"
	"github.com/sievecrawl/sieve/watch"
)

// TestEmbeddedCrawlLifecycle lives with crawls in the embedded mode, with
// real runs of the binary on one data directory: three crawls of a site
// are listed with their settings, queues, filter snapshots (a revisit
// window's too) and the last run's counts; deleting two removes their
// queued URLs, snapshot files, counts and records, leaving the third; a
// deleted id crawled again fetches the whole site again. While a run owns
// the directory, crawls names the process and shows what it reports, and
// delete-crawl is refused, naming the process, and deletes nothing.
func TestEmbeddedCrawlLifecycle(t *testing.T) {
	bin := crawlerBinary(t)
	site := startSite(t, testsite.Options{Pages: 30, Latency: time.Millisecond})
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	crawlSite := func(id string, extra ...string) runSummary {
		t.Helper()
		args := append([]string{"run", "--embedded", "--data-dir", dir, "--crawl-id", id, "--seed", site.URL, "--idle-exit", "1s"}, testRunFlags(8)...)
		return runCrawler(t, ctx, bin, append(args, extra...)...)
	}
	snapshot := func(id string) string { return pipeline.CrawlSnapshot(filepath.Join(dir, "seen.bloom"), id) }
	list := func() []crawls.Crawl {
		t.Helper()
		code, stdout, stderr := runCLI(t, ctx, "crawls", "--data-dir", dir, "--json")
		var rows []crawls.Crawl
		if code != 0 || json.Unmarshal([]byte(stdout), &rows) != nil {
			t.Fatalf("crawls --json: exit %d\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		return rows
	}

	// Crawl b the whole site, w too with a revisit window, then crawl a
	// only 5 pages: the rest of a stays queued.
	for _, args := range [][]string{{"b"}, {"w", "--revisit-after", "1h"}} {
		if sum := crawlSite(args[0], args[1:]...); sum.Crawler.Fetched == 0 {
			t.Fatalf("crawl %s fetched nothing", args[0])
		}
	}
	if sum := crawlSite("a", "--crawl-max-pages", "5", "--expect-urls", "5000"); sum.End != "max pages reached" {
		t.Fatalf("crawl a ended %q, want max pages reached", sum.End)
	}
	rows := list()
	if len(rows) != 3 || rows[0].ID != "a" || rows[1].ID != "b" || rows[2].ID != "w" {
		t.Fatalf("crawls: %+v, want a, b and w", rows)
	}
	a, b, w := rows[0], rows[1], rows[2]
	if a.Settings.ExpectURLs != 5000 || a.Queued == 0 || len(a.Seeds) != 1 || a.Filter == nil || a.Filter.Items == 0 ||
		a.Counts == nil || a.Counts.Admitted == 0 || a.Counts.Admitted != int64(a.Filter.Items) {
		t.Errorf("crawl a (5 pages of a run that was the last): %+v, filter %+v, counts %+v; want URLs queued, its snapshot's, the run's counts, which admitted what the filter holds (the report left by a max-pages run trailed the worker's last counts)", a, a.Filter, a.Counts)
	}
	if b.Settings.ExpectURLs != 100000 || b.Queued != 0 || b.Filter == nil || b.Filter.Items <= a.Filter.Items || b.Counts != nil {
		t.Errorf("crawl b (the whole site, an earlier run): %+v, filter %+v, counts %+v", b, b.Filter, b.Counts)
	}
	if w.Settings.RevisitAfter != time.Hour || w.Window == nil || w.Filter == nil || w.Filter.Items != b.Filter.Items || w.FilterError != "" {
		t.Errorf("crawl w (the whole site, a revisit window): %+v, window %+v, filter %+v", w, w.Window, w.Filter)
	}
	code, stdout, stderr := runCLI(t, ctx, "crawls", "--data-dir", dir)
	if code != 0 || !strings.Contains(stdout, "crawls stored in "+dir+" (ADMITTED and DUPLICATES are the last run's") ||
		!strings.Contains(stdout, "CRAWL") || !strings.Contains(stdout, "URLs, 1 layer(s)") || !strings.Contains(stdout, "generation(s) of") {
		t.Errorf("crawls: exit %d\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	t.Logf("crawls --data-dir:\n%s", stdout)

	// Delete a and w: their queued URLs, snapshots, counts and records
	// go; b stays.
	code, stdout, stderr = runCLI(t, ctx, "delete-crawl", "--data-dir", dir, "a", "w")
	if code != 0 {
		t.Fatalf("delete-crawl: exit %d\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"crawl a:\n  frontier: " + strconv.FormatUint(a.Queued, 10) + " messages purged (sieve.frontier.a.>)",
		"filter: " + snapshot("a") + " removed",
		"of the last run's per-crawl counts removed from watch-report.json",
		"record: removed (1 seeds",
		"crawl w:\n",
		"filter: " + snapshot("w") + " removed",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("delete-crawl output lacks %q:\n%s", want, stdout)
		}
	}
	t.Logf("delete-crawl --data-dir:\n%s", stdout)
	for _, id := range []string{"a", "w"} {
		if _, err := os.Stat(snapshot(id)); !os.IsNotExist(err) {
			t.Errorf("crawl %s's snapshot: %v, want it removed", id, err)
		}
	}
	if counts, _, _ := (crawls.Report{Path: filepath.Join(dir, watch.ReportFile)}).Read(); counts["a"] != (stats.CrawlCounts{}) {
		t.Errorf("crawl a's counts left in the report: %+v", counts["a"])
	}
	rows = list()
	if len(rows) != 1 || rows[0].ID != "b" || rows[0].Filter == nil || rows[0].Filter.Items != b.Filter.Items {
		t.Errorf("crawls after deleting a and w: %+v, want b as it was (filter %+v)", rows, b.Filter)
	}

	// Crawl a again: the whole site is fetched again, once.
	before := site.Fetches()
	if sum := crawlSite("a"); sum.End != "frontier empty" {
		t.Errorf("crawl a again ended %q", sum.End)
	}
	after := site.Fetches()
	for _, path := range site.Plan(8).Once {
		if n := after[path] - before[path]; n != 1 {
			t.Errorf("%s fetched %d times by crawl a run again, want 1", path, n)
		}
	}
	if rows := list(); len(rows) != 2 || rows[0].ID != "a" || rows[0].Queued != 0 || rows[0].Settings.ExpectURLs != 100000 {
		t.Errorf("crawls after crawl a again: %+v, want a anew and b", rows)
	}

	// A run owns the directory: crawls shows it, delete-crawl refuses.
	holder := startProc(t, "holder", bin, []string{"run", "--embedded", "--data-dir", dir, "--crawl-id", "c", "--seed", site.URL,
		"--progress", "never", "--idle-exit", "1m"}, nil) // polite: a request a second
	pid := strconv.Itoa(holder.cmd.Process.Pid)
	var url string
	waitFor(t, 30*time.Second, "the holder's pid in LOCK and its watch page", func() bool {
		lock, _ := os.ReadFile(filepath.Join(dir, "LOCK"))
		url = watch.RunningURL(ctx, dir)
		return strings.TrimSpace(string(lock)) == pid && url != ""
	})
	code, stdout, stderr = runCLI(t, ctx, "crawls", "--data-dir", dir)
	if code != 0 || !strings.Contains(stdout, "in use by process "+pid) || !strings.Contains(stdout, "watch it at "+url) ||
		!strings.Contains(stdout, snapshot("b")) {
		t.Errorf("crawls while a run owns the dir: exit %d\n%s\nstderr:\n%s\nwant the process %s, its page %s and crawl b's snapshot", code, stdout, stderr, pid, url)
	}
	t.Logf("crawls --data-dir while a run owns it:\n%s", stdout)
	var busy dirInUse
	code, stdout, _ = runCLI(t, ctx, "crawls", "--data-dir", dir, "--json")
	if err := json.Unmarshal([]byte(stdout), &busy); code != 0 || err != nil || strconv.Itoa(busy.PID) != pid || busy.URL != url {
		t.Errorf("crawls --json while a run owns the dir: exit %d, %v\n%s", code, err, stdout)
	}
	code, _, stderr = runCLI(t, ctx, "delete-crawl", "--data-dir", dir, "b")
	if code != 1 || !strings.Contains(stderr, "process "+pid) || !strings.Contains(stderr, dir) {
		t.Errorf("delete-crawl while a run owns the dir: exit %d, stderr:\n%s\nwant exit 1 naming process %s", code, stderr, pid)
	}
	if _, err := os.Stat(snapshot("b")); err != nil {
		t.Errorf("refused delete-crawl removed crawl b's snapshot: %v", err)
	}
	code, _, stderr = runCLI(t, ctx, "seed", "--data-dir", dir, "--crawl-id", "b", site.URL)
	if code != 1 || !strings.Contains(stderr, "process "+pid) {
		t.Errorf("seed while a run owns the dir: exit %d, stderr:\n%s\nwant exit 1 naming process %s", code, stderr, pid)
	}
	if err := holder.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-holder.done

	// Every crawl deleted: the listing says how to start one here, and a
	// run without --seed has nothing to continue.
	if code, stdout, stderr = runCLI(t, ctx, "delete-crawl", "--data-dir", dir, "a", "b", "c"); code != 0 {
		t.Fatalf("delete-crawl a b c: exit %d\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, ctx, "crawls", "--data-dir", dir)
	if want := "no crawls in " + dir + ": 'crawler run --embedded --data-dir " + dir; code != 0 || !strings.Contains(stdout, want) {
		t.Errorf("crawls with every crawl deleted: exit %d\n%s\nstderr:\n%s\nwant %q", code, stdout, stderr, want)
	}
	code, _, stderr = runCLI(t, ctx, "run", "--embedded", "--data-dir", dir, "--crawl-id", "a", "--progress", "never")
	if want := "nothing to crawl: " + dir + ` holds no crawl "a"; give --seed URL`; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("run without --seed of a deleted crawl: exit %d, stderr:\n%s\nwant 1 and %q", code, stderr, want)
	}
}

// TestEmbeddedRunNeedsSeed checks that an embedded run without --seed in a
// data dir no run has used fails at once, saying what to give, and creates
// nothing (it ran for seconds and summed up an empty crawl); and that a
// crawl seeded into a data dir (crawler seed --data-dir) is continued by a
// run without --seed.
func TestEmbeddedRunNeedsSeed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fresh")
	code, stdout, stderr := runCLI(t, t.Context(), "run", "--embedded", "--data-dir", dir, "--progress", "never")
	if want := "nothing to crawl: no run has used " + dir + ` yet; give --seed URL to start crawl "default"`; code != 1 || !strings.Contains(stderr, want) || stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant 1, nothing, and %q", code, stdout, stderr, want)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the data dir was created: %v", err)
	}

	// Seeded into the data dir (crawler seed --data-dir), a crawl is there
	// to continue: a run without --seed crawls it.
	site := startSite(t, testsite.Options{Pages: 10, Latency: time.Millisecond})
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCLI(t, t.Context(), "seed", "--data-dir", dir, "--crawl-id", "s", site.URL)
	if code != 0 || !strings.Contains(stdout, `seeded 1 URL(s) into crawl "s"`) {
		t.Fatalf("seed --data-dir: exit %d\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	args := append([]string{"run", "--embedded", "--data-dir", dir, "--crawl-id", "s", "--idle-exit", "1s"}, testRunFlags(8)...)
	if sum := runCrawler(t, t.Context(), crawlerBinary(t), args...); sum.Crawler.Fetched == 0 {
		t.Errorf("the run without --seed fetched nothing of the crawl seeded into its data dir: %+v", sum)
	}
}

// TestDataDirMissing checks that crawls and delete-crawl on a data
// directory no embedded crawl has used fail with a clear error and create
// nothing, and which settings make them act on a data directory.
func TestDataDirMissing(t *testing.T) {
	base := t.TempDir()
	empty := filepath.Join(base, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(base, "missing")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"crawls, no dir", []string{"crawls", "--data-dir", missing}, "data dir " + missing + " does not exist"},
		{"delete, no dir", []string{"delete-crawl", "--data-dir", missing, "a"}, "data dir " + missing + " does not exist"},
		{"crawls, empty dir", []string{"crawls", "--data-dir", empty, "--json"}, "holds no NATS store"},
		{"delete, empty dir", []string{"delete-crawl", "--embedded", "--data-dir", empty, "a"}, "holds no NATS store"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, t.Context(), tt.args...)
			if code != 1 || !strings.Contains(stderr, tt.want) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit 1 and %q", code, stdout, stderr, tt.want)
			}
			if _, err := os.Stat(missing); !os.IsNotExist(err) {
				t.Errorf("%s: %v, want nothing created", missing, err)
			}
			if entries, _ := os.ReadDir(empty); len(entries) != 0 {
				t.Errorf("%s holds %d entries, want none created", empty, len(entries))
			}
		})
	}

	modes := []struct {
		args     []string
		embedded bool
	}{
		{[]string{"--data-dir", "d"}, true},
		{[]string{"--embedded"}, true},
		{nil, false}, // the deployment's NATS
		{[]string{"--data-dir", "d", "--nats-url", "nats://n:4222"}, false}, // a server named wins
	}
	for _, cmd := range []string{"crawls", "delete-crawl"} {
		for _, m := range modes {
			args := m.args
			if cmd == "delete-crawl" {
				args = append(args, "a")
			}
			inv, err := parseSettings(cmd, args, func(string) (string, bool) { return "", false })
			if err != nil || inv.Embedded != m.embedded {
				t.Errorf("%s %q: embedded %v, %v; want %v", cmd, args, inv.Embedded, err, m.embedded)
			}
		}
	}
}
