package captures

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/warc"
)

// Shards is the number of hashes a crawl's captures are spread over, so a
// Redis Cluster spreads one crawl's captures over its masters.
const Shards = 64

// Redis keeps captures in Redis: the last capture of a URL in the hash
// <prefix>:captures:<crawl>:<n> (n = FNV-1a of the URL mod Shards), field
// the URL; the first capture of a digest in <prefix>:digests:<crawl>:<n>,
// set only if absent.
type Redis struct {
	Client redis.UniversalClient
	Prefix string // "sieve" if empty
}

func (r Redis) prefix() string {
	if r.Prefix == "" {
		return "sieve"
	}
	return r.Prefix
}

func shard(s string) string {
	h := fnv.New32a()
	h.Write([]byte(s))
	return strconv.Itoa(int(h.Sum32() % Shards))
}

func (r Redis) lastKey(crawl, url string) string {
	return r.prefix() + ":captures:" + crawl + ":" + shard(url)
}

func (r Redis) digestKey(crawl, digest string) string {
	return r.prefix() + ":digests:" + crawl + ":" + shard(digest)
}

func (r Redis) get(ctx context.Context, key, field string) (warc.Capture, bool, error) {
	var c warc.Capture
	data, err := r.Client.HGet(ctx, key, field).Bytes()
	if errors.Is(err, redis.Nil) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("captures: %s: %w", key, err)
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, false, fmt.Errorf("captures: %s %s: %w", key, field, err)
	}
	return c, true, nil
}

// Last returns the last capture of url in crawl.
func (r Redis) Last(ctx context.Context, crawl, url string) (warc.Capture, bool, error) {
	return r.get(ctx, r.lastKey(crawl, url), url)
}

// ByDigest returns the first capture of a payload in crawl.
func (r Redis) ByDigest(ctx context.Context, crawl, digest string) (warc.Capture, bool, error) {
	return r.get(ctx, r.digestKey(crawl, digest), digest)
}

// Put records c as url's last capture and, if the digest has none, as
// its first.
func (r Redis) Put(ctx context.Context, crawl, url string, c warc.Capture) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := r.Client.HSet(ctx, r.lastKey(crawl, url), url, data).Err(); err != nil {
		return fmt.Errorf("captures: %w", err)
	}
	if c.Digest != "" {
		if err := r.Client.HSetNX(ctx, r.digestKey(crawl, c.Digest), c.Digest, data).Err(); err != nil {
			return fmt.Errorf("captures: %w", err)
		}
	}
	return nil
}

// Delete removes a crawl's captures, returning how many keys it removed.
func (r Redis) Delete(ctx context.Context, crawl string) (int64, error) {
	var n int64
	for i := range Shards {
		keys := []string{r.prefix() + ":captures:" + crawl + ":" + strconv.Itoa(i), r.prefix() + ":digests:" + crawl + ":" + strconv.Itoa(i)}
		for _, k := range keys { // one key at a time: a cluster holds them on different masters
			d, err := r.Client.Del(ctx, k).Result()
			if err != nil {
				return n, fmt.Errorf("captures: delete %s: %w", k, err)
			}
			n += d
		}
	}
	return n, nil
}

// BytesPerURL is what one URL's capture costs in Redis: its last capture
// and, the payloads of a crawl being mostly distinct, its digest's first,
// each a ~300-byte JSON value in a hash field (TestRedisBytesPerURL
// measures it).
const BytesPerURL = 1000
