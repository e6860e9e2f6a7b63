package warc

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Capture is what a crawl keeps of its last capture of a URL: enough to ask
// the server whether the page changed (validators) and to point a revisit
// record at the record that holds the payload.
type Capture struct {
	Date         time.Time `json:"d"`           // when it was fetched last
	Digest       string    `json:"h"`           // payload digest, "sha1:…"
	ETag         string    `json:"e,omitempty"` // validators for a conditional request
	LastModified string    `json:"m,omitempty"` //
	PayloadURL   string    `json:"u"`           // the record holding the payload: its WARC-Target-URI,
	PayloadDate  time.Time `json:"t"`           // WARC-Date,
	File         string    `json:"f"`           // file
	Offset       int64     `json:"o"`           // and offset
	Status       int       `json:"s,omitempty"` // the status of the last fetch
}

// Captures keeps, per crawl, the last capture of every URL and the first
// capture of every payload digest. It must be exact (a revisit record that
// points at a payload never stored loses the page), so implementations are
// stores, not filters. Declared here, where it is used; implemented on
// Redis (deployments), a JetStream bucket (the embedded mode) and in memory.
type Captures interface {
	// Last returns the last capture of url in crawl.
	Last(ctx context.Context, crawl, url string) (Capture, bool, error)
	// ByDigest returns the first capture of a payload in crawl.
	ByDigest(ctx context.Context, crawl, digest string) (Capture, bool, error)
	// Put records c as url's last capture and, if its payload digest has
	// none yet, as the digest's first.
	Put(ctx context.Context, crawl, url string, c Capture) error
}

// The revisit profiles of WARC 1.1.
const (
	ProfileIdenticalPayload  = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
	ProfileServerNotModified = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
)

// revisitOf decides whether the response r to url is stored as a revisit of
// an earlier capture, and of which: a 304 to a conditional request is one of
// the last capture (server-not-modified); a complete 2xx whose payload the
// crawl already holds, under this URL or another, is one of that capture
// (identical-payload-digest). Empty payloads are always stored.
func revisitOf(ctx context.Context, crawl, url string, r response, complete bool, last *Capture, c Captures) (*Capture, string, error) {
	if c == nil || !complete {
		return nil, "", nil
	}
	if r.status == http.StatusNotModified && last != nil {
		return last, ProfileServerNotModified, nil
	}
	if r.status/100 != 2 || r.payloadLen == 0 {
		return nil, "", nil
	}
	if last != nil && last.Digest == r.payloadDigest {
		return last, ProfileIdenticalPayload, nil
	}
	ref, ok, err := c.ByDigest(ctx, crawl, r.payloadDigest)
	if err != nil || !ok {
		return nil, "", err
	}
	return &ref, ProfileIdenticalPayload, nil
}

// MemCaptures is Captures in memory: for tests and single runs.
type MemCaptures struct {
	mu      sync.Mutex
	last    map[[2]string]Capture
	digests map[[2]string]Capture
}

// NewMemCaptures returns an empty MemCaptures.
func NewMemCaptures() *MemCaptures {
	return &MemCaptures{last: map[[2]string]Capture{}, digests: map[[2]string]Capture{}}
}

func (m *MemCaptures) Last(_ context.Context, crawl, url string) (Capture, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.last[[2]string{crawl, url}]
	return c, ok, nil
}

func (m *MemCaptures) ByDigest(_ context.Context, crawl, digest string) (Capture, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.digests[[2]string{crawl, digest}]
	return c, ok, nil
}

func (m *MemCaptures) Put(_ context.Context, crawl, url string, c Capture) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last[[2]string{crawl, url}] = c
	if _, ok := m.digests[[2]string{crawl, c.Digest}]; !ok {
		m.digests[[2]string{crawl, c.Digest}] = c
	}
	return nil
}
