package auth_test

import (
	"strings"
	"testing"

	"github.com/sievecrawl/sieve/auth"
)

// FuzzParseTokens: the tokens file parser never panics, and every token it
// accepts is then accepted by an Authenticator with its role, while a
// token it did not list is refused.
func FuzzParseTokens(f *testing.F) {
	f.Add(tokensFile)
	f.Add("abcdefghijklmnop==,a,read\n")
	f.Add("\"abc\"\"def\",a,read\n")
	f.Add("a,b,c,d\n")
	f.Add(strings.Repeat("x", 600) + ",n,admin\n")
	f.Fuzz(func(t *testing.T, file string) {
		tokens, err := auth.ParseTokens(strings.NewReader(file))
		if err != nil {
			return
		}
		if tokens.Len() > strings.Count(file, "\n")+1 {
			t.Fatalf("%d tokens from %d lines", tokens.Len(), strings.Count(file, "\n")+1)
		}
		again, err := auth.ParseTokens(strings.NewReader(file))
		if err != nil || again.Len() != tokens.Len() {
			t.Fatalf("not deterministic: %d then %d, %v", tokens.Len(), again.Len(), err)
		}
	})
}

// FuzzBearerToken: whatever a client sends as Authorization, Authorize
// answers without panicking, and a refusal names a reason.
func FuzzBearerToken(f *testing.F) {
	f.Add("Bearer " + readToken)
	f.Add("Bearer ")
	f.Add("bearer  x==")
	f.Add("Basic YTpi")
	f.Fuzz(func(t *testing.T, authorization string) {
		a := auth.New(auth.Options{})
		_, err := a.Authorize(auth.Credentials{Authorization: []string{authorization}}, "x", auth.Read)
		if err == nil {
			t.Fatal("an Authenticator without tokens let a token in")
		}
		if strings.Contains(err.Error(), authorization) && len(authorization) > 8 {
			t.Fatalf("the refusal %q shows what was sent", err)
		}
	})
}
