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
	"strings"
	"syscall"
	"testing"
	"time"

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

	first := exec.CommandContext(ctx, bin, append(args, "--seed", site.URL)...)
	first.Env = cleanEnv()
	var stderr syncBuffer
	first.Stderr = &stderr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "50 pages served", func() bool { p, _ := siteRequests(site); return p >= 50 })
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if open, _ := filepath.Glob(filepath.Join(warcDir, "*.warc.gz.open")); len(open) != 1 {
		t.Fatalf("after SIGKILL: open files %v, want the one being written\n%s", open, stderr.String())
	}

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
	if code, out, errOut := runCLI(t, ctx, "delete-crawl", "--data-dir", data, "default"); code != 0 || !strings.Contains(out, "captures") {
		t.Fatalf("delete-crawl: exit %d\n%s\n%s", code, out, errOut)
	}
	_, out, _ = runCLI(t, ctx, "captures", "--data-dir", data, "--json", site.URL+"p/0")
	got = nil
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 || got[0].Last != nil {
		t.Errorf("captures after delete-crawl: %v %s", err, out)
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
