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

// ReadDir returns the report of the process that keeps its files in dir:
// live from its /stats while it runs (live is true), else the report it
// saved when it stopped. A URL file left by a process that was killed is
// passed over for the saved report.
func ReadDir(ctx context.Context, dir string) (r Report, live bool, err error) {
	if url := pageURL(dir); url != "" {
		if r, err := Fetch(ctx, url+"stats"); err == nil {
			return r, true, nil
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

// pageURL returns the page URL announced in dir, or "".
func pageURL(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, URLFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// RunningURL returns the page URL of the process that keeps its files in
// dir if it runs and answers, else "".
func RunningURL(ctx context.Context, dir string) string {
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
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return url
}

// Fetch reads the report at url (a Server's /stats), within 5 seconds.
func Fetch(ctx context.Context, url string) (Report, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var r Report
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return r, fmt.Errorf("watch: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, fmt.Errorf("watch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("watch: %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return r, fmt.Errorf("watch: %s: %w", url, err)
	}
	return r, nil
}
