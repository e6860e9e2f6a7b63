package dust

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// State is where a learned rule stands.
type State string

// The states of a learned rule.
const (
	// Candidate: proposed by a pair of URLs with the same page, gathering
	// support; it rewrites nothing yet.
	Candidate State = "candidate"
	// Active: enough support and no counterexample; it rewrites.
	Active State = "active"
	// Retired: it was active (or a candidate) and a counterexample showed
	// two URLs it merges serving different pages; it never rewrites again
	// in this crawl.
	Retired State = "retired"
	// Pinned: the crawl's settings make it active whatever is seen.
	Pinned State = "pinned"
	// Vetoed: the crawl's settings forbid it.
	Vetoed State = "vetoed"
)

// rewrites reports whether a rule in state s rewrites URLs.
func (s State) rewrites() bool { return s == Active || s == Pinned }

// Learned is a rule with what was learned about it.
type Learned struct {
	Rule
	State State `json:"state"`
	// Support is how many pairs of URLs the rule merges whose pages were
	// the same; Counter, how many whose pages differed.
	Support int `json:"support"`
	Counter int `json:"counter,omitempty"`
	// Examples are a few pairs of spellings it merged (the first ones).
	Examples [][2]string `json:"examples,omitempty"`
	// CounterExample is the first pair it would merge whose pages differ.
	CounterExample [2]string `json:"counter_example,omitzero"`
	// Wasted counts the fetches of pages already fetched under another
	// spelling that the rule explains before it was active: what learning
	// it cost.
	Wasted int `json:"wasted,omitempty"`
	// Saved counts the fetches it avoided: spellings dropped at fetch
	// time.
	Saved int `json:"saved,omitempty"`
	// Proposed is when it was first proposed; Since, when it took its
	// state.
	Proposed time.Time `json:"proposed,omitzero"`
	Since    time.Time `json:"since,omitzero"`
}

// RecordVersion is the format of HostRules. A reader meeting a newer
// version refuses it (ErrNewerRecord) rather than guess.
const RecordVersion = 1

// ErrNewerRecord is wrapped by DecodeHostRules for a record written by a
// newer Sieve.
var ErrNewerRecord = errors.New("dust: rules record of a newer format")

// HostRules is what a crawl has learned about one host: the record kept
// in the crawl's rules, one per host, shared by every crawler and worker.
type HostRules struct {
	V int `json:"v"`
	// Incarnation is the crawl's (frontier.CrawlRecord.Incarnation): rules
	// of a crawl deleted under the same id are not applied.
	Incarnation string `json:"incarnation,omitempty"`
	Host        string `json:"host"`
	// Revision counts the changes of the host's active rules: two records
	// with the same Revision rewrite alike.
	Revision int       `json:"revision"`
	Rules    []Learned `json:"rules"`
	Updated  time.Time `json:"updated,omitzero"`
}

// Active returns the rules that rewrite.
func (h HostRules) Active() []Rule {
	var out []Rule
	for _, l := range h.Rules {
		if l.State.rewrites() {
			out = append(out, l.Rule)
		}
	}
	return out
}

// Encode is the record's stored form (JSON).
func (h HostRules) Encode() ([]byte, error) {
	h.V = RecordVersion
	return json.Marshal(h)
}

// DecodeHostRules reads a stored record.
func DecodeHostRules(b []byte) (HostRules, error) {
	var h HostRules
	if err := json.Unmarshal(b, &h); err != nil {
		return HostRules{}, fmt.Errorf("dust: rules record: %w", err)
	}
	if h.V > RecordVersion {
		return HostRules{}, fmt.Errorf("%w: version %d, this Sieve reads up to %d", ErrNewerRecord, h.V, RecordVersion)
	}
	if h.Host == "" {
		return HostRules{}, errors.New("dust: rules record without a host")
	}
	for _, l := range h.Rules {
		if _, err := ParseRule(l.Rule.String()); err != nil {
			return HostRules{}, err
		}
	}
	return h, nil
}

// Set is one crawl's rules for every host, as Key applies them. A Set is
// immutable once built and safe for concurrent use.
type Set struct {
	hosts map[string]Rules
}

// NewSet compiles the active rules of records (one per host; a later
// record of a host replaces an earlier one).
func NewSet(records []HostRules) *Set {
	s := &Set{hosts: map[string]Rules{}}
	for _, h := range records {
		c := Compile(h.Active())
		if c.Empty() {
			delete(s.hosts, h.Host)
			continue
		}
		s.hosts[h.Host] = c
	}
	return s
}

// Len is the number of hosts with active rules.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.hosts)
}

// Key is the spelling of the canonical URL u under its host's rules: two
// URLs with one Key name one page. A URL no rule touches is its own Key.
// A mirror's URL is spelled on its target, under the target's rules.
func (s *Set) Key(u string) string {
	if s == nil || len(s.hosts) == 0 {
		return u
	}
	p, ok := Split(u)
	if !ok {
		return u
	}
	r, ok := s.hosts[p.Host]
	if !ok {
		return u
	}
	orig := p
	if r.mirror != "" {
		p.Host = r.mirror
		t := s.hosts[r.mirror]
		t.mirror = "" // a mirror of a mirror stops at the first
		r = t
	}
	if k := r.rewrite(p); k != orig {
		return k.String()
	}
	return u // unchanged: no new string
}

// sortRules orders rules as they apply, then by argument.
func sortRules(rs []Rule) {
	slices.SortFunc(rs, func(a, b Rule) int {
		if c := slices.Index(order, a.Kind) - slices.Index(order, b.Kind); c != 0 {
			return c
		}
		switch {
		case a.Arg < b.Arg:
			return -1
		case a.Arg > b.Arg:
			return 1
		}
		return 0
	})
}
