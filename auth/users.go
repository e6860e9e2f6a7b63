package auth

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// MaxBasicBytes bounds an Authorization "Basic" value's credentials
// (base64 of user:password): longer ones are refused as oversized before
// they are decoded. bcrypt reads 72 bytes of a password at most.
const MaxBasicBytes = 1024

// MaxPasswordBytes is the longest basic-auth password taken: bcrypt
// compares the first 72 bytes of a password and ignores the rest, so a
// hash of a longer password (made by a tool that cuts it silently; Go's
// bcrypt refuses to make one) would let in any password sharing its
// first 72 bytes. A longer password is refused (ReasonLongPassword)
// rather than cut.
const MaxPasswordBytes = 72

// UserSource gives the current basic-auth users, name to bcrypt hash (a
// WebConfig's basic_auth_users).
type UserSource interface {
	Users() map[string]string
}

// users checks basic-auth passwords against bcrypt hashes. bcrypt is slow
// on purpose (tens of milliseconds at cost 10), so each outcome is
// remembered by the SHA-256 of user, hash and password — a browser or a
// scraper sends the same credentials with every request — and at most one
// comparison runs at a time, so that a flood of wrong passwords costs one
// core, not all (as exporter-toolkit's server does). Successes and
// failures are remembered apart, each in a map dropped whole when it
// reaches maxCached: a flood of distinct guesses churns the failures only,
// so a user already let in is answered from memory, never queued behind
// the guesses' comparisons. A changed hash (a new password) is another
// key, so an old password is not let in from memory.
type users struct {
	compare sync.Mutex // held during a comparison
	mu      sync.Mutex // guards the maps, never held during a comparison
	good    map[[sha256.Size]byte]struct{}
	bad     map[[sha256.Size]byte]struct{}
}

const maxCached = 1024

// decoyHash is a bcrypt hash of a password nobody sends, compared against
// for an unknown user so that the time taken does not tell which users
// exist.
var decoyHash = sync.OnceValue(func() []byte {
	h, err := bcrypt.GenerateFromPassword([]byte("sieve: no such user"), bcrypt.DefaultCost)
	if err != nil {
		panic(err) // only for a password over 72 bytes or a bad cost
	}
	return h
})

// check reports whether password is user's in set.
func (u *users) check(set map[string]string, user, password string) bool {
	hash, known := set[user]
	if !known {
		hash = string(decoyHash())
	}
	h := sha256.New()
	for _, s := range []string{user, hash, password} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	u.mu.Lock()
	_, good := u.good[key]
	_, bad := u.bad[key]
	u.mu.Unlock()
	if good || bad {
		return good
	}
	u.compare.Lock()
	ok := bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil && known
	u.compare.Unlock()
	u.mu.Lock()
	defer u.mu.Unlock()
	m := &u.bad
	if ok {
		m = &u.good
	}
	if *m == nil || len(*m) >= maxCached {
		*m = make(map[[sha256.Size]byte]struct{})
	}
	(*m)[key] = struct{}{}
	return ok
}

// BasicCredentials returns the user and password of an Authorization
// value "Basic <base64(user:password)>" (RFC 7617; the scheme in any
// case), and a reason when it is not one: ReasonOversized past
// MaxBasicBytes, ReasonMalformed when it does not decode or has no colon,
// ReasonLongPassword (with the user) for a password over
// MaxPasswordBytes. isBasic says whether the scheme was Basic at all.
func BasicCredentials(authorization string) (user, password string, isBasic bool, reason Reason) {
	scheme, cred, found := strings.Cut(authorization, " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", "", false, ""
	}
	cred = strings.TrimLeft(cred, " ")
	if len(cred) > MaxBasicBytes {
		return "", "", true, ReasonOversized
	}
	b, err := base64.StdEncoding.DecodeString(cred)
	if err != nil {
		return "", "", true, ReasonMalformed
	}
	user, password, ok := strings.Cut(string(b), ":")
	if !ok {
		return "", "", true, ReasonMalformed
	}
	if len(password) > MaxPasswordBytes {
		return user, "", true, ReasonLongPassword
	}
	return user, password, true, ""
}
