package urlfrontier

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sievecrawl/sieve/frontier"
)

// formatVersion is the "v" of the values this package writes to its
// buckets; a reader refuses another.
const formatVersion = 1

// Entry is one queued or in-process URL, the value of its key in the URLs
// bucket (JSON, "v":1):
//
//	{"v":1,"crawl":"DEFAULT","url":"https://example.com/","key":"example.com",
//	 "meta":{"depth":["1"]},"created":1764000000,"due":0}
//
// A URL is ready when Due (Unix milliseconds; 0: at once) has passed and
// its queue holds no running lease of it (QueueState.Leases); a URL
// scheduled for a refetch is due at its refetch date.
type Entry struct {
	V       int                 `json:"v"`
	Crawl   string              `json:"crawl"`
	URL     string              `json:"url"`
	Key     string              `json:"key"`
	Meta    map[string][]string `json:"meta,omitempty"`
	Created int64               `json:"created"` // Unix seconds, when first stored
	Due     int64               `json:"due"`     // Unix milliseconds
	// Known says a known update scheduled it for a refetch at Due.
	Known bool `json:"known,omitempty"`
}

// ready reports whether e is due at now (Unix ms).
func (e *Entry) ready(now int64) bool { return e.Due <= now }

// QueueState is a queue's settings and turn, the value of its key in the
// queues bucket (JSON, "v":1). A zero field is unset.
type QueueState struct {
	V     int    `json:"v"`
	Crawl string `json:"crawl"`
	Key   string `json:"key"`
	// Delay is the pause between two turns in milliseconds; -1 or unset
	// (0 with HasDelay false): the crawl's default.
	Delay    int64 `json:"delay,omitempty"`
	HasDelay bool  `json:"has_delay,omitempty"`
	// Blocked is the Unix ms until which nothing is handed out.
	Blocked int64 `json:"blocked,omitempty"`
	// Limit is the most URLs the queue hands out to be fetched, counted
	// by Fetched and the URLs in process (SetCrawlLimit); 0: none.
	Limit uint32 `json:"limit,omitempty"`
	// Next is the Unix ms of the queue's next turn.
	Next int64 `json:"next,omitempty"`
	// Fetched counts known updates of the queue's URLs (fetches);
	// Completed those that completed a URL.
	Fetched   uint64 `json:"fetched,omitempty"`
	Completed uint64 `json:"completed,omitempty"`
	// Leases are the queue's URLs handed out: the last token of each
	// one's key (its URL hash) to the Unix ms its lease ends. A URL whose
	// lease ended is ready again; its known update removes it. Leasing in
	// the queue's value, which each hand-out writes anyway, makes a
	// hand-out one write per queue, not one per URL.
	Leases map[string]int64 `json:"leases,omitempty"`
}

// leased reports whether the URL of key is handed out at now.
func (q *QueueState) leased(key string, now int64) (until int64, ok bool) {
	until, ok = q.Leases[urlHash(key)]
	return until, ok && until > now
}

// urlHash is the last token of a URL's key.
func urlHash(key string) string {
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		return key[i+1:]
	}
	return key
}

var errFormat = errors.New("urlfrontier: bad stored value")

func decodeEntry(b []byte) (*Entry, error) {
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("%w: %v", errFormat, err)
	}
	if e.V != formatVersion || !frontier.ValidCrawl(e.Crawl) || e.URL == "" || len(e.Key) > frontier.MaxKeyBytes {
		return nil, fmt.Errorf("%w: entry v%d crawl %q", errFormat, e.V, e.Crawl)
	}
	return &e, nil
}

func decodeQueue(b []byte) (*QueueState, error) {
	var q QueueState
	if err := json.Unmarshal(b, &q); err != nil {
		return nil, fmt.Errorf("%w: %v", errFormat, err)
	}
	if q.V != formatVersion || !frontier.ValidCrawl(q.Crawl) {
		return nil, fmt.Errorf("%w: queue v%d crawl %q", errFormat, q.V, q.Crawl)
	}
	return &q, nil
}

func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain fields: cannot fail
	}
	return b
}

func ms(t time.Time) int64 { return t.UnixMilli() }
