package captures

import (
	"context"
	"crypto/sha1"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/warc"
)

// KV keeps captures in a JetStream key-value bucket (the embedded mode's,
// stored in its data directory): key u.<crawl>.<sha1 of the URL> for a
// URL's last capture, d.<crawl>.<sha1 of the digest> for a digest's first
// (created only if absent). Keys are digests because URLs hold characters
// keys may not.
type KV struct{ kv jetstream.KeyValue }

// OpenKV opens (creating if needed) the bucket of topo.
func OpenKV(ctx context.Context, js jetstream.JetStream, topo frontier.Topology) (*KV, error) {
	kv, err := frontier.Provision(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      topo.CapturesBucket(),
			Description: "Sieve: each crawl's last capture of every URL, first of every payload (for revisits)",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    topo.Replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("captures: bucket %s: %w", topo.CapturesBucket(), err)
	}
	return &KV{kv: kv}, nil
}

var enc = base32.StdEncoding.WithPadding(base32.NoPadding)

func kvKey(kind, crawl, s string) string {
	sum := sha1.Sum([]byte(s))
	return kind + "." + crawl + "." + enc.EncodeToString(sum[:])
}

func (k *KV) get(ctx context.Context, key string) (warc.Capture, bool, error) {
	var c warc.Capture
	e, err := k.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("captures: %w", err)
	}
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		return c, false, fmt.Errorf("captures: %s: %w", key, err)
	}
	return c, true, nil
}

// Last returns the last capture of url in crawl.
func (k *KV) Last(ctx context.Context, crawl, url string) (warc.Capture, bool, error) {
	return k.get(ctx, kvKey("u", crawl, url))
}

// ByDigest returns the first capture of a payload in crawl.
func (k *KV) ByDigest(ctx context.Context, crawl, digest string) (warc.Capture, bool, error) {
	return k.get(ctx, kvKey("d", crawl, digest))
}

// Put records c as url's last capture and, if the digest has none, as
// its first.
func (k *KV) Put(ctx context.Context, crawl, url string, c warc.Capture) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if _, err := k.kv.Put(ctx, kvKey("u", crawl, url), data); err != nil {
		return fmt.Errorf("captures: %w", err)
	}
	if c.Digest != "" {
		if _, err := k.kv.Create(ctx, kvKey("d", crawl, c.Digest), data); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("captures: %w", err)
		}
	}
	return nil
}

// Delete removes a crawl's captures, returning how many it removed.
func (k *KV) Delete(ctx context.Context, crawl string) (int64, error) {
	var n int64
	for _, kind := range []string{"u", "d"} {
		lister, err := k.kv.ListKeysFiltered(ctx, kind+"."+crawl+".*")
		if err != nil {
			return n, fmt.Errorf("captures: %w", err)
		}
		for key := range lister.Keys() {
			if !strings.HasPrefix(key, kind+"."+crawl+".") {
				continue
			}
			if err := k.kv.Purge(ctx, key); err != nil {
				return n, fmt.Errorf("captures: %w", err)
			}
			n++
		}
	}
	return n, nil
}
