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

// FuzzBasicCredentials: whatever a client sends as Authorization, the
// Basic parser answers without panicking, a value it accepts decodes to
// user:password again, and an Authenticator with users refuses it
// (nobody's password is fuzzed) with a reason that does not show it.
func FuzzBasicCredentials(f *testing.F) {
	f.Add("Basic cmVhZGVyOnMzY3JldA==")
	f.Add("basic  Og==")
	f.Add("Basic !!!")
	f.Add("Basic " + strings.Repeat("QUFB", 400))
	a := auth.New(auth.Options{Users: staticUsers{"reader": lowCostHash(f, "s3cret-pass")}})
	f.Fuzz(func(t *testing.T, authorization string) {
		user, password, isBasic, reason := auth.BasicCredentials(authorization)
		if !isBasic && (reason != "" || user != "" || password != "") {
			t.Fatalf("not Basic, yet %q %q %q", user, password, reason)
		}
		if isBasic && reason == "" && len(authorization) > auth.MaxBasicBytes+len("Basic ")+64 {
			t.Fatalf("accepted %d bytes", len(authorization))
		}
		if user == "reader" && password == "s3cret-pass" {
			return
		}
		_, err := a.Authorize(auth.Credentials{Authorization: []string{authorization}}, "x", auth.Read)
		if err == nil {
			t.Fatalf("%q let in", authorization)
		}
		if password != "" && len(password) > 4 && strings.Contains(err.Error(), password) {
			t.Fatalf("the refusal %q shows the password", err)
		}
	})
}
