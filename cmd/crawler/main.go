// Command crawler is Sieve's crawler: it takes admitted URLs from the
// frontier, fetches them politely with colly and publishes what each page
// links to, for the dedup workers to admit what is new.
//
//	crawler seed [settings] URL…      add seeds to a crawl
//	crawler run [settings]            crawl until stopped (or --idle-exit)
//	crawler run --embedded --seed URL everything in one process, no service needed
//	crawler run --demo                crawl the bundled demo site, offline
//
// Settings come from a YAML file (--config), SIEVE_* environment variables
// and flags; `crawler run --help` lists them all.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sievecrawl/sieve/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `Usage:
  crawler seed [settings] URL…   add seed URLs to a crawl (crawl.id) on the pipeline
  crawler run [settings]         crawl the frontier until stopped or idle (--idle-exit)
  crawler run --embedded --seed URL
                                 run NATS, a dedup worker and the crawler in this process
  crawler run --demo             crawl the bundled demo site, served on loopback (offline)

'crawler run --help' lists every setting.
`

// run executes one command and returns the exit code: 0 done, 1 failed,
// 2 bad usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "seed", "run":
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "crawler: unknown command %q\n%s", cmd, usage)
		return 2
	}
	s := defaultSettings()
	fs := flag.NewFlagSet("crawler "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	jsonOut := fs.Bool("json", false, "run: print the final summary as JSON on stdout")
	loader := config.NewLoader(fs, &s)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := loader.Load(os.LookupEnv); err != nil {
		fmt.Fprintln(stderr, "crawler:", err)
		return 2
	}
	if cmd == "seed" {
		s.Seed = append(s.Seed, fs.Args()...)
	} else if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "crawler run: unexpected arguments %q (seeds go in --seed)\n", fs.Args())
		return 2
	}
	// The demo runs embedded unless a NATS server was named.
	if s.Demo && s.NATS.URL == defaultSettings().NATS.URL {
		s.Embedded = true
	}
	if err := errors.Join(s.Config.Validate(), s.validate()); err != nil {
		fmt.Fprintln(stderr, "crawler:", err)
		return 2
	}

	var err error
	switch cmd {
	case "seed":
		if len(s.Seed) == 0 {
			fmt.Fprintln(stderr, "crawler seed: give at least one URL")
			return 2
		}
		err = seedCommand(ctx, s, stdout)
	case "run":
		err = runCommand(ctx, s, *jsonOut, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "crawler:", err)
		return 1
	}
	return 0
}
