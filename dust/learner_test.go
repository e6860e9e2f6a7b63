package dust

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/fingerprint"
)

// words is a page's own text: n pseudo-random words drawn for id.
func words(id string, n int) string {
	r := rand.New(rand.NewPCG(uint64(len(id)), hashString(id)))
	w := make([]string, n)
	for i := range w {
		w[i] = fmt.Sprintf("w%d", r.IntN(5000))
	}
	return strings.Join(w, " ")
}

func hashString(s string) uint64 {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// html renders a page: its title, its own text, extra blocks (each its own
// element), and links.
func html(title, text string, blocks []string, links ...string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "<html><head><title>%s</title></head><body><h1>%s</h1><p class=body>%s</p>", title, title, text)
	for i, x := range blocks {
		fmt.Fprintf(&b, `<div class="box%d">%s</div>`, i, x)
	}
	b.WriteString("<ul>")
	for _, l := range links {
		fmt.Fprintf(&b, `<li><a href="%s">link</a></li>`, l)
	}
	b.WriteString("</ul></body></html>")
	return []byte(b.String())
}

// fetcher plays a crawler for a Learner: it fetches (renders) a URL,
// renders it again when asked, and keeps what the Learner said.
type fetcher struct {
	t       *testing.T
	l       *Learner
	render  func(u string) []byte
	fetches int
	dups    map[string]int
}

func (f *fetcher) fetch(u string) Verdict {
	f.t.Helper()
	first := fingerprint.Of(f.render(u))
	f.fetches++
	v := f.l.Observe(u, first)
	if v.Refetch {
		f.fetches++
		v = f.l.ObserveRenders(u, first, fingerprint.Of(f.render(u)))
		if v.Refetch {
			f.t.Fatalf("ObserveRenders(%q) asked for a refetch again", u)
		}
	}
	if v.Of != "" {
		if f.dups == nil {
			f.dups = map[string]int{}
		}
		f.dups[v.Kind]++
	}
	return v
}

// rules returns a host's rules by state.
func rules(l *Learner, host string) map[State][]string {
	out := map[State][]string{}
	for _, rec := range l.Records(true) {
		if rec.Host != host {
			continue
		}
		for _, r := range rec.Rules {
			out[r.State] = append(out[r.State], r.Rule.String())
		}
	}
	return out
}

func TestLearnSessionParameter(t *testing.T) {
	// A shop appends a session id no list knows, new on every render, to
	// every link: each page is found under endless spellings. The text
	// is the same; only hrefs differ.
	rng := rand.New(rand.NewPCG(1, 2))
	sid := func() string { return fmt.Sprintf("%x", rng.Uint64()) }
	render := func(u string) []byte {
		p, _ := Split(u)
		id := params(p.Query)["id"]
		return html("product "+fmt.Sprint(id), words(fmt.Sprint(id), 120), nil,
			"/p?id=1&zsid="+sid(), "/p?id=2&zsid="+sid())
	}
	l := NewLearner(Options{AuditFirst: 4})
	f := &fetcher{t: t, l: l, render: render}
	for id := 1; id <= 4; id++ {
		if v := f.fetch(fmt.Sprintf("http://shop.test/p?id=%d&zsid=%s", id, sid())); v.Of != "" {
			t.Fatalf("first spelling of product %d: a duplicate of %q", id, v.Of)
		}
		v := f.fetch(fmt.Sprintf("http://shop.test/p?id=%d&zsid=%s", id, sid()))
		if id <= 3 && (v.Of == "" || v.Kind != Near) {
			t.Fatalf("second spelling of product %d: %+v, want a near duplicate", id, v)
		}
	}
	got := rules(l, "shop.test")
	if strings.Join(got[Active], " ") != "param:zsid" || len(got[Candidate]) != 0 {
		t.Fatalf("rules = %v, want param:zsid active and nothing else", got)
	}
	if k := l.Set().Key("http://shop.test/p?id=9&zsid=f00"); k != "http://shop.test/p?id=9" {
		t.Errorf("Key = %q", k)
	}
	// Later spellings of fetched products are dropped, but for audits.
	dropped := 0
	for range 20 {
		if of, seen := l.Seen("http://shop.test/p?id=2&zsid=" + sid()); seen {
			dropped++
			if !strings.HasPrefix(of, "http://shop.test/p?id=2&") {
				t.Errorf("Seen: of = %q", of)
			}
		}
	}
	if dropped != 17 {
		t.Errorf("dropped %d of 20 spellings, want 17 (audits at the 4th, 8th and 16th)", dropped)
	}
	if _, seen := l.Seen("http://shop.test/p?id=99&zsid=1"); seen {
		t.Error("a product never fetched is Seen")
	}
}

func TestLearnNoisyPages(t *testing.T) {
	// A news site's pages change on every render (a clock, a reader
	// count, a rotating box) and its links carry a random campaign
	// parameter. The noise is measured by a second render, then
	// discounted.
	rng := rand.New(rand.NewPCG(3, 4))
	render := func(u string) []byte {
		p, _ := Split(u)
		return html("story "+p.Path, words(p.Path, 150), []string{
			fmt.Sprintf("rendered at 12:%02d:%02d", rng.IntN(60), rng.IntN(60)),
			fmt.Sprintf("%d readers now", rng.IntN(5000)),
			"most read: " + words(fmt.Sprint(rng.IntN(50)), 12),
		})
	}
	l := NewLearner(Options{})
	f := &fetcher{t: t, l: l, render: render}
	for i := range 5 {
		for range 2 {
			f.fetch(fmt.Sprintf("http://news.test/story/%d?cmp=%x", i, rng.Uint64()))
		}
	}
	got := rules(l, "news.test")
	if strings.Join(got[Active], " ") != "param:cmp" {
		t.Fatalf("rules = %v, want param:cmp active", got)
	}
	if f.dups[Near] < 3 {
		t.Errorf("near duplicates = %d, want ≥ 3", f.dups[Near])
	}
	if f.fetches > 10+(Options{}).withDefaults().Refetches {
		t.Errorf("%d fetches for 10 spellings: more refetches than the budget", f.fetches)
	}
}

func TestNoiseNeedsTwoPairsOfRenders(t *testing.T) {
	// The host's "most read" box rotates among a few stories and shows
	// the same one in the first page's two renders: on that one pair
	// the box looks stable, and every later pair of renders of one page
	// would look like two pages. A block is stable only after a second
	// pair of renders, which shows it changing.
	rng := rand.New(rand.NewPCG(5, 6))
	renders := 0
	render := func(u string) []byte {
		p, _ := Split(u)
		renders++
		box := rng.IntN(1000)
		if renders == 2 || renders == 3 { // the first refetch: the box stays
			box = 7
		}
		return html("story "+p.Path, words(p.Path, 150), []string{
			fmt.Sprintf("rendered at 12:%02d:%02d.%d", rng.IntN(60), rng.IntN(60), renders),
			"most read: " + words(fmt.Sprint(box), 12),
		})
	}
	l := NewLearner(Options{})
	f := &fetcher{t: t, l: l, render: render}
	for i := range 6 {
		for range 2 {
			f.fetch(fmt.Sprintf("http://news.test/story/%d?cmp=%x", i, rng.Uint64()))
		}
	}
	got := rules(l, "news.test")
	if strings.Join(got[Active], " ") != "param:cmp" || len(got[Retired]) != 0 {
		t.Fatalf("rules = %v, want param:cmp active and none retired", got)
	}
	if f.fetches > 12+(Options{}).withDefaults().Refetches {
		t.Errorf("%d fetches for 12 spellings: more refetches than the budget", f.fetches)
	}
}

func TestLearnNeverMergesDistinctPages(t *testing.T) {
	// Look-alike URLs that are distinct pages, each with a clock that
	// changes on every render: a parameter that matters, a product in
	// red and in blue with its own price (one line apart), paths that
	// differ in case, extension, index file, trailing slash or a repeated
	// segment. Nothing may be merged, and no rule may rewrite.
	rng := rand.New(rand.NewPCG(5, 6))
	render := func(u string) []byte {
		p, _ := Split(u)
		ps := params(p.Query)
		text := words(p.Path+fmt.Sprint(ps["id"]), 150)
		blocks := []string{fmt.Sprintf("rendered at 12:%02d:%02d", rng.IntN(60), rng.IntN(60))}
		if c := ps["color"]; c != nil {
			price := map[string]string{"red": "10", "blue": "12"}[c[0]]
			blocks = append(blocks, "colour "+c[0]+", price "+price)
		}
		return html("control "+p.Path, text, blocks)
	}
	l := NewLearner(Options{})
	f := &fetcher{t: t, l: l, render: render}
	var urls []string
	for i := range 6 {
		urls = append(urls,
			fmt.Sprintf("http://control.test/item?id=%d", i),
			fmt.Sprintf("http://control.test/item?id=%d&color=red", i),
			fmt.Sprintf("http://control.test/item?id=%d&color=blue", i),
			fmt.Sprintf("http://control.test/Page/%d", i),
			fmt.Sprintf("http://control.test/page/%d", i),
			fmt.Sprintf("http://control.test/doc/%d.htm", i),
			fmt.Sprintf("http://control.test/doc/%d.html", i),
			fmt.Sprintf("http://control.test/dir/%d/", i),
			fmt.Sprintf("http://control.test/dir/%d/index.html", i),
			fmt.Sprintf("http://control.test/a/%d/a/", i),
			fmt.Sprintf("http://control.test/a/%d/", i),
		)
	}
	for _, u := range urls {
		if v := f.fetch(u); v.Of != "" {
			t.Errorf("%s: a duplicate of %s (%s)", u, v.Of, v.Kind)
		}
	}
	if got := rules(l, "control.test"); len(got[Active]) != 0 || len(got[Candidate]) != 0 {
		t.Errorf("rules = %v, want none", got)
	}
	if n := l.Set().Len(); n != 0 {
		t.Errorf("Set has %d hosts with rules", n)
	}
}

func TestLearnPathAliases(t *testing.T) {
	// A case-insensitive server with extension, index-file, trailing-slash
	// and repeated-segment aliases serves identical bytes for every
	// spelling of a page.
	canon := func(u string) string {
		p, _ := Split(u)
		path := collapseRepeats(strings.ToLower(p.Path))
		path = strings.TrimSuffix(path, "index.html")
		for _, e := range []string{".html", ".htm"} {
			path = strings.TrimSuffix(path, e)
		}
		return strings.TrimRight(path, "/")
	}
	render := func(u string) []byte { c := canon(u); return html("doc "+c, words(c, 100), nil) }
	l := NewLearner(Options{})
	f := &fetcher{t: t, l: l, render: render}
	for i := range 4 {
		for _, s := range []string{"/guide/p%d.html", "/Guide/P%d.html", "/guide/p%d.htm", "/guide/p%d", "/guide/guide/p%d.html",
			"/d%d/", "/d%d/index.html", "/d%d"} {
			f.fetch("http://docs.test" + fmt.Sprintf(s, i))
		}
	}
	got := rules(l, "docs.test")
	want := "case dupseg ext:.htm ext:.html index:index.html slash"
	if strings.Join(sorted(got[Active]), " ") != want {
		t.Fatalf("active rules = %v, want %s (all: %v)", sorted(got[Active]), want, got)
	}
	for _, u := range []string{"http://docs.test/GUIDE/guide/P7.HTM", "http://docs.test/guide/p7", "http://docs.test/guide/p7/"} {
		if k := l.Set().Key(u); k != "http://docs.test/guide/p7" {
			t.Errorf("Key(%q) = %q", u, k)
		}
	}
	if f.dups[Exact] == 0 || f.dups[Near] != 0 {
		t.Errorf("duplicates by kind = %v, want exact only", f.dups)
	}
}

func TestLearnMirror(t *testing.T) {
	render := func(u string) []byte { p, _ := Split(u); return html("doc "+p.Path, words(p.Path, 100), nil) }
	l := NewLearner(Options{})
	f := &fetcher{t: t, l: l, render: render}
	for i := range 4 {
		f.fetch(fmt.Sprintf("http://docs.test/p/%d", i))
	}
	for i := range 4 {
		if v := f.fetch(fmt.Sprintf("http://mirror.test/p/%d", i)); v.Of != fmt.Sprintf("http://docs.test/p/%d", i) || v.Kind != Exact {
			t.Errorf("mirror page %d: %+v", i, v)
		}
	}
	if got := rules(l, "mirror.test"); strings.Join(got[Active], " ") != "mirror:docs.test" {
		t.Fatalf("mirror rules = %v", got)
	}
	if of, seen := l.Seen("http://mirror.test/p/1"); !seen || of != "http://docs.test/p/1" {
		t.Errorf("Seen(mirror page 1) = %q, %v", of, seen)
	}
	if _, seen := l.Seen("http://mirror.test/p/9"); seen {
		t.Error("a page fetched on neither host is Seen")
	}
}

func TestMirrorTeachesItsTarget(t *testing.T) {
	// A case-insensitive docs host and its mirror; the crawl reaches
	// the mirror's spellings first, so the docs host's own are dropped
	// at fetch time as the mirror's pages. The pairs the mirror shows
	// teach the docs host's rules, under which the mirror is spelled.
	render := func(u string) []byte {
		p, _ := Split(u)
		path := strings.ToLower(p.Path)
		return html("doc "+path, words(path, 100), nil)
	}
	l := NewLearner(Options{})
	f := &fetcher{t: t, l: l, render: render}
	for i := range 3 {
		f.fetch(fmt.Sprintf("http://docs.test/p/%d", i))
		f.fetch(fmt.Sprintf("http://mirror.test/p/%d", i))
	}
	if got := rules(l, "mirror.test"); strings.Join(got[Active], " ") != "mirror:docs.test" {
		t.Fatalf("mirror rules = %v, want mirror:docs.test active", got)
	}
	for i := 3; i < 6; i++ {
		f.fetch(fmt.Sprintf("http://mirror.test/p/%d", i))
		f.fetch(fmt.Sprintf("http://mirror.test/P/%d", i))
	}
	if got := rules(l, "docs.test"); strings.Join(got[Active], " ") != "case" {
		t.Fatalf("docs rules = %v, want case active", got)
	}
	set := l.Set()
	if a, b := set.Key("http://mirror.test/P/9"), set.Key("http://docs.test/p/9"); a != b {
		t.Errorf("keys of one page: %q and %q", a, b)
	}
	if of, seen := l.Seen("http://docs.test/P/4"); !seen || !strings.HasPrefix(of, "http://mirror.test/") {
		t.Errorf("Seen(docs /P/4) = %q, %v, want the mirror's page", of, seen)
	}
}

func TestCounterexampleRetires(t *testing.T) {
	// v does not matter on the first pages, then does: the rule learned
	// from the first retires, and no longer rewrites.
	render := func(u string) []byte {
		p, _ := Split(u)
		text := p.Path
		if strings.HasPrefix(p.Path, "/late") {
			text += p.Query
		}
		return html(text, words(text, 80), nil)
	}
	l := NewLearner(Options{MinSupport: 2})
	f := &fetcher{t: t, l: l, render: render}
	for i := range 2 {
		f.fetch(fmt.Sprintf("http://h.test/early%d?v=1", i))
		f.fetch(fmt.Sprintf("http://h.test/early%d?v=2", i))
	}
	if got := rules(l, "h.test"); strings.Join(got[Active], " ") != "param:v" {
		t.Fatalf("rules = %v, want param:v active", got)
	}
	f.fetch("http://h.test/late?v=1")
	f.fetch("http://h.test/late?v=2") // an audit, or fetched before the rule reached the workers
	got := rules(l, "h.test")
	if strings.Join(got[Retired], " ") != "param:v" || len(got[Active]) != 0 {
		t.Fatalf("rules = %v, want param:v retired", got)
	}
	if k := l.Set().Key("http://h.test/x?v=3"); k != "http://h.test/x?v=3" {
		t.Errorf("a retired rule rewrites: %q", k)
	}
	rec := l.Records(true)[0].Rules[0]
	if rec.CounterExample == [2]string{} || rec.Counter == 0 {
		t.Errorf("retired rule without its counterexample: %+v", rec)
	}
}

func TestPinAndVeto(t *testing.T) {
	render := func(u string) []byte {
		p, _ := Split(u)
		return html(p.Path, words(p.Path, 80), nil)
	}
	l := NewLearner(Options{
		Pin:  []HostRule{{Host: "h.test", Rule: Rule{Kind: KindParam, Arg: "lang"}}},
		Veto: []HostRule{{Rule: Rule{Kind: KindParam, Arg: "s"}}},
	})
	if k := l.Set().Key("http://h.test/a?lang=en&s=1"); k != "http://h.test/a?s=1" {
		t.Errorf("pinned rule: Key = %q", k)
	}
	f := &fetcher{t: t, l: l, render: render}
	for i := range 5 {
		f.fetch(fmt.Sprintf("http://h.test/p%d?s=1", i))
		f.fetch(fmt.Sprintf("http://h.test/p%d?s=2", i))
	}
	got := rules(l, "h.test")
	if strings.Join(got[Pinned], " ") != "param:lang" || len(got[Active]) != 0 {
		t.Errorf("rules = %v, want only param:lang, pinned", got)
	}
	// Rules loaded from another crawl rewrite at once; a vetoed one does
	// not.
	l2 := NewLearner(Options{Veto: []HostRule{{Host: "h.test", Rule: Rule{Kind: KindCase}}}})
	l2.Load([]HostRules{{Host: "h.test", Revision: 3, Rules: []Learned{
		{Rule: Rule{Kind: KindParam, Arg: "zsid"}, State: Active, Support: 5},
		{Rule: Rule{Kind: KindCase}, State: Active, Support: 5},
	}}})
	if k := l2.Set().Key("http://h.test/A?zsid=1"); k != "http://h.test/A" {
		t.Errorf("loaded rules: Key = %q", k)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestLearnDefaultValue(t *testing.T) {
	// A listing's first page is served with p=1 and without p; its other
	// pages are not the same page. Seen first: only pairs of the first
	// page and a session id. The evidence is for "p=1 is the default",
	// never for "p does not matter", which page 2 would refute after it
	// had merged every page of every listing.
	rng := rand.New(rand.NewPCG(7, 8))
	render := func(u string) []byte {
		p, _ := Split(u)
		page := "1"
		if v := params(p.Query)["p"]; v != nil {
			page = v[0]
		}
		return html("list "+p.Path+" "+page, words(p.Path+page, 100), nil)
	}
	l := NewLearner(Options{})
	f := &fetcher{t: t, l: l, render: render}
	for i := range 5 {
		f.fetch(fmt.Sprintf("http://shop.test/c/%d?zsid=%x", i, rng.Uint64()))
		f.fetch(fmt.Sprintf("http://shop.test/c/%d?p=1&zsid=%x", i, rng.Uint64()))
	}
	for i := range 5 {
		f.fetch(fmt.Sprintf("http://shop.test/c/%d?p=2&zsid=%x", i, rng.Uint64()))
	}
	got := rules(l, "shop.test")
	if strings.Join(sorted(got[Active]), " ") != "param:p=1 param:zsid" {
		t.Errorf("rules = %v, want param:p=1 and param:zsid active", got)
	}
	for u, want := range map[string]string{
		"http://shop.test/c/1?p=1&zsid=9": "http://shop.test/c/1",
		"http://shop.test/c/1?p=2&zsid=9": "http://shop.test/c/1?p=2",
	} {
		if k := l.Set().Key(u); k != want {
			t.Errorf("Key(%q) = %q, want %q", u, k, want)
		}
	}
}

func TestRefuteRetiresTheYoungestRule(t *testing.T) {
	// zsid has held for long when a pair that differs in zsid and in x
	// (a rule learned later) turns out to be two pages: x retires, zsid
	// stays.
	clock := time.Unix(0, 0)
	render := func(u string) []byte {
		p, _ := Split(u)
		text := p.Path
		if strings.HasPrefix(p.Path, "/late") {
			text += fmt.Sprint(params(p.Query)["x"])
		}
		return html(text, words(text, 80), nil)
	}
	l := NewLearner(Options{Now: func() time.Time { clock = clock.Add(time.Second); return clock }})
	f := &fetcher{t: t, l: l, render: render}
	for i := range 3 {
		f.fetch(fmt.Sprintf("http://h.test/a%d?zsid=%d", i, i))
		f.fetch(fmt.Sprintf("http://h.test/a%d?zsid=%d", i, i+10))
	}
	for i := range 3 {
		f.fetch(fmt.Sprintf("http://h.test/b%d?x=1&zsid=1", i))
		f.fetch(fmt.Sprintf("http://h.test/b%d?x=2&zsid=1", i))
	}
	if got := rules(l, "h.test"); strings.Join(sorted(got[Active]), " ") != "param:x param:zsid" {
		t.Fatalf("rules = %v, want param:x and param:zsid active", got)
	}
	f.fetch("http://h.test/late?x=1&zsid=1")
	f.fetch("http://h.test/late?x=2&zsid=2")
	got := rules(l, "h.test")
	if strings.Join(got[Active], " ") != "param:zsid" || strings.Join(got[Retired], " ") != "param:x" {
		t.Errorf("rules = %v, want param:x retired and param:zsid active", got)
	}
}

func TestHintsNeedContent(t *testing.T) {
	// Redirects (/dN → /dN/) name pairs as one page; alone they never make
	// a rule active, with one pair of fetched pages they do.
	render := func(u string) []byte {
		p, _ := Split(u)
		path := strings.TrimSuffix(p.Path, "/")
		return html(path, words(path, 80), nil)
	}
	l := NewLearner(Options{})
	for i := range 10 {
		l.Hint(fmt.Sprintf("http://h.test/d%d", i), fmt.Sprintf("http://h.test/d%d/", i))
	}
	if got := rules(l, "h.test"); len(got[Active]) != 0 || strings.Join(got[Candidate], " ") != "slash" {
		t.Fatalf("after hints alone: rules = %v, want slash a candidate", got)
	}
	f := &fetcher{t: t, l: l, render: render}
	f.fetch("http://h.test/x/")
	f.fetch("http://h.test/x")
	if got := rules(l, "h.test"); strings.Join(got[Active], " ") != "slash" {
		t.Errorf("after one pair of pages: rules = %v, want slash active", got)
	}
}

func TestNoRulesCountsDuplicates(t *testing.T) {
	// Learning off: duplicates are still found, no rule is proposed.
	render := func(u string) []byte { p, _ := Split(u); return html(p.Path, words(p.Path, 80), nil) }
	l := NewLearner(Options{NoRules: true})
	f := &fetcher{t: t, l: l, render: render}
	for i := range 5 {
		f.fetch(fmt.Sprintf("http://h.test/p%d?s=1", i))
		f.fetch(fmt.Sprintf("http://h.test/p%d?s=2", i))
	}
	if f.dups[Exact] != 5 {
		t.Errorf("duplicates = %v, want 5 exact", f.dups)
	}
	if got := rules(l, "h.test"); len(got) != 0 || l.Set().Len() != 0 {
		t.Errorf("rules = %v, want none", got)
	}
}

func TestOverride(t *testing.T) {
	// An operator vetoes a rule the crawl learned, and pins another,
	// during the crawl.
	render := func(u string) []byte { p, _ := Split(u); return html(p.Path, words(p.Path, 80), nil) }
	l := NewLearner(Options{})
	f := &fetcher{t: t, l: l, render: render}
	for i := range 3 {
		f.fetch(fmt.Sprintf("http://h.test/p%d?s=1", i))
		f.fetch(fmt.Sprintf("http://h.test/p%d?s=2", i))
	}
	if k := l.Set().Key("http://h.test/a?s=3"); k != "http://h.test/a" {
		t.Fatalf("learned rule: Key = %q", k)
	}
	s := Rule{Kind: KindParam, Arg: "s"}
	lang := Rule{Kind: KindParam, Arg: "lang"}
	l.Override([]HostRule{{Host: "h.test", Rule: lang}}, []HostRule{{Rule: s}})
	if k := l.Set().Key("http://h.test/a?lang=de&s=3"); k != "http://h.test/a?s=3" {
		t.Errorf("after the veto and the pin: Key = %q", k)
	}
	if !l.Urgent() {
		t.Error("an override is not shared at once")
	}
	got := rules(l, "h.test")
	if strings.Join(got[Vetoed], " ") != "param:s" || strings.Join(got[Pinned], " ") != "param:lang" {
		t.Errorf("rules = %v", got)
	}
	l.Override(nil, nil)
	if got := rules(l, "h.test"); len(got[Vetoed]) != 0 || len(got[Pinned]) != 0 {
		t.Errorf("after lifting both: rules = %v", got)
	}
}

func TestListedHints(t *testing.T) {
	// A sitemap lists /dN/ where the crawl fetched /dN: a hint for slash,
	// which a pair of fetched pages then confirms.
	render := func(u string) []byte {
		p, _ := Split(u)
		path := strings.TrimSuffix(p.Path, "/")
		return html(path, words(path, 80), nil)
	}
	l := NewLearner(Options{})
	f := &fetcher{t: t, l: l, render: render}
	for i := range 4 {
		f.fetch(fmt.Sprintf("http://h.test/d%d", i))
	}
	for i := range 4 {
		l.Listed(fmt.Sprintf("http://h.test/d%d/", i))
	}
	l.Listed("http://h.test/unknown/")
	if got := rules(l, "h.test"); strings.Join(got[Candidate], " ") != "slash" || len(got[Active]) != 0 {
		t.Fatalf("after the sitemap: rules = %v, want slash a candidate", got)
	}
	f.fetch("http://h.test/d0/") // the listed spelling, fetched: the same page
	if got := rules(l, "h.test"); strings.Join(got[Active], " ") != "slash" {
		t.Errorf("after one pair of pages: rules = %v, want slash active", got)
	}
}
