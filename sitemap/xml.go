package sitemap

import (
	"bufio"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"unicode/utf8"
)

const (
	// maxDepth bounds element nesting: a sitemap needs 3 levels (urlset,
	// url, loc), its extensions (image:image, video:video) 5; deeper is an
	// attack on the decoder's stack, stopped as ReasonMalformedXML.
	maxDepth = 64
	// maxToken bounds the bytes of one XML token (a text run, a comment, a
	// tag with its attributes), so that the decoder never buffers a large
	// part of the document; longer stops the parse with ReasonTooLarge.
	maxToken = 1 << 20
)

// xml parses the XML form read from br: a <urlset> of <url> or a
// <sitemapindex> of <sitemap>, each with a <loc> and an optional <lastmod>.
// Elements are matched by local name in any namespace (or none), other
// elements are ignored, and only the first <loc> and <lastmod> directly in
// an entry count (so image:loc inside image:image is not a page).
//
// It reads raw tokens and keeps its own stack of open elements: the
// decoder's lenient mode would invent end tags for a wrong one and close
// the root early, losing the rest of the file in silence. An end tag must
// close the innermost open element (case aside); anything else is
// ReasonMalformedXML.
func (p *parser) xml(br *bufio.Reader) error {
	tr := &tokenReader{br: br}
	d := xml.NewDecoder(tr)
	d.Strict = false // a raw "&" or an unknown entity in a loc is text, not an error
	d.CharsetReader = tr.charsetReader
	var (
		item         string           // the entries' element: "url" or "sitemap"
		open         []string         // local names of the open elements, the root first
		inItem       bool             // inside an entry
		haveLoc      bool             // the entry's <loc> was seen
		haveLastMod  bool             // the entry's <lastmod> was seen
		loc, lastmod strings.Builder  // their text
		capture      *strings.Builder // the text being read, nil if none
		room         int              // how much more capture takes
	)
	for {
		tr.mark = tr.n
		tok, err := d.RawToken()
		switch {
		case err == nil:
		case p.res.Kind == "" && errors.Is(err, io.EOF):
			return fail(ReasonNotSitemap, "no root element")
		case p.res.Kind == "":
			return classify(err, ReasonNotSitemap)
		case errors.Is(err, io.EOF):
			return fail(ReasonMalformedXML, "unexpected EOF inside <%s>", open[len(open)-1])
		default:
			return classify(err, ReasonMalformedXML)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			open = append(open, t.Name.Local)
			switch depth := len(open); {
			case depth > maxDepth:
				return fail(ReasonMalformedXML, "elements nested deeper than %d", maxDepth)
			case depth == 1:
				switch t.Name.Local {
				case "urlset":
					p.res.Kind, item = KindURLSet, "url"
				case "sitemapindex":
					p.res.Kind, item = KindIndex, "sitemap"
				default:
					return fail(ReasonNotSitemap, "root element <%s>", t.Name.Local)
				}
			case depth == 2 && t.Name.Local == item:
				inItem, haveLoc, haveLastMod = true, false, false
				loc.Reset()
				lastmod.Reset()
			case depth == 3 && inItem && t.Name.Local == "loc" && !haveLoc:
				haveLoc, capture, room = true, &loc, 2*p.lim.MaxURLLength+64
			case depth == 3 && inItem && t.Name.Local == "lastmod" && !haveLastMod:
				haveLastMod, capture, room = true, &lastmod, 4*maxLastMod
			}
		case xml.EndElement:
			if len(open) == 0 || !strings.EqualFold(open[len(open)-1], t.Name.Local) {
				return fail(ReasonMalformedXML, "end tag </%s> closes no open element", t.Name.Local)
			}
			open = open[:len(open)-1]
			switch len(open) {
			case 0:
				return nil // the rest, if any, is not the sitemap's
			case 1:
				if inItem {
					inItem = false
					if err := p.entry(loc.String(), lastmod.String()); err != nil {
						return err
					}
				}
			case 2:
				capture = nil
			}
		case xml.CharData:
			// Past room the text is cut: a cut loc is still too long, a
			// cut lastmod too long to keep.
			if capture != nil && room > 0 {
				t = t[:min(len(t), room)]
				capture.Write(t)
				room -= len(t)
			}
		}
	}
}

// tokenReader counts the bytes the XML decoder reads and fails once one
// token (the bytes since mark) is longer than maxToken. It also reads a
// byte that does not begin a valid UTF-8 sequence as ISO-8859-1 (two bytes
// of UTF-8), where encoding/xml would stop at it: sites declare UTF-8 and
// serve Latin-1, and one such byte must not lose the file.
type tokenReader struct {
	br      *bufio.Reader
	n, mark int64
	cont    int  // continuation bytes of a valid sequence still to pass
	pending byte // the second byte of a converted one, or 0
	latin1  bool // the document declared Latin-1: charsetReader converts it all
}

func (t *tokenReader) ReadByte() (byte, error) {
	if t.pending != 0 {
		b := t.pending
		t.pending = 0
		return b, nil
	}
	if t.n-t.mark > maxToken {
		return 0, fail(ReasonTooLarge, "an XML token over %d bytes", maxToken)
	}
	b, err := t.br.ReadByte()
	if err != nil {
		return 0, err
	}
	t.n++
	switch {
	case b < utf8.RuneSelf || t.latin1:
		return b, nil
	case t.cont > 0:
		t.cont--
		return b, nil
	}
	peek, _ := t.br.Peek(utf8.UTFMax - 1)
	if r, size := utf8.DecodeRune(append([]byte{b}, peek...)); r != utf8.RuneError || size > 1 {
		t.cont = size - 1
		return b, nil
	}
	t.pending = 0x80 | b&0x3f
	return 0xc0 | b>>6, nil
}

// Read makes tokenReader an io.Reader, which encoding/xml wants of a reader
// it hands to charsetReader.
func (t *tokenReader) Read(b []byte) (int, error) {
	for i := range b {
		c, err := t.ReadByte()
		if err != nil {
			return i, err
		}
		b[i] = c
	}
	return len(b), nil
}

// charsetReader converts a document declared ISO-8859-1 (or its superset
// windows-1252, approximated by it) to UTF-8, and reads any other declared
// charset as UTF-8: URLs are ASCII in practice, and a loc that is not UTF-8
// is skipped. Without it encoding/xml refuses every non-UTF-8 declaration.
func (t *tokenReader) charsetReader(charset string, r io.Reader) (io.Reader, error) {
	switch strings.ToLower(charset) {
	case "iso-8859-1", "iso8859-1", "iso_8859-1", "latin1", "latin-1", "l1", "windows-1252", "cp1252":
		t.latin1 = true
		return &latin1{r: t}, nil
	}
	return r, nil
}

// latin1 converts ISO-8859-1 to UTF-8: bytes >= 0x80 become two.
type latin1 struct {
	r       io.ByteReader
	pending int // the second byte of the last character, or 0
}

func (l *latin1) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		if l.pending > 0 {
			b[n], l.pending = byte(l.pending), 0
			n++
			continue
		}
		c, err := l.r.ReadByte()
		if err != nil {
			return n, err
		}
		if c < 0x80 {
			b[n] = c
		} else {
			b[n], l.pending = 0xc0|c>>6, int(0x80|c&0x3f)
		}
		n++
	}
	return n, nil
}
