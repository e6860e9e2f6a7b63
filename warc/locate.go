package warc

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// An archive is a set of directories: a crawl may write each run into a
// new one (archive/run1, archive/run2, …) and still revisit against what
// the earlier runs kept. A capture names its file by the name the file has
// once closed (never the .open name it has while written); names are
// unique (time, serial and crawler id), so the file is found by looking in
// each of the crawl's directories, which the crawl records (Directories).

// Directories tells a Recorder where a crawl's WARC files may be: every
// directory the crawl has written to. Declared here, where it is used; the
// crawler implements it on the crawl's record.
type Directories interface {
	// Dirs returns the directories crawl has written WARC files to,
	// the likeliest first.
	Dirs(ctx context.Context, crawl string) ([]string, error)
}

// Reasons a capture's payload record cannot be read (UnreadableError).
const (
	// UnreadableMissing: the file is in none of the crawl's directories
	// (moved, deleted, on a disk not mounted).
	UnreadableMissing = "missing"
	// UnreadableCorrupt: the file is there, but the bytes at the offset
	// are not a whole response record with the capture's payload digest
	// (cut, overwritten, bad gzip checksum).
	UnreadableCorrupt = "corrupt"
	// UnreadableIO: the file could not be read (permissions, I/O error).
	UnreadableIO = "io_error"
)

// UnreadableError says why the record holding a capture's payload cannot
// be read. A revisit then fetches the page again in full.
type UnreadableError struct {
	File   string // the file name the capture gives
	Path   string // where it was looked for or found
	Offset int64
	Reason string // UnreadableMissing, UnreadableCorrupt or UnreadableIO
	Err    error
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("warc: capture at %d of %s unreadable (%s): %v", e.Offset, e.Path, e.Reason, e.Err)
}

func (e *UnreadableError) Unwrap() error { return e.Err }

// Locate returns the path of the WARC file name (a closed file's name) in
// the first of dirs that holds it: as name, or as name.open while a writer
// holds it or after one was killed. An error is an *UnreadableError with
// reason UnreadableMissing when no directory holds it.
func Locate(dirs []string, name string) (string, error) {
	name = filepath.Base(strings.TrimSuffix(name, openSuffix))
	for _, dir := range dirs {
		for _, p := range []string{filepath.Join(dir, name), filepath.Join(dir, name+openSuffix)} {
			_, err := os.Stat(p)
			if err == nil {
				return p, nil
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return "", &UnreadableError{File: name, Path: p, Reason: UnreadableIO, Err: err}
			}
		}
	}
	where := strings.Join(dirs, ", ")
	if len(dirs) == 0 {
		where = "(no directory)"
	}
	return "", &UnreadableError{File: name, Path: where, Reason: UnreadableMissing,
		Err: fmt.Errorf("%s is in none of the crawl's WARC directories: %w", name, fs.ErrNotExist)}
}

// locator finds the files captures name for a Recorder: in the crawl's
// directories (its own first), closing on the way a file a killed writer
// left open (as Open does for its own directory), so an earlier run's
// directory ends valid too. Safe for concurrent use.
type locator struct {
	own  string
	dirs Directories
	mu   sync.Mutex // serializes recoveries
}

// locate returns where the file name of crawl is.
func (l *locator) locate(ctx context.Context, crawl, name string) (string, error) {
	dirs := []string{l.own}
	if l.dirs != nil {
		more, err := l.dirs.Dirs(ctx, crawl)
		if err != nil {
			return "", fmt.Errorf("warc: directories of crawl %s: %w", crawl, err)
		}
		for _, d := range more {
			if d != l.own {
				dirs = append(dirs, d)
			}
		}
	}
	p, err := Locate(dirs, name)
	if err != nil || !strings.HasSuffix(p, openSuffix) {
		return p, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := recoverFile(p); err != nil {
		return "", &UnreadableError{File: name, Path: p, Reason: UnreadableIO, Err: err}
	}
	// Recovered (renamed), or a live writer's: look again.
	return Locate([]string{filepath.Dir(p)}, name)
}

// checkCapture finds the record holding c's payload and reads it whole:
// a WARC response record whose gzip member ends with a valid checksum,
// whose HTTP response parses, and whose payload has c's digest. It returns
// the record's file's path, or an *UnreadableError (or the directories'
// failure).
func (l *locator) checkCapture(ctx context.Context, crawl string, c Capture) (string, error) {
	p, err := l.locate(ctx, crawl, c.File)
	if err != nil {
		var ue *UnreadableError
		if errors.As(err, &ue) {
			ue.Offset = c.Offset
		}
		return "", err
	}
	return p, checkRecord(p, c.Offset, c.Digest)
}

// checkRecord reads the response record at offset of the file at path to
// its end and checks it against the payload digest digest (none if empty).
func checkRecord(path string, offset int64, digest string) error {
	resp, zr, err := openResponse(path, offset)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	h := sha1.New()
	bad := func(err error) error {
		return &UnreadableError{File: filepath.Base(path), Path: path, Offset: offset, Reason: UnreadableCorrupt, Err: err}
	}
	if _, err := io.Copy(h, resp.Body); err != nil {
		return bad(err)
	}
	// The rest of the gzip member: its checksum is checked at its end.
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return bad(err)
	}
	if got := sha1Digest(h); digest != "" && got != digest {
		return bad(fmt.Errorf("payload digest %s, the capture says %s", got, digest))
	}
	return nil
}

// openResponse opens the response record at offset in the file at path:
// the HTTP response (its body without transfer coding; closing it closes
// the file) and the record's gzip member, for reading it to its end.
// Errors are *UnreadableError.
func openResponse(path string, offset int64) (*http.Response, *gzip.Reader, error) {
	ue := func(reason string, err error) error {
		return &UnreadableError{File: filepath.Base(path), Path: path, Offset: offset, Reason: reason, Err: err}
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, ue(UnreadableMissing, err)
	}
	if err != nil {
		return nil, nil, ue(UnreadableIO, err)
	}
	fail := func(reason string, err error) (*http.Response, *gzip.Reader, error) {
		f.Close()
		return nil, nil, ue(reason, err)
	}
	if st, err := f.Stat(); err != nil {
		return fail(UnreadableIO, err)
	} else if offset < 0 || offset >= st.Size() {
		return fail(UnreadableCorrupt, fmt.Errorf("offset beyond the file's %d bytes", st.Size()))
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return fail(UnreadableIO, err)
	}
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return fail(UnreadableCorrupt, err)
	}
	zr.Multistream(false)
	br := bufio.NewReader(zr)
	fields, err := readFields(br)
	if err != nil {
		return fail(UnreadableCorrupt, err)
	}
	if fields["warc-type"] != "response" {
		return fail(UnreadableCorrupt, fmt.Errorf("a %q record, not a response", fields["warc-type"]))
	}
	n, err := strconv.ParseInt(fields["content-length"], 10, 64)
	if err != nil {
		return fail(UnreadableCorrupt, fmt.Errorf("Content-Length: %w", err))
	}
	block := io.LimitReader(br, n)
	resp, err := http.ReadResponse(bufio.NewReader(block), nil)
	if err != nil {
		return fail(UnreadableCorrupt, err)
	}
	resp.Body = readCloser{Reader: resp.Body, close: f.Close}
	// What the block holds past the body, and the member's end.
	return resp, zr, nil
}
