package auth_test

import (
	"bytes"
	"encoding/base64"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/crypto/bcrypt"

	"github.com/sievecrawl/sieve/auth"
)

// staticUsers is a fixed set of basic-auth users.
type staticUsers map[string]string

func (u staticUsers) Users() map[string]string { return u }

func lowCostHash(tb testing.TB, password string) string {
	tb.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		tb.Fatal(err)
	}
	return string(h)
}

func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// TestBasicCredentials: the Basic parser reads RFC 7617's form and
// refuses what is not it, by reason.
func TestBasicCredentials(t *testing.T) {
	tests := []struct {
		in, user, password string
		isBasic            bool
		reason             auth.Reason
	}{
		{basic("reader", "s3cret"), "reader", "s3cret", true, ""},
		{"basic " + base64.StdEncoding.EncodeToString([]byte("a:b:c")), "a", "b:c", true, ""}, // the first colon splits
		{"Basic " + base64.StdEncoding.EncodeToString([]byte(":")), "", "", true, ""},
		{"Basic " + base64.StdEncoding.EncodeToString([]byte("nocolon")), "", "", true, auth.ReasonMalformed},
		{"Basic !!notbase64", "", "", true, auth.ReasonMalformed},
		{"Basic " + base64.StdEncoding.EncodeToString(make([]byte, 800)), "", "", true, auth.ReasonOversized},
		// Issue 39, item 12: bcrypt reads 72 bytes of a password.
		{basic("reader", strings.Repeat("p", 72)), "reader", strings.Repeat("p", 72), true, ""},
		{basic("reader", strings.Repeat("p", 73)), "reader", "", true, auth.ReasonLongPassword},
		{"Bearer abcdefghijklmnop", "", "", false, ""},
		{"Basic", "", "", false, ""},
	}
	for _, tt := range tests {
		user, password, isBasic, reason := auth.BasicCredentials(tt.in)
		if user != tt.user || password != tt.password || isBasic != tt.isBasic || reason != tt.reason {
			t.Errorf("BasicCredentials(%.30q) = %q %q %v %q, want %q %q %v %q", tt.in, user, password, isBasic, reason,
				tt.user, tt.password, tt.isBasic, tt.reason)
		}
	}
}

// TestUsers: a basic-auth user is an identity of role read beside tokens
// and certificates; an unknown user and a wrong password are one reason,
// counted; a Basic value without users configured is malformed, as before.
func TestUsers(t *testing.T) {
	tokens, _ := openTokens(t, tokensFile, auth.FileOptions{})
	reg := prometheus.NewRegistry()
	long100 := strings.Repeat("0123456789", 10)
	a := auth.New(auth.Options{Server: "http", Tokens: tokens, Registerer: reg,
		Users: staticUsers{"reader": lowCostHash(t, "s3cret-pass"), "long": lowCostHash(t, long100[:72])}})
	tests := []struct {
		authorization string
		need          auth.Role
		name          string
		reason        auth.Reason
	}{
		{basic("reader", "s3cret-pass"), auth.Read, "reader", ""},
		{basic("reader", "s3cret-pass"), auth.Crawl, "reader", auth.ReasonForbidden},
		{basic("reader", "wrong"), auth.Read, "reader", auth.ReasonBadUser},
		{basic("nobody", "s3cret-pass"), auth.Read, "nobody", auth.ReasonBadUser},
		{basic("reader", "wrong"), auth.Read, "reader", auth.ReasonBadUser}, // cached: the same answer
		// Issue 39, item 12: bcrypt compares the first 72 bytes of a
		// password only, so the hash of a 100-byte password, made by a
		// tool that cuts it silently, let in any password sharing its
		// first 72 bytes. A password over 72 bytes is refused.
		{basic("long", long100), auth.Read, "long", auth.ReasonLongPassword},
		{basic("long", long100[:72]+strings.Repeat("x", 28)), auth.Read, "long", auth.ReasonLongPassword},
		{"Bearer " + adminToken, auth.Admin, "ops", ""},
	}
	for _, tt := range tests {
		id, err := a.Authorize(auth.Credentials{Authorization: []string{tt.authorization}}, "GET /stats", tt.need)
		var reason auth.Reason
		if r, ok := err.(*auth.Refusal); ok {
			reason = r.Reason
		} else if err != nil {
			t.Fatalf("%v: %T", err, err)
		}
		if reason != tt.reason || (tt.name != "" && id.Name != tt.name) {
			t.Errorf("%s needing %s: %q, %v; want %q, %q", tt.authorization, tt.need, id.Name, err, tt.name, tt.reason)
		}
	}
	if got := testutil.ToFloat64(a.Refusals().WithLabelValues("http", "bad_user")); got != 3 {
		t.Errorf("bad_user refusals = %v, want 3", got)
	}
	without := auth.New(auth.Options{Tokens: tokens})
	if _, err := without.Authorize(auth.Credentials{Authorization: []string{basic("reader", "s3cret-pass")}}, "x", auth.Read); err == nil ||
		err.(*auth.Refusal).Reason != auth.ReasonMalformed {
		t.Errorf("Basic without users = %v, want malformed", err)
	}
}

// TestRefusalLogLimit: a flood of bad credentials is counted in full but
// logged at the bounded rate, and the next line logged says how many were
// left out; the token itself is in no line.
func TestRefusalLogLimit(t *testing.T) {
	var buf bytes.Buffer
	a := auth.New(auth.Options{Server: "http", Logger: slog.New(slog.NewTextHandler(&buf, nil)), LogRate: 2, LogBurst: 5})
	const flood = 100
	for range flood {
		a.Authorize(auth.Credentials{Authorization: []string{"Bearer flood-0123456789abcdef"}, Addr: "192.0.2.1:1"}, "GET /stats", auth.Read)
	}
	if got := testutil.ToFloat64(a.Refusals().WithLabelValues("http", "unknown_token")); got != flood {
		t.Fatalf("counted %v refusals, want %d", got, flood)
	}
	if lines := strings.Count(buf.String(), "auth: refused"); lines < 5 || lines > 7 {
		t.Fatalf("%d lines logged for %d refusals at a burst of 5", lines, flood)
	}
	time.Sleep(600 * time.Millisecond) // one more token at 2 a second
	buf.Reset()
	a.Authorize(auth.Credentials{Addr: "192.0.2.1:1"}, "GET /stats", auth.Read)
	if !strings.Contains(buf.String(), "not_logged_before=") {
		t.Fatalf("the line after the flood does not say what was left out: %s", buf.String())
	}
	if strings.Contains(buf.String(), "flood-0123") {
		t.Fatal("a token was logged")
	}
}
