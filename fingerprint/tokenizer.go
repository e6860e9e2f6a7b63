package fingerprint

import (
	"bytes"

	"golang.org/x/net/html"
)

// tokenizer splits a body into the tokens golang.org/x/net/html's Tokenizer
// returns, at the same boundaries and of the same types, reading the body in
// place: it follows that Tokenizer's token.go state by state (its text, raw
// text, RCDATA, script, tag, comment and doctype states; CDATA is off, as
// it is by default there), but it does not copy the body into a buffer,
// and it does not copy, lower-case or index attributes. It only notes where
// the first id, class, rel and href attributes' values are, the ones Of
// reads. TestTokenizer and FuzzOf compare it with x/net's Tokenizer.
//
// The rare inputs that need x/net's tables or its attribute bookkeeping (an
// entity in text, an attribute value with an entity, a NUL or a carriage
// return, a self-closing tag with attributes) are handed to x/net itself.
//
// The zero tokenizer is at the end of an empty body; reset starts another.
type tokenizer struct {
	b     []byte
	start int  // the current token is b[start:pos]
	pos   int  // the next byte to read
	err   bool // the body is exhausted: x/net's io.EOF
	tt    html.TokenType

	// b[data0:data1] is a text token's text or a tag's name.
	data0, data1 int

	// rawTag is the lower-case name of the element whose raw text or
	// RCDATA is the next token ("" if none), as x/net's rawTag.
	rawTag     string
	textIsRaw  bool // the text is not unescaped (raw text, not RCDATA)
	convertNUL bool // the text's NULs become U+FFFD (raw text and RCDATA)

	nAttr int           // attributes with a non-empty key in the current start tag
	attr  [nAttrs]span2 // the first value of each of attrNames, or -1, -1
	name  []byte        // the current tag's name, lower case, NUL as U+FFFD
}

// span2 is a half-open range of the body; start -1 means none.
type span2 struct{ start, end int }

// The attributes a tokenizer notes.
const (
	attrID = iota
	attrClass
	attrRel
	attrHref
	nAttrs
)

var attrNames = [nAttrs]string{"id", "class", "rel", "href"}

func (z *tokenizer) reset(b []byte) {
	*z = tokenizer{b: b, name: z.name[:0]}
}

func (z *tokenizer) readByte() byte {
	if z.pos >= len(z.b) {
		z.err = true
		return 0
	}
	c := z.b[z.pos]
	z.pos++
	return c
}

// skipPast moves pos past the next c and returns true, or to the end of
// the body (setting err) and returns false: readByte until c, in one call.
func (z *tokenizer) skipPast(c byte) bool {
	i := bytes.IndexByte(z.b[z.pos:], c)
	if i < 0 {
		z.pos = len(z.b)
		z.err = true
		return false
	}
	z.pos += i + 1
	return true
}

func (z *tokenizer) skipWhiteSpace() {
	for z.pos < len(z.b) {
		switch z.b[z.pos] {
		case ' ', '\n', '\r', '\t', '\f':
			z.pos++
		default:
			return
		}
	}
	z.err = true
}

// next scans the next token and returns its type, as x/net's Next does.
func (z *tokenizer) next() html.TokenType {
	z.start = z.pos
	z.data0, z.data1 = z.pos, z.pos
	if z.err {
		z.tt = html.ErrorToken
		return z.tt
	}
	if z.rawTag != "" {
		if z.rawTag == "plaintext" {
			z.pos = len(z.b)
			z.err = true
			z.data1 = z.pos
			z.textIsRaw = true
		} else {
			z.readRawOrRCDATA()
		}
		if z.data1 > z.data0 {
			z.tt = html.TextToken
			z.convertNUL = true
			return z.tt
		}
	}
	z.textIsRaw = false
	z.convertNUL = false

	for {
		if !z.skipPast('<') {
			break
		}
		c := z.readByte()
		if z.err {
			break
		}
		var tokenType html.TokenType
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			tokenType = html.StartTagToken
		case c == '/':
			tokenType = html.EndTagToken
		case c == '!' || c == '?':
			tokenType = html.CommentToken
		default:
			z.pos--
			continue
		}
		// Text before the tag is a token of its own.
		if x := z.pos - len("<a"); z.start < x {
			z.pos = x
			z.data1 = x
			z.tt = html.TextToken
			return z.tt
		}
		switch tokenType {
		case html.StartTagToken:
			z.tt = z.readStartTag()
			return z.tt
		case html.EndTagToken:
			c = z.readByte()
			if z.err {
				return z.endText()
			}
			if c == '>' { // "</>" is an empty comment
				z.tt = html.CommentToken
				return z.tt
			}
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
				z.readTag(false)
				if z.err {
					z.tt = html.ErrorToken
				} else {
					z.tt = html.EndTagToken
				}
				return z.tt
			}
			z.pos--
			z.skipPast('>')
			z.tt = html.CommentToken
			return z.tt
		default:
			if c == '!' {
				z.tt = z.readMarkupDeclaration()
				return z.tt
			}
			z.pos--
			z.skipPast('>')
			z.tt = html.CommentToken
			return z.tt
		}
	}
	return z.endText()
}

// endText ends the body: what is left since the token's start is text.
func (z *tokenizer) endText() html.TokenType {
	if z.start < z.pos {
		z.data1 = z.pos
		z.tt = html.TextToken
		return z.tt
	}
	z.tt = html.ErrorToken
	return z.tt
}

// readRawOrRCDATA reads up to the "</rawTag" that ends raw text or RCDATA.
func (z *tokenizer) readRawOrRCDATA() {
	if z.rawTag == "script" {
		z.readScript()
		z.data1 = z.pos
		z.textIsRaw = true
		z.rawTag = ""
		return
	}
	for z.skipPast('<') {
		c := z.readByte()
		if z.err {
			break
		}
		if c != '/' {
			z.pos--
			continue
		}
		if z.readRawEndTag() || z.err {
			break
		}
	}
	z.data1 = z.pos
	// A textarea's or title's RCDATA can contain escaped entities.
	z.textIsRaw = z.rawTag != "textarea" && z.rawTag != "title"
	z.rawTag = ""
}

// readRawEndTag reads "rawTag" and a white space, '/' or '>' after "</",
// and if they are there, backs up to the '<' and returns true.
func (z *tokenizer) readRawEndTag() bool {
	for i := 0; i < len(z.rawTag); i++ {
		c := z.readByte()
		if z.err {
			return false
		}
		if c != z.rawTag[i] && c != z.rawTag[i]-('a'-'A') {
			z.pos--
			return false
		}
	}
	c := z.readByte()
	if z.err {
		return false
	}
	switch c {
	case ' ', '\n', '\r', '\t', '\f', '/', '>':
		z.pos -= 3 + len(z.rawTag)
		return true
	}
	z.pos--
	return false
}

// readScript reads up to the </script> that ends a script, following the
// rules for escaped and double-escaped script data.
func (z *tokenizer) readScript() {
	var c byte

scriptData:
	if !z.skipPast('<') {
		return
	}
	goto scriptDataLessThanSign

scriptDataLessThanSign:
	c = z.readByte()
	if z.err {
		return
	}
	switch c {
	case '/':
		goto scriptDataEndTagOpen
	case '!':
		goto scriptDataEscapeStart
	}
	z.pos--
	goto scriptData

scriptDataEndTagOpen:
	if z.readRawEndTag() || z.err {
		return
	}
	goto scriptData

scriptDataEscapeStart:
	c = z.readByte()
	if z.err {
		return
	}
	if c == '-' {
		goto scriptDataEscapeStartDash
	}
	z.pos--
	goto scriptData

scriptDataEscapeStartDash:
	c = z.readByte()
	if z.err {
		return
	}
	if c == '-' {
		goto scriptDataEscapedDashDash
	}
	z.pos--
	goto scriptData

scriptDataEscaped:
	c = z.readByte()
	if z.err {
		return
	}
	switch c {
	case '-':
		goto scriptDataEscapedDash
	case '<':
		goto scriptDataEscapedLessThanSign
	}
	goto scriptDataEscaped

scriptDataEscapedDash:
	c = z.readByte()
	if z.err {
		return
	}
	switch c {
	case '-':
		goto scriptDataEscapedDashDash
	case '<':
		goto scriptDataEscapedLessThanSign
	}
	goto scriptDataEscaped

scriptDataEscapedDashDash:
	c = z.readByte()
	if z.err {
		return
	}
	switch c {
	case '-':
		goto scriptDataEscapedDashDash
	case '<':
		goto scriptDataEscapedLessThanSign
	case '>':
		goto scriptData
	}
	goto scriptDataEscaped

scriptDataEscapedLessThanSign:
	c = z.readByte()
	if z.err {
		return
	}
	if c == '/' {
		goto scriptDataEscapedEndTagOpen
	}
	if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
		goto scriptDataDoubleEscapeStart
	}
	z.pos--
	goto scriptData

scriptDataEscapedEndTagOpen:
	if z.readRawEndTag() || z.err {
		return
	}
	goto scriptDataEscaped

scriptDataDoubleEscapeStart:
	z.pos--
	for i := 0; i < len("script"); i++ {
		c = z.readByte()
		if z.err {
			return
		}
		if c != "script"[i] && c != "SCRIPT"[i] {
			z.pos--
			goto scriptDataEscaped
		}
	}
	c = z.readByte()
	if z.err {
		return
	}
	switch c {
	case ' ', '\n', '\r', '\t', '\f', '/', '>':
		goto scriptDataDoubleEscaped
	}
	z.pos--
	goto scriptDataEscaped

scriptDataDoubleEscaped:
	c = z.readByte()
	if z.err {
		return
	}
	switch c {
	case '-':
		goto scriptDataDoubleEscapedDash
	case '<':
		goto scriptDataDoubleEscapedLessThanSign
	}
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapedDash:
	c = z.readByte()
	if z.err {
		return
	}
	switch c {
	case '-':
		goto scriptDataDoubleEscapedDashDash
	case '<':
		goto scriptDataDoubleEscapedLessThanSign
	}
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapedDashDash:
	c = z.readByte()
	if z.err {
		return
	}
	switch c {
	case '-':
		goto scriptDataDoubleEscapedDashDash
	case '<':
		goto scriptDataDoubleEscapedLessThanSign
	case '>':
		goto scriptData
	}
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapedLessThanSign:
	c = z.readByte()
	if z.err {
		return
	}
	if c == '/' {
		goto scriptDataDoubleEscapeEnd
	}
	z.pos--
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapeEnd:
	if z.readRawEndTag() {
		z.pos += len("</script>")
		goto scriptDataEscaped
	}
	if z.err {
		return
	}
	goto scriptDataDoubleEscaped
}

// readComment reads a comment after its "<!--", to its "-->", "--!>", or
// the end of the body. Only its end matters: its text is never read.
func (z *tokenizer) readComment() {
	dashCount := 0
	beginning := true
	for {
		c := z.readByte()
		if z.err {
			return
		}
		switch c {
		case '-':
			dashCount++
			continue
		case '>':
			if dashCount >= 2 || beginning {
				return
			}
		case '!':
			if dashCount >= 2 {
				c = z.readByte()
				if z.err || c == '>' {
					return
				} else if c == '-' {
					dashCount = 1
					beginning = false
					continue
				}
			}
		}
		dashCount = 0
		beginning = false
	}
}

// readMarkupDeclaration reads a comment, a doctype or a bogus comment after
// its "<!".
func (z *tokenizer) readMarkupDeclaration() html.TokenType {
	z.data0 = z.pos
	var c [2]byte
	for i := range 2 {
		c[i] = z.readByte()
		if z.err {
			return html.CommentToken
		}
	}
	if c[0] == '-' && c[1] == '-' {
		z.readComment()
		return html.CommentToken
	}
	z.pos -= 2
	if z.readDoctype() {
		return html.DoctypeToken
	}
	z.skipPast('>')
	return html.CommentToken
}

// readDoctype reads a doctype after its "<!", or backs up and returns false.
func (z *tokenizer) readDoctype() bool {
	const s = "DOCTYPE"
	for i := 0; i < len(s); i++ {
		c := z.readByte()
		if z.err {
			// Back up to read the fragment again, as a bogus comment.
			z.pos = z.data0
			z.err = false
			return false
		}
		if c != s[i] && c != s[i]+('a'-'A') {
			z.pos = z.data0
			return false
		}
	}
	if z.skipWhiteSpace(); z.err {
		return true
	}
	z.skipPast('>')
	return true
}

// rawTags are the elements whose content the tokenizer reads as raw text or
// RCDATA, as x/net's readStartTag lists them.
var rawTags = [...]string{"iframe", "noembed", "noframes", "noscript", "plaintext", "script", "style", "textarea", "title", "xmp"}

// readStartTag reads a start tag after its "<" and first letter.
func (z *tokenizer) readStartTag() html.TokenType {
	z.readTag(true)
	if z.err {
		return html.ErrorToken
	}
	if n := z.data1 - z.data0; 3 <= n && n <= 9 {
		for _, t := range rawTags {
			if asciiEqualFold(z.b[z.data0:z.data1], t) {
				z.rawTag = t
				break
			}
		}
	}
	if z.b[z.pos-2] == '/' && z.nAttr == 0 {
		return html.SelfClosingTagToken
	}
	// With attributes, whether "/>" makes the tag self-closing depends on
	// the last of them; selfClosing tells.
	return html.StartTagToken
}

// selfClosing reports whether the current start tag is self-closing (x/net's
// SelfClosingTagToken). It costs a second tokenizer when the tag has
// attributes and ends in "/>".
func (z *tokenizer) selfClosing() bool {
	switch {
	case z.tt == html.SelfClosingTagToken:
		return true
	case z.tt != html.StartTagToken || z.b[z.pos-2] != '/':
		return false
	}
	// x/net compares the '/' with the end of the last attribute it kept
	// (not an empty or a repeated one): ask it.
	x := html.NewTokenizer(bytes.NewReader(z.b[z.start:z.pos]))
	return x.Next() == html.SelfClosingTagToken
}

// readTag reads a tag's name and attributes after its "<" or "</" and first
// letter, up to its '>' or the end of the body. It notes the first value of
// each of attrNames if start.
func (z *tokenizer) readTag(start bool) {
	z.nAttr = 0
	for i := range z.attr {
		z.attr[i] = span2{-1, -1}
	}
	z.readTagName()
	if z.skipWhiteSpace(); z.err {
		return
	}
	for {
		c := z.readByte()
		if z.err || c == '>' {
			break
		}
		z.pos--
		k0, k1 := z.readTagAttrKey()
		v0, v1 := z.readTagAttrVal()
		if start && k0 != k1 {
			z.nAttr++
			if n := k1 - k0; 2 <= n && n <= 5 {
				for i, a := range attrNames {
					if z.attr[i].start < 0 && asciiEqualFold(z.b[k0:k1], a) {
						z.attr[i] = span2{v0, v1}
						break
					}
				}
			}
		}
		if z.skipWhiteSpace(); z.err {
			break
		}
	}
}

// readTagName sets data to the tag's name, whose first byte has been read.
func (z *tokenizer) readTagName() {
	z.data0 = z.pos - 1
	for ; z.pos < len(z.b); z.pos++ {
		if c := z.b[z.pos]; tagDelim[c] {
			z.data1 = z.pos
			if c != '/' && c != '>' {
				z.pos++
			}
			return
		}
	}
	z.err = true
	z.data1 = z.pos
}

// tagDelim marks the bytes that end a tag's name or an attribute's key:
// HTML's white space, '/' and '>'.
var tagDelim = [256]bool{' ': true, '\n': true, '\r': true, '\t': true, '\f': true, '/': true, '>': true}

// readTagAttrKey returns the span of an attribute's key.
func (z *tokenizer) readTagAttrKey() (int, int) {
	start := z.pos
	if z.pos < len(z.b) && z.b[z.pos] == '=' {
		// An '=' before the name begins is part of it.
		z.pos++
	}
	for ; z.pos < len(z.b); z.pos++ {
		if c := z.b[z.pos]; tagDelim[c] || c == '=' {
			return start, z.pos
		}
	}
	z.err = true
	return start, z.pos
}

// readTagAttrVal returns the span of an attribute's value, between its
// quotes if it is quoted.
func (z *tokenizer) readTagAttrVal() (int, int) {
	v0, v1 := z.pos, z.pos
	if z.skipWhiteSpace(); z.err {
		return v0, v1
	}
	c := z.readByte()
	if z.err || c == '/' {
		return v0, v1
	}
	if c != '=' {
		z.pos--
		return v0, v1
	}
	if z.skipWhiteSpace(); z.err {
		return v0, v1
	}
	quote := z.readByte()
	if z.err {
		return v0, v1
	}
	switch quote {
	case '>':
		z.pos--
		return v0, v1
	case '\'', '"':
		v0 = z.pos
		if !z.skipPast(quote) {
			return v0, z.pos
		}
		return v0, z.pos - 1
	}
	v0 = z.pos - 1
	for ; z.pos < len(z.b); z.pos++ {
		if c := z.b[z.pos]; tagDelim[c] && c != '/' {
			if c == '>' {
				return v0, z.pos
			}
			z.pos++
			return v0, z.pos - 1
		}
	}
	z.err = true
	return v0, z.pos
}

var (
	nul         = []byte{0}
	replacement = []byte("\ufffd")
)

// tagName returns the current tag's name as x/net's TagName does: ASCII
// lower case, a NUL as U+FFFD. It is valid until the next tag.
func (z *tokenizer) tagName() []byte {
	n := z.name[:0]
	for _, c := range z.b[z.data0:z.data1] {
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case c == 0:
			n = append(n, replacement...)
			continue
		}
		n = append(n, c)
	}
	z.name = n
	return n
}

// text returns the current text token's text as x/net's Text does, except
// that a "\r" or "\r\n" is not made "\n" (to Of, all are white space).
func (z *tokenizer) text() []byte {
	s := z.b[z.data0:z.data1]
	if z.convertNUL && bytes.IndexByte(s, 0) >= 0 {
		s = bytes.ReplaceAll(s, nul, replacement)
	}
	if !z.textIsRaw && bytes.IndexByte(s, '&') >= 0 {
		s = []byte(html.UnescapeString(string(s)))
	}
	return s
}

// attrVal returns the value of the current start tag's first attribute
// attrNames[i] as x/net's TagAttr does, and whether it has one.
func (z *tokenizer) attrVal(i int) ([]byte, bool) {
	sp := z.attr[i]
	if sp.start < 0 {
		return nil, false
	}
	v := z.b[sp.start:sp.end]
	if bytes.IndexByte(v, '&') < 0 && bytes.IndexByte(v, '\r') < 0 && bytes.IndexByte(v, 0) < 0 {
		return v, true
	}
	// An entity (attributes unescape them their own way), a carriage return
	// or a NUL: x/net's own reading of the tag.
	x := html.NewTokenizer(bytes.NewReader(z.b[z.start:z.pos]))
	x.Next()
	for more := true; more; {
		var key, val []byte
		key, val, more = x.TagAttr()
		if string(key) == attrNames[i] {
			return val, true
		}
	}
	return nil, false // not reached: the tokenizers agree
}
