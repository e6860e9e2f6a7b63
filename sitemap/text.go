package sitemap

import (
	"bufio"
	"errors"
	"io"
	"strings"
)

// text parses the text form read from br: one URL per line, UTF-8, lines
// ending in LF or CRLF. Blank lines are ignored; every other line is an
// entry. The first entry must begin with http:// or https://, or the
// document is not a sitemap (an error page, JSON, a binary file).
func (p *parser) text(br *bufio.Reader) error {
	for {
		line, long, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return classify(err, ReasonRead)
		}
		if s := strings.TrimSpace(line); s != "" || long {
			if p.res.Kind == "" {
				if long || !hasHTTPPrefix(s) {
					return fail(ReasonNotSitemap, "text whose first line is not an http(s) URL")
				}
				p.res.Kind = KindText
			}
			if long {
				s = "" // too long to keep: skipped
			}
			if err := p.entry(s, ""); err != nil {
				return err
			}
		}
		if err != nil {
			return nil // EOF
		}
	}
}

// readLine returns the next line of br without its end. A line longer than
// br's buffer is read to its end and returned as "" with long set. At the
// end of the input it returns the last line, if any, and io.EOF.
func readLine(br *bufio.Reader) (line string, long bool, err error) {
	b, err := br.ReadSlice('\n')
	for errors.Is(err, bufio.ErrBufferFull) {
		long = true
		_, err = br.ReadSlice('\n')
	}
	if long {
		return "", true, err
	}
	return string(b), false, err
}

// hasHTTPPrefix reports whether s begins with http:// or https://, in any
// case.
func hasHTTPPrefix(s string) bool {
	return len(s) >= 7 && strings.EqualFold(s[:7], "http://") ||
		len(s) >= 8 && strings.EqualFold(s[:8], "https://")
}
