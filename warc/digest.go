package warc

import (
	"bufio"
	"crypto/sha1"
	"encoding/base32"
	"hash"
	"io"
	"mime"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
)

// sha1Digest formats h's sum as WARC writers do: "sha1:" and base32.
func sha1Digest(h hash.Hash) string {
	return "sha1:" + base32.StdEncoding.EncodeToString(h.Sum(nil))
}

// response is what a recorded HTTP response says of itself.
type response struct {
	status        int
	mime          string // media type without parameters
	etag          string
	lastModified  string
	headerLen     int64  // status line and headers, with the blank line
	blockDigest   string // of every byte as received
	payloadDigest string // of the body without its transfer encoding
	payloadLen    int64
}

// readers recycles parseResponse's buffered readers (two per response).
var readers = sync.Pool{New: func() any { return bufio.NewReader(nil) }}

func reader(r io.Reader) *bufio.Reader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

func release(brs ...*bufio.Reader) {
	for _, br := range brs {
		br.Reset(nil) // holds nothing of the exchange while pooled
		readers.Put(br)
	}
}

// parseResponse reads a raw HTTP/1.x response as received and computes its
// digests: the block digest over the bytes as they are, the payload digest
// over the body with any chunked transfer coding removed (content codings,
// gzip say, stay: they are the payload). A body cut short still has a payload
// digest, of what arrived.
func parseResponse(raw io.Reader) (response, error) {
	var r response
	block := sha1.New()
	br, tp := reader(io.TeeReader(raw, block)), reader(nil)
	defer release(br, tp)
	counter := &byteCounter{br: br}
	tp.Reset(counter)
	resp, err := http.ReadResponse(tp, nil)
	if err != nil {
		_, _ = io.Copy(io.Discard, br)
		r.blockDigest = sha1Digest(block)
		return r, err
	}
	r.headerLen = counter.n - int64(tp.Buffered())
	r.status = resp.StatusCode
	r.mime, _, _ = mime.ParseMediaType(resp.Header.Get("Content-Type"))
	r.etag = resp.Header.Get("ETag")
	r.lastModified = resp.Header.Get("Last-Modified")
	// The body as sent: bytes after the header, dechunked only when the
	// transfer coding says so (http.ReadResponse would also stop at
	// Content-Length, which a cut or lying response may not match).
	rest := io.MultiReader(tp, br)
	var body io.Reader = rest
	if chunked(resp.TransferEncoding) {
		body = httputil.NewChunkedReader(rest)
	}
	payload := sha1.New()
	n, _ := copyPooled(payload, body) // a cut chunk stream ends the payload early
	_, _ = io.Copy(io.Discard, br)
	r.payloadLen = n
	r.payloadDigest = sha1Digest(payload)
	r.blockDigest = sha1Digest(block)
	return r, nil
}

func chunked(te []string) bool {
	for _, t := range te {
		if strings.EqualFold(strings.TrimSpace(t), "chunked") {
			return true
		}
	}
	return false
}

func mediaType(v string) string {
	t, _, _ := mime.ParseMediaType(v)
	return t
}
