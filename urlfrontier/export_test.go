package urlfrontier

import (
	"context"
	"encoding/binary"
	"strconv"
	"time"

	"github.com/sievecrawl/sieve/urlstore"
)

// ReportLoad runs s's catch-up report until the returned function is
// called, reporting every d.
func ReportLoad(s *Server, ctx context.Context, d time.Duration) (stop func()) {
	old := loadReport
	loadReport = d
	stopReport := s.reportLoad(ctx, make(chan struct{}))
	return func() { stopReport(); loadReport = old }
}

// StoreStats are the figures of s's queues' store.
func StoreStats(s *Server) urlstore.Stats { return s.q.st.Stats() }

// KeysOf lists s's keys for url of crawl in queue key, as "U" and
// "R@due", with "+index" for a value marked index-only.
func KeysOf(s *Server, crawl, key, url string) []string {
	var out []string
	_ = s.q.st.Read(func(r urlstore.Reader) error {
		for _, kind := range []byte{kindURL, kindReady} {
			_ = r.Scan(queuePrefix(kind, crawl, key), func(k, v []byte) bool {
				e, ok := scannedEntry(crawl, k, v)
				if !ok || e.URL != url {
					return true
				}
				name := string(kind)
				if kind == kindReady {
					name += "@" + strconv.FormatInt(int64(binary.BigEndian.Uint64(k[len(k)-len(url)-8:])), 10)
				}
				if e.indexOnly {
					name += "+index"
				}
				out = append(out, name)
				return true
			})
		}
		return nil
	})
	return out
}

// PutLegacyFresh stores url, never fetched, as versions before index-only
// records did: its record under its U key and a copy under its R key at
// due 0, neither marked index-only.
func PutLegacyFresh(ctx context.Context, s *Server, crawl, key, url string, created int64) error {
	return s.q.update(ctx, partOf(crawl, key), smallUpdate, func(u *updateTx) error {
		q, err := u.queue(crawl, key)
		if err != nil {
			return err
		}
		v := encodeEntry(&Entry{Crawl: crawl, Key: key, URL: url, Created: created})
		v[1] &^= flagIndexOnly
		u.b.Set(entryKey(crawl, key, url), v)
		u.b.Set(readyKey(crawl, key, 0, url), v)
		q.Queued++
		u.set(q)
		return nil
	})
}

// Compact runs one compaction of s's queues' store now.
func Compact(s *Server, ctx context.Context) (urlstore.Compaction, error) { return s.q.st.Compact(ctx) }

// NewerQueueState is a batch a newer build would write: crawl's queue
// key in a state of format version formatVersion+1, and its partition.
func NewerQueueState(crawl, key string) (int, *urlstore.Batch) {
	var b urlstore.Batch
	b.Set(queueKey(crawl, key), []byte{formatVersion + 1, 0})
	return partOf(crawl, key), &b
}

// FormatVersion is the format of serve's values, and StoreName its store.
const (
	FormatVersion = formatVersion
	StoreName     = storeName
)

// QueueStateBytes is the size of a queue's stored state (0: none).
func QueueStateBytes(s *Server, crawl, key string) int {
	v, _, _ := s.q.st.Get(queueKey(crawl, key))
	return len(v)
}

// Format2Queue is a batch a server of format 2 would write: crawl's queue
// key holding url, never fetched, and its partition.
func Format2Queue(crawl, key, url string) (int, *urlstore.Batch) {
	st := encodeQueue(&QueueState{Crawl: crawl, Key: key, Queued: 1})
	// Format 2's state: format 3's but its version and without a turn
	// (the byte before the lease count, 0 here).
	v2 := append([]byte{formatV2}, st[1:len(st)-2]...)
	v2 = append(v2, 0)
	e := encodeEntry(&Entry{Created: 1})
	e[0] = formatV2
	var b urlstore.Batch
	b.Set(queueKey(crawl, key), v2)
	b.Set(readyKey(crawl, key, 0, url), e)
	return partOf(crawl, key), &b
}
