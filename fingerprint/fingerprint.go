package fingerprint

import (
	"bytes"
	"crypto/sha1"
	"encoding/base32"
	"hash"
	"math/bits"
	"slices"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/spaolacci/murmur3"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// MaxBlocks is the most blocks a Print holds. The text of a page's blocks
// past the last one is folded into it: its Text then hashes the texts of
// all of them, joined by single spaces.
const MaxBlocks = 256

// maxDepth caps the stack of open elements. A start tag past it is counted,
// not pushed, and the next end tag only takes one off the count, so hostile
// nesting costs a counter, not memory.
const maxDepth = 256

// Block is one block of a page's visible text: a run of text between two
// block boundaries (see the package documentation).
type Block struct {
	Path uint32 // hash of the block's place: the open elements' tag names (with their id and class attributes) from the root, and the ordinal of this path among the page's blocks with the same path
	Text uint32 // hash of the block's normalized text
}

// Print is what Of finds in a page. Prints are compared field by field; the
// package documentation says what each field is evidence of. The zero Print
// is no page's: Of always sets Digest.
type Print struct {
	Digest    string  // the payload's digest as WARC writers write it: "sha1:" + base32.StdEncoding of SHA-1 of the whole body
	Text      uint64  // hash of the whole normalized visible text: equal text, equal Text (0 when the page has no text)
	SimHash   uint64  // 64-bit SimHash of the visible text's word 3-shingles (Charikar; Manku et al. WWW 2007)
	Blocks    []Block // the text blocks in document order, at most MaxBlocks (the rest is folded into the last)
	Canonical string  // the raw href of the first <link rel=canonical> (rel token list, case-insensitive), "" if none; not resolved
	Size      int     // len(body)
}

// Of fingerprints an HTML body in one pass of its tokens. The body may be
// malformed, truncated or not HTML at all, and of any size: Of never panics,
// and its result depends only on the body's bytes. Of does not keep body.
func Of(body []byte) Print {
	s := scanners.Get().(*scanner)
	s.scan(body)
	p := Print{
		Digest:    Digest(body),
		Text:      s.textSum(),
		SimHash:   s.simHash(),
		Blocks:    s.finishBlocks(),
		Canonical: s.canonical,
		Size:      len(body),
	}
	s.reset()
	scanners.Put(s)
	return p
}

// scanners keeps scanners, and their buffers, from one call of Of to the
// next (a crawler fingerprints pages on many goroutines at once). It holds
// no state between calls: a scanner is reset before it is put back.
var scanners = sync.Pool{New: func() any { return new(scanner) }}

// Digest returns the payload digest of body as WARC writers write it in
// WARC-Payload-Digest: "sha1:" followed by the base32 (RFC 4648, standard
// alphabet) of the SHA-1 of body, 37 characters. It is the part of Of that
// applies to any body, HTML or not.
func Digest(body []byte) string {
	sum := sha1.Sum(body)
	var b [len("sha1:") + 32]byte
	copy(b[:], "sha1:")
	base32.StdEncoding.Encode(b[len("sha1:"):], sum[:])
	return string(b[:])
}

// Distance returns the Hamming distance between two SimHashes: the number
// of bits in which they differ, from 0 to 64.
func Distance(a, b uint64) int {
	return bits.OnesCount64(a ^ b)
}

// Changed returns the Paths whose Text differs between a and b, or which
// only one of them has: sorted, without repeats, and nil when a and b have
// the same blocks (in any order). A Path that occurs more than once in one
// page (a 32-bit collision) is compared as the set of its Texts. Changed
// does not modify a or b.
func Changed(a, b []Block) []uint32 {
	x, y := sortedBlocks(a), sortedBlocks(b)
	var out []uint32
	for i, j := 0, 0; i < len(x) || j < len(y); {
		var p uint32
		if j == len(y) || (i < len(x) && x[i].Path < y[j].Path) {
			p = x[i].Path
		} else {
			p = y[j].Path
		}
		i2, j2 := i, j
		for i2 < len(x) && x[i2].Path == p {
			i2++
		}
		for j2 < len(y) && y[j2].Path == p {
			j2++
		}
		if !slices.Equal(x[i:i2], y[j:j2]) {
			out = append(out, p)
		}
		i, j = i2, j2
	}
	return out
}

// sortedBlocks returns a sorted copy of bs, by Path and then Text, without
// repeated blocks.
func sortedBlocks(bs []Block) []Block {
	c := slices.Clone(bs)
	slices.SortFunc(c, func(a, b Block) int {
		switch {
		case a.Path != b.Path:
			if a.Path < b.Path {
				return -1
			}
			return 1
		case a.Text < b.Text:
			return -1
		case a.Text > b.Text:
			return 1
		}
		return 0
	})
	return slices.Compact(c)
}

// FNV-1a, 64 bits: the path hash, continued element by element.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// Separators in the byte string a path hashes; none of them occurs in a
// lower-cased tag name the tokenizer returns.
const (
	sepField   = 0x1f // between a tag name, its id and its class
	sepElement = 0x1e // after each element
	sepOrdinal = 0x1d // between the path and the block's ordinal
)

func fnvAdd(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

func fnvByte(h uint64, c byte) uint64 {
	return (h ^ uint64(c)) * fnvPrime
}

// blockPath turns the state of a path's hash and the block's ordinal among
// the blocks with that path into a Block.Path: FNV-1a 64 continued over
// sepOrdinal and the ordinal's 4 bytes, big-endian, folded to 32 bits by
// xoring its halves.
func blockPath(path uint64, ordinal uint32) uint32 {
	h := fnvByte(path, sepOrdinal)
	h = fnvByte(h, byte(ordinal>>24))
	h = fnvByte(h, byte(ordinal>>16))
	h = fnvByte(h, byte(ordinal>>8))
	h = fnvByte(h, byte(ordinal))
	return uint32(h) ^ uint32(h>>32)
}

// Element kinds.
const (
	kBlock   uint8 = 1 << iota // a block boundary; text goes to the innermost open one
	kVoid                      // never has content: not pushed
	kSkip                      // its content is not visible text: skipped to its end tag
	kClosesP                   // its start tag closes an open <p> (HTML's "close a p element")
	kBreaks                    // its start tag ends foreign content (<svg>): HTML's breakout list
)

// kind classifies an element. Unknown elements (atom 0) are inline.
func kind(a atom.Atom) uint8 {
	switch a {
	case atom.Address, atom.Article, atom.Aside, atom.Details, atom.Dialog,
		atom.Dir, atom.Fieldset, atom.Figcaption, atom.Figure, atom.Footer, atom.Form,
		atom.Header, atom.Hgroup, atom.Main, atom.Nav, atom.Search, atom.Section, atom.Summary:
		return kBlock | kClosesP
	case atom.Blockquote, atom.Center, atom.Dd, atom.Div, atom.Dl, atom.Dt, atom.H1, atom.H2, atom.H3,
		atom.H4, atom.H5, atom.H6, atom.Li, atom.Menu, atom.Ol, atom.P, atom.Pre, atom.Table, atom.Ul:
		return kBlock | kClosesP | kBreaks
	case atom.Hr:
		return kBlock | kVoid | kClosesP | kBreaks
	case atom.Body:
		return kBlock | kBreaks
	case atom.Caption, atom.Legend, atom.Option, atom.Tbody, atom.Td, atom.Tfoot,
		atom.Th, atom.Thead, atom.Title, atom.Tr:
		return kBlock
	case atom.Br, atom.Embed, atom.Img, atom.Meta:
		return kVoid | kBreaks
	case atom.Area, atom.Base, atom.Basefont, atom.Bgsound, atom.Col, atom.Frame,
		atom.Image, atom.Input, atom.Keygen, atom.Link, atom.Param, atom.Source,
		atom.Track, atom.Wbr:
		return kVoid
	case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Svg,
		atom.Iframe, atom.Noembed, atom.Noframes:
		return kSkip
	case atom.Listing:
		return kClosesP | kBreaks
	case atom.Plaintext, atom.Xmp:
		return kClosesP
	case atom.B, atom.Big, atom.Code, atom.Em, atom.Head, atom.I, atom.Nobr, atom.Ruby,
		atom.S, atom.Small, atom.Span, atom.Strike, atom.Strong, atom.Sub, atom.Sup,
		atom.Tt, atom.U, atom.Var:
		return kBreaks
	}
	return 0
}

// entry is an open element.
type entry struct {
	key   uint64 // the atom, or for an unknown tag 1<<63 | FNV-1a of its name
	a     atom.Atom
	path  uint64 // FNV-1a state of the path from the root through this element
	block int32  // index in the stack of the innermost block element at or below this one, -1 if none
}

func elementKey(a atom.Atom, name []byte) uint64 {
	if a != 0 {
		return uint64(a)
	}
	return 1<<63 | fnvAdd(fnvOffset, name)
}

// slot spreads keys over scanner.open (Fibonacci hashing).
func slot(key uint64) uint64 {
	return key * 0x9e3779b97f4a7c15 >> 58
}

// mayBeOpen reports whether an element with the key may be open: false
// means it is not, and saves a search of the stack, which would otherwise
// make a deep stack cost its depth on every tag.
func (s *scanner) mayBeOpen(key uint64) bool {
	return s.open[slot(key)] > 0
}

// scanner is the state of one pass over a page. The zero scanner is ready
// to scan; reset readies a used one again, keeping its buffers and hashes.
type scanner struct {
	z tokenizer

	stack    []entry
	open     [64]int32 // open elements per slot of their key: 0 means none of those keys is open
	overflow int       // start tags not pushed because the stack was full

	skip      atom.Atom // the element whose content is being skipped, 0 if none
	skipDepth int       // open elements named skip inside the skipped content, plus one

	run   []byte // the normalized text of the current run
	space bool   // a space is due before the run's next non-space character

	blocks   []Block
	ordinals map[uint64]uint32 // blocks per path state so far
	folding  bool              // there are MaxBlocks blocks: the last one's text goes to fold
	fold     hash.Hash32       // the last block's text, once folding (made with text)

	text  hash.Hash64 // the page's normalized text, blocks joined by ' ' (made at the first block)
	texts int         // bytes written to text

	words   int    // words seen
	shing   []byte // the last two words of the blocks so far (or fewer), joined by ' '
	first   int    // the length of the first of them (len(shing) when it holds one word)
	scratch []byte // a shingle being built
	lanes   [8]uint64
	lanesN  int // shingles counted in lanes
	ones    [64]uint64
	shings  uint64 // shingles added

	canonical string
	linked    bool // a <link rel=canonical> was seen

	trace func(text []byte) // tests: the normalized text of each block, folded or not
}

func (s *scanner) scan(body []byte) {
	z := &s.z
	z.reset(body)
	for {
		tt := z.next()
		switch tt {
		case html.ErrorToken: // the end of the body
			s.flush()
			return
		case html.TextToken:
			if s.skip == 0 {
				s.addText(z.text())
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name := z.tagName()
			a := atom.Lookup(name)
			if s.skip != 0 {
				if a == s.skip && !(a == atom.Svg && z.selfClosing()) {
					s.skipDepth++
					continue
				}
				if s.skip != atom.Svg || kind(a)&kBreaks == 0 {
					continue
				}
				s.skip, s.skipDepth = 0, 0
			}
			s.start(a, name)
		case html.EndTagToken:
			name := z.tagName()
			a := atom.Lookup(name)
			if s.skip != 0 {
				if a == s.skip {
					if s.skipDepth--; s.skipDepth == 0 {
						s.skip = 0
					}
				}
				continue
			}
			s.end(a, name)
		}
		// Comments and doctypes are not text.
	}
}

// start handles a start tag outside skipped content.
func (s *scanner) start(a atom.Atom, name []byte) {
	k := kind(a)
	switch {
	case k&kSkip != 0:
		// The tokenizer reads <script/> like <script> (the content up to
		// </script> is raw text), and so do browsers; only foreign
		// content honours the self-closing flag.
		if !(a == atom.Svg && s.z.selfClosing()) {
			s.skip, s.skipDepth = a, 1
		}
		return
	case a == atom.Br:
		s.lineBreak()
		return
	case a == atom.Link:
		if !s.linked {
			s.link()
		}
		return
	}
	s.implyEnds(a, k)
	if k&kVoid != 0 {
		if k&kBlock != 0 {
			s.flush()
		}
		return
	}
	if (a == atom.Html || a == atom.Head || a == atom.Body) && s.mayBeOpen(uint64(a)) {
		// A repeated <html>, <head> or <body> opens nothing new.
		for i := range s.stack {
			if s.stack[i].a == a {
				return
			}
		}
	}
	if k&kBlock != 0 {
		s.flush()
	}
	if len(s.stack) >= maxDepth {
		s.overflow++
		return
	}
	e := entry{key: elementKey(a, name), a: a, path: fnvOffset, block: -1}
	if n := len(s.stack); n > 0 {
		e.path, e.block = s.stack[n-1].path, s.stack[n-1].block
	}
	if k&kBlock != 0 {
		e.block = int32(len(s.stack))
	}
	id, _ := s.z.attrVal(attrID)
	class, _ := s.z.attrVal(attrClass)
	e.path = fnvAdd(e.path, name)
	e.path = fnvByte(e.path, sepField)
	e.path = fnvAdd(e.path, id)
	e.path = fnvByte(e.path, sepField)
	e.path = fnvAdd(e.path, class)
	e.path = fnvByte(e.path, sepElement)
	s.stack = append(s.stack, e)
	s.open[slot(e.key)]++
}

// end handles an end tag outside skipped content: it closes the innermost
// open element of that name and every element opened inside it. An end tag
// that matches no open element is ignored, but still ends a block if it
// names a block element (browsers open and close an empty <p> for a stray
// </p>).
func (s *scanner) end(a atom.Atom, name []byte) {
	switch a {
	case atom.Br: // browsers read </br> as <br>
		s.lineBreak()
		return
	case atom.Html, atom.Body: // browsers keep the body open to the end
		return
	}
	if s.overflow > 0 {
		s.overflow--
		if kind(a)&kBlock != 0 {
			s.flush()
		}
		return
	}
	if key := elementKey(a, name); s.mayBeOpen(key) {
		for i := len(s.stack) - 1; i >= 0; i-- {
			if s.stack[i].key == key {
				s.popTo(i)
				return
			}
		}
	}
	if kind(a)&kBlock != 0 {
		s.flush()
	}
}

// implyEnds closes the elements HTML closes implicitly when an element a
// starts: a <p> before a block, a list item before the next, a cell before
// the next cell, a row before the next row, an option before the next, a
// heading directly inside a heading. The searches stop where HTML's element
// scopes do, approximately.
func (s *scanner) implyEnds(a atom.Atom, k uint8) {
	if k&kClosesP != 0 && s.mayBeOpen(uint64(atom.P)) {
		s.closeInScope(isP, stopsP)
	}
	switch a {
	case atom.Li:
		if s.mayBeOpen(uint64(atom.Li)) {
			s.closeInScope(isLi, stopsItem)
		}
	case atom.Dd, atom.Dt:
		if s.mayBeOpen(uint64(atom.Dd)) || s.mayBeOpen(uint64(atom.Dt)) {
			s.closeInScope(isDdDt, stopsItem)
		}
	case atom.Tr:
		if s.mayBeOpen(uint64(atom.Tr)) {
			s.closeInScope(isTr, stopsRow)
		}
	case atom.Td, atom.Th:
		if s.mayBeOpen(uint64(atom.Td)) || s.mayBeOpen(uint64(atom.Th)) {
			s.closeInScope(isCell, stopsCell)
		}
	case atom.Tbody, atom.Thead, atom.Tfoot:
		if s.mayBeOpen(uint64(atom.Tbody)) || s.mayBeOpen(uint64(atom.Thead)) || s.mayBeOpen(uint64(atom.Tfoot)) {
			s.closeInScope(isSection, stopsSection)
		}
	case atom.Option:
		s.closeTop(atom.Option)
	case atom.Optgroup:
		s.closeTop(atom.Option)
		s.closeTop(atom.Optgroup)
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		if n := len(s.stack); n > 0 && isHeading(s.stack[n-1].a) {
			s.popTo(n - 1)
		}
	}
}

func isP(a atom.Atom) bool    { return a == atom.P }
func isLi(a atom.Atom) bool   { return a == atom.Li }
func isDdDt(a atom.Atom) bool { return a == atom.Dd || a == atom.Dt }
func isTr(a atom.Atom) bool   { return a == atom.Tr }
func isCell(a atom.Atom) bool { return a == atom.Td || a == atom.Th }
func isSection(a atom.Atom) bool {
	return a == atom.Tbody || a == atom.Thead || a == atom.Tfoot
}
func isHeading(a atom.Atom) bool {
	switch a {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		return true
	}
	return false
}

// stopsP is HTML's "button scope" boundary.
func stopsP(a atom.Atom) bool {
	switch a {
	case atom.Applet, atom.Button, atom.Caption, atom.Html, atom.Marquee, atom.Object,
		atom.Table, atom.Td, atom.Th:
		return true
	}
	return false
}

// stopsItem approximates HTML's "special" elements other than address, div
// and p, at which the search for an open <li>, <dd> or <dt> stops.
func stopsItem(a atom.Atom) bool {
	switch a {
	case atom.Address, atom.Div, atom.P:
		return false
	}
	return kind(a)&kBlock != 0 || stopsP(a)
}

func stopsRow(a atom.Atom) bool {
	return a == atom.Table || a == atom.Html || isSection(a)
}

func stopsCell(a atom.Atom) bool {
	return a == atom.Tr || stopsRow(a)
}

func stopsSection(a atom.Atom) bool {
	return a == atom.Table || a == atom.Html
}

// closeInScope closes the innermost open element that is matches, unless
// an element that stops is opened inside it.
func (s *scanner) closeInScope(is, stops func(atom.Atom) bool) {
	for i := len(s.stack) - 1; i >= 0; i-- {
		switch a := s.stack[i].a; {
		case is(a):
			s.popTo(i)
			return
		case stops(a):
			return
		}
	}
}

// closeTop closes the current element if it is a.
func (s *scanner) closeTop(a atom.Atom) {
	if n := len(s.stack); n > 0 && s.stack[n-1].a == a {
		s.popTo(n - 1)
	}
}

// popTo closes stack[i] and everything opened inside it, ending the current
// block if a block element is among them.
func (s *scanner) popTo(i int) {
	if n := len(s.stack); n > 0 && int(s.stack[n-1].block) >= i {
		s.flush()
	}
	for _, e := range s.stack[i:] {
		s.open[slot(e.key)]--
	}
	s.stack = s.stack[:i]
}

// link reads a <link>'s attributes and keeps its href if its rel has the
// token canonical.
func (s *scanner) link() {
	rel, ok := s.z.attrVal(attrRel)
	if !ok || !hasToken(rel, "canonical") {
		return
	}
	href, _ := s.z.attrVal(attrHref)
	s.linked = true
	s.canonical = string(bytes.Trim(href, asciiSpace))
}

// spaceSep separates blocks in the page's text and in a folded block. It is
// only read.
var spaceSep = []byte{' '}

// asciiSpace is HTML's ASCII whitespace, which separates tokens in a list
// and is stripped from a URL before it is parsed.
const asciiSpace = " \t\n\f\r"

// hasToken reports whether the whitespace-separated list has the token,
// compared ASCII case-insensitively.
func hasToken(list []byte, token string) bool {
	for len(list) > 0 {
		list = bytes.TrimLeft(list, asciiSpace)
		n := bytes.IndexAny(list, asciiSpace)
		if n < 0 {
			n = len(list)
		}
		if asciiEqualFold(list[:n], token) {
			return true
		}
		list = list[n:]
	}
	return false
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c, d := b[i], s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// lineBreak ends a line: a space in the run, not a new block.
func (s *scanner) lineBreak() {
	if len(s.run) > 0 {
		s.space = true
	}
}

// addText appends text to the current run, normalized: Unicode lower case,
// every run of white space (unicode.IsSpace, so also U+00A0) one space,
// none at the start, U+0000 dropped as browsers drop it. Bytes that are
// not UTF-8 are kept as they are.
func (s *scanner) addText(t []byte) {
	run, space := s.run, s.space
	for i := 0; i < len(t); {
		// Most text is bytes that stay as they are, and single spaces
		// between them: append them at once.
		j := i
		for j < len(t) {
			if c := t[j]; asciiText[c&0x7f] == c {
				j++
			} else if c == ' ' && j > i && j+1 < len(t) && asciiText[t[j+1]&0x7f] == t[j+1] {
				j += 2
			} else {
				break
			}
		}
		if j > i {
			if space {
				run = append(run, ' ')
				space = false
			}
			run = append(run, t[i:j]...)
			if i = j; i == len(t) {
				break
			}
		}
		c := t[i]
		if c < utf8.RuneSelf {
			i++
			switch c = asciiText[c]; c {
			case textSpace:
				space = len(run) > 0
				continue
			case textDrop: // browsers drop U+0000 from text
				continue
			}
			if space {
				run = append(run, ' ')
				space = false
			}
			run = append(run, c)
			continue
		}
		r, n := utf8.DecodeRune(t[i:])
		if r == utf8.RuneError && n == 1 {
			if space {
				run = append(run, ' ')
				space = false
			}
			run = append(run, c)
			i++
			continue
		}
		i += n
		if unicode.IsSpace(r) {
			space = len(run) > 0
			continue
		}
		if space {
			run = append(run, ' ')
			space = false
		}
		run = utf8.AppendRune(run, unicode.ToLower(r))
	}
	s.run, s.space = run, space
}

// asciiText maps an ASCII byte to what addText appends: itself in lower
// case, or textSpace or textDrop (both above ASCII).
var asciiText = func() (t [utf8.RuneSelf]byte) {
	for c := range t {
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			t[c] = textSpace
		case c == 0:
			t[c] = textDrop
		case 'A' <= c && c <= 'Z':
			t[c] = byte(c + 'a' - 'A')
		default:
			t[c] = byte(c)
		}
	}
	return t
}()

const (
	textSpace = 0xff
	textDrop  = 0xfe
)

// flush ends the current run: if it has text, that is the next block, of
// the innermost open block element (or of the root when none is open).
func (s *scanner) flush() {
	s.space = false
	if len(s.run) == 0 {
		return
	}
	t := s.run
	s.run = s.run[:0]
	if s.trace != nil {
		s.trace(t)
	}

	if s.text == nil {
		s.text, s.fold = murmur3.New64(), murmur3.New32()
	}
	if s.texts > 0 {
		s.text.Write(spaceSep)
		s.texts++
	}
	s.text.Write(t)
	s.texts += len(t)
	s.addWords(t)

	if len(s.blocks) == MaxBlocks {
		s.fold.Write(spaceSep)
		s.fold.Write(t)
		return
	}
	path := uint64(fnvOffset)
	if n := len(s.stack); n > 0 && s.stack[n-1].block >= 0 {
		path = s.stack[s.stack[n-1].block].path
	}
	if s.ordinals == nil {
		s.ordinals = make(map[uint64]uint32)
	}
	ord := s.ordinals[path]
	s.ordinals[path] = ord + 1
	b := Block{Path: blockPath(path, ord)}
	if len(s.blocks) == MaxBlocks-1 {
		s.folding = true
		s.fold.Write(t)
	} else {
		b.Text = murmur3.Sum32(t)
	}
	s.blocks = append(s.blocks, b)
}

// finishBlocks returns the blocks, with the folded last one's Text.
func (s *scanner) finishBlocks() []Block {
	if len(s.blocks) == 0 {
		return nil
	}
	if s.folding {
		s.blocks[len(s.blocks)-1].Text = s.fold.Sum32()
	}
	return slices.Clone(s.blocks)
}

// maxKept is the largest buffer a scanner keeps for its next page.
const maxKept = 64 << 10

// reset makes s ready for another page, keeping its buffers (those that are
// not outsized by a hostile page) and not the body it read.
func (s *scanner) reset() {
	keep := func(b []byte) []byte {
		if cap(b) > maxKept {
			return nil
		}
		return b[:0]
	}
	text, fold := s.text, s.fold
	if text != nil {
		text.Reset()
		fold.Reset()
	}
	clear(s.ordinals)
	*s = scanner{
		z:        tokenizer{name: keep(s.z.name)},
		stack:    s.stack[:0],
		run:      keep(s.run),
		blocks:   s.blocks[:0],
		ordinals: s.ordinals,
		text:     text,
		fold:     fold,
		shing:    keep(s.shing),
		scratch:  keep(s.scratch),
	}
}

// textSum is the murmur3 hash of the page's normalized text, 0 only when
// it has none (a text that hashes to 0 is given 1).
func (s *scanner) textSum() uint64 {
	if s.texts == 0 {
		return 0
	}
	if h := s.text.Sum64(); h != 0 {
		return h
	}
	return 1
}

// wordByte reports whether a byte is an ASCII letter or digit: part of a
// word on its own. (A byte past ASCII may begin a letter; addWords decodes
// it.)
var wordByte = func() (t [256]bool) {
	for c := range t {
		t[c] = 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || 'A' <= c && c <= 'Z'
	}
	return t
}()

// addWords splits a block's normalized text into words, the maximal runs of
// Unicode letters, digits and combining marks (so that a decomposed "é" or
// a Devanagari vowel sign does not split a word), and shingles them.
func (s *scanner) addWords(t []byte) {
	var w blockWords
	start := -1
	for i := 0; i < len(t); {
		c := t[i]
		if wordByte[c] {
			if start < 0 {
				start = i
			}
			for i++; i < len(t) && wordByte[t[i]]; i++ {
			}
			continue
		}
		n, word := 1, false
		if c >= utf8.RuneSelf {
			var r rune
			r, n = utf8.DecodeRune(t[i:])
			word = !(r == utf8.RuneError && n == 1) &&
				(unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r))
		}
		if word {
			if start < 0 {
				start = i
			}
		} else if start >= 0 {
			s.addWord(t, start, i, &w)
			start = -1
		}
		i += n
	}
	if start >= 0 {
		s.addWord(t, start, len(t), &w)
	}
	s.carry(t, &w)
}

// blockWords are the last two words of a block's text so far: t[a0:b0] and
// t[a1:b1], of n.
type blockWords struct {
	a0, b0, a1, b1 int
	n              int
}

// addWord adds the shingle that the word t[a:b] ends, once there are three
// words: its words joined by single spaces. That is a slice of t when the
// three are in t with single spaces between them; otherwise it is built in
// s.scratch from the words in t and those s.shing carries from earlier
// blocks.
func (s *scanner) addWord(t []byte, a, b int, w *blockWords) {
	s.words++
	if s.words >= 3 {
		if w.n >= 2 && w.b0+1 == w.a1 && w.b1+1 == a && t[w.b0] == ' ' && t[w.b1] == ' ' {
			s.addShingle(sum64(t[w.a0:b]))
		} else {
			sh := s.scratch[:0]
			switch w.n {
			case 0: // the two words carried, this one
				sh = append(append(append(sh, s.shing...), ' '), t[a:b]...)
			case 1: // the last word carried, the first of t, this one
				sh = append(append(append(append(append(sh, s.lastCarried()...), ' '), t[w.a1:w.b1]...), ' '), t[a:b]...)
			default:
				sh = append(append(append(append(append(sh, t[w.a0:w.b0]...), ' '), t[w.a1:w.b1]...), ' '), t[a:b]...)
			}
			s.scratch = sh[:0]
			s.addShingle(sum64(sh))
		}
	}
	w.a0, w.b0, w.a1, w.b1 = w.a1, w.b1, a, b
	w.n++
}

// carry keeps the last two words of the page so far in s.shing, joined by a
// space (or the one word, if there is one), for the shingles that span
// blocks; s.first is the length of the first of two.
func (s *scanner) carry(t []byte, w *blockWords) {
	switch {
	case w.n >= 2:
		s.shing = append(append(append(s.shing[:0], t[w.a0:w.b0]...), ' '), t[w.a1:w.b1]...)
		s.first = w.b0 - w.a0
	case w.n == 1 && len(s.shing) == 0:
		s.shing = append(s.shing[:0], t[w.a1:w.b1]...)
		s.first = len(s.shing)
	case w.n == 1:
		n := copy(s.shing, s.lastCarried())
		s.first = n
		s.shing = append(append(s.shing[:n], ' '), t[w.a1:w.b1]...)
	}
}

// lastCarried returns the last word s.shing carries (of one or two).
func (s *scanner) lastCarried() []byte {
	if s.first < len(s.shing) {
		return s.shing[s.first+1:]
	}
	return s.shing
}

// addShingle counts the bits of a shingle's hash (murmur3 64 of its words
// joined by single spaces). It adds to eight counters at once: lane j holds
// the counts of bits j, j+8, …, j+56 in its eight bytes, which are spilled
// into ones before they can overflow.
func (s *scanner) addShingle(h uint64) {
	const lsb = 0x0101010101010101
	for j := range s.lanes {
		s.lanes[j] += h >> j & lsb
	}
	s.shings++
	if s.lanesN++; s.lanesN == 255 {
		s.spill()
	}
}

func (s *scanner) spill() {
	for j, l := range s.lanes {
		for b := range 8 {
			s.ones[8*b+j] += l >> (8 * b) & 0xff
		}
		s.lanes[j] = 0
	}
	s.lanesN = 0
}

// simHash sets bit i when more of the page's shingle hashes have bit i set
// than not: Charikar's sum of +1 and −1 is then positive. A page with fewer
// than three words has one shingle of the words it has; one with none has
// SimHash 0.
func (s *scanner) simHash() uint64 {
	if s.words > 0 && s.words < 3 {
		s.addShingle(sum64(s.shing))
	}
	s.spill()
	var h uint64
	for i, n := range s.ones {
		if 2*n > s.shings {
			h |= 1 << i
		}
	}
	return h
}
