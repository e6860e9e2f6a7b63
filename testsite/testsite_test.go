package testsite

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestSiteServesItsTraps(t *testing.T) {
	s, err := New(Options{Pages: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tests := []struct {
		path, ctype, location, body string
		status                      int
	}{
		{path: "/", status: 200, ctype: "text/html", body: `href="/calendar/2024/06"`},
		{path: "/p/3", status: 200, ctype: "text/html", body: "page 3"},
		{path: "/p/20", status: 404}, // beyond Pages
		{path: "/p/03", status: 404}, // one spelling per page number
		{path: "/p/1", status: 200, body: `<base href=`},
		{path: "/robots.txt", status: 200, ctype: "text/plain", body: "Disallow: /private/"},
		{path: "/old/2", status: 301, location: "/moved/2"},
		{path: "/moved/2", status: 302, location: "http://" + s.Host() + "/p/2"},
		{path: "/go/2", status: 308, location: "/p/2?utm_source=redirect"},
		{path: "/r/7", status: 302, location: "/r/8"},
		{path: "/missing/1", status: 404},
		{path: "/broken/1", status: 500},
		{path: "/flaky/1", status: 503},
		{path: "/flaky/1", status: 200, ctype: "text/html"}, // the second time
		{path: "/files/1.pdf", status: 200, ctype: "application/pdf", body: "/hidden/1"},
		{path: "/files/1.txt", status: 200, ctype: "text/plain", body: "/hidden/1"},
		{path: "/calendar/2024/12", status: 200, body: `/calendar/2024/11`},
		{path: "/calendar/2024/12", status: 200, body: `../../calendar/2025/01#top`},
		{path: "/calendar/2024/13", status: 404},
	}
	for _, tc := range tests {
		resp, err := client.Get(s.URL + strings.TrimPrefix(tc.path, "/"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.ctype) ||
			resp.Header.Get("Location") != tc.location || !strings.Contains(string(body), tc.body) {
			t.Errorf("GET %s = %d %q Location %q body %.80q; want %d %q %q containing %q",
				tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Location"), body,
				tc.status, tc.ctype, tc.location, tc.body)
		}
	}
	if got := s.Fetches()["/flaky/1"]; got != 2 {
		t.Errorf("Fetches()[/flaky/1] = %d, want 2", got)
	}
	resp, err := http.Get(s.OffScopeURL + "p/1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s.OffScopeFetches() != 1 {
		t.Errorf("OffScopeFetches() = %d, want 1", s.OffScopeFetches())
	}
	if p := s.Plan(5); p.Calendar != 9 || len(p.Once) != 1+20+6*5 || len(p.RedirectTrap(3)) != 4 {
		t.Errorf("Plan(5) = calendar %d, %d once, trap(3) %d; want 9, %d, 4", p.Calendar, len(p.Once), len(p.RedirectTrap(3)), 1+20+6*5)
	}
}
