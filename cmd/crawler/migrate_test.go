package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/captures"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/redistest"
	"github.com/sievecrawl/sieve/warc"
)

// TestMigrateCaptures: a deployment whose captures are in Redis (as
// before warc.captures disk) moves them with one command, and the
// captures command then finds them in the disk store; the source is
// left as it was.
func TestMigrateCaptures(t *testing.T) {
	ctx := t.Context()
	rs := redistest.Start(t, redistest.Options{})
	ns := natstest.Start(t, natstest.Options{})
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	c := warc.Capture{Date: at, Digest: "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ", PayloadURL: "https://example.com/a", PayloadDate: at,
		File: "old.warc.gz", Offset: 4242, Status: 200}
	old := captures.Redis{Client: rs.Client()}
	if err := old.Put(ctx, "default", c.PayloadURL, c); err != nil {
		t.Fatal(err)
	}
	servers := []string{"--nats-url", ns.URL(), "--redis-url", rs.URL()}
	code, out, errOut := runCLI(t, ctx, append(append([]string{"migrate-captures"}, servers...), "redis")...)
	if code != 0 || !strings.Contains(out, "copied 1 URLs' last captures and 1 digests'") {
		t.Fatalf("migrate-captures: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, ctx, append([]string{"captures", "--json"}, append(servers, c.PayloadURL)...)...)
	if code != 0 || !strings.Contains(out, `"f": "old.warc.gz"`) || !strings.Contains(out, `"o": 4242`) {
		t.Errorf("captures after the migration: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, ok, err := old.Last(ctx, "default", c.PayloadURL); err != nil || !ok {
		t.Errorf("the Redis capture is gone after the migration: %v %v", ok, err)
	}
	if code, _, errOut := runCLI(t, ctx, "migrate-captures", "elsewhere"); code != 2 || !strings.Contains(errOut, "redis or bucket") {
		t.Errorf("migrate-captures elsewhere: exit %d, %s", code, errOut)
	}
}
