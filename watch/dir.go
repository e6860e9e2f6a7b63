package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sievecrawl/sieve/auth"
)

// Files a Server with Options.Dir keeps in that directory (an embedded
// crawl's data directory), so that commands can find the process, or what it
// left, from the directory alone.
const (
	// URLFile holds the running process's page URL; it is removed at Close.
	URLFile = "watch.url"
	// ReportFile holds the report of the sample Close takes last (JSON).
	ReportFile = "watch-report.json"
)

// announce writes the page's URL into Options.Dir.
func (s *Server) announce(url string) error {
	if s.opts.Dir == "" {
		return nil
	}
	if err := os.WriteFile(filepath.Join(s.opts.Dir, URLFile), []byte(url+"\n"), 0o644); err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	return nil
}

// retire takes a last sample, saves its report into Options.Dir and removes
// the URL file.
func (s *Server) retire() error {
	if s.opts.Dir == "" {
		return nil
	}
	s.sample(context.Background(), time.Now())
	b, err := json.MarshalIndent(s.Report(), "", "  ")
	if err == nil {
		err = writeFileAtomic(filepath.Join(s.opts.Dir, ReportFile), b)
	}
	if rerr := os.Remove(filepath.Join(s.opts.Dir, URLFile)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	return nil
}

func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ErrNothingInDir is returned by ReadDir for a directory no watched process
// has used.
var ErrNothingInDir = errors.New("watch: no process has run in this directory")

// Client reads the surfaces of running processes for Sieve's commands
// (their reports, whether one runs in a directory, what their filters
// hold), over HTTP as its HTTP client says: the credentials of
// config.Client (auth.ClientOptions) for a surface behind TLS and
// authentication. The zero value uses http.DefaultClient.
type Client struct {
	HTTP *http.Client
}

// NewClient returns a Client presenting o's credentials.
func NewClient(o auth.ClientOptions) (Client, error) {
	hc, err := o.HTTPClient(0)
	if err != nil {
		return Client{}, err
	}
	return Client{HTTP: hc}, nil
}

func (c Client) do(req *http.Request) (*http.Response, error) {
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, auth.ExplainHTTP(err)
	}
	return resp, nil
}

// refused is the error of a status other than 200 from url, naming the
// client setting that answers a refusal.
func refused(url string, resp *http.Response) error {
	if why := auth.ExplainStatus(resp.StatusCode); why != "" {
		return fmt.Errorf("watch: %s: %s: %s", url, resp.Status, why)
	}
	return fmt.Errorf("watch: %s: %s", url, resp.Status)
}

// ReadDir returns the report of the process that keeps its files in dir:
// live from its /stats while it runs (live is true), else the report it
// saved when it stopped. A URL file left by a process that was killed is
// passed over for the saved report; a running process that refuses the
// client (its surface wants credentials) is an error, never answered with
// an old report.
func (c Client) ReadDir(ctx context.Context, dir string) (r Report, live bool, err error) {
	if url := pageURL(dir); url != "" {
		r, err := c.Fetch(ctx, url+"stats")
		if err == nil {
			return r, true, nil
		}
		if c.RunningURL(ctx, dir) != "" {
			return r, false, err
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if errors.Is(err, os.ErrNotExist) {
		return r, false, fmt.Errorf("%w: %s", ErrNothingInDir, dir)
	} else if err != nil {
		return r, false, fmt.Errorf("watch: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, false, fmt.Errorf("watch: %s: %w", filepath.Join(dir, ReportFile), err)
	}
	return r, false, nil
}

// ReadDir is Client{}.ReadDir.
func ReadDir(ctx context.Context, dir string) (Report, bool, error) {
	return Client{}.ReadDir(ctx, dir)
}

// pageURL returns the page URL announced in dir, or "".
func pageURL(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, URLFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// RunningURL returns the page URL of the process that keeps its files in
// dir if it runs and answers, else "". Any HTTP answer counts, a refusal
// too (its health may be guarded), and so does a TLS handshake whose
// certificate the client does not trust: something serves there.
func (c Client) RunningURL(ctx context.Context, dir string) string {
	url := pageURL(dir)
	if url == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"healthz", nil)
	if err != nil {
		return ""
	}
	resp, err := c.do(req)
	if err != nil {
		if auth.Untrusted(err) {
			return url
		}
		return ""
	}
	resp.Body.Close()
	return url
}

// RunningURL is Client{}.RunningURL.
func RunningURL(ctx context.Context, dir string) string { return Client{}.RunningURL(ctx, dir) }

// Fetch reads the report at url (a Server's /stats), within 5 seconds.
func (c Client) Fetch(ctx context.Context, url string) (Report, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var r Report
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return r, fmt.Errorf("watch: %w", err)
	}
	resp, err := c.do(req)
	if err != nil {
		return r, fmt.Errorf("watch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r, refused(url, resp)
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return r, fmt.Errorf("watch: %s: %w", url, err)
	}
	return r, nil
}

// Fetch is Client{}.Fetch.
func Fetch(ctx context.Context, url string) (Report, error) { return Client{}.Fetch(ctx, url) }
