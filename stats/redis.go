package stats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis keeps a deployment's statistics in Redis, shared by all workers.
// The keys share the hash tag {name}, so one Add is one MULTI/EXEC
// transaction on one node, also in a Redis Cluster:
//
//	{name}:stats        HASH  pages, links, admitted, duplicates, republished,
//	                          imported, imported_seen, rejected:<reason>,
//	                          poison:<reason>, crawl:<id>:<links|admitted|
//	                          duplicates|rejected>, since_ms, updated_ms
//	{name}:hosts        ZSET  host → admitted URLs
//	{name}:hosts:dup    ZSET  host → duplicate links
//	{name}:rate:<t/10s> HASH  links, admitted in one 10-second bucket
//	                          (expires after 15 minutes)
//
// The key layout is a storage format, pinned by a test. Redis is safe for
// concurrent use; it does not own the client.
type Redis struct {
	c    redis.UniversalClient
	name string
	now  func() time.Time
}

// rateTTL is how long a rate bucket is kept.
const rateTTL = 15 * time.Minute

// NewRedis returns the statistics named name (e.g. "sieve") in Redis.
func NewRedis(c redis.UniversalClient, name string) *Redis {
	return &Redis{c: c, name: name, now: time.Now}
}

func (r *Redis) key(suffix string) string { return "{" + r.name + "}:" + suffix }

func (r *Redis) rateKey(b int64) string { return r.key("rate:" + strconv.FormatInt(b, 10)) }

// Add adds d in one transaction (one round trip).
func (r *Redis) Add(ctx context.Context, d Delta) error {
	if d.IsZero() {
		return nil
	}
	now := r.now()
	ms := now.UnixMilli()
	stats, hosts := r.key("stats"), r.key("hosts")
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, f := range []struct {
			name string
			n    int64
		}{
			{"pages", d.Pages}, {"links", d.Links}, {"admitted", d.Admitted}, {"duplicates", d.Duplicates},
			{"republished", d.Republished}, {"imported", d.Imported}, {"imported_seen", d.ImportedSeen},
		} {
			if f.n != 0 {
				p.HIncrBy(ctx, stats, f.name, f.n)
			}
		}
		for reason, n := range d.Rejected {
			p.HIncrBy(ctx, stats, "rejected:"+reason, n)
		}
		for reason, n := range d.Poison {
			p.HIncrBy(ctx, stats, "poison:"+reason, n)
		}
		for id, c := range d.Crawls {
			for _, f := range []struct {
				name string
				n    int64
			}{{"links", c.Links}, {"admitted", c.Admitted}, {"duplicates", c.Duplicates}, {"rejected", c.Rejected}} {
				if f.n != 0 {
					p.HIncrBy(ctx, stats, "crawl:"+id+":"+f.name, f.n)
				}
			}
		}
		p.HSetNX(ctx, stats, "since_ms", ms)
		p.HSet(ctx, stats, "updated_ms", ms)
		for host, n := range d.Hosts {
			p.ZIncrBy(ctx, hosts, float64(n), host)
		}
		for host, n := range d.DuplicateHosts {
			p.ZIncrBy(ctx, r.key("hosts:dup"), float64(n), host)
		}
		if d.Links != 0 || d.Admitted != 0 {
			rk := r.rateKey(bucketOf(now))
			p.HIncrBy(ctx, rk, "links", d.Links)
			p.HIncrBy(ctx, rk, "admitted", d.Admitted)
			p.Expire(ctx, rk, rateTTL)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("stats: add: %w", err)
	}
	return nil
}

// Snapshot reads the statistics with the n hosts of most admitted URLs, in
// two round trips (the second for those hosts' duplicates).
func (r *Redis) Snapshot(ctx context.Context, n int) (Snapshot, error) {
	now := r.now()
	cur := bucketOf(now)
	var (
		all    *redis.MapStringStringCmd
		top    *redis.ZSliceCmd
		card   *redis.IntCmd
		recent = map[int64]*redis.SliceCmd{}
	)
	// Read-only commands on one slot: a pipeline, not a transaction.
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		all = p.HGetAll(ctx, r.key("stats"))
		if n > 0 {
			top = p.ZRevRangeWithScores(ctx, r.key("hosts"), 0, int64(n-1))
		}
		card = p.ZCard(ctx, r.key("hosts"))
		for b := cur - 300/bucketSeconds; b < cur; b++ {
			recent[b] = p.HMGet(ctx, r.rateKey(b), "links", "admitted")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Snapshot{}, fmt.Errorf("stats: snapshot: %w", err)
	}
	var s Snapshot
	for field, v := range all.Val() {
		x, _ := strconv.ParseInt(v, 10, 64)
		switch {
		case field == "pages":
			s.Totals.Pages = x
		case field == "links":
			s.Totals.Links = x
		case field == "admitted":
			s.Totals.Admitted = x
		case field == "duplicates":
			s.Totals.Duplicates = x
		case field == "republished":
			s.Totals.Republished = x
		case field == "imported":
			s.Totals.Imported = x
		case field == "imported_seen":
			s.Totals.ImportedSeen = x
		case field == "since_ms":
			s.Since = time.UnixMilli(x)
		case field == "updated_ms":
			s.Updated = time.UnixMilli(x)
		case strings.HasPrefix(field, "rejected:"):
			s.Totals.Rejected = inc(s.Totals.Rejected, strings.TrimPrefix(field, "rejected:"), x)
		case strings.HasPrefix(field, "poison:"):
			s.Totals.Poison = inc(s.Totals.Poison, strings.TrimPrefix(field, "poison:"), x)
		case strings.HasPrefix(field, "crawl:"):
			// crawl:<id>:<count>; ids hold no colon.
			rest := strings.TrimPrefix(field, "crawl:")
			if i := strings.LastIndexByte(rest, ':'); i > 0 {
				var c CrawlCounts
				switch rest[i+1:] {
				case "links":
					c.Links = x
				case "admitted":
					c.Admitted = x
				case "duplicates":
					c.Duplicates = x
				case "rejected":
					c.Rejected = x
				}
				s.Totals.CountCrawl(rest[:i], c)
			}
		}
	}
	if top != nil {
		for _, z := range top.Val() {
			s.TopHosts = append(s.TopHosts, HostCount{Host: fmt.Sprint(z.Member), Admitted: int64(z.Score)})
		}
	}
	if len(s.TopHosts) > 0 {
		// The top hosts' duplicates: a second round trip, once they are known.
		names := make([]string, len(s.TopHosts))
		for i, h := range s.TopHosts {
			names[i] = h.Host
		}
		dups, err := r.c.ZMScore(ctx, r.key("hosts:dup"), names...).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return Snapshot{}, fmt.Errorf("stats: snapshot: %w", err)
		}
		for i := range s.TopHosts {
			if i < len(dups) {
				s.TopHosts[i].Duplicates = int64(dups[i])
			}
		}
	}
	s.HostCount = card.Val()
	s.Rates = rates(now, s.Since, func(b int64) (int64, int64) {
		cmd, ok := recent[b]
		if !ok {
			return 0, 0
		}
		vals := cmd.Val()
		if len(vals) != 2 {
			return 0, 0
		}
		return toInt(vals[0]), toInt(vals[1])
	})
	return s, nil
}

func toInt(v any) int64 {
	s, _ := v.(string)
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// Reset deletes the statistics (not the filter).
func (r *Redis) Reset(ctx context.Context) error {
	keys := []string{r.key("stats"), r.key("hosts"), r.key("hosts:dup")}
	cur := bucketOf(r.now())
	for b := cur - int64(rateTTL/time.Second)/bucketSeconds; b <= cur; b++ {
		keys = append(keys, r.rateKey(b))
	}
	if err := r.c.Del(ctx, keys...).Err(); err != nil {
		return fmt.Errorf("stats: reset: %w", err)
	}
	return nil
}

// Close does nothing: the client belongs to the caller.
func (r *Redis) Close() error { return nil }
