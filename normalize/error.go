package normalize

import (
	"errors"
	"strconv"
)

// Reason says why a URL was rejected. Its values are short, stable strings
// meant to be used as a metrics label; see Reasons for the full set.
type Reason string

// The reasons a URL is rejected. New reasons may be added in later policy
// versions; existing ones keep their spelling.
const (
	ReasonScheme  Reason = "scheme"   // not http or https (mailto:, javascript:, data:, tel:, …) or no scheme at all
	ReasonNoHost  Reason = "no_host"  // no authority, or an empty host
	ReasonHost    Reason = "host"     // a host that is not a valid domain name, IPv4 or IPv6 address
	ReasonPort    Reason = "port"     // a port that is not a decimal number in 0–65535
	ReasonEscape  Reason = "escape"   // percent-encoding in the host that does not decode to UTF-8
	ReasonControl Reason = "control"  // a control character that cannot be stripped
	ReasonTooLong Reason = "too_long" // the URL or its canonical form is longer than Options.MaxLength
	ReasonBase    Reason = "base"     // Resolve: the base URL is not a valid absolute http(s) URL
)

// Reasons returns every Reason, so that a caller can create its counters
// before the first rejection.
func Reasons() []Reason {
	return []Reason{ReasonScheme, ReasonNoHost, ReasonHost, ReasonPort,
		ReasonEscape, ReasonControl, ReasonTooLong, ReasonBase}
}

// Sentinel errors, one per Reason, for errors.Is. Every *Error wraps exactly
// one of them.
var (
	ErrScheme  = errors.New("normalize: scheme is not http or https")
	ErrNoHost  = errors.New("normalize: no host")
	ErrHost    = errors.New("normalize: invalid host")
	ErrPort    = errors.New("normalize: invalid port")
	ErrEscape  = errors.New("normalize: invalid percent-encoding in host")
	ErrControl = errors.New("normalize: control character")
	ErrTooLong = errors.New("normalize: URL too long")
	ErrBase    = errors.New("normalize: invalid base URL")
)

// sentinel returns the sentinel error of r.
func (r Reason) sentinel() error {
	switch r {
	case ReasonScheme:
		return ErrScheme
	case ReasonNoHost:
		return ErrNoHost
	case ReasonHost:
		return ErrHost
	case ReasonPort:
		return ErrPort
	case ReasonEscape:
		return ErrEscape
	case ReasonControl:
		return ErrControl
	case ReasonTooLong:
		return ErrTooLong
	}
	return ErrBase
}

// Error is a rejected URL. Use errors.As to get it and Reason to count it.
type Error struct {
	URL    string // the rejected input: the URL, the reference, or (ReasonBase) the base
	Reason Reason // why it was rejected
	Err    error  // the sentinel for Reason, possibly wrapped with detail
}

// Error returns the cause and the URL, shortened to 200 bytes.
func (e *Error) Error() string {
	u := e.URL
	if len(u) > 200 {
		u = u[:200] + "…"
	}
	return e.Err.Error() + ": " + strconv.Quote(u)
}

// Unwrap returns the sentinel error (and its detail).
func (e *Error) Unwrap() error { return e.Err }

// reject builds the *Error for url with the sentinel of reason.
func reject(url string, reason Reason) *Error {
	return &Error{URL: url, Reason: reason, Err: reason.sentinel()}
}
