package dust

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sievecrawl/sieve/fingerprint"
)

// What a Learner costs (TestLearnerCost, ./bench.sh dust): it remembers
// at most DefaultMaxPages pages a crawl, about BytesPerPage each (a page of
// 60 text blocks), whatever the crawl's size.
const (
	DefaultMaxPages = 50_000
	BytesPerPage    = 870
)

// Options configures a Learner. Zero values mean the defaults beside them.
type Options struct {
	// MinSupport is how many pairs of URLs with the same page a rule must
	// merge, with none whose pages differ, before it rewrites (3).
	MinSupport int
	// NearBits is the SimHash distance within which two pages that are
	// not otherwise the same are compared block by block against the
	// host's render-to-render noise (12 of 64 bits).
	NearBits int
	// Refetches is how many pages of a host may be fetched a second time
	// to measure what changes between two renders (4).
	Refetches int
	// MaxPages bounds the pages remembered across the crawl's hosts
	// (50,000, about 45 MB at 60 text blocks a page): past it, pages are
	// still compared with those remembered, but not remembered themselves.
	MaxPages int
	// AuditFirst: the AuditFirst-th spelling the rules would drop at fetch
	// time is fetched anyway, so that a counterexample can still be seen,
	// and then the 2·AuditFirst-th, the 4·AuditFirst-th…: a rule is checked
	// less often the longer it holds, about log2(drops/AuditFirst) fetches
	// in all (16).
	AuditFirst int
	// Pin are rules active from the start, Veto rules never active, each
	// for a host ("" for every host in Veto).
	Pin, Veto []HostRule
	// NoRules finds and reports duplicates but learns no rule (a crawl
	// whose learning is off), and asks for no second render.
	NoRules bool
	// Incarnation is the crawl's, written into its records.
	Incarnation string
	// Now tells the time (default time.Now).
	Now func() time.Time
}

// HostRule is a rule of one host, as a crawl's settings name it:
// "host rule", such as "shop.example:8080 param:zsid".
type HostRule struct {
	Host string
	Rule Rule
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MinSupport, 3)
	def(&o.NearBits, 12)
	def(&o.Refetches, 4)
	def(&o.MaxPages, DefaultMaxPages)
	def(&o.AuditFirst, 16)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Duplicate kinds: what made two fetches one page.
const (
	// Exact: the payloads are byte for byte the same (same digest).
	Exact = "exact"
	// Near: the visible text is the same, or differs only in blocks the
	// host's pages change between two renders of one URL.
	Near = "near"
)

// Verdict is what a Learner makes of a fetched page.
type Verdict struct {
	// Of is an earlier URL of the crawl whose page this is ("" when the
	// page is new), and Kind how they matched (Exact or Near).
	Of, Kind string
	// Refetch asks the caller to fetch the URL once more and hand both
	// renders to ObserveRenders: the page is near an earlier one, and
	// whether the difference is the host's noise is not known yet.
	Refetch bool
}

// page is a remembered fetch.
type page struct {
	url    string
	host   *host
	digest string
	text   uint64
	sim    uint64
	blocks []fingerprint.Block
}

// candidate is a set of rules proposed together (most often one): the
// hypothesis that the URLs they merge name one page. Every remembered page
// is filed under its key with the host's active rules and these; two pages
// under one key are support when they are the same page, a counterexample
// when not.
type candidate struct {
	rules    []Rule
	mirror   string // the host a mirror candidate spells its host's URLs on
	keys     map[uint64]int32
	hints    int // pairs the site named as one page (a redirect, a canonical link)
	support  int
	counter  int
	examples [][2]string
	counterX [2]string
	proposed time.Time
}

// host is what a Learner knows of one host.
type host struct {
	name      string
	seq       int     // order in which the crawl met the host
	pages     []int32 // indexes into Learner.pages
	byDigest  map[string]int32
	byText    map[uint64]int32
	byStable  map[uint64]int32
	byLoose   map[uint64][]int32 // loose key → the last maxLoose pages with it
	noise     map[uint32]bool    // block paths that changed between two renders
	stable    map[uint32]uint8   // block paths that did not: in how many pairs of renders
	refetches int
	learned   map[string]*Learned // by Rule.String()
	cands     map[string]*candidate
	revision  int
	dirty     bool
}

// Learner learns one crawl's rewrite rules from what its crawler fetches:
// pages with the same content under different URLs propose rules, merges of
// different pages refute them. It is safe for concurrent use.
//
// # The same page
//
// Two fetches are the same page when their payloads are identical (Exact),
// or when their visible texts are (Near: links that carry a session id
// differ only in their hrefs), or when the text blocks that differ are all
// blocks the host changes between two renders of one URL (Near: a clock, a
// reader count, a rotating box). That noise is measured, never assumed: a
// page close to an earlier one (SimHash within NearBits) whose differing
// blocks have not been seen across two renders is fetched a second time
// (Verdict.Refetch), and the blocks that changed between its renders join
// the host's noise; those that stayed the same in two such pairs are its
// stable blocks (one pair is not enough: a box rotating among a few values
// stays now and then), and until then a difference in them asks for
// another render, within the host's budget. Two pages that differ
// in a stable block (a product in red and in blue, with its own price) are
// distinct, however close their SimHashes.
//
// # Rules
//
// A pair of URLs of one host with the same page proposes the smallest set
// of rules (Kind) that gives both one key; a pair on two hosts with the
// same path proposes that the later host mirrors the earlier. The set is a
// candidate: every remembered page of the host is filed under its key with
// the active rules and the candidate's, and every later page too; two
// pages under one key support it when they are the same page and refute
// it when not. A candidate with MinSupport support and no counterexample
// becomes active; an active rule that merges two different pages later
// (an audit fetch, a page fetched before the rule reached the workers)
// retires for the rest of the crawl.
//
// A host that mirrors another (an active mirror rule) spells its URLs on
// its target under the target's rules, so its own pairs propose and
// support the target's rules: the crawl may reach a site's spellings on
// its mirror first and drop the target's own as already fetched, and the
// target must still learn them.
type Learner struct {
	mu       sync.Mutex
	o        Options
	seed     maphash.Seed
	pages    []page
	hosts    map[string]*host
	byDigest map[string]int32  // crawl-wide, for mirrors
	fetched  map[uint64]int32  // key under the active rules → a page with that key
	mirrors  map[*host][]*host // a host → the hosts that mirror it (active rules)
	watch    map[*host][]*host // a host → the hosts that may mirror it (candidates)
	set      *Set
	drops    int  // spellings Seen reported or audited
	audit    int  // the drop that is fetched as the next audit
	urgent   bool // active rules changed since Records last ran
}

// NewLearner returns a Learner for one crawl.
func NewLearner(o Options) *Learner {
	l := &Learner{o: o.withDefaults(), seed: maphash.MakeSeed(), hosts: map[string]*host{},
		byDigest: map[string]int32{}, fetched: map[uint64]int32{}, set: NewSet(nil), watch: map[*host][]*host{}}
	now := l.o.Now()
	for _, p := range l.o.Pin {
		h := l.host(p.Host)
		h.learned[p.Rule.String()] = &Learned{Rule: p.Rule, State: Pinned, Proposed: now, Since: now}
		h.revision++
		l.urgent = true
		h.dirty = true
	}
	l.rebuild()
	return l
}

// Load starts the Learner from rules learned before (another crawl of the
// same hosts, or this crawl before a restart): their active rules rewrite
// at once and go on being checked.
func (l *Learner) Load(records []HostRules) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, rec := range records {
		h := l.host(rec.Host)
		for _, lr := range rec.Rules {
			k := lr.Rule.String()
			if old, ok := h.learned[k]; ok && (old.State == Pinned || old.State == Vetoed) {
				continue
			}
			c := lr
			if l.vetoed(rec.Host, lr.Rule) {
				c.State = Vetoed
			}
			h.learned[k] = &c
		}
		if rec.Revision > h.revision {
			h.revision = rec.Revision
		}
		h.dirty = true
		l.urgent = true // shared at once: the workers of this crawl may not have them
	}
	l.rebuild()
}

func (l *Learner) host(name string) *host {
	h, ok := l.hosts[name]
	if !ok {
		h = &host{name: name, seq: len(l.hosts), byDigest: map[string]int32{}, byText: map[uint64]int32{}, byStable: map[uint64]int32{}, byLoose: map[uint64][]int32{},
			noise: map[uint32]bool{}, stable: map[uint32]uint8{}, learned: map[string]*Learned{}, cands: map[string]*candidate{}}
		l.hosts[name] = h
	}
	return h
}

func (l *Learner) vetoed(hostName string, r Rule) bool {
	for _, v := range l.o.Veto {
		if (v.Host == "" || v.Host == hostName) && v.Rule == r {
			return true
		}
	}
	return false
}

// Set returns the crawl's active rules, for rewriting.
func (l *Learner) Set() *Set {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.set
}

// Seen reports whether the canonical URL u names a page already fetched
// under another spelling, by the active rules: the caller may drop it
// unfetched (of is that spelling). The AuditFirst-th such URL, then the
// 2·AuditFirst-th and so on, is reported unseen, so that the rules are
// checked against a real fetch now and then.
func (l *Learner) Seen(u string) (of string, seen bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.set.Len() == 0 {
		return "", false
	}
	i, ok := l.fetched[l.hash(l.set.Key(u))]
	if !ok || l.pages[i].url == u {
		return "", false
	}
	l.drops++
	if l.audit == 0 {
		l.audit = l.o.AuditFirst
	}
	if l.drops == l.audit {
		l.audit *= 2
		return "", false
	}
	l.credit(u, l.pages[i].url)
	return l.pages[i].url, true
}

// credit counts a saved fetch on the rules that merge u with of: those
// without which their keys differ.
func (l *Learner) credit(u, of string) {
	p, ok := Split(u)
	if !ok {
		return
	}
	h, ok := l.hosts[p.Host]
	if !ok {
		return
	}
	active := h.active()
	for _, r := range active {
		without := withoutRule(active, r)
		if l.keyWith(h, without, u) != l.keyWith(h, without, of) {
			h.learned[r.String()].Saved++
			h.dirty = true
		}
	}
}

// withoutRule is rs less r, a new slice.
func withoutRule(rs []Rule, r Rule) []Rule {
	return slices.DeleteFunc(slices.Clone(rs), func(x Rule) bool { return x == r })
}

// Observe takes a fetched page: u is its canonical URL, p its fingerprint.
// It reports whether an earlier URL had the same page, or asks for a
// second render (Verdict.Refetch) before it can say; such a page is not
// taken yet, and the caller hands both renders to ObserveRenders.
func (l *Learner) Observe(u string, p fingerprint.Print) Verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.observe(u, p, true)
}

// ObserveRenders takes a page fetched twice (Verdict.Refetch): what
// changed between the renders is the host's noise, what did not is
// stable; then the first render is observed as Observe would, without
// asking again.
func (l *Learner) ObserveRenders(u string, first, second fingerprint.Print) Verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sp, ok := Split(u); ok {
		h := l.host(sp.Host)
		h.refetches++
		changed := fingerprint.Changed(first.Blocks, second.Blocks)
		grew := false
		for _, c := range changed {
			if !h.noise[c] {
				h.noise[c] = true
				delete(h.stable, c)
				grew = true
			}
		}
		for _, b := range first.Blocks {
			if !slices.Contains(changed, b.Path) && !h.noise[b.Path] && h.stable[b.Path] < stableRenders {
				h.stable[b.Path]++
			}
		}
		if grew {
			h.byStable = map[uint64]int32{}
			for _, i := range h.pages {
				sh := h.stableHash(l.pages[i].blocks)
				if _, ok := h.byStable[sh]; !ok {
					h.byStable[sh] = i
				}
			}
		}
	}
	return l.observe(u, first, false)
}

// ObserveOnce is Observe for a page that could not be fetched again: it
// never asks for a second render.
func (l *Learner) ObserveOnce(u string, p fingerprint.Print) Verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.observe(u, p, false)
}

func (l *Learner) observe(u string, p fingerprint.Print, mayRefetch bool) Verdict {
	sp, ok := Split(u)
	if !ok {
		return Verdict{}
	}
	h := l.host(sp.Host)
	cur := page{url: u, host: h, digest: p.Digest, text: p.Text, sim: p.SimHash, blocks: keptBlocks(p.Blocks)}
	var v Verdict
	var of int32 = -1
	switch i, ok := h.byDigest[p.Digest]; {
	case ok && p.Digest != "":
		of, v = i, Verdict{Of: l.pages[i].url, Kind: Exact}
	default:
		if i, ok := h.byText[p.Text]; ok && p.Text != 0 {
			of, v = i, Verdict{Of: l.pages[i].url, Kind: Near}
			break
		}
		if len(h.noise) > 0 && len(p.Blocks) > 0 {
			if i, ok := h.byStable[h.stableHash(p.Blocks)]; ok {
				of, v = i, Verdict{Of: l.pages[i].url, Kind: Near}
				break
			}
		}
		if !mayRefetch || l.o.NoRules || h.refetches >= l.o.Refetches {
			break
		}
		if near := l.nearest(h, u, p); near >= 0 && l.mergeable(h, l.pages[near].url, u) &&
			h.untested(fingerprint.Changed(l.pages[near].blocks, p.Blocks)) {
			return Verdict{Refetch: true}
		}
	}
	mirrorOf := int32(-1)
	if of < 0 && p.Digest != "" {
		if i, ok := l.byDigest[p.Digest]; ok && l.pages[i].host != h {
			mirrorOf = i
			v = Verdict{Of: l.pages[i].url, Kind: Exact}
		}
	}
	if of >= 0 && l.pages[of].url == u {
		return Verdict{} // the same URL again (a retry): nothing to learn
	}
	idx := int32(-1)
	if len(l.pages) < l.o.MaxPages {
		idx = int32(len(l.pages))
		l.pages = append(l.pages, cur)
		h.pages = append(h.pages, idx)
		lk := l.hash(loose(u))
		if same := h.byLoose[lk]; len(same) >= maxLoose {
			h.byLoose[lk] = append(same[1:], idx)
		} else {
			h.byLoose[lk] = append(same, idx)
		}
		if _, ok := h.byDigest[p.Digest]; !ok && p.Digest != "" {
			h.byDigest[p.Digest] = idx
		}
		if _, ok := l.byDigest[p.Digest]; !ok && p.Digest != "" {
			l.byDigest[p.Digest] = idx
		}
		if _, ok := h.byText[p.Text]; !ok && p.Text != 0 {
			h.byText[p.Text] = idx
		}
		if sh := h.stableHash(p.Blocks); len(p.Blocks) > 0 {
			if _, ok := h.byStable[sh]; !ok {
				h.byStable[sh] = idx
			}
		}
	}
	l.evidence(h, &cur, idx)
	switch {
	case of >= 0:
		l.propose(h, l.pages[of].url, u)
	case mirrorOf >= 0:
		l.proposeMirror(h, l.pages[mirrorOf], u)
	}
	l.settle(h)
	if t := l.mirrorTarget(h); t != nil {
		l.settle(t)
	}
	return v
}

// mergeable reports whether rules of ours could give a and b (URLs of h)
// one key: only then is a second render worth fetching to tell whether
// they are one page.
func (l *Learner) mergeable(h *host, a, b string) bool {
	ua, ok1 := Split(a)
	ub, ok2 := Split(b)
	if !ok1 || !ok2 || ua.Host != ub.Host {
		return false
	}
	rs := append(h.active(), applicable(ua, ub)...)
	return l.keyWith(h, rs, a) == l.keyWith(h, rs, b)
}

// Override replaces the crawl's pinned and vetoed rules (an operator
// changed them during the crawl): a vetoed rule stops rewriting at once
// and is never proposed again, a pinned one rewrites at once; a rule no
// longer pinned or vetoed is forgotten, to be learned again or not.
func (l *Learner) Override(pin, veto []HostRule) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.o.Pin, l.o.Veto = pin, veto
	now := l.o.Now()
	touch := func(h *host) {
		h.revision++
		h.dirty = true
		l.urgent = true
	}
	for _, h := range l.hosts {
		for k, lr := range h.learned {
			switch {
			case lr.State == Pinned && !slices.Contains(pin, HostRule{Host: h.name, Rule: lr.Rule}):
				delete(h.learned, k)
				touch(h)
			case lr.State == Vetoed && !l.vetoed(h.name, lr.Rule):
				delete(h.learned, k)
				touch(h)
			case lr.State != Vetoed && lr.State != Pinned && l.vetoed(h.name, lr.Rule):
				lr.State, lr.Since = Vetoed, now
				touch(h)
			}
		}
		for id, c := range h.cands {
			for _, r := range c.rules {
				if l.vetoed(h.name, r) {
					delete(h.cands, id)
					break
				}
			}
		}
	}
	for _, p := range pin {
		h := l.host(p.Host)
		if lr, ok := h.learned[p.Rule.String()]; ok && lr.State == Pinned {
			continue
		}
		h.learned[p.Rule.String()] = &Learned{Rule: p.Rule, State: Pinned, Proposed: now, Since: now}
		touch(h)
	}
	l.rebuild()
}

// Hint takes what a site says of two URLs of one host: that a redirects to
// b, or that b's canonical URL is a. It proposes the rules that would give
// them one key, and counts the hint toward them, but never makes a rule
// active alone: a rule needs a pair of fetched pages with the same content
// too, and none that differs (a hint is checked against content, never
// trusted blindly).
func (l *Learner) Hint(a, b string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ua, ok1 := Split(a)
	ub, ok2 := Split(b)
	if !ok1 || !ok2 || ua.Host != ub.Host || a == b || l.set.Key(a) == l.set.Key(b) {
		return
	}
	h := l.host(ua.Host)
	if c := l.propose(h, a, b); c != nil {
		c.hints++
		l.settle(h)
		if t := l.mirrorTarget(h); t != nil {
			l.settle(t)
		}
	}
}

// Listed takes a URL a sitemap lists: the spelling its site calls its
// own. Each remembered page of its host that rules could merge with it
// (the same loose key) but that was fetched under another spelling makes
// a hint that the two name one page (at most a few, the latest).
func (l *Learner) Listed(u string) {
	l.mu.Lock()
	p, ok := Split(u)
	if !ok {
		l.mu.Unlock()
		return
	}
	h, ok := l.hosts[p.Host]
	var others []string
	if ok {
		for _, i := range h.byLoose[l.hash(loose(u))] {
			if o := l.pages[i].url; o != u && len(others) < 4 {
				others = append(others, o)
			}
		}
	}
	l.mu.Unlock()
	for _, o := range others {
		l.Hint(u, o)
	}
}

// nearest is the remembered page of h closest to p by SimHash, within
// NearBits, or -1.
//
// Only pages that some rules could merge with u are looked at: those with
// u's loose key (package loose), at most the last maxLoose of them, so the
// look-up costs the same on a host of a million pages as on one of ten.
func (l *Learner) nearest(h *host, u string, p fingerprint.Print) int32 {
	best, bestD := int32(-1), l.o.NearBits+1
	for _, i := range h.byLoose[l.hash(loose(u))] {
		if d := fingerprint.Distance(l.pages[i].sim, p.SimHash); d < bestD {
			best, bestD = i, d
		}
	}
	return best
}

// maxKept is the most blocks a remembered page keeps: the first
// maxKept-1 and one that folds the rest (its Path never a real one's), so a
// difference past them still tells two pages apart.
const maxKept = 64

// foldPath is the Path of the block that folds a long page's last blocks.
const foldPath = 0xffffffff

func keptBlocks(b []fingerprint.Block) []fingerprint.Block {
	if len(b) <= maxKept {
		return b
	}
	var x uint32 = 2166136261
	for _, r := range b[maxKept-1:] {
		x = (x ^ r.Path) * 16777619
		x = (x ^ r.Text) * 16777619
	}
	out := make([]fingerprint.Block, maxKept)
	copy(out, b[:maxKept-1])
	out[maxKept-1] = fingerprint.Block{Path: foldPath, Text: x}
	return out
}

// maxLoose bounds the pages a loose key keeps for nearest.
const maxLoose = 64

// loose is u with every rule of every kind applied as far as it goes: path
// in lower case, repeated segments, index files, extensions and trailing
// slashes gone, and no query. Two URLs that any rules could give one key
// have one loose key.
func loose(u string) string {
	p, ok := Split(u)
	if !ok {
		return u
	}
	r := Rules{lower: true, dupseg: true, slash: true, index: IndexNames, ext: Extensions}
	p.Path = r.rewritePath(p.Path)
	p.Query = ""
	return p.String()
}

// stableRenders is in how many pairs of renders a block must stay the
// same before it is taken as stable: a box that rotates among a few
// values (three "most read" stories of a hundred) shows one of them twice
// in a row now and then, and a block taken as stable on one such pair
// would make every later pair of renders of one page two pages, refuting
// a true rule for the rest of the crawl. On two pairs the chance falls
// from 1/k to 1/k² (k values).
const stableRenders = 2

// untested reports whether some of the paths have been seen neither
// changing between two renders nor staying in stableRenders pairs.
func (h *host) untested(paths []uint32) bool {
	for _, p := range paths {
		if !h.noise[p] && h.stable[p] < stableRenders {
			return true
		}
	}
	return false
}

// stableHash hashes the blocks outside the host's noise.
func (h *host) stableHash(blocks []fingerprint.Block) uint64 {
	var x uint64 = 14695981039346656037
	for _, b := range blocks {
		if h.noise[b.Path] {
			continue
		}
		x ^= uint64(b.Path)<<32 | uint64(b.Text)
		x *= 1099511628211
		x ^= x >> 29
	}
	return x
}

// same reports whether two pages are one, and how. Pages of two hosts
// are one only when their bytes are: a mirror serves the same payload, and
// two sites whose pages share their text but not their links (a template
// filled alike) are not mirrors.
func (l *Learner) same(a, b *page) (string, bool) {
	if a.host != b.host {
		if a.digest != "" && a.digest == b.digest {
			return Exact, true
		}
		return "", false
	}
	switch {
	case a.digest != "" && a.digest == b.digest:
		return Exact, true
	case a.text != 0 && a.text == b.text:
		return Near, true
	}
	diff := fingerprint.Changed(a.blocks, b.blocks)
	if len(diff) == 0 {
		return "", false // no text to tell them apart: not evidence either way
	}
	for _, d := range diff {
		if !a.host.noise[d] || !b.host.noise[d] {
			return "", false
		}
	}
	return Near, true
}

// active is the rules of h that rewrite, in order.
func (h *host) active() []Rule {
	var rs []Rule
	for _, lr := range h.learned {
		if lr.State.rewrites() {
			rs = append(rs, lr.Rule)
		}
	}
	sortRules(rs)
	return rs
}

// keyWith is u's key under rules of h (a mirror rule among them spells it
// on its target, under the target's active rules).
func (l *Learner) keyWith(h *host, rules []Rule, u string) string {
	p, ok := Split(u)
	if !ok {
		return u
	}
	c := Compile(rules)
	if c.mirror != "" {
		p.Host = c.mirror
		if t, ok := l.hosts[c.mirror]; ok {
			tc := Compile(t.active())
			tc.mirror = ""
			return tc.rewrite(p).String()
		}
		c.mirror = ""
	}
	return c.rewrite(p).String()
}

func (l *Learner) hash(s string) uint64 { return maphash.String(l.seed, s) }

// evidence files the new page (index idx, or -1 when not remembered) under
// the keys of h's candidates and of the active rules, counting support and
// counterexamples.
func (l *Learner) evidence(h *host, cur *page, idx int32) {
	l.fileNew(h, cur.url, cur, idx)
	if t := l.mirrorTarget(h); t != nil {
		// A mirror's pages are its target's, spelled on the target.
		l.fileNew(t, rehost(cur.url, t.name), cur, idx)
	}
	// A host that may mirror h meets h's pages as they come.
	for _, m := range l.watch[h] {
		for _, c := range m.cands {
			if c.counter > 0 || c.mirror != h.name {
				continue
			}
			// As file does, pairs of h's own pages are not the
			// candidate's evidence: only a page of m beside one of h.
			k := l.hash(l.keyWith(h, h.active(), cur.url))
			if j, ok := c.keys[k]; !ok && idx >= 0 {
				c.keys[k] = idx
			} else if ok && l.pages[j].host == m {
				l.judge(c, &l.pages[j], cur)
			}
		}
	}
	if l.set.Len() == 0 {
		return
	}
	key := l.set.Key(cur.url)
	k := l.hash(key)
	j, ok := l.fetched[k]
	if !ok {
		if idx >= 0 {
			l.fetched[k] = idx
		}
		return
	}
	other := &l.pages[j]
	if other.url == cur.url {
		return
	}
	if _, same := l.same(other, cur); same {
		return
	}
	l.refute(h, other, cur)
}

// fileNew files a new page, spelled u on h, under h's candidates' keys.
func (l *Learner) fileNew(h *host, u string, cur *page, idx int32) {
	for _, c := range h.cands {
		if c.counter > 0 {
			continue
		}
		k := l.hash(l.keyWith(h, append(h.active(), c.rules...), u))
		if j, ok := c.keys[k]; ok {
			l.judge(c, &l.pages[j], cur)
		} else if idx >= 0 {
			c.keys[k] = idx
		}
	}
}

// mirrorTarget is the host h mirrors by an active rule, or nil.
func (l *Learner) mirrorTarget(h *host) *host {
	if m := h.mirrorOf(); m != "" {
		return l.hosts[m]
	}
	return nil
}

// rehost is u on host.
func rehost(u, host string) string {
	p, ok := Split(u)
	if !ok {
		return u
	}
	p.Host = host
	return p.String()
}

// judge counts a pair a candidate merges.
func (l *Learner) judge(c *candidate, a, b *page) {
	if a.url == b.url {
		return
	}
	if _, same := l.same(a, b); same {
		c.support++
		if len(c.examples) < 3 {
			c.examples = append(c.examples, [2]string{a.url, b.url})
		}
		return
	}
	c.counter++
	if c.counterX == [2]string{} {
		c.counterX = [2]string{a.url, b.url}
	}
}

// refute retires the active rules that merge a and b, two different pages.
func (l *Learner) refute(h *host, a, b *page) {
	// Of the learned rules without which the two would not meet, the
	// culprit is taken to be the youngest: older ones have held for longer
	// without a counterexample. One goes; if the pair still meets, the
	// next comes up with the next counterexample.
	var culprit *Learned
	var at *host
	for _, hh := range []*host{a.host, b.host} {
		active := hh.active()
		for _, r := range active {
			lr := hh.learned[r.String()]
			if lr.State != Active {
				continue // pinned rules stay
			}
			without := withoutRule(active, r)
			if l.keyWith(hh, without, a.url) == l.keyWith(hh, without, b.url) && hh == h && a.host == b.host {
				continue
			}
			if culprit == nil || lr.Since.After(culprit.Since) || (lr.Since.Equal(culprit.Since) && lr.Support < culprit.Support) {
				culprit, at = lr, hh
			}
		}
	}
	if culprit == nil {
		return
	}
	culprit.State, culprit.Since = Retired, l.o.Now()
	culprit.Counter++
	culprit.CounterExample = [2]string{a.url, b.url}
	at.revision++
	at.dirty = true
	l.urgent = true
	l.rebuild()
}

// applicable lists the rules that would change a's or b's spelling, of
// those known to h as neither rewriting nor refused.
func applicable(a, b URL) []Rule {
	var rs []Rule
	add := func(r Rule) {
		if !slices.Contains(rs, r) {
			rs = append(rs, r)
		}
	}
	for _, p := range []string{a.Path, b.Path} {
		if a.Path != b.Path && strings.ToLower(p) != p {
			add(Rule{Kind: KindCase})
		}
		if collapseRepeats(p) != p {
			add(Rule{Kind: KindDupSeg})
		}
		for _, q := range []string{p, strings.ToLower(p)} {
			last := q[strings.LastIndexByte(q, '/')+1:]
			if slices.Contains(IndexNames, last) {
				add(Rule{Kind: KindIndex, Arg: last})
			}
			if j := strings.LastIndexByte(last, '.'); j > 0 && slices.Contains(Extensions, last[j:]) {
				add(Rule{Kind: KindExt, Arg: last[j:]})
			}
		}
		if len(p) > 1 && strings.HasSuffix(p, "/") {
			add(Rule{Kind: KindSlash})
		}
	}
	pa, pb := params(a.Query), params(b.Query)
	for _, name := range sortedKeys(pa, pb) {
		va, vb := pa[name], pb[name]
		switch {
		case slices.Equal(va, vb):
		case len(va) == 0 && len(vb) == 1:
			// Absent on one side, one value on the other: the evidence
			// is that this value is the default, not that any value is.
			add(Rule{Kind: KindParam, Arg: name + "=" + vb[0]})
		case len(vb) == 0 && len(va) == 1:
			add(Rule{Kind: KindParam, Arg: name + "=" + va[0]})
		default:
			add(Rule{Kind: KindParam, Arg: name})
		}
	}
	return rs
}

// IndexNames are the file names a directory's page is served under.
var IndexNames = []string{"index.html", "index.htm", "index.php", "index.shtml", "index.asp", "index.aspx", "index.jsp", "index.cgi",
	"default.htm", "default.html", "default.asp", "default.aspx"}

// Extensions are the extensions a page's URL may be spelled with or
// without.
var Extensions = []string{".html", ".htm", ".php", ".shtml", ".xhtml", ".asp", ".aspx", ".jsp", ".cgi", ".pl", ".cfm"}

func params(q string) map[string][]string {
	m := map[string][]string{}
	if q == "" {
		return m
	}
	for _, p := range strings.Split(q, "&") {
		name, val, _ := strings.Cut(p, "=")
		m[name] = append(m[name], val)
	}
	for _, v := range m {
		slices.Sort(v)
	}
	return m
}

func sortedKeys(a, b map[string][]string) []string {
	var ks []string
	for k := range a {
		ks = append(ks, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

// propose makes the smallest set of rules that gives a and b (URLs of h
// with one page) one key a candidate, if it is not one already.
//
// The rules a host that mirrors another would need are its target's: its
// URLs are spelled on the target, under the target's rules. A pair of the
// mirror's proposes them there, so a target whose own spellings the crawl
// reached second (dropped at fetch time as the mirror's) still learns.
func (l *Learner) propose(h *host, a, b string) *candidate {
	if t := l.mirrorTarget(h); t != nil {
		h, a, b = t, rehost(a, t.name), rehost(b, t.name)
	}
	ua, ok1 := Split(a)
	ub, ok2 := Split(b)
	if !ok1 || !ok2 || ua.Host != ub.Host {
		return nil
	}
	active := h.active()
	var cands []Rule
	for _, r := range applicable(ua, ub) {
		if lr, ok := h.learned[r.String()]; ok && lr.State != Candidate {
			continue // active already, or refused
		}
		if l.vetoed(h.name, r) {
			continue
		}
		cands = append(cands, r)
	}
	if len(cands) == 0 || l.keyWith(h, append(slices.Clone(active), cands...), a) != l.keyWith(h, append(slices.Clone(active), cands...), b) {
		return nil // no rule of ours explains the pair
	}
	sortRules(cands)
	for i := 0; i < len(cands); {
		without := slices.Delete(slices.Clone(cands), i, i+1)
		rs := append(slices.Clone(active), without...)
		if len(without) > 0 && l.keyWith(h, rs, a) == l.keyWith(h, rs, b) {
			cands = without
			continue
		}
		i++
	}
	return l.candidate(h, cands)
}

// proposeMirror proposes that h (the host of u) mirrors the host of
// earlier, whose page u has.
//
// A host only mirrors a host seen before it in the crawl (the pair in the
// other order proposes the other way), and a mirror of a mirror is spelled
// on the first: mirror rules never form a cycle, in which two hosts each
// spelled on the other would never meet.
func (l *Learner) proposeMirror(h *host, earlier page, u string) {
	target := earlier.host
	if t := target.mirrorOf(); t != "" {
		if tt, ok := l.hosts[t]; ok {
			target = tt
		}
	}
	if target.seq >= h.seq || h.mirrorOf() != "" {
		return
	}
	r := Rule{Kind: KindMirror, Arg: target.name}
	if lr, ok := h.learned[r.String()]; (ok && lr.State != Candidate) || l.vetoed(h.name, r) {
		return
	}
	if l.keyWith(h, []Rule{r}, u) != l.set.Key(earlier.url) {
		return // not the same path
	}
	l.candidate(h, []Rule{r})
}

func (h *host) mirrorOf() string {
	for _, lr := range h.learned {
		if lr.Kind == KindMirror && lr.State.rewrites() {
			return lr.Arg
		}
	}
	return ""
}

// candidate files every remembered page of h under the key of a new
// candidate made of rules.
func (l *Learner) candidate(h *host, rules []Rule) *candidate {
	if len(rules) == 0 || l.o.NoRules {
		return nil
	}
	id := ruleSetID(rules)
	if c, ok := h.cands[id]; ok {
		return c
	}
	c := &candidate{rules: rules, mirror: Compile(rules).mirror, keys: map[uint64]int32{}, proposed: l.o.Now()}
	h.cands[id] = c
	if t, ok := l.hosts[c.mirror]; ok && !slices.Contains(l.watch[t], h) {
		l.watch[t] = append(l.watch[t], h)
	}
	l.file(h, c)
	for _, r := range rules {
		if _, ok := h.learned[r.String()]; !ok {
			h.learned[r.String()] = &Learned{Rule: r, State: Candidate, Proposed: c.proposed, Since: c.proposed}
		}
	}
	h.dirty = true
	return c
}

// file (re)files h's remembered pages under c's keys, counting what they
// show. A mirror candidate files its target's pages too, so that its
// pages meet theirs.
func (l *Learner) file(h *host, c *candidate) {
	c.keys = map[uint64]int32{}
	c.support, c.counter, c.examples, c.counterX = 0, 0, nil, [2]string{}
	rules := append(h.active(), c.rules...)
	if c.mirror != "" {
		if t, ok := l.hosts[c.mirror]; ok {
			for _, i := range t.pages {
				k := l.hash(l.keyWith(t, t.active(), l.pages[i].url))
				if _, ok := c.keys[k]; !ok {
					c.keys[k] = i
				}
			}
		}
	}
	put := func(i int32, u string) {
		k := l.hash(l.keyWith(h, rules, u))
		if j, ok := c.keys[k]; ok {
			l.judge(c, &l.pages[j], &l.pages[i])
			return
		}
		c.keys[k] = i
	}
	for _, i := range h.pages {
		put(i, l.pages[i].url)
	}
	for _, m := range l.mirrors[h] {
		for _, i := range m.pages {
			put(i, rehost(l.pages[i].url, h.name))
		}
	}
}

func ruleSetID(rs []Rule) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	return strings.Join(s, " ")
}

// settle activates h's candidates with enough support and none against,
// and marks refuted ones.
func (l *Learner) settle(h *host) {
	now := l.o.Now()
	changed := false
	for id, c := range h.cands {
		for _, r := range c.rules {
			lr := h.learned[r.String()]
			if lr == nil {
				continue
			}
			if lr.State == Candidate && (lr.Support != c.support || lr.Counter != c.counter) {
				lr.Support, lr.Counter, lr.Examples = c.support, c.counter, c.examples
				h.dirty = true
			}
		}
		switch {
		case c.counter > 0:
			for _, r := range c.rules {
				lr := h.learned[r.String()]
				if lr == nil {
					continue
				}
				if lr.State == Candidate && l.onlyIn(h, r, id) {
					lr.State, lr.Since, lr.CounterExample = Retired, now, c.counterX
				}
			}
			delete(h.cands, id)
			h.dirty = true
		case c.support >= 1 && c.support+c.hints >= l.o.MinSupport:
			for _, r := range c.rules {
				lr := h.learned[r.String()]
				if lr == nil {
					continue
				}
				if name, _, isValue := strings.Cut(r.Arg, "="); r.Kind == KindParam && isValue {
					if g, ok := h.learned[string(KindParam)+":"+name]; ok && g.State.rewrites() {
						delete(h.learned, r.String()) // the general rule holds already
						continue
					}
				}
				if lr.State == Candidate {
					lr.State, lr.Since = Active, now
					lr.Support, lr.Examples, lr.Wasted = c.support, c.examples, c.support
				}
				if r.Kind == KindParam && !strings.Contains(r.Arg, "=") {
					l.subsume(h, r.Arg)
				}
			}
			delete(h.cands, id)
			h.revision++
			l.urgent = true
			h.dirty = true
			changed = true
		}
	}
	if changed {
		l.rebuild()
	}
}

// subsume forgets the rules and candidates of h that drop one value of
// the parameter name, now that any value goes: their support is the
// general rule's.
func (l *Learner) subsume(h *host, name string) {
	prefix := string(KindParam) + ":" + name + "="
	for k, lr := range h.learned {
		if strings.HasPrefix(k, prefix) && (lr.State == Active || lr.State == Candidate) {
			delete(h.learned, k)
		}
	}
	for id, c := range h.cands {
		for _, r := range c.rules {
			if r.Kind == KindParam && strings.HasPrefix(r.Arg, name+"=") {
				delete(h.cands, id)
				break
			}
		}
	}
}

// onlyIn reports whether r is in no candidate of h but id.
func (l *Learner) onlyIn(h *host, r Rule, id string) bool {
	for cid, c := range h.cands {
		if cid != id && slices.Contains(c.rules, r) {
			return false
		}
	}
	return true
}

// rebuild recompiles the crawl's Set and refiles every page under the
// active rules' keys and every candidate's, after the active rules
// changed.
func (l *Learner) rebuild() {
	recs := make([]HostRules, 0, len(l.hosts))
	for _, h := range l.hosts {
		recs = append(recs, HostRules{Host: h.name, Rules: h.learnedList()})
	}
	l.set = NewSet(recs)
	l.mirrors = map[*host][]*host{}
	for _, h := range l.hosts {
		if t := l.mirrorTarget(h); t != nil {
			l.mirrors[t] = append(l.mirrors[t], h)
		}
	}
	l.fetched = map[uint64]int32{}
	for i := range l.pages {
		k := l.hash(l.set.Key(l.pages[i].url))
		if _, ok := l.fetched[k]; !ok {
			l.fetched[k] = int32(i)
		}
	}
	for _, h := range l.hosts {
		for _, c := range h.cands {
			l.file(h, c)
		}
	}
}

func (h *host) learnedList() []Learned {
	out := make([]Learned, 0, len(h.learned))
	for _, lr := range h.learned {
		out = append(out, *lr)
	}
	slices.SortFunc(out, func(a, b Learned) int { return strings.Compare(a.Rule.String(), b.Rule.String()) })
	return out
}

// Urgent reports whether some host's active rules changed since Records
// last ran: sharing them at once saves the fetches of every spelling
// admitted meanwhile.
func (l *Learner) Urgent() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.urgent
}

// Records returns the records of the hosts whose rules changed since the
// last call (every host's with all set), for sharing with the crawl's
// other processes.
func (l *Learner) Records(all bool) []HostRules {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []HostRules
	now := l.o.Now()
	l.urgent = false
	for _, h := range l.hosts {
		if !h.dirty && !all {
			continue
		}
		h.dirty = false
		out = append(out, HostRules{V: RecordVersion, Incarnation: l.o.Incarnation, Host: h.name, Revision: h.revision, Rules: h.learnedList(), Updated: now})
	}
	slices.SortFunc(out, func(a, b HostRules) int { return strings.Compare(a.Host, b.Host) })
	return out
}

// Remembered is the number of pages the Learner holds.
func (l *Learner) Remembered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pages)
}
