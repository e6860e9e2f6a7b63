package warc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"
)

// conn is a connection whose bytes are copied into the exchange it carries
// now. net/http's HTTP/1.1 transport runs one exchange at a time on a
// connection and writes a request only after the previous response was read
// to its end, so the bytes crossing the connection between an exchange's
// GotConn and the end of its response body are exactly that exchange.
type conn struct {
	net.Conn
	mu sync.Mutex
	ex *exchange // the exchange on this connection now; nil between two
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if c.ex != nil {
			c.ex.response(p[:n])
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.mu.Lock()
		if c.ex != nil {
			c.ex.request(p[:n])
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *conn) attach(ex *exchange) {
	c.mu.Lock()
	c.ex = ex
	c.mu.Unlock()
	ex.mu.Lock()
	ex.conn = c
	ex.mu.Unlock()
}

func (c *conn) detach(ex *exchange) {
	c.mu.Lock()
	if c.ex == ex {
		c.ex = nil
	}
	c.mu.Unlock()
}

// exchange is one HTTP exchange being captured: the request and response
// bytes as they crossed the wire, spooled (in memory up to a bound, then in
// a temporary file), the response cut at a limit.
type exchange struct {
	url   string
	date  time.Time // when the request was sent
	limit int64     // response bytes kept at most

	mu        sync.Mutex
	conn      *conn
	ip        string
	req, resp *spool
	truncated bool
	err       error // a spool that could not be written

	// lastPath is where the record of the last capture's payload is;
	// refetch why it could not be read, when it could not.
	lastPath string
	refetch  *UnreadableError
}

func (ex *exchange) request(p []byte) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if _, err := ex.req.Write(p); err != nil && ex.err == nil {
		ex.err = err
	}
}

func (ex *exchange) response(p []byte) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if room := ex.limit - ex.resp.Len(); int64(len(p)) > room {
		p = p[:max(room, 0)]
		ex.truncated = true
	}
	if _, err := ex.resp.Write(p); err != nil && ex.err == nil {
		ex.err = err
	}
}

func (ex *exchange) isTruncated() bool {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.truncated
}

func (ex *exchange) release() {
	ex.req.Close()
	ex.resp.Close()
}

// Recorder captures every HTTP exchange made through its connections and
// round trips, and writes each as a request and a response (or revisit)
// record. Install both halves: WrapConn on the transport's connections (after
// the address guard and the TLS handshake), RoundTripper around the
// transport. Requests must go over HTTP/1.1.
type Recorder struct {
	w    *Writer
	opts RecorderOptions
	loc  *locator
}

// RecorderOptions configures a Recorder.
type RecorderOptions struct {
	// MaxBodySize is the most body bytes kept per response; a longer one is
	// cut and its record marked WARC-Truncated: length. 10 MiB if 0.
	MaxBodySize int64
	// SpoolMemory is the most bytes of one exchange held in memory before
	// spooling to a temporary file. 1 MiB if 0.
	SpoolMemory int64
	// SpoolDir holds spooled exchanges; the system's temporary directory
	// if empty.
	SpoolDir string
	// Captures, if set, keeps each crawl's last capture of every URL, for
	// revisit records and conditional requests.
	Captures Captures
	// Directories, if set, names the directories besides the Writer's
	// where a crawl's earlier captures may be (an archive is a set of
	// directories: one per run, say). Without it only the Writer's
	// directory is searched.
	Directories Directories
}

// NewRecorder returns a Recorder writing to w.
func NewRecorder(w *Writer, opts RecorderOptions) *Recorder {
	if opts.MaxBodySize <= 0 {
		opts.MaxBodySize = 10 << 20
	}
	if opts.SpoolMemory <= 0 {
		opts.SpoolMemory = 1 << 20
	}
	return &Recorder{w: w, opts: opts, loc: &locator{own: w.opts.Dir, dirs: opts.Directories}}
}

// maxHeaderBytes bounds the response header kept beside the body limit.
const maxHeaderBytes = 1 << 20

// WrapConn returns c recording the exchanges it carries.
func (r *Recorder) WrapConn(c net.Conn) net.Conn { return &conn{Conn: c} }

// RoundTripper wraps next so that each exchange is recorded once its
// response body is read to its end or closed (the rest of a body closed
// early is read, up to MaxBodySize, so the record holds the whole response).
// A request whose context carries a Tracker reports the outcome there.
func (r *Recorder) RoundTripper(next http.RoundTripper) http.RoundTripper {
	return roundTripper{r: r, next: next}
}

type roundTripper struct {
	r    *Recorder
	next http.RoundTripper
}

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	r := t.r
	if err := r.w.Err(); err != nil {
		return nil, err // nothing is fetched that cannot be kept
	}
	tr := trackerFrom(req.Context())
	ex := &exchange{
		url:   req.URL.String(),
		limit: maxHeaderBytes + r.opts.MaxBodySize,
		req:   newSpool(r.opts.SpoolMemory, r.opts.SpoolDir),
		resp:  newSpool(r.opts.SpoolMemory, r.opts.SpoolDir),
	}
	var last *Capture
	if r.opts.Captures != nil && tr != nil && req.Method == http.MethodGet && tr.target == ex.url {
		c, ok, err := r.opts.Captures.Last(req.Context(), tr.crawl, ex.url)
		if err != nil {
			ex.release()
			return nil, fmt.Errorf("%w: last capture of %s: %w", ErrCaptures, ex.url, err)
		}
		if ok {
			// A revisit is only as good as the record it points at: one
			// that cannot be read whole means fetching the page again
			// in full (an unconditional request, a response record).
			switch path, err := r.loc.checkCapture(req.Context(), tr.crawl, c); {
			case errors.As(err, &ex.refetch):
			case err != nil:
				ex.release()
				return nil, fmt.Errorf("%w: last capture of %s: %w", ErrCaptures, ex.url, err)
			default:
				last, ex.lastPath = &c, path
				req = conditional(req, c)
			}
		}
	}
	trace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			c, ok := info.Conn.(*conn)
			if !ok {
				return
			}
			ex.mu.Lock()
			ex.date = time.Now().UTC()
			if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
				ex.ip = a.IP.String()
			}
			ex.mu.Unlock()
			c.attach(ex)
		},
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		ex.mu.Lock()
		if ex.conn != nil {
			ex.conn.detach(ex)
		}
		ex.mu.Unlock()
		ex.release()
		return nil, err
	}
	resp.Body = &body{ReadCloser: resp.Body, ctx: req.Context(), r: r, ex: ex, tr: tr, last: last}
	return resp, nil
}

// conditional returns req asking for the page only if it changed since c.
func conditional(req *http.Request, c Capture) *http.Request {
	if c.ETag == "" && c.LastModified == "" {
		return req
	}
	req = req.Clone(req.Context())
	if c.ETag != "" {
		req.Header.Set("If-None-Match", c.ETag)
	}
	if c.LastModified != "" {
		req.Header.Set("If-Modified-Since", c.LastModified)
	}
	return req
}

// body is a response body that records its exchange when read to its end or
// closed.
type body struct {
	io.ReadCloser
	ctx  context.Context
	r    *Recorder
	ex   *exchange
	tr   *Tracker
	last *Capture
	once sync.Once
	err  error
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.finish(false)
	}
	return n, err
}

func (b *body) Close() error {
	b.once.Do(func() {
		// Read what the reader left, so the record holds the response as
		// the server sent it, up to the limit.
		bufp := copyBuffers.Get().(*[]byte)
		defer copyBuffers.Put(bufp)
		buf := *bufp
		cut := false
		for {
			if b.ex.isTruncated() {
				cut = true
				break
			}
			_, err := b.ReadCloser.Read(buf)
			if err != nil {
				break
			}
		}
		b.err = b.record(cut)
	})
	cerr := b.ReadCloser.Close()
	if b.err != nil {
		return b.err
	}
	return cerr
}

func (b *body) finish(cut bool) {
	b.once.Do(func() { b.err = b.record(cut) })
}

func (b *body) record(cut bool) error {
	ex := b.ex
	ex.mu.Lock()
	c := ex.conn
	ex.mu.Unlock()
	if c != nil {
		c.detach(ex)
	}
	defer ex.release()
	var res Result
	var err error
	switch {
	case c == nil:
		err = errors.New("warc: the exchange crossed no recorded connection (is WrapConn installed and HTTP/2 off?)")
	case ex.err != nil:
		err = fmt.Errorf("warc: spooling the exchange: %w", ex.err)
	default:
		res, err = b.r.w.writeExchange(b.ctx, b.tr.crawlID(), ex, cut || ex.truncated, b.last, b.r.opts.Captures, b.r.loc)
	}
	res.Refetch = ex.refetch
	res.URL, res.Err = ex.url, err
	if b.tr != nil {
		b.tr.add(res)
	}
	return err
}

// Tracker collects the outcomes of the exchanges recorded for one fetch.
type Tracker struct {
	crawl   string
	target  string // the URL fetched: only its request is made conditional
	mu      sync.Mutex
	results []Result
}

type trackerKey struct{}

// Track returns a context whose requests report their recorded exchanges to
// the returned Tracker, as exchanges of a fetch of target for crawl.
func Track(ctx context.Context, crawl, target string) (context.Context, *Tracker) {
	t := NewTracker(crawl, target)
	return t.Context(ctx), t
}

// NewTracker returns a Tracker of the exchanges of a fetch of target for
// crawl. Only the request for target is made conditional (robots.txt, say,
// is always read whole).
func NewTracker(crawl, target string) *Tracker { return &Tracker{crawl: crawl, target: target} }

// Context returns ctx whose requests report to t.
func (t *Tracker) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, trackerKey{}, t)
}

func trackerFrom(ctx context.Context) *Tracker {
	t, _ := ctx.Value(trackerKey{}).(*Tracker)
	return t
}

func (t *Tracker) crawlID() string {
	if t == nil {
		return ""
	}
	return t.crawl
}

func (t *Tracker) add(r Result) {
	t.mu.Lock()
	t.results = append(t.results, r)
	t.mu.Unlock()
}

// Results returns the outcomes so far, in the order the exchanges ended.
func (t *Tracker) Results() []Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Result(nil), t.results...)
}

// Of returns the outcome of the last exchange for url, if any.
func (t *Tracker) Of(url string) (Result, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.results) - 1; i >= 0; i-- {
		if t.results[i].URL == url {
			return t.results[i], true
		}
	}
	return Result{}, false
}

// Err returns the first failure to record an exchange, if any.
func (t *Tracker) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.results {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// Err returns why the Recorder's Writer stopped writing, or nil.
func (r *Recorder) Err() error { return r.w.Err() }

// Writer returns the Writer the Recorder writes to.
func (r *Recorder) Writer() *Writer { return r.w }

// WithDirectories returns a Recorder writing to r's Writer with r's
// options that also looks for captures' files where d says (the crawler
// installs its crawls' directories this way).
func (r *Recorder) WithDirectories(d Directories) *Recorder {
	opts := r.opts
	opts.Directories = d
	return NewRecorder(r.w, opts)
}

// ReadPayload reads the HTTP response of the record holding a revisit's
// payload (Result.RefPath, RefOffset), checked whole when the revisit was
// decided. The caller closes the body. Errors are *UnreadableError.
func (r *Recorder) ReadPayload(res Result) (*http.Response, error) {
	if res.RefPath == "" {
		return nil, &UnreadableError{File: res.RefFile, Path: res.RefFile, Offset: res.RefOffset, Reason: UnreadableMissing, Err: errors.New("not a revisit")}
	}
	resp, _, err := openResponse(res.RefPath, res.RefOffset)
	return resp, err
}
