package dedup

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// redisScript is a Lua script that a filter runs by its SHA1 digest
// (EVALSHA), many calls in one pipeline. A server that does not know the
// script — after a restart, a failover to a replica that never saw it, or
// SCRIPT FLUSH — answers NOSCRIPT without running anything; those calls are
// sent again, once, as EVAL with the full source, which both runs the
// script and caches it for the next EVALSHA. So a lost script cache costs
// one extra round trip and is never seen by the caller.
//
// A redisScript is immutable and safe for concurrent use.
type redisScript struct {
	src string
	sha string
}

func newRedisScript(src string) *redisScript {
	return &redisScript{src: src, sha: redis.NewScript(src).Hash()}
}

// redisCall is one run of a script: its keys, which must share one hash slot
// on a cluster, and its arguments.
type redisCall struct {
	keys []string
	args []any
}

// run runs every call in one pipeline (on a cluster, go-redis sends one
// pipeline per master, in parallel) and returns the replies in call order.
//
// An error other than NOSCRIPT fails the whole run and is returned wrapped.
// The outcome is then unknown: calls that reached Redis before the failure
// may have run, so a write script must be safe to run again (a filter's
// test-and-add is: it only sets bits).
func (s *redisScript) run(ctx context.Context, c redis.UniversalClient, calls []redisCall) ([]any, error) {
	cmds := make([]*redis.Cmd, len(calls))
	pipe := c.Pipeline()
	for i, call := range calls {
		cmds[i] = pipe.EvalSha(ctx, s.sha, call.keys, call.args...)
	}
	if _, err := pipe.Exec(ctx); err != nil && !onlyNoScript(cmds) {
		return nil, fmt.Errorf("run script: %w", firstErr(cmds, err))
	}
	var retry []int
	for i, cmd := range cmds {
		if cmd.Err() != nil {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		pipe := c.Pipeline()
		for _, i := range retry {
			cmds[i] = pipe.Eval(ctx, s.src, calls[i].keys, calls[i].args...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("run script after NOSCRIPT: %w", firstErr(cmds, err))
		}
	}
	out := make([]any, len(cmds))
	for i, cmd := range cmds {
		out[i] = cmd.Val()
	}
	return out, nil
}

// onlyNoScript reports whether every failed command failed with NOSCRIPT.
func onlyNoScript(cmds []*redis.Cmd) bool {
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return false
		}
	}
	return true
}

// firstErr returns the first command error that is not NOSCRIPT, or fallback.
func firstErr(cmds []*redis.Cmd, fallback error) error {
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return err
		}
	}
	return fallback
}
