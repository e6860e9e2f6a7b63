package dedup

import (
	"errors"
	"fmt"
)

// ErrMismatch is returned (inside a *MismatchError) when a stored filter is
// opened with parameters other than those it was created with.
var ErrMismatch = errors.New("dedup: filter parameters mismatch")

// ErrNotFound is returned by an open that must find an existing filter
// (RedisBloomOptions.Existing, RedisCuckooOptions.Existing) when there is
// none.
var ErrNotFound = errors.New("dedup: no such filter")

// MismatchError reports which stored parameter differs from the one given
// when a filter is reopened. Using a filter under other parameters would
// silently corrupt it (other bit positions, another error bound, another
// canonical form), so it is refused.
type MismatchError struct {
	// Name identifies the filter (its Redis key prefix or snapshot path).
	Name string
	// Field names the parameter, e.g. "target_fpp" or "policy".
	Field string
	// Stored and Given are the stored and requested values, formatted.
	Stored, Given string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("dedup: filter %q was created with %s=%s, opened with %s=%s", e.Name, e.Field, e.Stored, e.Field, e.Given)
}

// Unwrap returns ErrMismatch.
func (e *MismatchError) Unwrap() error { return ErrMismatch }
