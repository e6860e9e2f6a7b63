package frontier

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Version is the format version Discovered and Entry messages are written
// with, carried in their "v" field. Readers accept every version from
// MinVersion to Version and reject any other as poison (PoisonVersion).
//
// Version 2 added queue keys, metadata and link kinds. A version 1 message
// reads as a version 2 message without them: every link of the kind its
// message implies (LinkPlain, or LinkRedirect in a redirect message), queued
// under its host, with no metadata. Fields of version 2 in a message that
// says "v":1 are ignored, as a version 1 reader ignored them. A reader of
// version 1 rejects version 2 messages, so a deployment upgrades all of its
// workers and crawlers together (Topology.Ensure marks the streams).
const Version = 2

// MinVersion is the oldest format version readers still accept.
const MinVersion = 1

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

// LinkKind says how one link was found. It travels from the Discovered
// message to the Entry, for the crawler; the depth a link gets follows the
// message's Kind, not the link's.
type LinkKind string

// The kinds of link.
const (
	// LinkPlain: an ordinary link, an href on a page, or a seed. The
	// default of a page or seed message.
	LinkPlain LinkKind = "link"
	// LinkRedirect: the target of a redirect. The default of a redirect
	// message.
	LinkRedirect LinkKind = "redirect"
	// LinkSitemap: a URL listed in a sitemap.
	LinkSitemap LinkKind = "sitemap"
	// LinkExternal: a link from a page to outside the page's site.
	LinkExternal LinkKind = "external"
)

// Known reports whether k is one of the link kinds, or empty (the default).
func (k LinkKind) Known() bool {
	switch k {
	case "", LinkPlain, LinkRedirect, LinkSitemap, LinkExternal:
		return true
	}
	return false
}

// Metadata is what a producer attaches to a link and the crawler finds on
// its Entry, as URLFrontier's metadata: names to lists of values. Sieve does
// not interpret it. A message's metadata is bounded (see MaxMetaKeys,
// MaxMetaValues, MaxMetaBytes); names are not empty.
type Metadata map[string][]string

// Bounds of the fields added in version 2; a message beyond them is poison.
const (
	// MaxKeyBytes bounds a queue key.
	MaxKeyBytes = 255
	// MaxMetaKeys bounds the names of one link's or entry's metadata.
	MaxMetaKeys = 32
	// MaxMetaValues bounds its values, over all names.
	MaxMetaValues = 128
	// MaxMetaBytes bounds the bytes of its names and values together.
	MaxMetaBytes = 4096
)

// Discovered is what a crawler publishes for one crawled page: the page, its
// depth, the crawl it belongs to and every raw link found on it, so that one
// message feeds one filter batch. Encoded as JSON (see Encode):
//
//	{"v":2,"crawl":"default","url":"https://example.com/a/","base":"/b/","depth":1,
//	 "links":["c.html","../d?utm_source=x","https://other.example/"],
//	 "attrs":[{"i":2,"kind":"external","key":"partners","meta":{"lang":["en"]}}]}
//
// Links are raw href values; the dedup worker resolves them against Base
// (itself resolved against URL) or, without Base, against URL.
//
// Most links of a page are plain: of the message's default kind, queued
// under their host, without metadata. So Links stays a list of strings,
// exactly as in version 1, and the few links that carry more have an entry
// in the sparse list Attrs, which names them by index. A page of plain links
// costs nothing more than before, a reader that only wants the URLs reads
// Links as it always did, and one link's attributes cannot drift from its
// URL the way parallel arrays could. Link(i) gives a link with its
// attributes resolved; Add appends one.
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
	// Attrs holds the attributes of the links that are not plain, in
	// increasing order of their index in Links, at most one per link.
	// Version 2; nil in a version 1 message.
	Attrs []LinkAttrs `json:"attrs,omitempty"`
}

// LinkAttrs is what a Discovered message says of one link beyond its raw
// URL. Zero fields mean the defaults.
type LinkAttrs struct {
	// I is the link's index in Links.
	I int `json:"i"`
	// Kind is the link's kind; empty means the message's default
	// (Discovered.LinkKind).
	Kind LinkKind `json:"kind,omitempty"`
	// Key is the queue the link's URL waits in for politeness; empty means
	// its host (HostKey of the resolved URL). At most MaxKeyBytes.
	Key string `json:"key,omitempty"`
	// Meta is the link's metadata, handed to the crawler with its Entry.
	Meta Metadata `json:"meta,omitempty"`
}

// Link is one link of a Discovered message with its attributes.
type Link struct {
	// URL is the raw link, as in Discovered.Links.
	URL string
	// Kind is the link's kind; Link sets it, Add takes empty as the
	// message's default.
	Kind LinkKind
	// Key is the link's queue key; empty means its host.
	Key string
	// Meta is its metadata (nil: none).
	Meta Metadata
}

// Entry is one admitted URL on the frontier: canonical, seen for the first
// time, and published exactly once. Encoded as JSON:
//
//	{"v":2,"crawl":"default","url":"https://example.com/d","depth":2,"from":"https://example.com/a/",
//	 "kind":"sitemap","key":"partners","meta":{"lang":["en"]}}
//
// Kind, Key and Meta are omitted when they have their defaults, so an entry
// of a plain link is the version 1 entry with "v":2. Use QueueKey and
// LinkKind rather than Key and Kind: they apply the defaults.
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
	// Kind is how the URL was found; empty means LinkPlain. Version 2.
	Kind LinkKind `json:"kind,omitempty"`
	// Key is the queue the URL waits in for politeness; empty means its
	// host (HostKey(URL)). At most MaxKeyBytes. Version 2.
	Key string `json:"key,omitempty"`
	// Meta is the metadata its link carried. Version 2.
	Meta Metadata `json:"meta,omitempty"`
}

// Poison reasons: why a discovered or frontier message was rejected. They
// are stable labels of the poison counters.
const (
	PoisonTooLarge     = "too_large"
	PoisonMalformed    = "malformed"
	PoisonVersion      = "version"
	PoisonCrawl        = "crawl"
	PoisonKind         = "kind"
	PoisonDepth        = "depth"
	PoisonURL          = "url"
	PoisonTooManyLinks = "too_many_links"
	// PoisonKey: a queue key longer than MaxKeyBytes.
	PoisonKey = "key"
	// PoisonMeta: metadata beyond its bounds, or with an empty name.
	PoisonMeta = "meta"
)

// PoisonReasons returns every Poison* label, for counters that must exist
// before the first rejection.
func PoisonReasons() []string {
	return []string{PoisonTooLarge, PoisonMalformed, PoisonVersion, PoisonCrawl, PoisonKind, PoisonDepth,
		PoisonURL, PoisonTooManyLinks, PoisonKey, PoisonMeta}
}

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

// checkVersion validates a message's version.
func checkVersion(v int) error {
	if v < MinVersion || v > Version {
		return poison(PoisonVersion, "version %d, this build reads %d to %d", v, MinVersion, Version)
	}
	return nil
}

// check validates a decoded or to-be-published message.
func (d *Discovered) check(l Limits) error {
	if err := checkVersion(d.V); err != nil {
		return err
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
	next := 0 // the lowest index the next attrs may name
	for _, a := range d.Attrs {
		if a.I < next || a.I >= len(d.Links) {
			return poison(PoisonMalformed, "attrs of link %d: want increasing indexes in [0, %d)", a.I, len(d.Links))
		}
		next = a.I + 1
		if pe := checkAttrs(a.Kind, a.Key, a.Meta); pe != nil {
			pe.Err = fmt.Errorf("link %d: %w", a.I, pe.Err)
			return pe
		}
	}
	return nil
}

// checkAttrs validates a link's or entry's version 2 fields.
func checkAttrs(kind LinkKind, key string, meta Metadata) *PoisonError {
	if !kind.Known() {
		return poison(PoisonKind, "link kind %q: want link, redirect, sitemap or external", kind)
	}
	if len(key) > MaxKeyBytes {
		return poison(PoisonKey, "queue key of %d bytes, limit %d", len(key), MaxKeyBytes)
	}
	if len(meta) > MaxMetaKeys {
		return poison(PoisonMeta, "%d metadata names, limit %d", len(meta), MaxMetaKeys)
	}
	values, size := 0, 0
	for name, vs := range meta {
		if name == "" {
			return poison(PoisonMeta, "empty metadata name")
		}
		values += len(vs)
		size += len(name)
		for _, v := range vs {
			size += len(v)
		}
	}
	switch {
	case values > MaxMetaValues:
		return poison(PoisonMeta, "%d metadata values, limit %d", values, MaxMetaValues)
	case size > MaxMetaBytes:
		return poison(PoisonMeta, "%d bytes of metadata, limit %d", size, MaxMetaBytes)
	}
	return nil
}

// decode parses data into v, bounded by maxBytes.
func decode(data []byte, maxBytes int, v any) error {
	if len(data) > maxBytes {
		return poison(PoisonTooLarge, "%d bytes, limit %d", len(data), maxBytes)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return poison(PoisonMalformed, "%v", err)
	}
	return nil
}

// DecodeDiscovered parses a discovered message of any version from
// MinVersion to Version. Anything it cannot use is a *PoisonError: larger
// than l.MaxBytes, not JSON of the right shape, another version, a bad
// crawl id, kind or depth, no page URL, too many links, or link attributes
// out of their bounds. Empty lists and maps decode as nil.
func DecodeDiscovered(data []byte, l Limits) (Discovered, error) {
	l = l.withDefaults()
	var d Discovered
	if err := decode(data, l.MaxBytes, &d); err != nil {
		return Discovered{}, err
	}
	if d.V < 2 {
		d.Attrs = nil // not part of version 1
	}
	if err := d.check(l); err != nil {
		return Discovered{}, err
	}
	if len(d.Links) == 0 {
		d.Links = nil
	}
	if len(d.Attrs) == 0 {
		d.Attrs = nil
	}
	for i := range d.Attrs {
		d.Attrs[i].Meta = d.Attrs[i].Meta.orNil()
	}
	return d, nil
}

// orNil returns m, or nil if it is empty.
func (m Metadata) orNil() Metadata {
	if len(m) == 0 {
		return nil
	}
	return m
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

// LinkKind is the kind of the message's links that Attrs does not say
// otherwise of: LinkRedirect in a redirect message, else LinkPlain.
func (d Discovered) LinkKind() LinkKind {
	if d.Kind == KindRedirect {
		return LinkRedirect
	}
	return LinkPlain
}

// Link returns link i (0 ≤ i < len(d.Links)) with its attributes: Kind
// resolved to the message's default when Attrs does not give one, Key
// empty for the host.
func (d Discovered) Link(i int) Link {
	l := Link{URL: d.Links[i], Kind: d.LinkKind()}
	if a, ok := d.attrs(i); ok {
		l.Key, l.Meta = a.Key, a.Meta
		if a.Kind != "" {
			l.Kind = a.Kind
		}
	}
	return l
}

// attrs returns link i's attributes, if Attrs has them.
func (d Discovered) attrs(i int) (LinkAttrs, bool) {
	j, ok := slices.BinarySearchFunc(d.Attrs, i, func(a LinkAttrs, i int) int { return a.I - i })
	if !ok {
		return LinkAttrs{}, false
	}
	return d.Attrs[j], true
}

// Add appends l to d's links, and to Attrs if it is not plain: a kind other
// than d's default (an empty Kind is the default), a key or metadata. Set
// d.Kind before adding links: it decides their default kind.
func (d *Discovered) Add(l Link) {
	d.Links = append(d.Links, l.URL)
	a := LinkAttrs{I: len(d.Links) - 1, Key: l.Key, Meta: l.Meta.orNil()}
	if l.Kind != d.LinkKind() {
		a.Kind = l.Kind
	}
	if a.Kind != "" || a.Key != "" || a.Meta != nil {
		d.Attrs = append(d.Attrs, a)
	}
}

// EntryFor returns the frontier entry of link i (0 ≤ i < len(d.Links)),
// admitted as the canonical URL canonical: the crawl, depth (LinkDepth) and
// page of d, and the link's kind, queue key and metadata. Kind is left
// empty for LinkPlain, to keep the entry compact. This is the one mapping
// from a discovered link to what the crawler reads.
func (d Discovered) EntryFor(i int, canonical string) Entry {
	l := d.Link(i)
	e := Entry{Crawl: d.Crawl, URL: canonical, Depth: d.LinkDepth(), From: d.URL, Kind: l.Kind, Key: l.Key, Meta: l.Meta}
	if e.Kind == LinkPlain {
		e.Kind = ""
	}
	return e
}

// Split cuts d into messages of at most maxLinks links each (all other
// fields copied, each link's attributes kept with it), so that none is
// rejected for its length. maxLinks ≤ 0 means DefaultMaxLinks.
func (d Discovered) Split(maxLinks int) []Discovered {
	if maxLinks <= 0 {
		maxLinks = DefaultMaxLinks
	}
	if len(d.Links) <= maxLinks {
		return []Discovered{d}
	}
	var out []Discovered
	attrs := d.Attrs
	for i := 0; i < len(d.Links); i += maxLinks {
		part := d
		end := min(i+maxLinks, len(d.Links))
		part.Links, part.Attrs = d.Links[i:end], nil
		for len(attrs) > 0 && attrs[0].I < end {
			a := attrs[0]
			a.I -= i
			part.Attrs, attrs = append(part.Attrs, a), attrs[1:]
		}
		out = append(out, part)
	}
	return out
}

// Encode returns e's wire form with V set to Version.
func (e Entry) Encode() ([]byte, error) {
	e.V = Version
	return json.Marshal(e)
}

// DecodeEntry parses a frontier message of any version from MinVersion to
// Version. Errors are *PoisonError. An empty Meta decodes as nil.
func DecodeEntry(data []byte) (Entry, error) {
	var e Entry
	if err := decode(data, DefaultMaxBytes, &e); err != nil {
		return Entry{}, err
	}
	if e.V < 2 {
		e.Kind, e.Key, e.Meta = "", "", nil // not part of version 1
	}
	if err := checkVersion(e.V); err != nil {
		return Entry{}, err
	}
	switch {
	case !ValidCrawl(e.Crawl):
		return Entry{}, poison(PoisonCrawl, "crawl %q", e.Crawl)
	case e.URL == "":
		return Entry{}, poison(PoisonURL, "no url")
	case e.Depth < 0 || e.Depth > MaxDepth:
		return Entry{}, poison(PoisonDepth, "depth %d", e.Depth)
	}
	if pe := checkAttrs(e.Kind, e.Key, e.Meta); pe != nil {
		return Entry{}, pe
	}
	e.Meta = e.Meta.orNil()
	return e, nil
}

// LinkKind is how the entry's URL was found: Kind, or LinkPlain.
func (e Entry) LinkKind() LinkKind {
	if e.Kind == "" {
		return LinkPlain
	}
	return e.Kind
}

// QueueKey is the queue the entry's URL waits in for politeness: Key, or
// HostKey(URL) when Key is empty (always in a version 1 entry).
func (e Entry) QueueKey() string {
	if e.Key != "" {
		return e.Key
	}
	return HostKey(e.URL)
}

// HostKey is the default queue key of a URL: its host in lower case, with
// the port when the URL gives one other than its scheme's default (80 for
// http, 443 for https): "example.com", "example.com:8080", "[::1]:8080". For
// a canonical URL (normalize drops default ports) it is
// strings.ToLower(u.Host) of url.Parse, the key the crawler's politeness
// uses. It is "" for a URL that does not parse.
func HostKey(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	host := strings.ToLower(u.Host)
	switch port := u.Port(); {
	case port == "80" && strings.EqualFold(u.Scheme, "http"), port == "443" && strings.EqualFold(u.Scheme, "https"):
		host = host[:len(host)-len(port)-1]
	}
	return host
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
// bytes, so a crawler's retried publish of the same message is stored once;
// with an incarnation, of it, "@" and the bytes.
func contentID(data []byte, incarnation string) string {
	if incarnation != "" {
		data = append([]byte(incarnation+"@"), data...)
	}
	sum := sha256.Sum256(data)
	return "d" + base64.RawURLEncoding.EncodeToString(sum[:16])
}
