package warc

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
)

// ReadResponse reads the HTTP response of the response record at offset in
// the WARC file at path, or at path+".open" while it is being written: its
// status, headers and body, the body without transfer coding. The caller
// closes the body. Errors are *UnreadableError.
func ReadResponse(path string, offset int64) (*http.Response, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(path + openSuffix); err == nil {
			path += openSuffix
		}
	}
	resp, _, err := openResponse(path, offset)
	return resp, err
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
