package auth

import (
	"errors"
	"net/http"
)

// HTTPHandler returns next behind the Authenticator: every request needs
// role need unless open says its path is open (health checks for
// orchestrators). A request without a credential or with a bad one is
// answered 401 with a challenge for each scheme it takes — Basic (RFC
// 7617) when it has users, so that a browser asks for one, then Bearer
// (RFC 6750 section 3) — and one whose role is too low 403. The
// credentials are the Authorization header and the client certificate
// crypto/tls verified.
func (a *Authenticator) HTTPHandler(next http.Handler, need Role, open func(path string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if open != nil && open(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		c := Credentials{Authorization: r.Header.Values("Authorization"), Addr: r.RemoteAddr}
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
			c.Certificate = r.TLS.VerifiedChains[0][0]
		}
		_, err := a.Authorize(c, r.Method+" "+r.URL.Path, need)
		switch {
		case err == nil:
			next.ServeHTTP(w, r)
		case errors.Is(err, ErrForbidden):
			http.Error(w, http.StatusText(http.StatusForbidden), http.StatusForbidden)
		default:
			if a.HasUsers() {
				w.Header().Add("WWW-Authenticate", `Basic realm="sieve", charset="UTF-8"`)
			}
			if a.HasTokens() || !a.HasUsers() {
				w.Header().Add("WWW-Authenticate", `Bearer realm="sieve"`)
			}
			http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
		}
	})
}
