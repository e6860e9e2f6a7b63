package urlfrontier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
)

// Earlier versions kept the queues in the bucket <PREFIX>_UF_QUEUES (JSON,
// "v":1): a key per URL, <crawl>.<queue hash>.<URL hash>, and per queue,
// <crawl>.<queue hash> (its state, with its leases by URL hash), and a
// crawl's default delay under <crawl>._default. A server that finds the
// bucket at start moves it into the store, then deletes it (migrateBucket):
// the upgrade is starting the new version. Servers starting together may
// each move it: a URL already in the store is skipped, a queue's settings
// are set (not added), so the result is the same.

// v1Entry is a URL's value in the bucket.
type v1Entry struct {
	V       int                 `json:"v"`
	Crawl   string              `json:"crawl"`
	URL     string              `json:"url"`
	Key     string              `json:"key"`
	Meta    map[string][]string `json:"meta"`
	Created int64               `json:"created"`
	Due     int64               `json:"due"`
	Known   bool                `json:"known"`
}

// v1Queue is a queue's (or a crawl's default) value in the bucket.
type v1Queue struct {
	V        int              `json:"v"`
	Crawl    string           `json:"crawl"`
	Key      string           `json:"key"`
	Delay    int64            `json:"delay"`
	HasDelay bool             `json:"has_delay"`
	Blocked  int64            `json:"blocked"`
	Limit    uint32           `json:"limit"`
	Next     int64            `json:"next"`
	Fetched  uint64           `json:"fetched"`
	Leases   map[string]int64 `json:"leases"`
}

// migrateBatch is how many URLs of a partition one entry of the move
// carries.
const migrateBatch = 500

// migrateBucket moves the bucket of earlier versions into the store, if
// it exists, and deletes it. It reads the queues first (one value each,
// "<crawl>.<hash>"), then the URLs ("<crawl>.<hash>.<hash>"), so that a
// lease running in the bucket stays a lease. It logs its progress; an
// error leaves the bucket, and the next start moves what is left.
func (s *Server) migrateBucket(ctx context.Context) error {
	name := s.b.topo.URLFrontierQueuesBucket()
	kv, err := s.o.JetStream.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("urlfrontier: bucket %s: %w", name, err)
	}
	start := time.Now()
	s.o.Logger.Info("urlfrontier: moving the queues of an earlier version into the store", "bucket", name)
	queues := map[string]*v1Queue{} // by key
	defaults := map[string]int64{}
	err = watchAll(ctx, kv, "*.*", func(key string, v []byte) error {
		var q v1Queue
		if json.Unmarshal(v, &q) != nil || q.V != 1 || !frontier.ValidCrawl(q.Crawl) || len(q.Key) > frontier.MaxKeyBytes {
			return nil // unreadable then too: nothing handed it out
		}
		if strings.HasSuffix(key, "._default") {
			defaults[q.Crawl] = q.Delay
		} else {
			queues[key] = &q
		}
		return nil
	})
	if err != nil {
		return err
	}
	pending := map[int][]v1Entry{}
	leases := map[int][]int64{}
	moved := 0
	flush := func(p int) error {
		es, ls := pending[p], leases[p]
		if len(es) == 0 {
			return nil
		}
		err := s.q.update(ctx, p, maxEntryBytes, func(tx *updateTx) error {
			for i, e := range es {
				had, err := tx.entry(e.Crawl, e.Key, e.URL)
				if err != nil {
					return err
				}
				if had != nil {
					continue
				}
				q, err := tx.queue(e.Crawl, e.Key)
				if err != nil {
					return err
				}
				now := ms(s.o.Now())
				until := int64(0)
				if ls[i] > now {
					until = ls[i]
					q.lease(until, 1, now)
				}
				tx.putEntry(nil, &Entry{Crawl: e.Crawl, URL: e.URL, Key: e.Key, Meta: e.Meta, Created: e.Created, Due: e.Due, Known: e.Known, Until: until})
				q.Queued++
				tx.set(q)
			}
			return nil
		})
		if err != nil {
			return err
		}
		moved += len(es)
		pending[p], leases[p] = es[:0], ls[:0]
		return nil
	}
	lastReport := time.Now()
	err = watchAll(ctx, kv, "*.*.*", func(key string, v []byte) error {
		var e v1Entry
		if json.Unmarshal(v, &e) != nil || e.V != 1 || !frontier.ValidCrawl(e.Crawl) || e.URL == "" || len(e.Key) > frontier.MaxKeyBytes {
			return nil
		}
		var lease int64
		i := strings.LastIndexByte(key, '.')
		if q := queues[key[:i]]; q != nil {
			lease = q.Leases[key[i+1:]]
		}
		p := partOf(e.Crawl, e.Key)
		pending[p] = append(pending[p], e)
		leases[p] = append(leases[p], lease)
		if time.Since(lastReport) > 5*time.Second {
			lastReport = time.Now()
			s.o.Logger.Info("urlfrontier: moving the queues", "urls", moved, "elapsed", time.Since(start).Round(time.Second))
		}
		if len(pending[p]) >= migrateBatch {
			return flush(p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for p := range pending {
		if err := flush(p); err != nil {
			return err
		}
	}
	for _, q := range queues {
		err := s.updateQueue(ctx, q.Crawl, q.Key, func(st *QueueState) {
			st.Delay, st.HasDelay, st.Blocked, st.Limit = q.Delay, q.HasDelay, q.Blocked, q.Limit
			// The bucket kept no completed URL, only a count of them:
			// the store counts the completed URLs it holds, none here.
			st.Next, st.Fetched = q.Next, q.Fetched
		})
		if err != nil {
			return err
		}
	}
	for crawl, d := range defaults {
		if err := s.updateQueue(ctx, crawl, "", func(st *QueueState) { st.Delay = d }); err != nil {
			return err
		}
	}
	if err := s.o.JetStream.DeleteKeyValue(ctx, name); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("urlfrontier: delete bucket %s: %w", name, err)
	}
	s.o.Logger.Info("urlfrontier: moved the queues of an earlier version into the store", "bucket", name,
		"urls", moved, "queues", len(queues), "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

// watchAll calls fn with every value of kv's keys matching filter, then
// returns.
func watchAll(ctx context.Context, kv jetstream.KeyValue, filter string, fn func(key string, v []byte) error) error {
	w, err := kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("urlfrontier: read bucket %s: %w", kv.Bucket(), err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("urlfrontier: read bucket %s: watch ended", kv.Bucket())
			}
			if e == nil {
				return nil
			}
			if err := fn(e.Key(), e.Value()); err != nil {
				return err
			}
		}
	}
}
