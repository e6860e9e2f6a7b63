package dedup

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/redistest"
)

func TestVersionAtLeast(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want bool
	}{
		{"6.0.0", true},
		{"6.0.16", true},
		{"7.0.15", true},
		{"7.2.4-rc1", true},
		{"10.0", true},
		{"5.0.14", false},
		{"4.0.9", false},
		{"5.9.104", false},
		{"", false},
		{"x.y", false},
		{"6", false},
	} {
		if got := versionAtLeast(tt.v, MinRedisVersion); got != tt.want {
			t.Errorf("versionAtLeast(%q, %s) = %v, want %v", tt.v, MinRedisVersion, got, tt.want)
		}
	}
}

func TestInfoField(t *testing.T) {
	info := "# Server\r\nredis_version:5.0.14\r\nredis_git_sha1:00000000\r\n"
	if v := infoField(info, "redis_version"); v != "5.0.14" {
		t.Errorf("redis_version = %q", v)
	}
	if v := infoField(info, "redis_mode"); v != "" {
		t.Errorf("redis_mode = %q, want none", v)
	}
	err := error(&RedisVersionError{Addr: "10.0.0.1:6379", Version: "5.0.14"})
	if !errors.Is(err, ErrRedisTooOld) || !strings.Contains(err.Error(), "5.0.14") || !strings.Contains(err.Error(), MinRedisVersion) ||
		!strings.Contains(err.Error(), "10.0.0.1:6379") {
		t.Errorf("error %q: want ErrRedisTooOld naming the server, its version and the minimum", err)
	}
}

// TestCheckRedis checks real servers, single and cluster (Debian's 7.0
// here): they pass, and a server that cannot be reached is an error naming
// it. (No Redis older than 6.0 can be installed here; the refusal itself is
// TestVersionAtLeast and TestInfoField.)
func TestCheckRedis(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	if err := CheckRedis(ctx, srv.Client()); err != nil {
		t.Errorf("single server: %v", err)
	}
	cl := redistest.StartCluster(t, 3)
	if err := CheckRedis(ctx, cl.Client()); err != nil {
		t.Errorf("cluster: %v", err)
	}
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:9", DialerRetries: 1})
	defer down.Close()
	if err := CheckRedis(ctx, down); err == nil || !strings.Contains(err.Error(), "127.0.0.1:9") {
		t.Errorf("unreachable server: %v, want an error naming it", err)
	}
}
