package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/sievecrawl/sieve/config"
)

// env is the process's outside world, passed in so tests can run commands.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	lookupEnv      func(string) (string, bool)
}

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the command failed (or, for normalize and check, some input was rejected)
	exitUsage = 2
)

type command struct {
	name, args, summary string
	run                 func(ctx context.Context, e env, fs *flag.FlagSet, cfg *config.Config) int
	flags               func(fs *flag.FlagSet) // the command's own flags
	// writes marks the commands that write the filter (run, import): only
	// they take filter.force, which rewrites the policy stored with it.
	writes bool
}

func commands() []command {
	return []command{
		{name: "run", summary: "run a dedup worker until SIGTERM (serves the live page, /stats, /metrics, /healthz, /readyz on http.addr)", run: cmdRun, writes: true},
		{name: "stats", args: "[--json] [--data-dir DIR] [--crawl ID]", summary: "print the shared seen-URL statistics, filter health and queue depths", run: cmdStats, flags: statsFlags},
		{name: "check", args: "[--base URL] [--data-dir DIR] [--crawl ID] URL…", summary: "print each URL's canonical form and whether it was seen (adds nothing); URLs from stdin if none given", run: cmdCheck, flags: checkFlags},
		{name: "import", args: "[--crawl ID] FILE|-", summary: "mark the URLs in FILE (one per line; - is stdin) as seen without enqueueing them", run: cmdImport, flags: importFlags, writes: true},
		{name: "forget", args: "[--base URL] [--crawl ID] URL…", summary: "remove URLs from a cuckoo filter so they are admitted again (a Bloom filter cannot forget); URLs from stdin if none given", run: cmdForget, flags: forgetFlags},
		{name: "plan", args: "--urls N [--fpp P] [--revisit-after D --rate R/s] [--kind K] [--hosts H] [--replicas R] [--node-memory BYTES] [--node-disk BYTES]", summary: "size the filter for a crawl, in memory and in Redis, for both kinds, and the whole system: RAM and disk of every process and store (serve's queues and the crawler's scheduler per host), and the nodes it takes (creates nothing)", run: cmdPlan, flags: planFlags},
		{name: "redis-cluster-init", args: "[--replicas N] [--wait D]", summary: "make the nodes of redis.url one Redis Cluster: form it if every node is empty, else meet every node at its address now (after a restart on new addresses); compose's redis-cluster-init", run: cmdClusterInit, flags: clusterInitFlags},
		{name: "health", args: "[--live]", summary: "exit 0 if the worker at http.addr is ready (its /readyz, over TLS verified with client.ca_file), else 1 with why: an orchestrator's probe", run: cmdHealth, flags: healthFlags},
		{name: "normalize", args: "[--base URL] URL…", summary: "print each URL's canonical form or why it is rejected; URLs from stdin if none given", run: cmdNormalize, flags: baseFlag},
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: dedup-worker COMMAND [flags] [args]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n      \t%s\n", c.name, c.args, c.summary)
	}
	fmt.Fprintf(w, "\nEvery command takes the settings flags; \"dedup-worker COMMAND --help\" lists them with\ntheir environment variables (SIEVE_*), YAML keys and defaults.\n")
}

// cli runs one command and returns the process exit code.
func cli(ctx context.Context, args []string, e env) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		out := e.stdout
		if len(args) == 0 {
			out = e.stderr
		}
		usage(out)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		cfg := config.Default()
		fs := flag.NewFlagSet("dedup-worker "+c.name, flag.ContinueOnError)
		fs.SetOutput(io.Discard) // errors are printed below, help on request
		if c.flags != nil {
			c.flags(fs)
		}
		var omit []string
		if !c.writes {
			omit = append(omit, "filter.force")
		}
		l := config.NewLoader(fs, &cfg, omit...)
		l.Skip(config.CrawlerKeys()...) // a file shared with the crawler
		fs.Usage = func() {}
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(e.stdout, "Usage: dedup-worker %s %s\n", c.name, c.args)
				l.PrintSettings(e.stdout, fs)
				return exitOK
			}
			fmt.Fprintf(e.stderr, "dedup-worker %s: %v\nRun 'dedup-worker %s --help' for every setting.\n", c.name, err, c.name)
			return exitUsage
		}
		if err := l.Load(e.lookupEnv); err != nil {
			fmt.Fprintf(e.stderr, "dedup-worker %s: %v\n", c.name, err)
			return exitUsage
		}
		if err := cfg.Validate(); err != nil {
			fmt.Fprintf(e.stderr, "dedup-worker %s: %v\n", c.name, err)
			return exitUsage
		}
		cfg.Filter.Log = newLogger(e.stderr, cfg.Log)
		return c.run(ctx, e, fs, &cfg)
	}
	fmt.Fprintf(e.stderr, "dedup-worker: unknown command %q\n\n", args[0])
	usage(e.stderr)
	return exitUsage
}

// newLogger builds the process logger from the log settings.
func newLogger(w io.Writer, c config.Log) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level)) // validated
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// hostname names this process in NATS connection names.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// inputs returns the command's URL arguments, or stdin's non-empty lines.
func inputs(fs *flag.FlagSet, stdin io.Reader) ([]string, error) {
	if fs.NArg() > 0 {
		return fs.Args(), nil
	}
	data, err := io.ReadAll(stdin)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out, nil
}
