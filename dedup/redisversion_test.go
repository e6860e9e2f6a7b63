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

// TestCheckRedisCredentials checks a server with a password and an ACL
// user: credentials it refuses are a *RedisAuthError naming the server and
// its answer (WRONGPASS, NOAUTH), found when the filter opens rather than at
// the first batch, where CheckRedis took the refusal of INFO for a managed
// service's renamed command and passed (issue 39, item 10).
func TestCheckRedisCredentials(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{Args: []string{
		"--user", "alice", "on", ">alice-pw", "~*", "&*", "+@all"}, Password: "right"})
	for _, tt := range []struct {
		name, user, password string
		want                 string // the server's error code; "" accepted
	}{
		{name: "default user, right password", password: "right"},
		{name: "ACL user, right password", user: "alice", password: "alice-pw"},
		{name: "default user, wrong password", password: "wrong", want: "WRONGPASS"},
		{name: "ACL user, wrong password", user: "alice", password: "wrong", want: "WRONGPASS"},
		{name: "unknown user", user: "bob", password: "alice-pw", want: "WRONGPASS"},
		{name: "no password", want: "NOAUTH"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: tt.user, Password: tt.password, DialerRetries: 1})
			defer c.Close()
			err := CheckRedis(context.Background(), c)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckRedis = %v, want nil", err)
				}
				return
			}
			var aerr *RedisAuthError
			if !errors.As(err, &aerr) || !errors.Is(err, ErrRedisAuth) {
				t.Fatalf("CheckRedis = %v, want a *RedisAuthError", err)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want) || !strings.Contains(msg, srv.Addr) || strings.Contains(msg, tt.password) && tt.password != "" {
				t.Errorf("error %q: want it to name %s and the server, and never the password", msg, tt.want)
			}
		})
	}
}
