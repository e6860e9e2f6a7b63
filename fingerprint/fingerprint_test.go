package fingerprint

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

// blockTexts returns the normalized text of each block of body, as Of
// hashes them, without folding the blocks past MaxBlocks.
func blockTexts(body string) []string {
	var out []string
	s := scanner{trace: func(t []byte) { out = append(out, string(t)) }}
	s.scan([]byte(body))
	return out
}

// TestBlockTexts pins what is visible text, where blocks end and how text
// is normalized.
func TestBlockTexts(t *testing.T) {
	for _, tt := range blockTextTests {
		if got := blockTexts(tt.body); !slices.Equal(got, tt.want) {
			t.Errorf("%s: blocks(%q) = %q, want %q", tt.name, tt.body, got, tt.want)
		}
	}
}

var blockTextTests = []struct {
	name, body string
	want       []string
}{
	{"inline markup joins", "<p>Hello   <b>World</b>!</p>", []string{"hello world!"}},
	{"br ends a line, not a block", "<p>a<br>b<br/>c</br>d</p>", []string{"a b c d"}},
	{"nested blocks split the outer one", "<div>a<p>b</p>c</div>", []string{"a", "b", "c"}},
	{"hr ends a block", "<div>a<hr>b</div>", []string{"a", "b"}},
	{"title is a block", "<html><head><title> My  Page </title></head><body><p>x</p>", []string{"my page", "x"}},
	{"text outside any element", "just text", []string{"just text"}},
	{"empty blocks omitted", "<div> \n\t</div><p>&nbsp;</p><p>x</p><p></p>", []string{"x"}},
	{"entities decoded", "<p>caf&eacute; &amp; co&nbsp;&nbsp;x&#x41;</p>", []string{"café & co xa"}},
	// unicode.ToLower per rune: no special casing, so no final sigma.
	{"unicode lower case", "<p>ÉCOLE Straße ΣΊΣΥΦΟΣ</p>", []string{"école straße σίσυφοσ"}},
	{"unicode spaces collapse", "<p>a\u00a0\u2003 b\u3000c</p>", []string{"a b c"}},
	{"invalid UTF-8 kept", "<p>A\xffB</p>", []string{"a\xffb"}},
	{"options are blocks", "<select><option>Red<option>Blue</select>", []string{"red", "blue"}},
	{"table cells are blocks", "<table><tr><td>a<td>b<tr><td>c</table>", []string{"a", "b", "c"}},

	// Content that is not visible text.
	{"script", `<p>a<script>var x = "<p>no</p>";</script>b</p>`, []string{"ab"}},
	{"self-closing script is still raw", `<p>a<script/>no</script>b</p>`, []string{"ab"}},
	{"style", "<style>p { color: red }</style><p>x</p>", []string{"x"}},
	{"noscript", "<noscript><p>enable js</p></noscript><p>x</p>", []string{"x"}},
	{"template", "<template><p>no<template>no</template>no</p></template><p>x</p>", []string{"x"}},
	{"svg", "<p>a<svg><text>no</text><svg><title>no</title></svg>no</svg>b</p>", []string{"ab"}},
	{"self-closing svg", "<p>a<svg/>b</p>", []string{"ab"}},
	// An HTML tag inside <svg> ends foreign content (HTML §13.2.6.5), so
	// an unclosed icon does not swallow the page.
	{"unclosed svg", "<svg><path d='M0'><p>after</p>", []string{"after"}},
	{"iframe", "<p>a<iframe>no</iframe>b</p>", []string{"ab"}},
	{"comments", "<p>a<!-- no -->b<!--> c</p>", []string{"ab c"}},
	{"doctype", "<!DOCTYPE html><p>x", []string{"x"}},
	{"img alt is not text", `<p>a<img alt="no">b</p>`, []string{"ab"}},

	// Malformed HTML.
	{"unclosed p", "<p>a<p>b<div>c", []string{"a", "b", "c"}},
	{"stray end tags", "</div></span>a</p>b</table>", []string{"a", "b"}},
	{"misnested inline", "<p><b>a<i>b</b>c</i></p>", []string{"abc"}},
	{"unclosed script", "<p>a<script>no", []string{"a"}},
	{"truncated tag", "<p>a</p><div cla", []string{"a"}},
}

// TestPaths shows which changes to a page keep its blocks' Paths and which
// do not: a Path is the block's place, never its text.
func TestPaths(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"text does not change a path", `<div id="x"><p class="c">one</p></div>`, `<div id="x"><p class="c">two words</p></div>`, true},
		{"inline markup inside the block does not either", "<p>one</p>", "<p><b><a href=/x>one</a></b></p>", true},
		{"other attributes do not either", `<p class=c>x</p>`, `<p class=c style="color:red" data-t="9">x</p>`, true},
		{"implied </p>", "<body><p>a<p>b</body>", "<body><p>a</p><p>b</p></body>", true},
		{"implied </li>", "<ul><li>a<li>b</ul>", "<ul><li>a</li><li>b</li></ul>", true},
		{"implied </td> and </tr>", "<table><tr><td>a<td>b<tr><td>c</table>", "<table><tr><td>a</td><td>b</td></tr><tr><td>c</td></tr></table>", true},
		{"implied </option>", "<select><option>a<option>b</select>", "<select><option>a</option><option>b</option></select>", true},
		{"repeated <body>", "<body><p>a</p><body class=x><p>b</p>", "<body><p>a</p><p>b</p>", true},
		{"class is part of the place", `<p class="a">x</p>`, `<p class="b">x</p>`, false},
		{"id is part of the place", `<p id="a">x</p>`, `<p id="b">x</p>`, false},
		{"the ancestors are part of the place", "<div><p>x</p></div>", "<section><p>x</p></section>", false},
		{"inline ancestors too", "<a href=/><p>x</p></a>", "<span><p>x</p></span>", false},
		{"the ordinal among its likes", "<p>x</p>", "<p></p><p>y</p><p>x</p>", false},
	}
	for _, tt := range tests {
		pa, pb := paths(Of([]byte(tt.a)).Blocks), paths(Of([]byte(tt.b)).Blocks)
		if got := slices.Equal(pa, pb); got != tt.same || len(pa) == 0 {
			t.Errorf("%s: paths(%q) = %x, paths(%q) = %x; want equal %v", tt.name, tt.a, pa, tt.b, pb, tt.same)
		}
	}
}

func paths(bs []Block) []uint32 {
	var ps []uint32
	for _, b := range bs {
		ps = append(ps, b.Path)
	}
	return ps
}

// pathOf returns the Path of the block of p whose normalized text is text.
func pathOf(tb testing.TB, body, text string) uint32 {
	tb.Helper()
	texts := blockTexts(body)
	i := slices.Index(texts, text)
	if i < 0 {
		tb.Fatalf("no block %q in %q (blocks %q)", text, body, texts)
	}
	return Of([]byte(body)).Blocks[i].Path
}

// page renders a small product page template, as a site would.
func page(rendered, colour, price, session string) string {
	return `<!DOCTYPE html>
<html><head><title>Widget | Shop</title>
<link rel="stylesheet" href="/s.css"><link rel="canonical" href="/widget">
<script>window.dataLayer = [{"t": "` + rendered + `"}];</script>
<style>.price { font-weight: bold }</style></head>
<body class="product">
<header id="top"><nav><ul>
<li><a href="/?sid=` + session + `">Home</a></li>
<li><a href="/shop?sid=` + session + `">Shop</a></li>
<li><a href="/cart?sid=` + session + `">Cart</a></li></ul></nav></header>
<main><h1>Widget</h1>
<p class="lede">A widget for every purpose.</p>
<p class="price">Colour: ` + colour + `, price ` + price + `</p>
<p>Ships in two days. Returns within thirty days.</p>
<ul class="specs"><li>Weight: 200 g</li><li>Size: 10 cm</li></ul>
</main>
<footer><p>© 2024 Shop Ltd.</p><p class="stamp">Rendered ` + rendered + `</p></footer>
</body></html>`
}

// TestChangedPages is the use Blocks are for: comparing two fetches and
// naming the parts that differ.
func TestChangedPages(t *testing.T) {
	base := page("2024-05-01 12:00:01", "red", "10", "a1")
	tests := []struct {
		name   string
		a, b   string
		want   []uint32
		same   bool // equal Text
		simMax int  // Distance(SimHash) at most
	}{
		{"identical", base, base, nil, true, 0},
		{
			"timestamp differs", base, page("2024-05-01 12:00:07", "red", "10", "a1"),
			[]uint32{pathOf(t, base, "rendered 2024-05-01 12:00:01")}, false, 16,
		},
		{
			"one paragraph differs", base, page("2024-05-01 12:00:01", "blue", "12", "a1"),
			[]uint32{pathOf(t, base, "colour: red, price 10")}, false, 16,
		},
		// Links carrying a session id: other bytes, the same visible text.
		{"session id in links", base, page("2024-05-01 12:00:01", "red", "10", "b2"), nil, true, 0},
		{
			"paragraph added", base, strings.Replace(base, "</main>", "<p>Now on sale.</p></main>", 1),
			[]uint32{pathOf(t, strings.Replace(base, "</main>", "<p>Now on sale.</p></main>", 1), "now on sale.")}, false, 20,
		},
	}
	for _, tt := range tests {
		a, b := Of([]byte(tt.a)), Of([]byte(tt.b))
		if got := Changed(a.Blocks, b.Blocks); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Changed = %x, want %x", tt.name, got, tt.want)
		}
		if got := a.Text == b.Text; got != tt.same {
			t.Errorf("%s: Text %x, %x; want equal %v", tt.name, a.Text, b.Text, tt.same)
		}
		if d := Distance(a.SimHash, b.SimHash); d > tt.simMax {
			t.Errorf("%s: Distance(SimHash) = %d, want ≤ %d", tt.name, d, tt.simMax)
		}
		if got := a.Digest == b.Digest; got != (tt.a == tt.b) {
			t.Errorf("%s: Digest %s, %s; want equal %v", tt.name, a.Digest, b.Digest, tt.a == tt.b)
		}
		if a.Canonical != "/widget" {
			t.Errorf("%s: Canonical = %q, want %q", tt.name, a.Canonical, "/widget")
		}
	}
}

// TestScriptStyleIgnored: pages that differ only in scripts, styles,
// comments and attributes have the same Text, SimHash and Blocks.
func TestScriptStyleIgnored(t *testing.T) {
	a := `<html><head><style>body{margin:0}</style><script>var t=1</script></head><body><p>Same text.</p><!-- build 1 --></body></html>`
	b := `<html><head><style>body{margin:1px}</style><script>var t="a long script with words in it"</script></head><body><p data-x="9">Same text.</p><!-- build 2 --><script src=/x.js></script></body></html>`
	pa, pb := Of([]byte(a)), Of([]byte(b))
	if pa.Text != pb.Text || pa.SimHash != pb.SimHash || !slices.Equal(pa.Blocks, pb.Blocks) {
		t.Errorf("Of(%q) = %+v\nOf(%q) = %+v\nwant the same Text, SimHash and Blocks", a, pa, b, pb)
	}
	if pa.Digest == pb.Digest {
		t.Errorf("Digest(a) = Digest(b) = %s, want different", pa.Digest)
	}
}

func TestCanonical(t *testing.T) {
	tests := []struct {
		body, want string
	}{
		{`<link rel="Canonical foo" href="/a">`, "/a"},
		{`<link rel="stylesheet" href="/s.css"><link rel=canonical href="/b">`, "/b"},
		{`<link href="/c" rel="CANONICAL">`, "/c"},
		{"<link rel=\"alternate\n canonical\" href=/d>", "/d"},
		{`<link rel=canonical href="/first"><link rel=canonical href="/second">`, "/first"},
		{`<body><p>x</p><link rel=canonical href="/in-body"></body>`, "/in-body"}, // anywhere
		{`<link rel=canonical href="/a?x=1&amp;y=2">`, "/a?x=1&y=2"},              // the attribute's value
		{`<link rel=canonical href="  https://example.com/p#x  ">`, "https://example.com/p#x"},
		{`<link rel=canonical href="../up">`, "../up"}, // not resolved
		{`<link rel=canonical>`, ""},
		{`<link rel=canonicalx href=/no>`, ""},
		{`<link rel=can-onical href=/no>`, ""},
		{`<a rel=canonical href=/no>x</a>`, ""},
		{`<script><link rel=canonical href=/no></script><!-- <link rel=canonical href=/no> -->`, ""},
		{`<link rel=canonical href="/a" href="/b">`, "/a"},
		{``, ""},
	}
	for _, tt := range tests {
		if got := Of([]byte(tt.body)).Canonical; got != tt.want {
			t.Errorf("Of(%q).Canonical = %q, want %q", tt.body, got, tt.want)
		}
	}
}

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b uint64
		want int
	}{
		{0, 0, 0},
		{0, 1, 1},
		{0, ^uint64(0), 64},
		{0xf0f0, 0x0ff0, 8},
		{1 << 63, 1, 2},
	}
	for _, tt := range tests {
		if got := Distance(tt.a, tt.b); got != tt.want {
			t.Errorf("Distance(%#x, %#x) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestChanged(t *testing.T) {
	tests := []struct {
		name string
		a, b []Block
		want []uint32
	}{
		{"both empty", nil, nil, nil},
		{"equal", []Block{{1, 10}, {2, 20}}, []Block{{1, 10}, {2, 20}}, nil},
		{"order does not matter", []Block{{2, 20}, {1, 10}}, []Block{{1, 10}, {2, 20}}, nil},
		{"one text", []Block{{1, 10}, {2, 20}}, []Block{{1, 10}, {2, 21}}, []uint32{2}},
		{"only in a", []Block{{1, 10}, {3, 30}}, []Block{{1, 10}}, []uint32{3}},
		{"only in b", nil, []Block{{5, 50}, {4, 40}}, []uint32{4, 5}},
		{"sorted", []Block{{9, 1}, {3, 1}, {7, 1}}, []Block{{9, 2}, {3, 2}, {7, 2}}, []uint32{3, 7, 9}},
		// A Path twice in a page (a collision) compares as a set of Texts.
		{"repeated path, same texts", []Block{{1, 10}, {1, 11}}, []Block{{1, 11}, {1, 10}}, nil},
		{"repeated path, one text differs", []Block{{1, 10}, {1, 11}}, []Block{{1, 10}, {1, 12}}, []uint32{1}},
		{"repeated path against one", []Block{{1, 10}, {1, 11}, {2, 5}}, []Block{{1, 10}, {2, 5}}, []uint32{1}},
	}
	for _, tt := range tests {
		a, b := slices.Clone(tt.a), slices.Clone(tt.b)
		if got := Changed(tt.a, tt.b); !slices.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
			t.Errorf("%s: Changed(%v, %v) = %v, want %v", tt.name, tt.a, tt.b, got, tt.want)
		}
		if got := Changed(tt.b, tt.a); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Changed(%v, %v) = %v, want %v", tt.name, tt.b, tt.a, got, tt.want)
		}
		if !slices.Equal(a, tt.a) || !slices.Equal(b, tt.b) {
			t.Errorf("%s: Changed modified its arguments", tt.name)
		}
	}
}

// TestMaxBlocks: the blocks past MaxBlocks fold into the last, whose Text
// then changes when any of them does.
func TestMaxBlocks(t *testing.T) {
	render := func(changed int) string {
		var b strings.Builder
		for i := range 1000 {
			if i == changed {
				fmt.Fprintf(&b, "<p>changed %d</p>\n", i)
			} else {
				fmt.Fprintf(&b, "<p>paragraph %d</p>\n", i)
			}
		}
		return b.String()
	}
	base := Of([]byte(render(-1)))
	if len(base.Blocks) != MaxBlocks {
		t.Fatalf("len(Blocks) = %d, want %d", len(base.Blocks), MaxBlocks)
	}
	for _, tt := range []struct {
		changed, block int
	}{{0, 0}, {10, 10}, {MaxBlocks - 2, MaxBlocks - 2}, {MaxBlocks - 1, MaxBlocks - 1}, {MaxBlocks, MaxBlocks - 1}, {999, MaxBlocks - 1}} {
		p := Of([]byte(render(tt.changed)))
		want := []uint32{base.Blocks[tt.block].Path}
		if got := Changed(base.Blocks, p.Blocks); !slices.Equal(got, want) {
			t.Errorf("paragraph %d changed: Changed = %x, want %x (block %d)", tt.changed, got, want, tt.block)
		}
	}
}

// TestHostile: inputs built to cost memory or time are handled in bounded
// space and linear time.
func TestHostile(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []string // the first blocks
	}{
		{"deep nesting", strings.Repeat("<div><span>", 20_000) + "x" + strings.Repeat("</span></div>", 20_000) + "<p>after</p>", []string{"x", "after"}},
		{"deep nesting, unclosed", strings.Repeat("<div>", 50_000) + "x", []string{"x"}},
		// Stray end tags under a full stack: each is one counter decrement
		// or a miss in scanner.open, not a search of 256 entries.
		{"stray end tags", strings.Repeat("<span>", 300) + strings.Repeat("</div>", 50_000) + "<p>x</p>", []string{"x"}},
		{"many blocks", strings.Repeat("<p>x</p>", 50_000), []string{"x", "x"}},
		{"nested templates", strings.Repeat("<template>", 10_000) + "x" + strings.Repeat("</template>", 10_000) + "y", []string{"y"}},
		{"huge word", "<p>" + strings.Repeat("a", 1<<20) + "</p>", []string{strings.Repeat("a", 1<<20)}},
	}
	for _, tt := range tests {
		var s scanner
		var got []string
		s.trace = func(t []byte) {
			if len(got) < len(tt.want) {
				got = append(got, string(t))
			}
		}
		s.scan([]byte(tt.body))
		if len(s.stack) > maxDepth {
			t.Errorf("%s: stack depth %d, want ≤ %d", tt.name, len(s.stack), maxDepth)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: first blocks %.40q, want %.40q", tt.name, got, tt.want)
		}
		if p := Of([]byte(tt.body)); len(p.Blocks) > MaxBlocks {
			t.Errorf("%s: len(Blocks) = %d, want ≤ %d", tt.name, len(p.Blocks), MaxBlocks)
		}
	}
}

// TestEmpty: a page without visible text has no Text, SimHash or Blocks.
func TestEmpty(t *testing.T) {
	for _, body := range []string{"", "<html></html>", "<script>x</script>", "<p> &nbsp; </p>", "\x00"} {
		p := Of([]byte(body))
		if p.Text != 0 || p.SimHash != 0 || p.Blocks != nil || p.Size != len(body) || p.Digest != Digest([]byte(body)) {
			t.Errorf("Of(%q) = %+v, want no Text, SimHash or Blocks", body, p)
		}
	}
	// Text without words ("!!!") is text: it has a Text and a Block, but
	// no shingle, so SimHash 0.
	if p := Of([]byte("<p>!!!</p>")); p.Text == 0 || len(p.Blocks) != 1 || p.SimHash != 0 {
		t.Errorf("Of(%q) = %+v, want a Text, one Block and SimHash 0", "<p>!!!</p>", p)
	}
}

// TestOfReuse: Of reuses scanners, and nothing of one page (its blocks, its
// canonical link, a huge word, hostile nesting) shows in the next, on one
// goroutine or several.
func TestOfReuse(t *testing.T) {
	bodies := []string{
		pinnedPage,
		string(realisticPage()),
		"<p>" + strings.Repeat("a", 1<<20) + "</p>",
		strings.Repeat("<div>", 1000) + "x",
		strings.Repeat("<p>x</p>", 1000),
		"",
		"<svg><p>",
	}
	want := make([]Print, len(bodies))
	for i, b := range bodies {
		want[i] = Of([]byte(b))
	}
	check := func(tb testing.TB, i int) {
		if got := Of([]byte(bodies[i])); !reflect.DeepEqual(got, want[i]) {
			tb.Errorf("Of(%.40q) after other pages = %+v, want %+v", bodies[i], got, want[i])
		}
	}
	for i := len(bodies) - 1; i >= 0; i-- {
		check(t, i)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for n := range 20 {
				check(t, (g+n)%len(bodies))
			}
		})
	}
	wg.Wait()
}
