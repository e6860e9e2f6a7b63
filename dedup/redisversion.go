package dedup

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// MinRedisVersion is the oldest Redis server the Redis filters work with:
// their read path is BITFIELD_RO, which Redis 6.0 introduced; an older
// server answers every lookup with "unknown command", which a worker would
// retry forever. Valkey reports a compatible redis_version and passes.
const MinRedisVersion = "6.0.0"

// ErrRedisTooOld is returned (inside a *RedisVersionError) when a Redis
// server is older than MinRedisVersion.
var ErrRedisTooOld = errors.New("dedup: redis server too old")

// RedisVersionError names a server older than MinRedisVersion.
type RedisVersionError struct {
	// Addr is the server's address, Version what it reports.
	Addr, Version string
}

func (e *RedisVersionError) Error() string {
	return fmt.Sprintf("dedup: redis server %s is version %s; Sieve's filters need %s or newer (BITFIELD_RO)", e.Addr, e.Version, MinRedisVersion)
}

// Unwrap returns ErrRedisTooOld.
func (e *RedisVersionError) Unwrap() error { return ErrRedisTooOld }

// ErrRedisAuth is returned (inside a *RedisAuthError) when a Redis server
// refuses the client's credentials: WRONGPASS (an unknown user, a wrong
// password, a disabled user) or NOAUTH (a password is needed and none was
// given).
var ErrRedisAuth = errors.New("dedup: redis refused the credentials")

// RedisAuthError names a server that refused the client's credentials and
// says what it answered.
type RedisAuthError struct {
	// Addr is the server's address (a cluster's seed addresses).
	Addr string
	// Err is the server's answer.
	Err error
}

func (e *RedisAuthError) Error() string {
	return fmt.Sprintf("dedup: redis %s refused the credentials (redis.password, or the user and password of redis.url): %v", e.Addr, e.Err)
}

// Unwrap returns ErrRedisAuth and the server's answer.
func (e *RedisAuthError) Unwrap() []error { return []error{ErrRedisAuth, e.Err} }

// authRefused reports whether err is a server's refusal of the client's
// credentials, by its error code.
func authRefused(err error) bool {
	return redis.HasErrorPrefix(err, "WRONGPASS") || redis.HasErrorPrefix(err, "NOAUTH")
}

// checkedRedis holds the clients whose servers CheckRedis accepted: a
// process opens many filters (one per crawl, one per window generation) on
// one client, and asks the server once.
var checkedRedis sync.Map // redis.UniversalClient → struct{}

// CheckRedis refuses, with a *RedisAuthError, a server that refuses the
// client's credentials, and with a *RedisVersionError a server (every master
// of a cluster) whose INFO reports a version older than MinRedisVersion. A
// server that accepts the client but refuses INFO is not refused. The Redis filters call it when
// they open; a client whose servers passed is not asked again.
func CheckRedis(ctx context.Context, c redis.UniversalClient) error {
	if _, ok := checkedRedis.Load(c); ok {
		return nil
	}
	if err := checkRedis(ctx, c); err != nil {
		return err
	}
	checkedRedis.Store(c, struct{}{})
	return nil
}

func checkRedis(ctx context.Context, c redis.UniversalClient) error {
	check := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "server").Result()
		if authRefused(err) {
			return &RedisAuthError{Addr: c.Options().Addr, Err: err}
		}
		var rerr redis.Error
		if errors.As(err, &rerr) {
			return nil // INFO refused (a managed service may rename it): the server's own errors will tell
		}
		if err != nil {
			return fmt.Errorf("dedup: redis %s: read its version: %w", c.Options().Addr, err)
		}
		v := infoField(info, "redis_version")
		if v != "" && !versionAtLeast(v, MinRedisVersion) {
			return &RedisVersionError{Addr: c.Options().Addr, Version: v}
		}
		return nil
	}
	switch c := c.(type) {
	case *redis.ClusterClient:
		err := c.ForEachMaster(ctx, check)
		if authRefused(err) && !errors.Is(err, ErrRedisAuth) { // refused while reading the slots
			return &RedisAuthError{Addr: strings.Join(c.Options().Addrs, ","), Err: err}
		}
		return err
	case *redis.Client:
		return check(ctx, c)
	}
	return nil // another client (a ring, a failover client): not checked
}

// infoField returns field's value in an INFO reply, or "".
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// versionAtLeast reports whether the dotted version v is min or newer; an
// unreadable v is not.
func versionAtLeast(v, min string) bool {
	parse := func(s string) ([3]int, bool) {
		var out [3]int
		parts := strings.SplitN(s, ".", 3)
		for i, p := range parts {
			// "7.2.4-rc1" and the like: the leading digits count.
			end := strings.IndexFunc(p, func(r rune) bool { return r < '0' || r > '9' })
			if end >= 0 {
				p = p[:end]
			}
			n, err := strconv.Atoi(p)
			if err != nil {
				return out, false
			}
			out[i] = n
		}
		return out, len(parts) >= 2
	}
	a, ok := parse(v)
	b, _ := parse(min)
	if !ok {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return true
}
