package sitemap

import (
	"errors"
	"fmt"
)

// Reason says why a sitemap, or one of its locs, was rejected. Its values are
// short, stable strings meant to be used as a metrics label; see Reasons for
// the full set.
type Reason string

// The reasons. Every one but ReasonBadURL stops a parse (it is the Reason of
// the *Error Parse returns); ReasonBadURL is a skipped loc, counted in
// Result.Skipped. New reasons may be added; existing ones keep their spelling.
const (
	ReasonNotSitemap   Reason = "not_sitemap"   // no <urlset> or <sitemapindex> root, or text whose first line is no http(s) URL (an HTML error page, a feed, JSON, an empty body)
	ReasonMalformedXML Reason = "malformed_xml" // an XML syntax error, a truncated document or nesting deeper than maxDepth
	ReasonTooManyURLs  Reason = "too_many_urls" // more than Limits.MaxURLs entries
	ReasonTooLarge     Reason = "too_large"     // more than Limits.MaxBytes bytes (compressed or not), or one XML token over maxToken bytes
	ReasonBadGzip      Reason = "bad_gzip"      // gzip magic bytes followed by a broken header, stream or checksum
	ReasonRead         Reason = "read"          // the io.Reader failed (a network error, a cancelled context): not the sitemap's fault
	ReasonBadURL       Reason = "bad_url"       // a loc that is empty, too long, not UTF-8, unparsable or not absolute http(s): skipped, never returned
)

// Reasons returns every Reason, so that a caller can create its counters
// before the first rejection.
func Reasons() []Reason {
	return []Reason{ReasonNotSitemap, ReasonMalformedXML, ReasonTooManyURLs,
		ReasonTooLarge, ReasonBadGzip, ReasonRead, ReasonBadURL}
}

// Sentinel errors, one per Reason that stops a parse, for errors.Is. Every
// *Error wraps exactly one of them.
var (
	ErrNotSitemap   = errors.New("sitemap: not a sitemap")
	ErrMalformedXML = errors.New("sitemap: malformed XML")
	ErrTooManyURLs  = errors.New("sitemap: too many URLs")
	ErrTooLarge     = errors.New("sitemap: too large")
	ErrBadGzip      = errors.New("sitemap: bad gzip")
	ErrRead         = errors.New("sitemap: read failed")
)

// sentinel returns the sentinel error of r.
func (r Reason) sentinel() error {
	switch r {
	case ReasonNotSitemap:
		return ErrNotSitemap
	case ReasonMalformedXML:
		return ErrMalformedXML
	case ReasonTooManyURLs:
		return ErrTooManyURLs
	case ReasonTooLarge:
		return ErrTooLarge
	case ReasonBadGzip:
		return ErrBadGzip
	}
	return ErrRead
}

// Error is a parse stopped by its input. Use errors.As to get it and Reason
// to count it. The entries yielded before it stay valid.
type Error struct {
	Reason Reason // why the parse stopped
	Offset int64  // uncompressed bytes read when it stopped, read-ahead buffer included
	Err    error  // the sentinel for Reason, wrapped with detail
}

// Error returns the cause and where it was found.
func (e *Error) Error() string {
	return fmt.Sprintf("%v (at byte %d)", e.Err, e.Offset)
}

// Unwrap returns the sentinel error (and its detail).
func (e *Error) Unwrap() error { return e.Err }

// fail builds the *Error for reason; detail says more and may wrap an error
// with %w (a reader's error, so that errors.Is finds context.Canceled).
func fail(reason Reason, detail string, args ...any) *Error {
	return &Error{Reason: reason, Err: fmt.Errorf("%w: "+detail, append([]any{reason.sentinel()}, args...)...)}
}
