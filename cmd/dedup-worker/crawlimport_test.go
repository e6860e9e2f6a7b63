package main

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/redistest"
	"github.com/sievecrawl/sieve/watch"
)

// TestImportByCrawlSettings: import --crawl opens a registered crawl's
// filter by the crawl's stored settings (kind, expected URLs, fpp, revisit
// window), as its workers do, whatever the generic filter flags say: a
// worker configured as compose.yaml's (filter.kind, capacity and fpp
// given) then opens the imported filter without a mismatch and finds the
// URL seen. A crawl id the registry does not know is refused, naming it and
// the commands that create and list crawls, and creates nothing; unless
// its filter exists (a crawl recorded before crawls had records), which is
// opened as stored, also while the registry is unreachable. forget --crawl
// takes the crawl's kind, not filter.kind: a cuckoo crawl forgets, a
// revisit window of Bloom filters is refused with why.
func TestImportByCrawlSettings(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := natstest.Start(t, natstest.Options{})
	crawls := map[string]frontier.CrawlSettings{
		"plain-bloom":   {ExpectURLs: 3000, FPP: 0.001, Kind: "bloom", Scope: "host"},
		"plain-cuckoo":  {ExpectURLs: 3000, FPP: 0.001, Kind: "cuckoo", Scope: "host"},
		"window-bloom":  {ExpectURLs: 3000, FPP: 0.001, RevisitAfter: time.Hour, Granularity: 3, Kind: "bloom", Scope: "host"},
		"window-cuckoo": {ExpectURLs: 3000, FPP: 0.001, RevisitAfter: time.Hour, Granularity: 3, Kind: "cuckoo", Scope: "host"},
	}
	for id, st := range crawls {
		registerCrawl(t, ns, id, st)
	}
	// The generic filter settings, as compose.yaml gives every worker:
	// none of them is any crawl's.
	generic := map[string]string{"SIEVE_FILTER_KIND": "bloom", "SIEVE_FILTER_CAPACITY": "10000000", "SIEVE_FILTER_FPP": "0.000001",
		"SIEVE_NATS_URL": ns.URL()}
	workerSection := config.Default().Filter
	workerSection.Kind, workerSection.Capacity, workerSection.FPP = "bloom", 10_000_000, 0.000001
	workerSection.Given = []string{"kind", "capacity", "fpp"}
	for _, place := range []string{"redis", "snapshot"} {
		t.Run(place, func(t *testing.T) {
			dir := t.TempDir()
			env := maps.Clone(generic)
			f := workerSection
			redisURL := ""
			state := func() map[string]string { return redistest.Dump(t, srv.Client()) }
			if place == "redis" {
				redisURL = srv.URL()
				env["SIEVE_REDIS_URL"] = redisURL
			} else {
				env["SIEVE_FILTER_SNAPSHOT"] = filepath.Join(dir, "seen.bloom")
				f.Snapshot = env["SIEVE_FILTER_SNAPSHOT"]
				state = func() map[string]string { return files(t, dir) }
			}
			for id, st := range crawls {
				u := "https://" + id + ".example/"
				code, out, errOut := runCLI(t, u+"\n", env, "import", "--crawl", id, "--filter-kind", "cuckoo", "--filter-capacity", "7", "-")
				if code != exitOK || !strings.Contains(out, "1 new") {
					t.Errorf("import --crawl %s: exit %d, %q, %q", id, code, out, errOut)
					continue
				}
				if added := workerAdds(t, f, redisURL, id, st, u); added[0] {
					t.Errorf("crawl %s: a worker finds the imported %s new", id, u)
				}
				code, out, errOut = runCLI(t, "", env, "stats", "--json", "--crawl", id)
				if wantKind := `"kind": "` + st.Kind + `"`; code != exitOK || !strings.Contains(out, wantKind) ||
					strings.Contains(out, `"window"`) != (st.RevisitAfter != 0) {
					t.Errorf("stats --crawl %s after import: exit %d, stderr %q; want %s, a window %v:\n%s", id, code, errOut, wantKind, st.RevisitAfter != 0, out)
				}
			}

			before := state()
			for _, tt := range []struct {
				name  string
				stdin string
				env   map[string]string
				args  []string
				code  int
				want  []string // stdout and stderr contain
			}{
				{"import into an unknown crawl", "https://a.example/\n", nil, []string{"import", "--crawl", "nosuch", "-"}, exitFail,
					[]string{`crawl "nosuch" does not exist`, ns.URL(), "crawler seed --crawl-id nosuch", "crawler crawls"}},
				{"forget from an unknown crawl", "", nil, []string{"forget", "--crawl", "nosuch", "https://a.example/"}, exitFail,
					[]string{`crawl "nosuch" does not exist`}},
				{"import with the registry unreachable, no filter", "https://a.example/\n", map[string]string{"SIEVE_NATS_URL": "nats://" + natstest.ClosedAddr(t)},
					[]string{"import", "--crawl", "later", "-"}, exitFail, []string{`crawl "later" has no filter yet`, "cannot be read"}},
				{"forget from a revisit window of Bloom filters", "", nil, []string{"forget", "--crawl", "window-bloom", "https://window-bloom.example/"}, exitUsage,
					[]string{"cannot forget"}},
			} {
				e := maps.Clone(env)
				maps.Copy(e, tt.env)
				code, out, errOut := runCLI(t, tt.stdin, e, tt.args...)
				for _, w := range tt.want {
					if code != tt.code || !strings.Contains(out+errOut, w) {
						t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d and %q", tt.name, code, out, errOut, tt.code, w)
					}
				}
			}
			if after := state(); !maps.Equal(before, after) {
				t.Errorf("refused imports and forgets changed what is stored")
			}

			for _, id := range []string{"plain-cuckoo", "window-cuckoo"} {
				u := "https://" + id + ".example/"
				if code, out, errOut := runCLI(t, "", env, "forget", "--crawl", id, u); code != exitOK || out != "forgotten\t"+u+"\n" {
					t.Errorf("forget --crawl %s (filter.kind bloom): exit %d, %q, %q", id, code, out, errOut)
				}
				if code, out, errOut := runCLI(t, "", env, "check", "--crawl", id, u); code != exitOK || out != "new\t"+u+"\n" {
					t.Errorf("check --crawl %s after forget: exit %d, %q, %q", id, code, out, errOut)
				}
			}

			// A crawl without a record whose filter exists (made before
			// crawls had records): opened as stored, with or without the
			// registry.
			legacy := frontier.CrawlSettings{}
			workerAdds(t, f, redisURL, "legacy", legacy, "https://old.example/")
			for _, nats := range []string{ns.URL(), "nats://" + natstest.ClosedAddr(t)} {
				e := maps.Clone(env)
				e["SIEVE_NATS_URL"] = nats
				code, out, errOut := runCLI(t, "https://old.example/\nhttps://new.example/\n", e, "import", "--crawl", "legacy", "-")
				if code != exitOK || !strings.Contains(out, "already seen") {
					t.Errorf("import --crawl legacy (registry %s): exit %d, %q, %q", nats, code, out, errOut)
				}
			}
		})
	}
}

// TestWritesRefusedWhileCrawlRuns: import and forget refuse to write a
// snapshot file in the data dir of a crawl that runs there (it announces its
// page in watch.url), whose next save would undo them silently; once it has
// stopped they write. check reads the file meanwhile.
func TestWritesRefusedWhileCrawlRuns(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"SIEVE_FILTER_SNAPSHOT": filepath.Join(dir, "seen.cuckoo"), "SIEVE_FILTER_KIND": "cuckoo", "SIEVE_HTTP_ADDR": ""}
	if code, out, errOut := runCLI(t, "https://a.example/\n", env, "import", "-"); code != exitOK {
		t.Fatalf("import: exit %d, %q, %q", code, out, errOut)
	}
	// A running crawl's watch server, as far as the commands can tell.
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer page.Close()
	if err := os.WriteFile(filepath.Join(dir, watch.URLFile), []byte(page.URL+"/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := files(t, dir)
	for _, tt := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"import", "https://b.example/\n", []string{"import", "-"}, exitFail, "stop it first"},
		{"forget", "", []string{"forget", "https://a.example/"}, exitFail, "stop it first"},
		{"check", "", []string{"check", "https://a.example/"}, exitOK, "seen\thttps://a.example/"},
	} {
		code, out, errOut := runCLI(t, tt.stdin, env, tt.args...)
		if code != tt.code || !strings.Contains(out+errOut, tt.want) {
			t.Errorf("%s while a crawl runs: exit %d, stdout %q, stderr %q; want exit %d and %q", tt.name, code, out, errOut, tt.code, tt.want)
		}
	}
	if after := files(t, dir); !maps.Equal(before, after) {
		t.Error("refused commands changed the data dir")
	}
	page.Close() // the crawl stopped (killed: its watch.url is left)
	if code, out, errOut := runCLI(t, "", env, "forget", "https://a.example/"); code != exitOK || out != "forgotten\thttps://a.example/\n" {
		t.Errorf("forget once the crawl stopped: exit %d, %q, %q", code, out, errOut)
	}
}
