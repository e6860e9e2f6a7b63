package captures

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/urlstore"
	"github.com/sievecrawl/sieve/warc"
)

// Moved counts what a migration did.
type Moved struct {
	Captures int // URLs' last captures written to the log
	Digests  int // digests' first captures
	// Skipped are bucket entries whose URL cannot be known: the bucket
	// keys a URL by its hash, so a last capture whose payload is another
	// URL's names no URL. Such a page is fetched in full at its next
	// visit; nothing is lost.
	Skipped int
}

// migrateBatch is how many captures go in one log entry.
const migrateBatch = 256

// migrator groups captures by partition into log entries.
type migrator struct {
	log     urlstore.Log
	batches map[int]*urlstore.Batch
	moved   Moved
}

func (m *migrator) add(ctx context.Context, k, v []byte, ifAbsent bool) error {
	p := keyPart(k)
	b := m.batches[p]
	if b == nil {
		b = &urlstore.Batch{}
		m.batches[p] = b
	}
	if ifAbsent {
		b.SetIfAbsent(k, v)
	} else {
		b.Set(k, v)
	}
	if b.Len() >= migrateBatch {
		return m.flush(ctx, p)
	}
	return nil
}

func (m *migrator) flush(ctx context.Context, p int) error {
	b := m.batches[p]
	if b == nil || b.Len() == 0 {
		return nil
	}
	if err := urlstore.Append(ctx, m.log, p, b); err != nil {
		return fmt.Errorf("captures: migrate: %w", err)
	}
	b.Reset()
	return nil
}

func (m *migrator) flushAll(ctx context.Context) error {
	for p := range m.batches {
		if err := m.flush(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// MigrateRedis copies every crawl's captures from Redis (the layout of
// Redis: <prefix>:captures:<crawl>:<n> and <prefix>:digests:<crawl>:<n>)
// to the disk store's log, in entries of up to 256 captures. A URL's
// capture is a Set, a digest's a SetIfAbsent: run again, or beside
// crawlers already writing to the log, it never replaces a digest's first
// capture. Redis is left as it was; delete its keys once crawlers run on
// disk.
func MigrateRedis(ctx context.Context, r Redis, log urlstore.Log) (Moved, error) {
	m := &migrator{log: log, batches: map[int]*urlstore.Batch{}}
	for _, kind := range []string{"captures", "digests"} {
		pattern := r.prefix() + ":" + kind + ":*"
		keys, err := scanKeys(ctx, r.Client, pattern)
		if err != nil {
			return m.moved, err
		}
		for _, key := range keys {
			rest := strings.TrimPrefix(key, r.prefix()+":"+kind+":")
			i := strings.LastIndexByte(rest, ':')
			if i <= 0 {
				continue
			}
			crawl := rest[:i]
			if _, err := strconv.Atoi(rest[i+1:]); err != nil {
				continue
			}
			it := r.Client.HScan(ctx, key, 0, "", 1000).Iterator()
			for it.Next(ctx) {
				field := it.Val()
				if !it.Next(ctx) {
					break
				}
				var c warc.Capture
				if err := json.Unmarshal([]byte(it.Val()), &c); err != nil {
					return m.moved, fmt.Errorf("captures: migrate %s %s: %w", key, field, err)
				}
				if kind == "captures" {
					err = m.add(ctx, urlKey(crawl, field), encodeCapture(c, field), false)
					m.moved.Captures++
				} else {
					err = m.add(ctx, digestKey(crawl, field), encodeCapture(c, ""), true)
					m.moved.Digests++
				}
				if err != nil {
					return m.moved, err
				}
			}
			if err := it.Err(); err != nil {
				return m.moved, fmt.Errorf("captures: migrate %s: %w", key, err)
			}
		}
	}
	return m.moved, m.flushAll(ctx)
}

// scanKeys lists the keys matching pattern, on every master of a cluster.
func scanKeys(ctx context.Context, c redis.UniversalClient, pattern string) ([]string, error) {
	var keys []string
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		return it.Err()
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			mu.Lock() // ForEachMaster runs them at once; keys is shared
			defer mu.Unlock()
			return scan(ctx, n)
		})
	} else {
		err = scan(ctx, c)
	}
	if err != nil {
		return nil, fmt.Errorf("captures: migrate: scan %s: %w", pattern, err)
	}
	return keys, nil
}

// MigrateKV copies every crawl's captures from the embedded mode's bucket
// (KV) to the disk store's log, as MigrateRedis does. The bucket keys a
// URL by its hash, so a last capture is copied when its payload URL hashes
// to its key (the page's own payload); the others are counted as
// Skipped.
func MigrateKV(ctx context.Context, k *KV, log urlstore.Log) (Moved, error) {
	m := &migrator{log: log, batches: map[int]*urlstore.Batch{}}
	lister, err := k.kv.ListKeys(ctx)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return m.moved, nil
		}
		return m.moved, fmt.Errorf("captures: migrate: %w", err)
	}
	for key := range lister.Keys() {
		parts := strings.Split(key, ".")
		if len(parts) != 3 {
			continue
		}
		kind, crawl := parts[0], parts[1]
		c, ok, err := k.get(ctx, key)
		if err != nil {
			return m.moved, err
		}
		if !ok {
			continue
		}
		switch {
		case kind == "u" && kvKey("u", crawl, c.PayloadURL) == key:
			err = m.add(ctx, urlKey(crawl, c.PayloadURL), encodeCapture(c, c.PayloadURL), false)
			m.moved.Captures++
		case kind == "u":
			m.moved.Skipped++
		case kind == "d" && kvKey("d", crawl, c.Digest) == key:
			err = m.add(ctx, digestKey(crawl, c.Digest), encodeCapture(c, ""), true)
			m.moved.Digests++
		}
		if err != nil {
			return m.moved, err
		}
	}
	return m.moved, m.flushAll(ctx)
}
