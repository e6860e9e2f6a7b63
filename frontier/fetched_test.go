package frontier

import (
	"encoding/json"
	"testing"
	"time"
)

func TestFetchedRoundTrip(t *testing.T) {
	f := Fetched{V: FetchedVersion, Crawl: "c1", URL: "https://example.com/", Time: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC),
		Status: 200, MIME: "text/html", Digest: "sha1:ABC", Size: 10, Links: 3, Record: "response", File: "f.warc.gz", Offset: 5, Length: 9}
	data, _ := json.Marshal(f)
	got, err := DecodeFetched(data)
	if err != nil || got != f {
		t.Fatalf("DecodeFetched = %+v, %v; want %+v", got, err, f)
	}
	for _, bad := range []string{`{}`, `{"v":2,"crawl":"c","url":"u"}`, `{"v":1,"crawl":"c"}`, `[`} {
		if _, err := DecodeFetched([]byte(bad)); err == nil {
			t.Errorf("DecodeFetched(%s) accepted", bad)
		}
	}
	topo := Topology{}
	if c, ok := topo.ParseFetchedSubject(topo.FetchedSubject("c1")); !ok || c != "c1" {
		t.Errorf("ParseFetchedSubject(FetchedSubject(c1)) = %q %v", c, ok)
	}
}

// FuzzDecodeFetched: a fetch event from the stream never crashes its
// reader, and what it accepts names a crawl and a URL.
func FuzzDecodeFetched(f *testing.F) {
	f.Add([]byte(`{"v":1,"crawl":"c","url":"https://e.com/","time":"2026-11-25T12:00:00Z","status":200,"links":2}`))
	f.Add([]byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := DecodeFetched(data)
		if err == nil && (ev.Crawl == "" || ev.URL == "") {
			t.Fatalf("accepted %q without crawl or url", data)
		}
	})
}
