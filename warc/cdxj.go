package warc

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// cdxEntry is one capture in a CDXJ index.
type cdxEntry struct {
	URL    string
	Date   time.Time
	MIME   string
	Status int
	Digest string
	Length int64
	Offset int64
	File   string
	Type   string // "response" or "revisit"
}

// cdxjFields is the JSON part of a CDXJ line, as pywb and Browsertrix
// (cdxj-indexer) write it: every value a string.
type cdxjFields struct {
	URL      string `json:"url"`
	MIME     string `json:"mime,omitempty"`
	Status   string `json:"status,omitempty"`
	Digest   string `json:"digest,omitempty"`
	Length   string `json:"length"`
	Offset   string `json:"offset"`
	Filename string `json:"filename"`
}

// cdxjLine formats e as a CDXJ line: the URL's SURT key, the 14-digit
// capture time and a JSON object. A revisit's mime is "warc/revisit", as
// pywb expects.
func cdxjLine(e cdxEntry) string {
	mime := e.MIME
	if e.Type == "revisit" {
		mime = "warc/revisit"
	}
	// The digest without its "sha1:" prefix, as pywb and warcio write it.
	_, digest, ok := strings.Cut(e.Digest, ":")
	if !ok {
		digest = e.Digest
	}
	f := cdxjFields{URL: e.URL, MIME: mime, Digest: digest, Length: strconv.FormatInt(e.Length, 10),
		Offset: strconv.FormatInt(e.Offset, 10), Filename: e.File}
	if e.Status > 0 {
		f.Status = strconv.Itoa(e.Status)
	}
	j, _ := json.Marshal(f)
	return fmt.Sprintf("%s %s %s\n", SURT(e.URL), e.Date.UTC().Format("20060102150405"), j)
}

// SURT returns the Sort-friendly URI Reordering Transform of rawURL that
// CDX(J) indexes are keyed by: scheme dropped, host lower-cased without a
// leading "www." and its labels reversed, comma-separated, then ")" and the
// path and query ("com,example)/a?b=1&c=2", query parameters sorted). An
// unparsable URL is its own key.
func SURT(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return strings.ToLower(rawURL)
	}
	host := strings.ToLower(u.Hostname())
	host = strings.TrimPrefix(host, "www.")
	labels := strings.Split(host, ".")
	for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
		labels[i], labels[j] = labels[j], labels[i]
	}
	key := strings.Join(labels, ",")
	if p := u.Port(); p != "" && !(u.Scheme == "http" && p == "80") && !(u.Scheme == "https" && p == "443") {
		key += ":" + p
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	key += ")" + strings.ToLower(path)
	if u.RawQuery != "" {
		params := strings.Split(u.RawQuery, "&")
		sort.Strings(params)
		key += "?" + strings.ToLower(strings.Join(params, "&"))
	}
	return key
}

// sortIndex writes the lines of the unsorted index from, sorted bytewise
// (as `LC_ALL=C sort` does, what CDXJ readers binary-search), to to, and
// removes from.
func sortIndex(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("warc: read index: %w", err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	sort.Strings(lines)
	tmp := to + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("warc: write index: %w", err)
	}
	bw := bufio.NewWriter(f)
	for _, l := range lines {
		bw.WriteString(l)
	}
	err = bw.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, to)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("warc: write index: %w", err)
	}
	return os.Remove(from)
}

// IndexEntry is one capture as a CDXJ index lists it: its time, the
// line's fields, and the directory of the index.
type IndexEntry struct {
	Time string `json:"time"` // 14-digit UTC
	Dir  string `json:"dir"`
	cdxjFields
}

// Lookup returns the captures of rawURL that the CDXJ indexes in dirs list
// (closed files' and the ones being written), oldest first. A directory
// that does not exist holds none.
func Lookup(dirs []string, rawURL string) ([]IndexEntry, error) {
	var files []string
	for _, dir := range dirs {
		for _, pat := range []string{"*.cdxj", "*.cdxj" + openSuffix} {
			m, err := filepath.Glob(filepath.Join(dir, pat))
			if err != nil {
				return nil, err
			}
			files = append(files, m...)
		}
	}
	key := SURT(rawURL) + " "
	var out []IndexEntry
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, fmt.Errorf("warc: index: %w", err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, key) {
				continue
			}
			rest := line[len(key):]
			ts, js, ok := strings.Cut(rest, " ")
			var e IndexEntry
			if !ok || json.Unmarshal([]byte(js), &e) != nil || e.URL != rawURL {
				continue
			}
			e.Time, e.Dir = ts, filepath.Dir(f)
			out = append(out, e)
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("warc: index %s: %w", f, err)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time < out[j].Time })
	return out, nil
}
