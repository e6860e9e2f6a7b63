// Command dedup-worker is Sieve's dedup worker and its tools: it consumes the
// pages crawlers discover from NATS JetStream, canonicalizes their links,
// and publishes each URL not seen before to the frontier, exactly once (see
// package frontier). Run "dedup-worker help" for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := cli(ctx, os.Args[1:], env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, lookupEnv: os.LookupEnv})
	stop()
	os.Exit(code)
}
