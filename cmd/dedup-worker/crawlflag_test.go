package main

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/redistest"
)

// TestCrawlFlag: check, stats, import and forget take --crawl to use one
// crawl's own filter, in Redis (<filter.name>:<crawl>) and in an embedded
// data dir holding several crawls' snapshots (seen.<crawl>.<kind>): crawl
// a's filter answers for a, b's for b (both Bloom, where --data-dir alone
// cannot choose), c's cuckoo filter is found by its own kind; a crawl
// without a filter is an error saying so, never "new"; a bad id is a usage
// error naming the flag; check and stats write nothing.
func TestCrawlFlag(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := natstest.Start(t, natstest.Options{})
	for _, c := range []struct{ crawl, kind string }{{"a", "bloom"}, {"b", "bloom"}, {"c", "cuckoo"}} {
		registerCrawl(t, ns, c.crawl, frontier.CrawlSettings{ExpectURLs: 1000, FPP: 0.01, Kind: c.kind, Scope: "host"})
	}
	dir := t.TempDir()
	type place struct {
		make  map[string]string // the environment import creates the filters with
		env   map[string]string // the environment of the other commands
		args  []string          // their flags saying where the filters are
		state func() map[string]string
	}
	places := map[string]place{
		"redis": {
			make:  map[string]string{"SIEVE_REDIS_URL": srv.URL(), "SIEVE_NATS_URL": ns.URL()},
			env:   map[string]string{"SIEVE_REDIS_URL": srv.URL(), "SIEVE_NATS_URL": ns.URL()},
			state: func() map[string]string { return redistest.Dump(t, srv.Client()) },
		},
		"data dir": {
			make:  map[string]string{"SIEVE_FILTER_SNAPSHOT": filepath.Join(dir, "seen.bloom"), "SIEVE_HTTP_ADDR": "", "SIEVE_NATS_URL": ns.URL()},
			env:   map[string]string{"SIEVE_HTTP_ADDR": "", "SIEVE_NATS_URL": ns.URL()},
			args:  []string{"--data-dir", dir},
			state: func() map[string]string { return files(t, dir) },
		},
	}
	for name, pl := range places {
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct{ crawl, kind string }{{"a", "bloom"}, {"b", "bloom"}, {"c", "cuckoo"}} {
				u := "https://" + c.crawl + ".example/\n"
				code, out, errOut := runCLI(t, u, pl.make, "import", "--crawl", c.crawl, "-")
				if code != exitOK || !strings.Contains(out, "1 new") {
					t.Fatalf("import --crawl %s: exit %d, %q, %q", c.crawl, code, out, errOut)
				}
			}
			before := pl.state()
			switch name {
			case "redis":
				for _, c := range []string{"a", "b", "c"} {
					if !slices.ContainsFunc(slices.Collect(maps.Keys(before)), func(k string) bool { return strings.HasPrefix(k, "sieve:seen:"+c) }) {
						t.Errorf("no key of filter sieve:seen:%s in redis: %v", c, slices.Sorted(maps.Keys(before)))
					}
				}
			case "data dir":
				// A crawl's file is named after its own kind
				// (seen.<crawl>.<kind>): c's cuckoo filter is in
				// seen.c.cuckoo beside filter.snapshot's seen.bloom.
				for _, f := range []string{"seen.a.bloom", "seen.b.bloom", "seen.c.cuckoo"} {
					if _, ok := before[f]; !ok {
						t.Errorf("no %s in the data dir: %v", f, slices.Sorted(maps.Keys(before)))
					}
				}
			}
			ab := []string{"https://a.example/", "https://b.example/"}
			for _, tt := range []struct {
				name string
				args []string
				code int
				out  string // stdout and stderr contain
			}{
				{"check a", append([]string{"check", "--crawl", "a"}, ab...), exitOK, "seen\thttps://a.example/\nnew\thttps://b.example/\n"},
				{"check b", append([]string{"check", "--crawl", "b"}, ab...), exitOK, "new\thttps://a.example/\nseen\thttps://b.example/\n"},
				{"check c, a cuckoo filter", []string{"check", "--crawl", "c", "https://c.example/"}, exitOK, "seen\thttps://c.example/\n"},
				{"check an unknown crawl", []string{"check", "--crawl", "zz", "https://a.example/"}, exitFail, `no filter exists for crawl "zz"`},
				{"check a bad id", []string{"check", "--crawl", "a b", "https://a.example/"}, exitUsage, "-crawl"},
				{"stats b", []string{"stats", "--json", "--crawl", "b"}, exitOK, `"kind": "bloom"`},
				{"stats c", []string{"stats", "--json", "--crawl", "c"}, exitOK, `"kind": "cuckoo"`},
				{"stats an unknown crawl", []string{"stats", "--json", "--crawl", "zz"}, exitFail, "no filter exists for crawl"},
				{"forget from a Bloom filter", []string{"forget", "--crawl", "a", "https://a.example/"}, exitUsage, "cannot forget"},
				{"forget from an unknown crawl", []string{"forget", "--crawl", "zz", "https://a.example/"}, exitFail, `crawl "zz" does not exist`},
			} {
				code, out, errOut := runCLI(t, "", pl.env, at(tt.args, pl.args)...)
				if name == "data dir" && tt.args[0] == "forget" {
					// forget has no --data-dir: it reads filter.snapshot.
					code, out, errOut = runCLI(t, "", pl.make, tt.args...)
				}
				if (tt.code >= 0 && code != tt.code) || !strings.Contains(out+errOut, tt.out) {
					t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d and %q", tt.name, code, out, errOut, tt.code, tt.out)
				}
			}
			if after := pl.state(); !maps.Equal(before, after) {
				t.Errorf("check, stats and refused forgets changed what is stored")
			}
			// forget and import write the named crawl's filter only.
			if code, out, errOut := runCLI(t, "", pl.make, "forget", "--crawl", "c", "https://c.example/"); code != exitOK || out != "forgotten\thttps://c.example/\n" {
				t.Errorf("forget --crawl c: exit %d, %q, %q", code, out, errOut)
			}
			if code, out, errOut := runCLI(t, "https://a.example/\n", pl.make, "import", "--crawl", "b", "-"); code != exitOK || !strings.Contains(out, "1 new") {
				t.Errorf("import --crawl b: exit %d, %q, %q", code, out, errOut)
			}
			for crawl, want := range map[string]string{"a": "seen", "b": "seen", "c": "new"} {
				u := "https://a.example/"
				if crawl == "c" {
					u = "https://c.example/"
				}
				if code, out, errOut := runCLI(t, "", pl.env, at([]string{"check", "--crawl", crawl, u}, pl.args)...); code != exitOK || out != want+"\t"+u+"\n" {
					t.Errorf("check --crawl %s %s after forget and import: exit %d, %q, %q; want %s", crawl, u, code, out, errOut, want)
				}
			}
		})
	}
}

// at inserts the flags saying where the filters are after the command name.
func at(args, where []string) []string {
	return slices.Concat(args[:1], where, args[1:])
}
