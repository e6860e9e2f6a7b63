// Package watchtest drives the live page in headless Chromium for tests: it
// finds the browser (Debian package chromium), starts it with a fresh
// profile, reads the page's numbers, and saves screenshots as test
// artifacts.
//
// Without Chromium a test is skipped, or with CI=true fails: a CI run must
// not pass without its browser tests (test.sh installs Chromium).
package watchtest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

var screenshotPath = flag.String("watch.screenshot", "", "also save the live page's screenshot to this PNG `path` (docs/running.md shows docs/watch.png)")

// ChromiumPath returns the path of Chromium, skipping the test without it or,
// with CI=true, failing it.
func ChromiumPath(tb testing.TB) string {
	tb.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium found (Debian: apt-get install chromium; test.sh installs it)"
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// Browser starts headless Chromium with a fresh profile in a temporary
// directory and returns a context for chromedp actions on one tab, bounded
// by timeout; the browser stops at cleanup. more adds Chromium options.
func Browser(tb testing.TB, timeout time.Duration, more ...chromedp.ExecAllocatorOption) context.Context {
	tb.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(ChromiumPath(tb)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(tb.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	opts = append(opts, more...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(tb.Logf))
	tb.Cleanup(func() { cancelTab(); cancelAlloc() })
	// The first action starts the browser, which lives as long as ctx:
	// the timeout goes on the actions' context, derived after it.
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("start chromium: %v", err)
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	tb.Cleanup(cancelTimeout)
	return ctx
}

// Text reads the text of the page's elements with the given ids (an absent
// element reads "").
func Text(ctx context.Context, ids ...string) (map[string]string, error) {
	js := fmt.Sprintf(`Object.fromEntries(%q.split(",").map(id => [id, (document.getElementById(id) || {}).textContent || ""]))`, strings.Join(ids, ","))
	return chromedp.Run(ctx, chromedp.Evaluate[map[string]string](js))
}

// ChartPoints returns, for each chart of the page, the number of data points
// it drew (-1 for a chart without a canvas).
func ChartPoints(ctx context.Context) (map[string]float64, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](
		`Object.fromEntries([...document.querySelectorAll(".chart")].map(e => [e.id, e.querySelector("canvas") ? +e.dataset.points : -1]))`))
}

// Polled waits until the page has polled its process once since it loaded.
var Polled = chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
	_, err := chromedp.Poll[bool](`window.sieveWatch && window.sieveWatch.polls >= 1`, chromedp.WithPollingTimeout(10*time.Second))(ctx, t)
	return err
})

// Num formats n as the page does (thousands separated by commas).
func Num(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// SaveScreenshot takes a screenshot of the whole page and writes it as name
// into the artifact directory (SIEVE_ARTIFACTS, or a temporary directory),
// and to the -watch.screenshot path when that flag is given.
func SaveScreenshot(tb testing.TB, ctx context.Context, name string) {
	tb.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("SIEVE_ARTIFACTS")
	if dir == "" {
		dir = tb.TempDir()
	}
	paths := []string{filepath.Join(dir, name)}
	if *screenshotPath != "" {
		paths = append(paths, *screenshotPath)
	}
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, png, 0o644); err != nil {
			tb.Fatal(err)
		}
		tb.Logf("screenshot: %s (%d bytes)", p, len(png))
	}
}
