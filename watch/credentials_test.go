package watch

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sievecrawl/sieve/watch/watchtest"
)

// TestPageURLWithCredentials is issue 39 item 8: the live page opened as
// https://user:pass@host/ showed no data, since the browser refuses fetch()
// of a URL with credentials, and the page's relative URLs resolved against
// its own address took them along. The page builds its requests from its
// origin and path, and the browser sends the credentials it was given for
// the origin: the page shows the process's report and charts.
func TestPageURLWithCredentials(t *testing.T) {
	w := startWeb(t)
	ctx := watchtest.Browser(t, 60*time.Second, chromedp.Flag("ignore-certificate-errors", true))
	withCreds := strings.Replace(w.url, "https://", "https://reader:s3cret-pass@", 1) + "/"
	if err := chromedp.Do(ctx, chromedp.Navigate(withCreds)); err != nil {
		t.Fatalf("open %s: %v", withCreds, err)
	}
	var got map[string]string
	var err error
	for deadline := time.Now().Add(15 * time.Second); ; {
		if got, err = watchtest.Text(ctx, "role", "updated", "errors"); err != nil {
			t.Fatal(err)
		}
		if got["role"] == "dedup-worker" && strings.HasPrefix(got["updated"], "updated") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got["role"] != "dedup-worker" || !strings.HasPrefix(got["updated"], "updated") {
		t.Errorf("the page opened with credentials in its URL shows role %q, %q, errors %q; want its report", got["role"], got["updated"], got["errors"])
	}
}
