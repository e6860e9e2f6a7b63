package fingerprint

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// checkTokenizer fails if tokenizer and x/net's Tokenizer split body
// differently: every token's type (for a start tag, as selfClosing tells),
// raw bytes, tag name, text (with x/net's newlines, which Of treats as the
// white space they replace) and the id, class, rel and href attributes.
func checkTokenizer(tb testing.TB, body []byte) {
	tb.Helper()
	x := html.NewTokenizer(bytes.NewReader(body))
	var z tokenizer
	z.reset(body)
	for i := 0; ; i++ {
		want, got := x.Next(), z.next()
		if got == html.StartTagToken && z.selfClosing() {
			got = html.SelfClosingTagToken
		}
		if got != want || !bytes.Equal(z.b[z.start:z.pos], x.Raw()) {
			tb.Fatalf("tokens(%.80q): token %d is %v %q, x/net's %v %q", body, i, got, z.b[z.start:z.pos], want, x.Raw())
		}
		switch want {
		case html.ErrorToken:
			return
		case html.TextToken:
			if g, w := newlines(z.text()), x.Text(); !bytes.Equal(g, w) {
				tb.Fatalf("tokens(%.80q): token %d: text %q, x/net's %q", body, i, g, w)
			}
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			g := string(z.tagName())
			w, _ := x.TagName()
			if g != string(w) {
				tb.Fatalf("tokens(%.80q): token %d: name %q, x/net's %q", body, i, g, w)
			}
			if want == html.EndTagToken {
				continue
			}
			var wantAttr [nAttrs]*string
			for more := true; more; {
				var k, v []byte
				k, v, more = x.TagAttr()
				for j, n := range attrNames {
					if string(k) == n && wantAttr[j] == nil {
						s := string(v)
						wantAttr[j] = &s
					}
				}
			}
			for j, n := range attrNames {
				v, ok := z.attrVal(j)
				if w := wantAttr[j]; ok != (w != nil) || ok && string(v) != *w {
					tb.Fatalf("tokens(%.80q): token %d: %s %q (%v), x/net's %v", body, i, n, v, ok, w)
				}
			}
		}
	}
}

// newlines makes "\r\n" and "\r" "\n", as x/net's Text does.
func newlines(b []byte) []byte {
	return bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
}

// tokenizerTests reach each of the tokenizer's states and their ends.
var tokenizerTests = []string{
	"", "x", "<", "<<", "a<", "a</", "a<b", "</", "</>", "</ x>", "<!", "<!-", "<!>", "<?xml?>x", "<a", "a<1>",
	`<p id=a class="b c" ID=z rel='r' href=h>x</p>`,
	`<p id="a&amp;b" class="&ampx=1" href="/a?b=1&c=2&amp=3">`, "<p class=\"a\r\nb\x00\">", "<p\x00 I\x00D=1 id=2>",
	"<p a=/>x", "<p a/>x", "<p a=b />x", "<p a a/>", "<p =a>", "<p ==a>", "<p a = b>", "<p a='b>", "<p a=\"b",
	"<svg/>x", "<svg a=/>x</svg>y", "<svg a a/>x", "<svg A=1 a=/>", "<br/>", "<br />", "<p/a>",
	"<title>a &amp; <b>b\x00</title>x", "<TITLE>a</Title >b", "<textarea>&lt;</textarea/>", "<title></title>x",
	"<xmp>&amp;<p></xmp>x", "<plaintext>a</plaintext><p>", "<style>a</styl</style x>b", "<iframe>a</iframe>",
	"<noscript>a</noscript>", "<noembed>a</noembed", "<noframes></noframes>", "<script/>a</script>b",
	"<script>a<!--b<script>c</script>d-->e</script>f", "<script><!--<script></script>--></script>x",
	"<script><!-- -- </script>x", "<script><!--<scriptx></script>x", "<script><!--</script>x",
	"<script><!--<script>--!></script>x</script>y", "<script>a</SCRIPT\n>b", "<script>a</scrip", "<script>a<",
	"<!--x-->y", "<!---->y", "<!-->y", "<!--->y", "<!--x--!>y", "<!--x--!-->y", "<!--x--!y-->z", "<!--x", "<!--x-",
	"<!doctype html>x", "<!DOCTYPE>x", "<!DOCTYPE", "<!DOCTYP", "<!DOCTYPE \n", "<!DOCTYPEx>", "<![CDATA[x]]>y",
	"a &amp; b &ampx &#65; &#x4g; &notit; &#0; &#128;", "\x00a&\x00", "<a\tb\nc\fd\re>",
	"</p a=b>x", "</p\x00>", "</P\n>", "<p>a\r\nb\rc</p>",
}

// TestTokenizer: tokenizer splits pages as x/net's Tokenizer does.
func TestTokenizer(t *testing.T) {
	bodies := append([]string{pinnedPage, string(realisticPage())}, tokenizerTests...)
	for _, tt := range blockTextTests {
		bodies = append(bodies, tt.body)
	}
	for _, b := range bodies {
		checkTokenizer(t, []byte(b))
		// Every prefix: a body can end anywhere.
		if len(b) < 200 {
			for i := range len(b) {
				checkTokenizer(t, []byte(b[:i]))
			}
		}
	}
	checkTokenizer(t, []byte(strings.Repeat("<svg a a=/ ", 1000)+"/>"))
}
