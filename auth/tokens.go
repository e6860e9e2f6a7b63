package auth

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Bounds of a token, in bytes. A token shorter than MinTokenBytes is
// refused in a tokens file (a guessable secret); one longer than
// MaxTokenBytes is refused wherever it is seen, before any work is done on
// it.
const (
	MinTokenBytes = 16
	MaxTokenBytes = 512
)

// maxTokensFile bounds a tokens file: a few thousand tokens, far more than
// a deployment names.
const maxTokensFile = 1 << 20

// Tokens is a set of bearer tokens, each with a name and a role. It keeps
// only the tokens' SHA-256 digests. The zero value holds no token. It is
// immutable, so safe for concurrent use.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	digest [sha256.Size]byte
	name   string
	role   Role
}

// Len returns the number of tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// ParseTokens reads a tokens file: CSV lines of "token,name,role" (after
// Kubernetes' static token file), where role is read, crawl or admin and
// name is what logs show for the token's holder. Lines starting with # are
// comments; blank lines are skipped. A token must be MinTokenBytes to
// MaxTokenBytes of RFC 6750's b64token characters; a token or a name given
// twice is an error, as is a file of more than 1 MiB.
func ParseTokens(r io.Reader) (*Tokens, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxTokensFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxTokensFile {
		return nil, fmt.Errorf("tokens file larger than %d bytes", maxTokensFile)
	}
	cr := csv.NewReader(bytes.NewReader(data))
	cr.Comment = '#'
	cr.FieldsPerRecord = 3
	cr.TrimLeadingSpace = true
	t := &Tokens{}
	names := map[string]bool{}
	digests := map[[sha256.Size]byte]bool{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("tokens file: %w", err)
		}
		line, _ := cr.FieldPos(0)
		token, name, roleName := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1]), strings.TrimSpace(rec[2])
		if reason := checkToken(token); reason != "" {
			return nil, fmt.Errorf("tokens file line %d: token %s", line, reasonText(reason))
		}
		if len(token) < MinTokenBytes {
			return nil, fmt.Errorf("tokens file line %d: token shorter than %d bytes", line, MinTokenBytes)
		}
		if name == "" {
			return nil, fmt.Errorf("tokens file line %d: empty name", line)
		}
		role, err := ParseRole(roleName)
		if err != nil {
			return nil, fmt.Errorf("tokens file line %d: %w", line, err)
		}
		d := sha256.Sum256([]byte(token))
		if digests[d] {
			return nil, fmt.Errorf("tokens file line %d: token given twice", line)
		}
		if names[name] {
			return nil, fmt.Errorf("tokens file line %d: name %q given twice", line, name)
		}
		digests[d], names[name] = true, true
		t.entries = append(t.entries, tokenEntry{digest: d, name: name, role: role})
	}
	return t, nil
}

// lookup returns the name and role of token, or ok false. It hashes token
// and compares the digest with every entry's in constant time, without
// stopping at a match: the time taken depends on the number of tokens
// only. The caller has checked token's length and syntax.
func (t *Tokens) lookup(token string) (name string, role Role, ok bool) {
	if t == nil {
		return "", None, false
	}
	d := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.entries {
		if subtle.ConstantTimeCompare(d[:], t.entries[i].digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", None, false
	}
	return t.entries[found].name, t.entries[found].role, true
}

// checkToken returns the reason a presented token is refused before it is
// looked up (ReasonOversized, ReasonMalformed), or "".
func checkToken(token string) Reason {
	if len(token) > MaxTokenBytes {
		return ReasonOversized
	}
	if !b64token(token) {
		return ReasonMalformed
	}
	return ""
}

// b64token reports whether s is RFC 6750 section 2.1's b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func b64token(s string) bool {
	i := 0
	for i < len(s) {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0 {
			i++
			continue
		}
		break
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

// errEmptyTokens is returned by a TokenFile whose file holds no token: a
// server that asked for tokens and got none would refuse everyone.
var errEmptyTokens = errors.New("no token in file")
