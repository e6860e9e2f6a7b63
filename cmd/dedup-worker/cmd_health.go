package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/watch"
)

func healthFlags(fs *flag.FlagSet) {
	fs.Bool("live", false, "ask only whether the worker runs (/healthz), not whether it is ready (/readyz)")
}

// cmdHealth is "dedup-worker health": the probe of an orchestrator (compose's
// healthcheck) as a command, asking the worker that http.addr names with
// the client settings, so that the server's certificate is verified
// against client.ca_file like any client's.
func cmdHealth(ctx context.Context, e env, fs *flag.FlagSet, cfg *config.Config) int {
	if err := probe(ctx, cfg, flagValue(fs, "live") == "true"); err != nil {
		fmt.Fprintf(e.stderr, "dedup-worker health: %v\n", err)
		return exitFail
	}
	fmt.Fprintln(e.stdout, "ok")
	return exitOK
}

// probe asks the HTTP surface of cfg's http.addr for its health.
func probe(ctx context.Context, cfg *config.Config, live bool) error {
	page, err := watch.LocalPageURL(cfg.HTTP)
	if err != nil {
		return err
	}
	c, err := watchClient(cfg)
	if err != nil {
		return err
	}
	return c.Health(ctx, page, live)
}
