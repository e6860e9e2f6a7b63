package warc

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Recover closes the WARC files in dir that no live writer holds: a writer
// killed mid-file leaves <name>.open, locked while it lived. Each such file is
// cut after its last complete record (a record is complete when its gzip
// member ends with a valid checksum and holds a whole WARC record), renamed
// and indexed anew; one without any complete record is removed. It returns
// the names of the files it closed.
func Recover(dir string) ([]string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"+openSuffix))
	if err != nil {
		return nil, err
	}
	var closed []string
	for _, path := range names {
		ok, err := recoverFile(path)
		if err != nil {
			return closed, err
		}
		if ok {
			closed = append(closed, strings.TrimSuffix(filepath.Base(path), openSuffix))
		}
	}
	return closed, nil
}

// recoverFile closes one orphaned file, unless a live writer holds it.
func recoverFile(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false, fmt.Errorf("warc: recover: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil // a live writer's
		}
		return false, fmt.Errorf("warc: recover: lock %s: %w", path, err)
	}
	dir, name := filepath.Dir(path), strings.TrimSuffix(filepath.Base(path), openSuffix)
	entries, good, err := scan(f, name)
	if err != nil {
		return false, fmt.Errorf("warc: recover %s: %w", path, err)
	}
	idxOpen := filepath.Join(dir, indexName(name)+openSuffix)
	if good == 0 {
		os.Remove(idxOpen)
		return false, os.Remove(path)
	}
	if err := f.Truncate(good); err != nil {
		return false, fmt.Errorf("warc: recover: cut %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return false, fmt.Errorf("warc: recover: %w", err)
	}
	var idx bytes.Buffer
	for _, e := range entries {
		idx.WriteString(cdxjLine(e))
	}
	if err := os.WriteFile(idxOpen, idx.Bytes(), 0o644); err != nil {
		return false, fmt.Errorf("warc: recover: %w", err)
	}
	return true, finish(dir, name)
}

// byteCounter is a flate.Reader that counts what it hands out, so the end
// of each gzip member is known exactly.
type byteCounter struct {
	br *bufio.Reader
	n  int64
}

func (c *byteCounter) Read(p []byte) (int, error) {
	n, err := c.br.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *byteCounter) ReadByte() (byte, error) {
	b, err := c.br.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// scan reads the gzip members of a WARC file from its start and returns the
// index entries of its responses and revisits and the offset after its last
// complete record.
func scan(r io.Reader, name string) ([]cdxEntry, int64, error) {
	c := &byteCounter{br: bufio.NewReaderSize(r, 64<<10)}
	var entries []cdxEntry
	var good int64
	var zr *gzip.Reader
	for {
		start := c.n
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(c)
		} else {
			err = zr.Reset(c)
		}
		if err != nil {
			return entries, good, nil // the end, or a cut member
		}
		zr.Multistream(false)
		data, err := io.ReadAll(zr)
		if err != nil {
			return entries, good, nil
		}
		e, ok := parseRecord(data)
		if !ok {
			return entries, good, nil
		}
		good = c.n
		if e.Type == "response" || e.Type == "revisit" {
			e.Offset, e.Length, e.File = start, c.n-start, name
			entries = append(entries, e)
		}
	}
}

// parseRecord checks that data is one whole WARC record and returns what an
// index says of it.
func parseRecord(data []byte) (cdxEntry, bool) {
	var e cdxEntry
	if !bytes.HasPrefix(data, []byte("WARC/1.")) {
		return e, false
	}
	end := bytes.Index(data, []byte("\r\n\r\n"))
	if end < 0 {
		return e, false
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(data[:end]), "\r\n")[1:] {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
	}
	n, err := strconv.ParseInt(fields["content-length"], 10, 64)
	blockStart := int64(end + 4)
	if err != nil || n < 0 || int64(len(data)) != blockStart+n+4 || !bytes.HasSuffix(data, []byte("\r\n\r\n")) {
		return e, false
	}
	e.Type = fields["warc-type"]
	e.URL = strings.Trim(fields["warc-target-uri"], "<>")
	e.Digest = fields["warc-payload-digest"]
	e.Date, _ = time.Parse(time.RFC3339Nano, fields["warc-date"])
	if e.Type == "response" || e.Type == "revisit" {
		block := data[blockStart : blockStart+n]
		if resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(block)), nil); err == nil {
			e.Status = resp.StatusCode
			e.MIME = mediaType(resp.Header.Get("Content-Type"))
		}
	}
	return e, true
}
