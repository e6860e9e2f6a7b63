package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sievecrawl/sieve/auth"
	"github.com/sievecrawl/sieve/credentials"
)

const credentialsUsage = `Usage: crawler credentials --dir DIR --names NAME,… [flags]

Writes a deployment's credentials into DIR, keeping those already there and
valid: a CA (ca.pem, ca-key.pem), a server certificate for NAMEs (server.pem,
server-key.pem), bearer tokens (tokens.csv, and token-NAME with each alone)
and web.yml for http.web_config_file. See docs/security.md.

Flags:
`

// credentialsCommand runs `crawler credentials`: its flags are its own,
// not settings (it connects to nothing).
func credentialsCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("crawler credentials", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), credentialsUsage)
		fs.PrintDefaults()
	}
	dir := fs.String("dir", "", "directory of the credentials (made if missing)")
	names := fs.String("names", "", "the server certificate's names, comma-separated: DNS names and IP addresses clients dial")
	tokens := fs.String("tokens", "prometheus=read,ops=admin", "tokens to make, as name=role (read, crawl or admin), comma-separated; a token already in tokens.csv is kept")
	owner := fs.Int("owner", 0, "uid owning server-key.pem, tokens.csv and the token files (0: the user running the command); the serving process's")
	tokenOwners := fs.String("token-owner", "", "uids owning token files of other processes, as name=uid, comma-separated (e.g. prometheus=65534)")
	users := fs.String("users", "", "basic-auth users to make for people's browsers, comma-separated: each gets a random password in password-NAME and its bcrypt hash in web.yml (the read role)")
	renew := fs.Bool("renew", false, "sign the server certificate again even if it is valid (the CA and tokens stay)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return 0
		}
		return 2
	}
	o, err := credentialsOptions(*dir, *names, *tokens, *tokenOwners)
	if err != nil || fs.NArg() > 0 {
		if err == nil {
			err = fmt.Errorf("unexpected arguments %q", fs.Args())
		}
		fmt.Fprintf(stderr, "crawler credentials: %v\nRun 'crawler credentials --help' for its flags.\n", err)
		return 2
	}
	o.Owner, o.Renew, o.Users = *owner, *renew, list(*users)
	written, err := credentials.Generate(o)
	if err != nil {
		fmt.Fprintln(stderr, "crawler credentials:", err)
		if errors.Is(err, credentials.ErrOptions) {
			return 2
		}
		return 1
	}
	if len(written) == 0 {
		fmt.Fprintf(stdout, "credentials in %s: kept as they are\n", o.Dir)
	} else {
		fmt.Fprintf(stdout, "credentials in %s: wrote %s\n", o.Dir, strings.Join(written, ", "))
	}
	return 0
}

// credentialsOptions reads the command's lists.
func credentialsOptions(dir, names, tokens, tokenOwners string) (credentials.Options, error) {
	o := credentials.Options{Dir: dir}
	if dir == "" || names == "" {
		return o, errors.New("--dir and --names are required")
	}
	o.Names = strings.Split(names, ",")
	owners := map[string]int{}
	for _, e := range list(tokenOwners) {
		name, uid, ok := strings.Cut(e, "=")
		n, err := strconv.Atoi(uid)
		if !ok || err != nil || n < 0 {
			return o, fmt.Errorf("--token-owner %q: want name=uid", e)
		}
		owners[name] = n
	}
	for _, e := range list(tokens) {
		name, r, ok := strings.Cut(e, "=")
		role, err := auth.ParseRole(r)
		if !ok || err != nil {
			return o, fmt.Errorf("--tokens %q: want name=role, role read, crawl or admin", e)
		}
		o.Tokens = append(o.Tokens, credentials.Token{Name: name, Role: role, Owner: owners[name]})
		delete(owners, name)
	}
	for name := range owners {
		return o, fmt.Errorf("--token-owner %q: no such token in --tokens", name)
	}
	return o, nil
}

// list splits a comma-separated list, without empty entries.
func list(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
