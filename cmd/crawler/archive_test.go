package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/crawl"
	"github.com/sievecrawl/sieve/testsite"
	"github.com/sievecrawl/sieve/warc"
	"github.com/sievecrawl/sieve/warc/warctest"
)

// archived checks the WARC files of dirs after a crawl of site ended: no
// file left open, every file valid for the Internet Archive's verifier, and
// every path the site served with a response in the archive whose payload
// is byte for byte one the site served for it.
func archived(t *testing.T, site *testsite.Site, dirs ...string) {
	t.Helper()
	var files []string
	have := map[string]bool{} // path + " " + sha1
	for _, dir := range dirs {
		if open, _ := filepath.Glob(filepath.Join(dir, "*.open")); len(open) > 0 {
			t.Errorf("files left open: %v", open)
		}
		fs, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
		files = append(files, fs...)
		for _, r := range warctest.Records(t, dir) {
			if r.Get("WARC-Type") != "response" {
				continue
			}
			u, _ := url.Parse(r.Get("WARC-Target-URI"))
			_, payload := warctest.Payload(t, r)
			have[u.Path+" "+warctest.SHA1(payload)] = true
		}
	}
	if len(files) == 0 {
		t.Fatal("no WARC file")
	}
	warctest.Verify(t, files...)
	missing := 0
	for path, sums := range site.Served() {
		found := false
		for _, s := range sums {
			found = found || have[path+" "+s]
		}
		if !found {
			missing++
			if missing <= 5 {
				t.Errorf("%s: served (%d times) but not archived", path, len(sums))
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d paths served but not archived", missing)
	}
}

// killMidFile runs the crawler binary with args until site served 50
// pages, kills it (SIGKILL) and returns the name of the file it left open
// in warcDir (its name once closed), failing unless there is one.
func killMidFile(t *testing.T, ctx context.Context, bin string, site *testsite.Site, warcDir string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = cleanEnv()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "50 pages served", func() bool { p, _ := siteRequests(site); return p >= 50 })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	open, _ := filepath.Glob(filepath.Join(warcDir, "*.warc.gz.open"))
	if len(open) != 1 {
		t.Fatalf("after SIGKILL: open files %v, want the one being written\n%s", open, stderr.String())
	}
	return strings.TrimSuffix(filepath.Base(open[0]), ".open")
}

// TestArchiveSurvivesKill kills an archiving crawler (SIGKILL) mid-crawl
// and runs it again: the file it was writing is cut after its last complete
// record and closed at the next start, and every page whose records were
// not written is fetched again, so the archive ends complete and valid.
func TestArchiveSurvivesKill(t *testing.T) {
	bin := crawlerBinary(t)
	site := startSite(t, testsite.Options{Pages: 150, Latency: 10 * time.Millisecond})
	data, warcDir := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	args := append([]string{"run", "--embedded", "--data-dir", data, "--warc-dir", warcDir, "--idle-exit", "1s"}, testRunFlags(8)...)

	killMidFile(t, ctx, bin, site, warcDir, append(args, "--seed", site.URL)...)

	second := runCrawler(t, ctx, bin, args...)
	if second.End != "frontier empty" {
		t.Fatalf("second run ended %q", second.End)
	}
	archived(t, site, warcDir)
	if _, out, _ := runCLI(t, ctx, "stats", "--data-dir", data); !strings.Contains(out, "WARC files") || !strings.Contains(out, warcDir) {
		t.Errorf("crawler stats does not say where the archive is:\n%s", out)
	}

	// Where is the capture of a page: any spelling of its URL finds it,
	// in the capture store and in the indexes.
	code, out, errOut := runCLI(t, ctx, "captures", "--data-dir", data, "--warc-dir", warcDir, "--json", strings.ToUpper(site.URL[:4])+site.URL[4:]+"p/./0#top")
	var got []urlCaptures
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got) != 1 {
		t.Fatalf("captures: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	c := got[0]
	if c.URL != site.URL+"p/0" || c.Last == nil || len(c.Index) == 0 {
		t.Fatalf("captures of /p/0: %+v", c)
	}
	resp, err := warc.ReadResponse(filepath.Join(warcDir, c.Last.File), c.Last.Offset)
	if err != nil {
		t.Fatalf("the capture store's location: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !slices.Contains(site.Served()["/p/0"], warctest.SHA1(body)) {
		t.Error("the capture store points at a record whose payload the site did not serve for /p/0")
	}

	// Deleting the crawl deletes its captures.
	// It says where the WARC files it keeps are.
	if code, out, errOut := runCLI(t, ctx, "delete-crawl", "--data-dir", data, "default"); code != 0 || !strings.Contains(out, "captures") || !strings.Contains(out, warcDir) {
		t.Fatalf("delete-crawl: exit %d\n%s\n%s", code, out, errOut)
	}
	_, out, _ = runCLI(t, ctx, "captures", "--data-dir", data, "--json", site.URL+"p/0")
	got = nil
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 || got[0].Last != nil {
		t.Errorf("captures after delete-crawl: %v %s", err, out)
	}
}

// TestRevisitAfterKillAcrossDirectories keeps one WARC directory per run,
// as archives are kept, and kills the first run (SIGKILL) mid-file: the
// second run, writing elsewhere, finishes the crawl; after the revisit
// window a third, writing into a third directory, revisits every page.
// Each revisit record points at a response record that exists in the
// earlier directories, including the file the killed run left .open
// (closed on the way by the revisit that read it); nothing is fetched in
// full for want of a readable capture; every file is valid for the
// Internet Archive's verifier and warcio; and `crawler captures` finds a
// page's captures in all the directories.
func TestRevisitAfterKillAcrossDirectories(t *testing.T) {
	bin := crawlerBinary(t)
	site := startSite(t, testsite.Options{Pages: 150, Latency: 10 * time.Millisecond, Validators: true})
	data, root := t.TempDir(), t.TempDir()
	run := func(n int) string { return filepath.Join(root, "run"+strconv.Itoa(n)) }
	for n := 1; n <= 3; n++ {
		if err := os.Mkdir(run(n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 240*time.Second)
	defer cancel()
	// A window long enough that no page is revisited within the first two
	// runs, short enough for a test; the frontier's duplicate window
	// below it.
	const window = 30 * time.Second
	args := append([]string{"run", "--embedded", "--data-dir", data, "--idle-exit", "1s", "--revisit-after", window.String(),
		"--frontier-duplicate-window", "20s", "--frontier-ack-wait", "10s"}, testRunFlags(8)...)

	killed := killMidFile(t, ctx, bin, site, run(1), append(args, "--warc-dir", run(1), "--seed", site.URL)...)

	if second := runCrawler(t, ctx, bin, append(args, "--warc-dir", run(2))...); second.End != "frontier empty" {
		t.Fatalf("second run ended %q", second.End)
	}
	// Every URL of the first two runs is new again once the window has
	// passed since the last was admitted: wait for that moment.
	select {
	case <-time.After(window + window/4 + 2*time.Second):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	third := runCrawler(t, ctx, bin, append(args, "--warc-dir", run(3), "--seed", site.URL)...)
	if third.End != "frontier empty" || len(third.Crawler.Refetched) > 0 {
		t.Fatalf("revisit run ended %q, refetched in full %v", third.End, third.Crawler.Refetched)
	}
	// Every URL the revisit run admitted was fetched or given up with a
	// counted reason, and none is left.
	c := third.Crawler
	handled := c.Fetched - crawl.Sum(c.Retried) + c.Failed[crawl.ReasonRobots] + crawl.Sum(c.Skipped)
	if third.Dedup == nil || third.Left == nil || third.Dedup.Totals.Admitted != handled || third.Left.Frontier != 0 {
		t.Errorf("revisit run: admitted %+v, handled %d (fetched %d, retried %v, skipped %v), left %+v",
			third.Dedup, handled, c.Fetched, c.Retried, c.Skipped, third.Left)
	}

	// What the first two runs captured: response records by URL and date.
	var earlier []string
	for _, dir := range []string{run(1), run(2)} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
		earlier = append(earlier, files...)
	}
	if left, _ := filepath.Glob(filepath.Join(run(1), "*.open")); len(left) > 0 {
		t.Errorf("the killed run's file is still open after the revisit read it: %v", left)
	}
	warcio := map[string]bool{} // file@offset of every response warcio lists
	for _, f := range earlier {
		for _, l := range warctest.Index(t, f) {
			if l.Type == "response" {
				warcio[filepath.Base(f)+"@"+strconv.FormatInt(l.Offset, 10)] = true
			}
		}
	}
	stored := map[string]warctest.Record{}
	captured := map[string]bool{} // pages with a 2xx response
	for _, r := range warctest.ReadFiles(t, earlier...) {
		if r.Get("WARC-Type") != "response" {
			continue
		}
		u := r.Get("WARC-Target-URI")
		stored[u+" "+r.Get("WARC-Date")] = r
		if status, _ := warctest.Payload(t, r); status/100 == 2 && !strings.HasSuffix(u, "/robots.txt") {
			captured[u] = true
		}
	}
	revisited := map[string]bool{}
	inKilled := 0
	latest, _ := filepath.Glob(filepath.Join(run(3), "*.warc.gz"))
	for _, r := range warctest.ReadFiles(t, latest...) {
		if r.Get("WARC-Type") != "revisit" {
			continue
		}
		revisited[r.Get("WARC-Target-URI")] = true
		ref, ok := stored[r.Get("WARC-Refers-To-Target-URI")+" "+r.Get("WARC-Refers-To-Date")]
		switch {
		case !ok:
			t.Errorf("revisit of %s refers to %s at %s: no response record of the earlier directories", r.Get("WARC-Target-URI"),
				r.Get("WARC-Refers-To-Target-URI"), r.Get("WARC-Refers-To-Date"))
		case !warcio[ref.File+"@"+strconv.FormatInt(ref.Offset, 10)]:
			t.Errorf("warcio lists no response at %d of %s", ref.Offset, ref.File)
		case ref.File == killed:
			inKilled++
		}
	}
	for u := range captured {
		if !revisited[u] {
			t.Errorf("%s: captured before, not revisited", u)
		}
	}
	t.Logf("%d pages captured in %s and %s, %d revisited into %s (%d 304s), %d of them pointing into the killed run's file",
		len(captured), run(1), run(2), len(revisited), run(3), third.Crawler.Unchanged, inKilled)
	if inKilled == 0 {
		t.Errorf("no revisit refers to the file the killed run left open (%s)", killed)
	}
	warctest.Verify(t, append(earlier, latest...)...)

	// The captures of a page, in every directory the crawl wrote.
	code, out, errOut := runCLI(t, ctx, "captures", "--data-dir", data, "--json", site.URL+"p/0")
	var got []urlCaptures
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got) != 1 {
		t.Fatalf("captures: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	dirs := map[string]bool{}
	for _, e := range got[0].Index {
		dirs[e.Dir] = true
	}
	if got[0].Last == nil || got[0].Path == "" || got[0].Unreadable != "" || len(dirs) < 2 || !dirs[run(3)] {
		t.Errorf("captures of /p/0: last %+v at %q (%s), indexed in %v: want a readable last capture, indexed in run3 and an earlier run",
			got[0].Last, got[0].Path, got[0].Unreadable, dirs)
	}
}

// TestArchiveDiskFull gives the archive a file system that fills up
// mid-crawl: the crawler stops fetching, says why in its summary and exits
// non-zero; the file is valid up to its last complete record; with room
// again, the next run fetches what was not kept.
func TestArchiveDiskFull(t *testing.T) {
	warcDir := mountTmpfs(t, "size=160k")
	bin := crawlerBinary(t)
	site := startSite(t, testsite.Options{Pages: 150})
	data := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	args := append([]string{"run", "--embedded", "--data-dir", data, "--warc-dir", warcDir, "--idle-exit", "1s"}, testRunFlags(8)...)

	cmd := exec.CommandContext(ctx, bin, append(args, "--seed", site.URL)...)
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("a full archive disk: exit %v, want non-zero\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "archive failed") || !strings.Contains(stdout.String(), "no space left on device") {
		t.Errorf("summary does not say the archive failed and why:\n%s", stdout.String())
	}
	// The error names the part that failed, its path and its setting;
	// never the dedup worker (issue 28 saw "dedup worker: warc: write
	// index" when closing the archive hit the full disk).
	t.Logf("exit error: %s", lastLine(stderr.String()))
	if last := lastLine(stderr.String()); !strings.Contains(last, "crawler's archive in "+warcDir+" (warc.dir)") ||
		!strings.Contains(last, "no space left on device") || strings.Contains(stderr.String(), "dedup worker") {
		t.Errorf("exit error does not name the crawler's archive, %s and warc.dir:\n%s", warcDir, stderr.String())
	}
	files, _ := filepath.Glob(filepath.Join(warcDir, "*.warc.gz*"))
	for _, f := range files {
		if strings.HasSuffix(f, ".warc.gz") || strings.HasSuffix(f, ".warc.gz.open") {
			warctest.ReadFile(t, f) // every record whole
		}
	}

	if out, err := exec.Command("mount", "-o", "remount,size=20m", warcDir).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v: %s", err, out)
	}
	second := runCrawler(t, ctx, bin, args...)
	if second.End != "frontier empty" {
		t.Fatalf("second run ended %q", second.End)
	}
	archived(t, site, warcDir)
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestArchiveDirRefused: a WARC directory that cannot be written stops the
// crawl before it fetches anything, saying which directory and why, with
// exit status 1.
func TestArchiveDirRefused(t *testing.T) {
	// A read-only file system: root writes to a directory whatever its mode.
	readOnly := mountTmpfs(t, "ro,size=64k")
	aFile := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(aFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	site := startSite(t, testsite.Options{Pages: 10})
	for _, tc := range []struct {
		name, dir, why string
	}{
		{"missing", filepath.Join(t.TempDir(), "missing"), "no such file or directory"},
		{"a file", aFile, "is not a directory"},
		{"read-only", readOnly, "read-only file system"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"run", "--embedded", "--data-dir", t.TempDir(), "--warc-dir", tc.dir, "--seed", site.URL}, testRunFlags(2)...)
			code, _, stderr := runCLI(t, t.Context(), args...)
			if code != 1 || !strings.Contains(stderr, "warc.dir") || !strings.Contains(stderr, tc.dir) || !strings.Contains(stderr, tc.why) {
				t.Errorf("exit %d, stderr %q: want 1, naming warc.dir, %s and %q", code, stderr, tc.dir, tc.why)
			}
			if f := site.Fetches(); len(f) > 0 {
				t.Errorf("fetched %v with an archive that cannot be written", f)
			}
		})
	}
}

// mountTmpfs mounts a tmpfs of our own with options on a new directory,
// unmounted at the test's end. It needs root, as the tests run where CI
// runs: without it the test is skipped, or fails with CI=true.
func mountTmpfs(t *testing.T, options string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", options, "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount a tmpfs (%s): %v: %s", options, err, out)
		}
		t.Skipf("cannot mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}
