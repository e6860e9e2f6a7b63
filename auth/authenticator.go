package auth

import (
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Options configures an Authenticator. Zero values mean the defaults.
type Options struct {
	// Server names the server in metrics and logs ("urlfrontier",
	// "http").
	Server string
	// Tokens is the tokens file's current set (nil: no token is known).
	Tokens *TokenFile
	// Identities maps client certificates' names to roles (nil: a
	// certificate gives no role).
	Identities Identities
	// Users are the basic-auth users (nil: none); each has role Read,
	// all the HTTP surface needs.
	Users UserSource
	// Registerer receives sieve_auth_refusals_total (nil: none). Two
	// Authenticators of one process may share it.
	Registerer prometheus.Registerer
	// Logger logs refusals (nil: discard), at most LogBurst at once and
	// LogRate a second after that.
	Logger *slog.Logger
	// LogRate and LogBurst bound the refusals logged (defaults 10 a
	// second, bursts of 50): a client flooding bad tokens is counted in
	// full but cannot flood the log; the next line logged says how many
	// were left out.
	LogRate  float64
	LogBurst int
}

// Authenticator answers who a client is and whether it may make a call.
// It is safe for concurrent use; it owns nothing to close (the TokenFile
// is its caller's).
type Authenticator struct {
	o        Options
	refusals *prometheus.CounterVec
	users    *users
	logs     *logLimit
}

// Credentials are what a client presented for one call.
type Credentials struct {
	// Authorization is the values of its Authorization header (HTTP) or
	// authorization metadata (gRPC).
	Authorization []string
	// Certificate is its client certificate, verified by crypto/tls
	// (nil: none).
	Certificate *x509.Certificate
	// Addr is the client's address, for the logs.
	Addr string
}

// Identity is an authenticated client.
type Identity struct {
	// Name is the token's name or the certificate's name that gave the
	// role.
	Name string
	Role Role
}

// New returns an Authenticator.
func New(o Options) *Authenticator {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.LogRate <= 0 {
		o.LogRate = 10
	}
	if o.LogBurst <= 0 {
		o.LogBurst = 50
	}
	a := &Authenticator{o: o, refusals: refusalsCounter(o.Registerer), users: &users{},
		logs: &logLimit{l: rate.NewLimiter(rate.Limit(o.LogRate), o.LogBurst)}}
	for _, r := range Reasons { // every reason shows, at 0, from the start
		a.refusals.WithLabelValues(o.Server, string(r))
	}
	return a
}

// refusalsCounter returns the counter registered on reg, or the one
// another Authenticator registered there.
func refusalsCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	return registerShared(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sieve_auth_refusals_total",
		Help: "Calls refused by Sieve's own servers, by server and reason (missing, malformed, oversized, unknown_token, bad_user, no_role, forbidden, unmapped_call)."},
		[]string{"server", "reason"}))
}

// ReloadFailures returns a FileOptions.Failed that counts the failed
// reloads of the file of setting (urlfrontier.tokens_file, …) in
// sieve_auth_reload_failures_total{setting} on reg, shown at 0 from the
// start: a file that no longer parses keeps the last good credentials,
// and this is how an operator sees it.
func ReloadFailures(reg prometheus.Registerer, setting string) func() {
	c := registerShared(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sieve_auth_reload_failures_total",
		Help: "Reloads of a credentials file (tokens, certificate) that failed, the last good one kept, by setting."},
		[]string{"setting"})).WithLabelValues(setting)
	return c.Inc
}

// registerShared registers c on reg (if any) and returns it, or the
// collector of the same name registered there before.
func registerShared(reg prometheus.Registerer, c *prometheus.CounterVec) *prometheus.CounterVec {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing
			}
		}
	}
	return c
}

// Enabled reports whether any credential is configured: without one, an
// Authenticator refuses every call, and a server should not use it.
func (a *Authenticator) Enabled() bool {
	return a.o.Tokens != nil || len(a.o.Identities) > 0 || a.HasUsers()
}

// WithUsers returns an Authenticator that also knows the basic-auth users
// of u, counting its refusals in the same counter.
func (a *Authenticator) WithUsers(u UserSource) *Authenticator {
	b := *a
	b.o.Users = u
	return &b
}

// HasUsers reports whether basic-auth users may authenticate now (the
// source's current set is not empty).
func (a *Authenticator) HasUsers() bool { return a.o.Users != nil && len(a.o.Users.Users()) > 0 }

// HasTokens reports whether bearer tokens may authenticate.
func (a *Authenticator) HasTokens() bool { return a.o.Tokens != nil }

// Authorize checks that c proves an identity whose role allows need, and
// returns it. call names what is asked, for the refusal. A refusal is a
// *Refusal, counted and logged.
func (a *Authenticator) Authorize(c Credentials, call string, need Role) (Identity, error) {
	id, reason := a.authenticate(c)
	if reason == "" {
		switch {
		case need == None:
			reason = ReasonUnmapped
		case id.Role == None:
			reason = ReasonNoRole
		case !id.Role.Allows(need):
			reason = ReasonForbidden
		}
	}
	if reason == "" {
		return id, nil
	}
	r := &Refusal{Reason: reason, Call: call, Name: id.Name, Role: id.Role, Need: need}
	a.refusals.WithLabelValues(a.o.Server, string(reason)).Inc()
	if left, ok := a.logs.allow(); ok {
		attrs := []any{"server", a.o.Server, "reason", string(reason), "call", call,
			"client", c.Addr, "name", id.Name, "role", id.Role.String(), "need", need.String()}
		if left > 0 {
			attrs = append(attrs, "not_logged_before", left)
		}
		a.o.Logger.Warn("auth: refused", attrs...)
	}
	return id, r
}

// logLimit lets refusals be logged at a bounded rate and counts those it
// left out since the last one logged.
type logLimit struct {
	l    *rate.Limiter
	left atomic.Int64
}

// allow reports whether to log one more refusal, and how many were not
// logged before it.
func (g *logLimit) allow() (left int64, ok bool) {
	if !g.l.Allow() {
		g.left.Add(1)
		return 0, false
	}
	return g.left.Swap(0), true
}

// authenticate returns the identity c proves, or the reason it proves
// none. A token (or a basic-auth user) and a certificate give the higher
// of their roles; a token or a password presented and bad is refused
// whatever the certificate.
func (a *Authenticator) authenticate(c Credentials) (Identity, Reason) {
	var id Identity
	have := false
	if c.Certificate != nil {
		id.Name, id.Role = a.o.Identities.Role(c.Certificate)
		have = true
	}
	switch len(c.Authorization) {
	case 0:
		if !have {
			return id, ReasonMissing
		}
		return id, ""
	case 1:
	default:
		return id, ReasonMalformed
	}
	if user, password, isBasic, reason := BasicCredentials(c.Authorization[0]); isBasic && a.HasUsers() {
		if reason == ReasonLongPassword {
			return Identity{Name: user}, reason
		}
		if reason != "" {
			return id, reason
		}
		if !a.users.check(a.o.Users.Users(), user, password) {
			return Identity{Name: user}, ReasonBadUser
		}
		if Read > id.Role || !have {
			id = Identity{Name: user, Role: Read}
		}
		return id, ""
	}
	token, ok := BearerToken(c.Authorization[0])
	if !ok {
		return id, ReasonMalformed
	}
	if reason := checkToken(token); reason != "" {
		return id, reason
	}
	var tokens *Tokens
	if a.o.Tokens != nil {
		tokens = a.o.Tokens.Tokens()
	}
	name, role, found := tokens.lookup(token)
	if !found {
		return id, ReasonUnknownToken
	}
	if role > id.Role || !have {
		id = Identity{Name: name, Role: role}
	}
	return id, ""
}

// BearerToken returns the token of an Authorization value "Bearer <token>"
// (the scheme in any case, RFC 7235 section 2.1), or ok false.
func BearerToken(authorization string) (token string, ok bool) {
	scheme, token, found := strings.Cut(authorization, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(token, " "), true
}

// Refusals returns the refusals counter (for tests and callers that count
// a refusal decided elsewhere).
func (a *Authenticator) Refusals() *prometheus.CounterVec { return a.refusals }

// Open returns an Authenticator over the tokens file at tokensFile (none
// if empty) and the certificate names' roles clientRoles ("name=role"),
// and the function that stops reading the file.
func Open(o Options, tokensFile string, clientRoles []string, fo FileOptions) (*Authenticator, func() error, error) {
	ids, err := ParseIdentities(clientRoles)
	if err != nil {
		return nil, nil, err
	}
	o.Identities = ids
	closeFile := func() error { return nil }
	if tokensFile != "" {
		f, err := OpenTokenFile(tokensFile, fo)
		if err != nil {
			return nil, nil, err
		}
		o.Tokens, closeFile = f, f.Close
	}
	return New(o), closeFile, nil
}
