package frontier

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/dust"
)

// A crawl's learned rewrite rules (package dust) are kept in the key-value
// bucket <PREFIX>_RULES, one key per crawl and host, "<crawl>.<host in
// unpadded base64url>", whose value is the host's dust.HostRules. They are
// the crawl's, like its record: deleting the crawl purges them. One key
// per host, not one value per crawl, so a crawl of many hosts never meets
// the store's value limit, and a change rewrites one host's record.
// Crawlers learn and write them (one crawler owns a host at a time: its
// partition's lease); dedup workers follow the bucket and rewrite every
// discovered URL by its host's active rules before the filter.

// RulesBucket is the bucket of the crawls' learned rules.
func (t Topology) RulesBucket() string { return t.upperPrefix() + "_RULES" }

// RulesKey is the key of a crawl's rules for host.
func RulesKey(crawl, host string) string {
	return crawl + "." + base64.RawURLEncoding.EncodeToString([]byte(host))
}

// Rules is the bucket of learned rules, with the rules of every crawl in
// memory once Follow runs. It is safe for concurrent use.
type Rules struct {
	kv jetstream.KeyValue

	mu    sync.RWMutex
	recs  map[string]map[string]dust.HostRules // crawl → host → record
	sets  map[string]*dust.Set
	ready chan struct{}
	once  sync.Once
	stop  func()
	done  chan struct{}
}

// OpenRules opens the rules bucket, creating it if missing.
func OpenRules(ctx context.Context, js jetstream.JetStream, topo Topology) (*Rules, error) {
	topo = topo.WithDefaults()
	kv, err := Provision(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      topo.RulesBucket(),
			Description: "Sieve: each crawl's learned URL rewrite rules, per host",
			History:     1,
			Storage:     topo.Storage,
			Replicas:    topo.Replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("frontier: rules bucket: %w", err)
	}
	return &Rules{kv: kv, recs: map[string]map[string]dust.HostRules{}, sets: map[string]*dust.Set{}, ready: make(chan struct{})}, nil
}

// Put stores a host's record of a crawl.
func (r *Rules) Put(ctx context.Context, crawl string, h dust.HostRules) error {
	b, err := h.Encode()
	if err != nil {
		return fmt.Errorf("frontier: rules of %s %s: %w", crawl, h.Host, err)
	}
	if _, err := r.kv.Put(ctx, RulesKey(crawl, h.Host), b); err != nil {
		return fmt.Errorf("frontier: store rules of %s %s: %w", crawl, h.Host, err)
	}
	r.apply(crawl, h, false)
	return nil
}

// List reads every host's record of a crawl from the bucket. Records of a
// newer format are an error (ErrNewerRecord): rules this Sieve cannot read
// are not silently dropped.
func (r *Rules) List(ctx context.Context, crawl string) ([]dust.HostRules, error) {
	lister, err := r.kv.ListKeysFiltered(ctx, crawl+".*")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("frontier: list rules of %s: %w", crawl, err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	var out []dust.HostRules
	for _, k := range keys {
		e, err := r.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("frontier: read rules %s: %w", k, err)
		}
		h, err := dust.DecodeHostRules(e.Value())
		if err != nil {
			return nil, fmt.Errorf("frontier: rules %s: %w", k, err)
		}
		out = append(out, h)
	}
	return out, nil
}

// Delete removes every record of a crawl.
func (r *Rules) Delete(ctx context.Context, crawl string) error {
	hosts, err := r.List(ctx, crawl)
	if err != nil && !errors.Is(err, dust.ErrNewerRecord) {
		return err
	}
	for _, h := range hosts {
		if err := r.kv.Purge(ctx, RulesKey(crawl, h.Host)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("frontier: delete rules of %s: %w", crawl, err)
		}
	}
	r.mu.Lock()
	delete(r.recs, crawl)
	delete(r.sets, crawl)
	r.mu.Unlock()
	return nil
}

// Follow keeps the rules of every crawl in memory, from the bucket's
// watch, until ctx ends or Close; Ready is closed once what the bucket
// held at the start is read. A record it cannot read is logged by the
// caller's report and skipped: it rewrites nothing, which admits more
// spellings, never fewer.
func (r *Rules) Follow(ctx context.Context, report func(key string, err error)) error {
	w, err := r.kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("frontier: watch rules: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	r.stop = cancel
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					r.once.Do(func() { close(r.ready) })
					continue
				}
				crawl, _, found := strings.Cut(e.Key(), ".")
				if !found {
					continue
				}
				if e.Operation() != jetstream.KeyValuePut {
					r.remove(crawl, e.Key())
					continue
				}
				h, err := dust.DecodeHostRules(e.Value())
				if err != nil {
					if report != nil {
						report(e.Key(), err)
					}
					continue
				}
				r.apply(crawl, h, true)
			}
		}
	}()
	return nil
}

// Ready is closed once Follow has read what the bucket held when it
// started.
func (r *Rules) Ready() <-chan struct{} { return r.ready }

func (r *Rules) apply(crawl string, h dust.HostRules, replace bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hosts := r.recs[crawl]
	if hosts == nil {
		hosts = map[string]dust.HostRules{}
		r.recs[crawl] = hosts
	}
	if old, ok := hosts[h.Host]; ok && !replace && old.Revision > h.Revision {
		return
	}
	hosts[h.Host] = h
	r.compile(crawl)
}

func (r *Rules) remove(crawl, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for host := range r.recs[crawl] {
		if RulesKey(crawl, host) == key {
			delete(r.recs[crawl], host)
		}
	}
	r.compile(crawl)
}

func (r *Rules) compile(crawl string) {
	recs := make([]dust.HostRules, 0, len(r.recs[crawl]))
	for _, h := range r.recs[crawl] {
		recs = append(recs, h)
	}
	r.sets[crawl] = dust.NewSet(recs)
}

// Set returns a crawl's active rules (nil when it has none), as Follow
// last read them.
func (r *Rules) Set(crawl string) *dust.Set {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.sets[crawl]
}

// Close stops Follow and waits for it.
func (r *Rules) Close() error {
	if r.stop != nil {
		r.stop()
		<-r.done
	}
	return nil
}
