package warc

import (
	"bufio"

	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ReadResponse reads the HTTP response held by the response record at
// offset in the file named file (in the Writer's directory, closed or still
// open): its status, headers and body, the body without transfer coding.
// The caller closes the body.
func (w *Writer) ReadResponse(file string, offset int64) (*http.Response, error) {
	return ReadResponse(filepath.Join(w.opts.Dir, filepath.Base(file)), offset)
}

// ReadResponse reads the HTTP response of the response record at offset in
// the WARC file at path, or at path+".open" while it is being written.
func ReadResponse(path string, offset int64) (*http.Response, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		f, err = os.Open(path + openSuffix)
	}
	if err != nil {
		return nil, fmt.Errorf("warc: read record: %w", err)
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("warc: read record: %w", err)
	}
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("warc: read record at %d of %s: %w", offset, path, err)
	}
	zr.Multistream(false)
	br := bufio.NewReader(zr)
	fields, err := readFields(br)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("warc: record at %d of %s: %w", offset, path, err)
	}
	if fields["warc-type"] != "response" {
		f.Close()
		return nil, fmt.Errorf("warc: record at %d of %s is a %q, not a response", offset, path, fields["warc-type"])
	}
	n, err := strconv.ParseInt(fields["content-length"], 10, 64)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("warc: record at %d of %s: Content-Length: %w", offset, path, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(io.LimitReader(br, n)), nil)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("warc: record at %d of %s: %w", offset, path, err)
	}
	resp.Body = readCloser{Reader: resp.Body, close: f.Close}
	return resp, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// readFields reads a record's version line and header fields (names
// lower-cased), up to the blank line.
func readFields(br *bufio.Reader) (map[string]string, error) {
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "WARC/1.") {
		return nil, errors.New("not a WARC record")
	}
	fields := map[string]string{}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			return fields, nil
		}
		k, v, _ := strings.Cut(line, ":")
		fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
}
