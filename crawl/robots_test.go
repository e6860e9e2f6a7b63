package crawl

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestRobots(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		path       string
		wantReason Reason // "" for allowed
		wantDelay  time.Duration
	}{
		// RFC 9309 §2.2.2: the longest match wins; Allow wins ties.
		{"disallowed", 200, "User-agent: *\nDisallow: /a/\n", "/a/b", ReasonRobots, 0},
		{"allowed path", 200, "User-agent: *\nDisallow: /a/\n", "/b", "", 0},
		{"longest match", 200, "User-agent: *\nDisallow: /a/\nAllow: /a/ok\n", "/a/ok", "", 0},
		{"query matched", 200, "User-agent: *\nDisallow: /*?sort=\n", "/list?sort=asc", ReasonRobots, 0},
		// §2.2.1: the most specific group for our product token applies.
		{"own group", 200, "User-agent: *\nDisallow: /\n\nUser-agent: sievebot\nAllow: /\n", "/x", "", 0},
		{"own group disallows", 200, "User-agent: *\nAllow: /\n\nUser-agent: SieveBot\nDisallow: /x\n", "/x", ReasonRobots, 0},
		{"crawl-delay", 200, "User-agent: *\nCrawl-delay: 2\n", "/x", "", 2 * time.Second},
		// §2.3.1.3: 4xx means no robots.txt, a full allow.
		{"404", 404, "", "/x", "", 0},
		{"403", 403, "", "/x", "", 0},
		// §2.3.1.4: 5xx means complete disallow for now: retried later.
		{"503", 503, "", "/x", ReasonRobotsUnavailable, 0},
		{"429", 429, "", "/x", ReasonRobotsUnavailable, 0},
		{"empty", 200, "", "/x", "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/robots.txt" {
					w.WriteHeader(tc.status)
					fmt.Fprint(w, tc.body)
					return
				}
				fmt.Fprint(w, "<html></html>")
			}))
			defer srv.Close()
			f := newFetcher(t, FetcherOptions{MaxCrawlDelay: time.Second}, strings.TrimPrefix(srv.URL, "http://"))
			_, err := f.Fetch(t.Context(), srv.URL+tc.path)
			var fe *FetchError
			switch {
			case tc.wantReason == "" && err != nil:
				t.Errorf("Fetch(%s) = %v, want allowed", tc.path, err)
			case tc.wantReason != "" && (!errors.As(err, &fe) || fe.Reason != tc.wantReason):
				t.Errorf("Fetch(%s) = %v, want %s", tc.path, err, tc.wantReason)
			case tc.wantReason == ReasonRobotsUnavailable && !fe.Temporary:
				t.Errorf("Fetch(%s) = %v, want temporary", tc.path, err)
			}
			u, _ := url.Parse(srv.URL + tc.path)
			if d, _ := f.robots.allowed(t.Context(), u); d != tc.wantDelay {
				t.Errorf("crawl delay = %v, want %v", d, tc.wantDelay)
			}
		})
	}
}

func TestRobotsCache(t *testing.T) {
	var fetches atomic.Int32
	var status atomic.Int32
	status.Store(503)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fetches.Add(1)
			w.WriteHeader(int(status.Load()))
			return
		}
		fmt.Fprint(w, "<html></html>")
	}))
	defer srv.Close()
	f := newFetcher(t, FetcherOptions{}, strings.TrimPrefix(srv.URL, "http://"))
	f.robots.errTTL = 50 * time.Millisecond

	// Concurrent misses: one fetch.
	errs := make(chan error, 8)
	for range 8 {
		go func() { _, err := f.Fetch(t.Context(), srv.URL+"/x"); errs <- err }()
	}
	for range 8 {
		if err := <-errs; err == nil {
			t.Errorf("Fetch while robots.txt answers 503 succeeded")
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("robots.txt fetched %d times for 8 concurrent misses, want 1", n)
	}
	// An unavailable robots.txt is asked again after errTTL.
	status.Store(404)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := f.Fetch(t.Context(), srv.URL+"/x"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("robots.txt never re-read after it became available")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := fetches.Load(); n != 2 {
		t.Errorf("robots.txt fetched %d times, want 2", n)
	}

	// Bounded: the least recently used origin is evicted.
	c := newRobotsCache(f.robots.client, DefaultUserAgent, time.Hour, 2)
	for _, o := range []string{"http://a", "http://b", "http://c"} {
		c.store(o, &robotsRules{expires: time.Now().Add(time.Hour)})
	}
	if _, ok := c.items["http://a"]; ok || len(c.items) != 2 || c.lru.Len() != 2 {
		t.Errorf("cache of 2 holds %d items (a present: %v), want b and c", len(c.items), ok)
	}
}
