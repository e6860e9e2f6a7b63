package warc

import (
	"bytes"
	"io"
	"os"
	"sync"
)

// buffers recycles spools' memory: every exchange fills four (request,
// response, and the two compressed records).
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// copyBuffers are io.CopyBuffer's buffers for readers without WriteTo.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyPooled is io.Copy with a pooled buffer. Neither side's ReadFrom or
// WriteTo is used: gowarc's record builder and io.MultiReader allocate 32
// KiB of their own for each call (with them, archiving a small page
// allocated about 100 KB).
func copyPooled(dst io.Writer, src io.Reader) (int64, error) {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, *buf)
}

// pooledReadFrom gives a writer a ReadFrom with a pooled buffer, which
// io.Copy prefers to allocating one: gowarc's Marshal copies each record's
// block with io.Copy.
type pooledReadFrom struct{ io.Writer }

func (w pooledReadFrom) ReadFrom(r io.Reader) (int64, error) { return copyPooled(w.Writer, r) }

// spool holds the bytes of one side of an exchange: in memory up to a bound,
// then in a temporary file, so a large body costs disk, not memory.
type spool struct {
	mem    *bytes.Buffer
	max    int64
	dir    string
	file   *os.File
	n      int64
	closed bool
}

func newSpool(maxMem int64, dir string) *spool {
	b := buffers.Get().(*bytes.Buffer)
	b.Reset()
	return &spool{mem: b, max: maxMem, dir: dir}
}

func (s *spool) Write(p []byte) (int, error) {
	if s.file == nil && int64(s.mem.Len()+len(p)) > s.max {
		f, err := os.CreateTemp(s.dir, "sieve-spool-*")
		if err != nil {
			return 0, err
		}
		_ = os.Remove(f.Name()) // gone when closed, whatever happens
		if _, err := f.Write(s.mem.Bytes()); err != nil {
			f.Close()
			return 0, err
		}
		s.file = f
		s.mem.Reset()
	}
	var n int
	var err error
	if s.file != nil {
		n, err = s.file.Write(p)
	} else {
		n, err = s.mem.Write(p)
	}
	s.n += int64(n)
	return n, err
}

// Len is the number of bytes written.
func (s *spool) Len() int64 { return s.n }

// Reader reads the spooled bytes from the start.
func (s *spool) Reader() io.Reader {
	if s.file != nil {
		return io.NewSectionReader(s.file, 0, s.n)
	}
	return bytes.NewReader(s.mem.Bytes())
}

// Close releases the spool.
func (s *spool) Close() {
	if s.closed {
		return
	}
	s.closed = true
	if s.file != nil {
		s.file.Close()
	}
	if s.mem.Cap() <= 4<<20 { // a big one goes to the collector
		buffers.Put(s.mem)
	}
	s.mem = nil
}
