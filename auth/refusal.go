package auth

import (
	"errors"
	"fmt"
)

// Reason says why a call was refused; it is the reason label of
// sieve_auth_refusals_total.
type Reason string

// The reasons a call is refused.
const (
	// ReasonMissing: no credential (no token, no certificate that names
	// a role).
	ReasonMissing Reason = "missing"
	// ReasonMalformed: an Authorization that is not "Bearer <b64token>",
	// or several of them.
	ReasonMalformed Reason = "malformed"
	// ReasonOversized: a token longer than MaxTokenBytes.
	ReasonOversized Reason = "oversized"
	// ReasonUnknownToken: a well-formed token that is not in the set.
	ReasonUnknownToken Reason = "unknown_token"
	// ReasonBadUser: a basic-auth user that is not in the web
	// configuration file, or its wrong password (one reason for both, as
	// the answer is one: telling them apart would tell which users exist).
	ReasonBadUser Reason = "bad_user"
	// ReasonLongPassword: a basic-auth password longer than
	// MaxPasswordBytes, which bcrypt would compare by its first 72 bytes
	// only.
	ReasonLongPassword Reason = "long_password"
	// ReasonNoRole: a verified client certificate whose names map to no
	// role.
	ReasonNoRole Reason = "no_role"
	// ReasonForbidden: a known client whose role is below the call's.
	ReasonForbidden Reason = "forbidden"
	// ReasonUnmapped: a call no role was given to; nobody may make it.
	ReasonUnmapped Reason = "unmapped_call"
)

// Reasons lists every Reason, for tests and dashboards.
var Reasons = []Reason{ReasonMissing, ReasonMalformed, ReasonOversized, ReasonUnknownToken, ReasonBadUser, ReasonLongPassword,
	ReasonNoRole, ReasonForbidden, ReasonUnmapped}

// Sentinel errors a Refusal matches with errors.Is: ErrUnauthenticated for
// a client that proved no identity (gRPC UNAUTHENTICATED, HTTP 401),
// ErrForbidden for one whose identity may not make the call (gRPC
// PERMISSION_DENIED, HTTP 403).
var (
	ErrUnauthenticated = errors.New("auth: unauthenticated")
	ErrForbidden       = errors.New("auth: forbidden")
)

// Refusal is a refused call. It never holds the token.
type Refusal struct {
	Reason Reason
	// Call is what was asked (a gRPC method, an HTTP path).
	Call string
	// Name is the client's name (a token's or a certificate's), if known.
	Name string
	// Role is the client's role, Need the call's.
	Role, Need Role
}

// Error describes the refusal, without any secret.
func (r *Refusal) Error() string {
	switch r.Reason {
	case ReasonForbidden:
		return fmt.Sprintf("auth: %s (role %s) may not call %s, which needs %s", r.Name, r.Role, r.Call, r.Need)
	case ReasonUnmapped:
		return fmt.Sprintf("auth: %s is given to no role", r.Call)
	case ReasonNoRole:
		return fmt.Sprintf("auth: certificate %s has no role", r.Name)
	}
	return fmt.Sprintf("auth: %s: %s", r.Call, reasonText(r.Reason))
}

// Is matches ErrForbidden or ErrUnauthenticated, by reason.
func (r *Refusal) Is(target error) bool {
	switch r.Reason {
	case ReasonForbidden, ReasonUnmapped, ReasonNoRole:
		return target == ErrForbidden
	}
	return target == ErrUnauthenticated
}

func reasonText(r Reason) string {
	switch r {
	case ReasonMissing:
		return "no credential"
	case ReasonMalformed:
		return "malformed (want Bearer and 1-512 characters of A-Z a-z 0-9 - . _ ~ + /, then =)"
	case ReasonOversized:
		return fmt.Sprintf("longer than %d bytes", MaxTokenBytes)
	case ReasonUnknownToken:
		return "unknown token"
	case ReasonBadUser:
		return "unknown user or wrong password"
	case ReasonLongPassword:
		return fmt.Sprintf("password longer than %d bytes, all bcrypt compares", MaxPasswordBytes)
	}
	return string(r)
}
