package fingerprint

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/spaolacci/murmur3"
)

// reference computes Text, SimHash and the blocks' Texts from the normalized
// texts of a page's blocks, the slow and obvious way the package
// documentation describes them.
func reference(texts []string) (text, simHash uint64, blocks []uint32) {
	if len(texts) == 0 {
		return 0, 0, nil
	}
	all := strings.Join(texts, " ")
	if text = murmur3.Sum64([]byte(all)); text == 0 {
		text = 1
	}
	words := strings.FieldsFunc(all, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsMark(r)
	})
	var shingles []string
	switch {
	case len(words) == 0:
	case len(words) < 3:
		shingles = []string{strings.Join(words, " ")}
	default:
		for i := range len(words) - 2 {
			shingles = append(shingles, strings.Join(words[i:i+3], " "))
		}
	}
	var sum [64]int
	for _, sh := range shingles {
		h := murmur3.Sum64([]byte(sh))
		for i := range sum {
			if h>>i&1 == 1 {
				sum[i]++
			} else {
				sum[i]--
			}
		}
	}
	for i, v := range sum {
		if v > 0 {
			simHash |= 1 << i
		}
	}
	for i, t := range texts {
		if i == MaxBlocks-1 {
			blocks = append(blocks, murmur3.Sum32([]byte(strings.Join(texts[i:], " "))))
			break
		}
		blocks = append(blocks, murmur3.Sum32([]byte(t)))
	}
	return text, simHash, blocks
}

// checkReference fails if Of(body) disagrees with reference.
func checkReference(tb testing.TB, body []byte) {
	tb.Helper()
	p := Of(body)
	text, sim, blocks := reference(blockTexts(string(body)))
	var got []uint32
	for _, b := range p.Blocks {
		got = append(got, b.Text)
	}
	if p.Text != text || p.SimHash != sim || !slices.Equal(got, blocks) {
		tb.Errorf("Of(%.80q): Text %#x, SimHash %#x, block Texts %x; reference %#x, %#x, %x", body, p.Text, p.SimHash, got, text, sim, blocks)
	}
}

// TestReference: the one-pass Of (streamed hashes, SimHash counted eight
// bits at a time, blocks folded on the fly) computes what the reference
// does, on the table tests' pages and on generated ones of every size.
func TestReference(t *testing.T) {
	c := newCorpus(99, 3000)
	bodies := [][]byte{[]byte(page("now", "red", "10", "a")), realisticPage()}
	for _, n := range []int{0, 1, 2, 3, 4, 10, 254, 255, 256, 257, 600, 2000} {
		ws := c.words(n)
		// One paragraph per word: many blocks, some folded.
		bodies = append(bodies, []byte("<p>"+strings.Join(ws, "<p>")), c.html(ws))
	}
	for _, tt := range blockTextTests {
		bodies = append(bodies, []byte(tt.body))
	}
	// Shingles across blocks of one, two and more words, and words apart
	// by more than a space.
	for _, b := range []string{
		"<p>a<p>b<p>c d<p>e", "<p>a b<p>c<p>d e f<p>g, h", "<p>a, b<p>c", "<p>a<p>b, c<p>d",
		"<p>a<p>b c d<p>e<p>f", "<p>a -- b -- c<p>d<p>e", "<p>a<p>b", "<p>a b<p>c!",
	} {
		bodies = append(bodies, []byte(b))
	}
	for _, b := range bodies {
		checkReference(t, b)
	}
}

// TestPathPinned derives a Path by hand from its definition: FNV-1a 64 of
// each open element's "tag 0x1f id 0x1f class 0x1e" from the root, then
// 0x1d and the ordinal as 4 big-endian bytes, the halves xored.
func TestPathPinned(t *testing.T) {
	path := func(ordinal uint32, elements ...string) uint32 {
		h := fnv.New64a()
		for _, e := range elements {
			h.Write([]byte(e + "\x1e"))
		}
		h.Write([]byte{0x1d})
		h.Write(binary.BigEndian.AppendUint32(nil, ordinal))
		s := h.Sum64()
		return uint32(s) ^ uint32(s>>32)
	}
	body := `<div id="main" class="a  b"><p>Hi <b>there</b></p><p>Again</p></div>bye`
	want := []Block{
		{path(0, "div\x1fmain\x1fa  b", "p\x1f\x1f"), murmur3.Sum32([]byte("hi there"))},
		{path(1, "div\x1fmain\x1fa  b", "p\x1f\x1f"), murmur3.Sum32([]byte("again"))},
		{path(0), murmur3.Sum32([]byte("bye"))}, // the root: no element open
	}
	if got := Of([]byte(body)).Blocks; !slices.Equal(got, want) {
		t.Errorf("Of(%q).Blocks = %x, want %x", body, got, want)
	}
}

// pinnedPage is a small shop page with the markup TestPinned needs to
// cover: a title, a script and a style, implied end tags, a <br>, an
// entity, a table and classes and ids in the paths.
const pinnedPage = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Widget | Shop</title>
<link rel="canonical" href="https://shop.example/widget">
<script>var t = "2024-05-01";</script><style>p { margin: 0 }</style></head>
<body class="product">
<nav id="top"><ul><li><a href="/">Home</a><li><a href="/cart">Cart (2)</a></ul></nav>
<main><h1>Widget</h1>
<p class="price">Colour: red, price 10</p>
<p>Ships in two days.<br>Returns within thirty days.</p>
<table><tr><th>Weight<td>200&nbsp;g<tr><th>Size<td>10 cm</table>
</main>
<footer><p>© 2024 Shop Ltd.</p><p class="stamp">Rendered 12:00:01</p></footer>
</body></html>
`

// TestPinned pins every hash Of computes, as bits-and-blooms/bloom pins its
// hashes: rules learned from Prints are stored, so a change here is a change
// of storage format and must not happen by accident. The values were
// computed by this package and agree with reference and TestPathPinned; the
// digests of "" and "abc" are SHA-1's FIPS 180 test vectors (da39a3ee…,
// a9993e36…) in base32, checked with Python's hashlib and base64.
func TestPinned(t *testing.T) {
	tests := []struct {
		body    string
		digest  string
		text    uint64
		simHash uint64
		blocks  []Block
	}{
		{body: "", digest: "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"},
		// One word, one shingle: SimHash is that shingle's hash, which is
		// also the hash of the whole text.
		{
			body: "abc", digest: "sha1:VGMT4NSHA2AWVOR6EVYXQUGCNSONBWE5",
			text: 0xb4963f3f3fad7867, simHash: 0xb4963f3f3fad7867,
			blocks: []Block{{0xa7a7e2a8, 0xb3dd93fa}},
		},
		{
			body:   "<title>Hello</title><p>The quick brown fox jumps over the lazy dog.</p>",
			digest: "sha1:DPV2ZLSRDRERW6CP5WNW654S3FH3COC3", text: 0xe837660a42ac65ee, simHash: 0x3800020846054014,
			blocks: []Block{{0xfc85cba1, 0x248bfa47}, {0x395a1730, 0x602aad27}},
		},
		{
			body:   "<p>Ünïcödé — ΣΊΣΥΦΟΣ 東京 x\u0301y</p>",
			digest: "sha1:MUEZQ43552R6ZLMLKRO4QUJOEUHH5C52", text: 0x9d40e75f21e14362, simHash: 0xa2a010270400040,
			blocks: []Block{{0x395a1730, 0x5422ae62}},
		},
		{
			body:   pinnedPage,
			digest: "sha1:FRZCMKXAYL3OF7RHVOX4PPOKGGY2J4IS", text: 0x6b3c80414d8766ad, simHash: 0x144f13f6876b305a,
			blocks: []Block{
				{0xde6e8baf, 0x47c8c8c0}, {0x5b80133b, 0x448ff13b}, {0x5b801df4, 0xaa8834be}, {0xd76eceec, 0x5c3ce50b},
				{0x909a7bdb, 0x63e72682}, {0x42257431, 0xadc3ef01}, {0x8916f78c, 0x211e6be5}, {0xf475f5e3, 0x6a0ff37f},
				{0x8916f4db, 0xed8917fa}, {0xf475f75c, 0xcefd65bb}, {0xbe950042, 0xe22670fe}, {0xa6328c56, 0xf421c8da},
			},
		},
	}
	for _, tt := range tests {
		p := Of([]byte(tt.body))
		if p.Digest != tt.digest || p.Text != tt.text || p.SimHash != tt.simHash || !slices.Equal(p.Blocks, tt.blocks) {
			t.Errorf("Of(%.60q) = {Digest: %q, Text: %#x, SimHash: %#x, Blocks: %x}\nwant {Digest: %q, Text: %#x, SimHash: %#x, Blocks: %x}",
				tt.body, p.Digest, p.Text, p.SimHash, p.Blocks, tt.digest, tt.text, tt.simHash, tt.blocks)
		}
		if d := Digest([]byte(tt.body)); d != tt.digest {
			t.Errorf("Digest(%.60q) = %q, want %q", tt.body, d, tt.digest)
		}
	}
	if got, want := Of([]byte(pinnedPage)).Canonical, "https://shop.example/widget"; got != want {
		t.Errorf("Of(pinnedPage).Canonical = %q, want %q", got, want)
	}
	if got, want := blockTexts(pinnedPage), []string{
		"widget | shop", "home", "cart (2)", "widget", "colour: red, price 10",
		"ships in two days. returns within thirty days.", "weight", "200 g", "size", "10 cm",
		"© 2024 shop ltd.", "rendered 12:00:01",
	}; !slices.Equal(got, want) {
		t.Errorf("blocks(pinnedPage) = %q, want %q", got, want)
	}
}
