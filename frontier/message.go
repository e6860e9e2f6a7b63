package frontier

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
)

// Version is the format version of Discovered and Entry messages, carried
// in their "v" field. A reader rejects a version it does not know.
const Version = 1

// Kind says how the links of a Discovered message relate to its page, which
// decides the depth they get on the frontier.
type Kind string

// The kinds of discovered message.
const (
	// KindPage: links found on the page at URL; they get depth Depth+1.
	KindPage Kind = "page"
	// KindRedirect: URL redirected to the link(s); they get depth Depth, as
	// the same page under another address.
	KindRedirect Kind = "redirect"
	// KindSeed: seeds given by a person; absolute links, depth 0, URL may be
	// empty.
	KindSeed Kind = "seed"
)

// Discovered is what a crawler publishes for one crawled page: the page, its
// depth, the crawl it belongs to and every raw link found on it, so that one
// message feeds one filter batch. Encoded as JSON (see Encode):
//
//	{"v":1,"crawl":"default","url":"https://example.com/a/","depth":1,
//	 "base":"/b/","links":["c.html","../d?utm_source=x","https://other.example/"]}
//
// Links are raw href values; the dedup worker resolves them against Base
// (itself resolved against URL) or, without Base, against URL.
type Discovered struct {
	// V is the format version; Encode sets it to Version.
	V int `json:"v"`
	// Crawl names the crawl: 1–64 of [A-Za-z0-9_-]; it is a subject token.
	Crawl string `json:"crawl"`
	// URL is the page's absolute URL. It may be empty only for KindSeed.
	URL string `json:"url,omitempty"`
	// Base is the page's <base href> value, raw, if it had one.
	Base string `json:"base,omitempty"`
	// Depth is the page's depth (seeds are 0); links get Depth+1, or Depth
	// for a redirect, or 0 for seeds.
	Depth int `json:"depth"`
	// Kind is KindPage when empty.
	Kind Kind `json:"kind,omitempty"`
	// Links are the raw links, in page order.
	Links []string `json:"links"`
}

// Entry is one admitted URL on the frontier: canonical, seen for the first
// time, and published exactly once. Encoded as JSON:
//
//	{"v":1,"crawl":"default","url":"https://example.com/d","depth":2,"from":"https://example.com/a/"}
type Entry struct {
	// V is the format version; Encode sets it to Version.
	V int `json:"v"`
	// Crawl is the crawl of the page the URL was found on.
	Crawl string `json:"crawl"`
	// URL is the canonical URL to fetch.
	URL string `json:"url"`
	// Depth is the link distance from a seed.
	Depth int `json:"depth"`
	// From is the page the URL was first found on (empty for seeds).
	From string `json:"from,omitempty"`
}

// Poison reasons: why a discovered message was rejected. They are stable
// labels of the poison counters.
const (
	PoisonTooLarge     = "too_large"
	PoisonMalformed    = "malformed"
	PoisonVersion      = "version"
	PoisonCrawl        = "crawl"
	PoisonKind         = "kind"
	PoisonDepth        = "depth"
	PoisonURL          = "url"
	PoisonTooManyLinks = "too_many_links"
)

// ErrPoison is wrapped by every *PoisonError.
var ErrPoison = errors.New("frontier: poison message")

// PoisonError reports a message that can never be processed: it is
// acknowledged (terminated) and counted under Reason, never retried.
type PoisonError struct {
	// Reason is one of the Poison* labels.
	Reason string
	// Err describes the problem.
	Err error
}

func (e *PoisonError) Error() string {
	return fmt.Sprintf("frontier: poison message (%s): %v", e.Reason, e.Err)
}

// Unwrap returns ErrPoison and the cause.
func (e *PoisonError) Unwrap() []error { return []error{ErrPoison, e.Err} }

func poison(reason, format string, args ...any) *PoisonError {
	return &PoisonError{Reason: reason, Err: fmt.Errorf(format, args...)}
}

var crawlRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidCrawl reports whether id can name a crawl (it becomes a subject
// token): 1–64 of [A-Za-z0-9_-].
func ValidCrawl(id string) bool { return crawlRE.MatchString(id) }

// MaxDepth bounds Depth in messages; deeper ones are poison.
const MaxDepth = 1 << 20

// Limits bounds what DecodeDiscovered accepts. Zero fields mean the defaults.
type Limits struct {
	// MaxBytes is the largest encoded message (default 1 MiB).
	MaxBytes int
	// MaxLinks is the most links in one message (default 10,000).
	MaxLinks int
}

// Default limits of a discovered message.
const (
	DefaultMaxBytes = 1 << 20
	DefaultMaxLinks = 10_000
)

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxLinks <= 0 {
		l.MaxLinks = DefaultMaxLinks
	}
	return l
}

// Encode returns d's wire form with V set to Version.
func (d Discovered) Encode() ([]byte, error) {
	d.V = Version
	if d.Links == nil {
		d.Links = []string{}
	}
	return json.Marshal(d)
}

// check validates a decoded or to-be-published message.
func (d *Discovered) check(l Limits) error {
	if d.V != Version {
		return poison(PoisonVersion, "version %d, this worker reads %d", d.V, Version)
	}
	if !ValidCrawl(d.Crawl) {
		return poison(PoisonCrawl, "crawl %q: want 1-64 of [A-Za-z0-9_-]", d.Crawl)
	}
	switch d.Kind {
	case "", KindPage, KindRedirect:
		if d.URL == "" {
			return poison(PoisonURL, "no page url (only a seed message may omit it)")
		}
	case KindSeed:
	default:
		return poison(PoisonKind, "kind %q: want page, redirect or seed", d.Kind)
	}
	if d.Depth < 0 || d.Depth > MaxDepth {
		return poison(PoisonDepth, "depth %d out of [0, %d]", d.Depth, MaxDepth)
	}
	if len(d.Links) > l.MaxLinks {
		return poison(PoisonTooManyLinks, "%d links, limit %d (split the message)", len(d.Links), l.MaxLinks)
	}
	return nil
}

// DecodeDiscovered parses a discovered message. Anything it cannot use is a
// *PoisonError: larger than l.MaxBytes, not JSON of the right shape, another
// version, a bad crawl id, kind or depth, no page URL, or too many links.
func DecodeDiscovered(data []byte, l Limits) (Discovered, error) {
	l = l.withDefaults()
	var d Discovered
	if len(data) > l.MaxBytes {
		return d, poison(PoisonTooLarge, "%d bytes, limit %d", len(data), l.MaxBytes)
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return Discovered{}, poison(PoisonMalformed, "%v", err)
	}
	if err := d.check(l); err != nil {
		return Discovered{}, err
	}
	return d, nil
}

// LinkDepth is the depth the message's links get on the frontier.
func (d Discovered) LinkDepth() int {
	switch d.Kind {
	case KindSeed:
		return 0
	case KindRedirect:
		return d.Depth
	}
	return d.Depth + 1
}

// Split cuts d into messages of at most maxLinks links each (all other
// fields copied), so that none is rejected for its length. maxLinks ≤ 0
// means DefaultMaxLinks.
func (d Discovered) Split(maxLinks int) []Discovered {
	if maxLinks <= 0 {
		maxLinks = DefaultMaxLinks
	}
	if len(d.Links) <= maxLinks {
		return []Discovered{d}
	}
	var out []Discovered
	for i := 0; i < len(d.Links); i += maxLinks {
		part := d
		part.Links = d.Links[i:min(i+maxLinks, len(d.Links))]
		out = append(out, part)
	}
	return out
}

// Encode returns e's wire form with V set to Version.
func (e Entry) Encode() ([]byte, error) {
	e.V = Version
	return json.Marshal(e)
}

// DecodeEntry parses a frontier message. Errors are *PoisonError.
func DecodeEntry(data []byte) (Entry, error) {
	var e Entry
	if len(data) > DefaultMaxBytes {
		return e, poison(PoisonTooLarge, "%d bytes, limit %d", len(data), DefaultMaxBytes)
	}
	if err := json.Unmarshal(data, &e); err != nil {
		return Entry{}, poison(PoisonMalformed, "%v", err)
	}
	switch {
	case e.V != Version:
		return Entry{}, poison(PoisonVersion, "version %d, this reader knows %d", e.V, Version)
	case !ValidCrawl(e.Crawl):
		return Entry{}, poison(PoisonCrawl, "crawl %q", e.Crawl)
	case e.URL == "":
		return Entry{}, poison(PoisonURL, "no url")
	case e.Depth < 0 || e.Depth > MaxDepth:
		return Entry{}, poison(PoisonDepth, "depth %d", e.Depth)
	}
	return e, nil
}

// MsgID is the Nats-Msg-Id under which a canonical URL is published to the
// frontier: base64url of the first 16 bytes of SHA-256(url), 22 characters.
// Publishing a URL twice under the same ID within the stream's duplicate
// window stores it once. It is part of the wire format: changing it would
// let a URL published by an old worker through again.
func MsgID(canonicalURL string) string {
	sum := sha256.Sum256([]byte(canonicalURL))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// contentID is the Nats-Msg-Id of a discovered message: a digest of its
// bytes, so a crawler's retried publish of the same message is stored once.
func contentID(data []byte) string {
	sum := sha256.Sum256(data)
	return "d" + base64.RawURLEncoding.EncodeToString(sum[:16])
}
