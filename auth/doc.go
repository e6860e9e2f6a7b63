// Package auth decides who a client of Sieve's own servers is and what it
// may do: the URLFrontier gRPC API and the HTTP surface both ask it.
//
// # Roles
//
// Every credential maps to one Role, and roles are ordered: Read < Crawl <
// Admin. A role allows everything a lower one does (Role.Allows), so a
// check is one comparison with the role a call needs. Read sees (listings,
// statistics, the live page, metrics); Crawl is what a fetcher needs on top
// (taking and putting URLs); Admin changes the frontier's state (deleting,
// purging, blocking, pausing).
//
// # Credentials
//
// A bearer token is read from a file, never from a flag that ps shows: a
// CSV file of "token,name,role" lines, after Kubernetes' static token file
// (kube-apiserver --token-auth-file); the name is what logs show instead
// of the secret. Tokens (ParseTokens) parses it with encoding/csv;
// TokenFile keeps a file's current set, re-reading the file every
// interval and swapping the set when its bytes changed, so a token is
// rotated by rewriting the file (or a Kubernetes secret's symlink) while
// clients stay connected: a call is checked against the set of the moment
// it arrives, and a gRPC stream opened with a token again at each change
// (a token removed ends its streams). A file that no longer parses keeps the last good set and is
// reported, never leaves the server open.
//
// A presented token is looked up in constant time: the set keeps the
// SHA-256 of each token, the presented token is hashed too, and every
// digest is compared with crypto/subtle without stopping at a match, so
// neither the position of a match nor the length of a token shows in the
// time taken. A token longer than MaxTokenBytes is refused before it is
// hashed, and one with a character outside RFC 6750's b64token syntax is
// refused as malformed.
//
// A client certificate, already verified by crypto/tls against the
// configured client CA, names an identity by its subject common name and
// its DNS, URI and e-mail subject alternative names; Identities maps such
// names to roles. A client presenting both a certificate and a token gets
// the higher of the two roles, but a bad token is refused even beside a
// good certificate: a credential that was presented and is wrong is an
// error, not an absence.
//
// # Users
//
// A WebConfig is a Prometheus web configuration file (exporter-toolkit's
// format and types), kept current like a TokenFile. Its basic_auth_users
// are identities of role Read when given as Options.Users: an
// Authorization "Basic" value is checked against their bcrypt hashes,
// each outcome remembered by the SHA-256 of user, hash and password (a
// browser sends the same credentials with every request), one bcrypt
// comparison at a time, and an unknown user compared against a decoy
// hash, so that timing tells neither which users exist nor lets a flood
// of guesses take every core.
//
// # Refusals
//
// Authenticator.Authenticate and Authorize answer a *Refusal whose Reason
// is one of the Reason constants: ErrUnauthenticated (no credential, or a
// bad one) or ErrForbidden (a role too low) match it with errors.Is. Each
// refusal is counted in sieve_auth_refusals_total{server,reason} and
// logged with the client's address, the call and, when known, the
// identity's name, never the token.
//
// # gRPC
//
// Authenticator.GRPCOptions check a grpc.Server's calls before any of
// their messages is read: a tap (grpc.InTapHandle) sees a call's headers
// as soon as they arrive, and a refused call's stream is reset, so a
// client without a credential cannot make the server read, decode or
// hold its messages; the headers themselves are bounded by
// MaxMetadataBytes. Each call's credentials are its authorization
// metadata and the certificate crypto/tls verified; the role it needs is
// looked up by its full method name, and a method given no role is
// refused to everyone.
//
// # TLS
//
// CertFile serves a server certificate and key read from files through
// tls.Config.GetCertificate, re-reading them every interval as TokenFile
// does, so a renewed certificate is served to new connections without a
// restart; ServerTLS builds the tls.Config, with a client CA for mutual
// TLS when one is given (clients without a certificate are still let in,
// to authenticate with a token, unless RequireClientCert).
package auth
