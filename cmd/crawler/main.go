// Command crawler is Sieve's crawler: it takes admitted URLs from the
// frontier, fetches them politely with colly and publishes what each page
// links to, for the dedup workers to admit what is new.
//
//	crawler seed [settings] URL…      add seeds to a crawl
//	crawler run [settings]            crawl until stopped (or --idle-exit)
//	crawler run --embedded --seed URL everything in one process, no service needed
//	crawler run --demo                crawl the bundled demo site, offline
//	crawler serve [--embedded]        serve the URLFrontier gRPC API (other crawlers fetch)
//	crawler stats [--data-dir DIR]    an embedded crawl's numbers, running or ended
//	crawler crawls [--data-dir DIR]   the crawls on the pipeline (or in DIR), their settings and queues
//	crawler delete-crawl [--data-dir DIR] ID…
//	                                  remove crawls: queues, filter, record
//	crawler rules [--crawl ID] [veto|pin|unveto|unpin HOST RULE]
//	                                  a crawl's learned rewrite rules; veto or pin one
//	crawler credentials --dir DIR --names a,b
//	                                  make a deployment's CA, certificate and tokens
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
  crawler serve [--embedded]     serve the URLFrontier gRPC API on urlfrontier.addr (127.0.0.1:7071)
  crawler stats [--json]         the embedded crawl in data_dir: live while it runs, else its last run
  crawler crawls [--json]        the crawls on the pipeline: settings, seeds, queued URLs
  crawler delete-crawl ID…       remove crawls: frontier and discovered messages, filter, record
  crawler rules [--crawl ID] [--json]
                                 the rewrite rules a crawl learned (which spellings of a URL name
                                 one page), per host: state, support, fetches wasted and saved,
                                 when, an example
  crawler rules veto|pin|unveto|unpin HOST RULE
                                 forbid a rule, or make it active whatever is seen, in the crawl's
                                 settings ("crawler rules veto shop.example param:zsid"; host "*"
                                 vetoes it on every host)
  crawler captures URL…          where the crawl's captures of URLs are: its last (exact), and with
                                 --warc-dir every one its CDXJ indexes list
  crawler migrate-captures redis|bucket
                                 copy the captures earlier versions kept in Redis or the embedded
                                 bucket to the disk store (warc.captures disk); the source stays
  crawler seed --data-dir DIR URL…
                                 add seeds to a crawl of DIR, for the next 'crawler run --embedded'
  crawler crawls --data-dir DIR  the embedded crawls stored in DIR (while a run owns it: what it reports)
  crawler delete-crawl --data-dir DIR ID…
                                 remove embedded crawls from DIR (refused while a run owns it)
  crawler health [--live]        exit 0 if the process at http.addr (an embedded crawl: the one
                                 in data_dir) is ready, else 1 with why: an orchestrator's probe,
                                 over TLS verified with client.ca_file
  crawler credentials --dir DIR --names NAME,…
                                 write a deployment's CA, server certificate, tokens and web config
                                 into DIR, keeping those there and valid (docs/security.md)

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
	case "seed", "run", "stats", "crawls", "delete-crawl", "captures", "migrate-captures", "serve", "health", "rules":
	case "credentials":
		return credentialsCommand(args, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "crawler: unknown command %q\n%s", cmd, usage)
		return 2
	}
	inv, err := parseSettings(cmd, args, os.LookupEnv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		inv.loader.PrintSettings(stdout, inv.flags)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "crawler %s: %v\nRun 'crawler %s --help' for every setting.\n", cmd, err, cmd)
		return 2
	}
	s := inv.settings
	switch cmd {
	case "seed":
		err = seedCommand(ctx, s, stdout)
	case "run":
		err = runCommand(ctx, s, inv.json, stdout, stderr)
	case "serve":
		err = serveCommand(ctx, s, stderr)
	case "stats":
		err = statsCommand(ctx, s, inv.json, stdout)
	case "health":
		err = healthCommand(ctx, s, inv.live, stdout)
	case "crawls":
		if s.Embedded {
			err = dataDirCrawlsCommand(ctx, s, inv.json, stdout)
		} else {
			err = crawlsCommand(ctx, s, inv.json, stdout)
		}
	case "delete-crawl":
		err = deleteCrawlCommand(ctx, s, inv.args, stdout)
	case "captures":
		err = capturesCommand(ctx, s, inv.args, inv.json, stdout)
	case "migrate-captures":
		err = migrateCapturesCommand(ctx, s, inv.args[0], stdout)
	case "rules":
		err = rulesCommand(ctx, s, inv.crawl, inv.rules, inv.json, stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "crawler:", err)
		return 1
	}
	return 0
}

// invocation is a command's parsed settings.
type invocation struct {
	settings
	json   bool       // run --json
	live   bool       // health --live
	args   []string   // delete-crawl's ids
	crawl  string     // rules --crawl (default crawl.id)
	rules  *rulesEdit // rules veto|pin|unveto|unpin; nil: list
	loader *config.Loader
	flags  *flag.FlagSet
}

// parseSettings reads a command's settings from its flags, the environment
// (lookupEnv) and the YAML file, and validates them; --help returns
// flag.ErrHelp.
func parseSettings(cmd string, args []string, lookupEnv func(string) (string, bool)) (invocation, error) {
	inv := invocation{settings: defaultSettings(), flags: flag.NewFlagSet("crawler "+cmd, flag.ContinueOnError)}
	fs := inv.flags
	fs.SetOutput(io.Discard) // errors are returned, help printed by the caller
	var jsonOut *bool
	if cmd == "run" || cmd == "stats" || cmd == "crawls" || cmd == "captures" || cmd == "rules" {
		jsonOut = fs.Bool("json", false, "print the final summary as JSON on stdout")
	}
	var crawlID *string
	if cmd == "rules" {
		crawlID = fs.String("crawl", "", "the `ID` of the crawl whose rules to show or change (default crawl.id)")
	}
	var live *bool
	if cmd == "health" {
		live = fs.Bool("live", false, "ask only whether the process runs (/healthz), not whether it is ready (/readyz)")
	}
	inv.loader = config.NewLoader(fs, &inv.settings)
	fs.Usage = func() {} // the caller prints one line of help, or all of it for --help
	if err := fs.Parse(args); err != nil {
		return inv, err
	}
	if jsonOut != nil {
		inv.json = *jsonOut
	}
	if live != nil {
		inv.live = *live
	}
	if err := inv.loader.Load(lookupEnv); err != nil {
		return inv, err
	}
	if crawlID != nil {
		if inv.crawl = *crawlID; inv.crawl == "" {
			inv.crawl = inv.Crawl.ID
		}
	}
	s := &inv.settings
	if cmd == "seed" {
		s.Seed = append(s.Seed, fs.Args()...)
		if len(s.Seed) == 0 {
			return inv, errors.New("give at least one URL")
		}
	} else if cmd == "delete-crawl" {
		if inv.args = fs.Args(); len(inv.args) == 0 {
			return inv, errors.New("give the id of the crawl to delete")
		}
	} else if cmd == "captures" {
		if inv.args = fs.Args(); len(inv.args) == 0 {
			return inv, errors.New("give the URL whose captures to show")
		}
	} else if cmd == "rules" {
		var err error
		if inv.rules, err = parseRulesArgs(fs.Args()); err != nil {
			return inv, err
		}
	} else if cmd == "migrate-captures" {
		if inv.args = fs.Args(); len(inv.args) != 1 || (inv.args[0] != "redis" && inv.args[0] != "bucket") {
			return inv, errors.New("give where the captures are: redis or bucket")
		}
	} else if fs.NArg() > 0 {
		return inv, fmt.Errorf("unexpected arguments %q (seeds go in --seed)", fs.Args())
	}
	// The demo runs embedded unless a NATS server was named.
	if s.Demo && s.NATS.URL == defaultSettings().NATS.URL {
		s.Embedded = true
	}
	// seed, crawls, delete-crawl and rules given a data dir act on the embedded
	// crawls stored there, unless a NATS server was named.
	if (cmd == "seed" || cmd == "crawls" || cmd == "delete-crawl" || cmd == "captures" || cmd == "migrate-captures" || cmd == "rules") && inv.loader.Given("data_dir") && !inv.loader.Given("nats.url") {
		s.Embedded = true
	}
	if cmd == "serve" {
		if err := s.validateServe(); err != nil {
			return inv, err
		}
	}
	if err := errors.Join(s.Config.Validate(), s.validate()); err != nil {
		return inv, err
	}
	return inv, nil
}
