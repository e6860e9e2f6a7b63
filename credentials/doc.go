// Package credentials writes a deployment's credentials into a directory:
// what compose.yaml's Sieve services and its Prometheus need to speak TLS
// and authenticate one another, made with Go's standard crypto only (the
// image has no openssl).
//
// # What it writes
//
// Generate writes, in Dir:
//
//   - ca.pem, ca-key.pem: the deployment's own certificate authority
//     (ECDSA P-256, ten years). Clients trust ca.pem; ca-key.pem signs the
//     server certificate and is read by nothing else.
//   - server.pem, server-key.pem: one server certificate (ECDSA P-256, one
//     year, serverAuth) whose subject alternative names are Names: the
//     compose services' names, localhost, 127.0.0.1. Every Sieve service
//     serves it, so a client verifies any of them with ca.pem and the name
//     it dialled.
//   - tokens.csv: the bearer tokens in the format auth.ParseTokens reads
//     ("token,name,role" lines), one per Token; each token is 32 bytes from
//     crypto/rand, in standard base64 (44 characters, within RFC 6750's
//     b64token). Sieve's http.tokens_file.
//   - token-NAME: each token alone, without a newline: what Prometheus's
//     authorization.credentials_file and a person's curl read.
//   - web.yml: a Prometheus web configuration file (exporter-toolkit's) whose
//     tls_server_config names server.pem and server-key.pem by paths
//     relative to it, and whose basic_auth_users hold the bcrypt hash of
//     each of Users' passwords. Sieve's http.web_config_file.
//   - password-NAME: each user's password (18 bytes from crypto/rand,
//     base64url), what a person signs in to the live page with.
//
// # Idempotent
//
// Generate keeps what is there and valid, byte for byte: compose runs it
// at every `up`, and a credential rotated under running clients would lock
// them out. A file is made again only when it is missing or no longer
// valid: a CA that does not parse or whose key does not match it (then the
// server certificate is signed again too), a server certificate that does
// not verify against the CA, does not cover every name, or expires within
// RenewBefore (or Options.Renew asks), and tokens: a token already in
// tokens.csv keeps its value, a requested name missing from it is added,
// and a token-NAME file is rewritten when it differs from tokens.csv.
// Every file is written beside its final name and renamed over it, the key
// before its certificate, so a reader sees the old file or the new one
// (Sieve re-reads the server certificate and tokens.csv while running, see
// package auth).
//
// # Who reads what
//
// Files are owned by the process that reads them, readable by no one else
// when they are secret: Options.Owner (Sieve's uid, 10001 in the image)
// owns server-key.pem and tokens.csv (0600), a token-NAME file is owned by
// its Token.Owner (Prometheus's nobody, 65534, for its token) or else by
// Owner (0600); ca-key.pem stays with the user running Generate (0600);
// ca.pem, server.pem and web.yml without users hold no secret (0644);
// with users, web.yml and the password files are Owner's (0600). An owner of 0
// leaves a file with the user running Generate, who then must be the one
// reading it. Dir itself is made 0755, so that each reader reaches its
// file. Modes and owners are set again at every run, which changes no
// byte.
package credentials
