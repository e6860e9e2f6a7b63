package frontier_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/admit"
	"github.com/sievecrawl/sieve/frontier"
)

// TestPublisherAcks checks the real Publisher against a real JetStream
// server: what admit.Core relies on is that a URL published again within
// the duplicate window is answered as a duplicate (and stored once), that
// a URL is stored on its crawl's partition subject, and that a publish the
// full stream refuses fails with the stream's error (10077), which the
// worker reads as backpressure.
func TestPublisherAcks(t *testing.T) {
	p := newPipeline(t, frontier.Topology{FrontierMaxMsgs: 3})
	pub := frontier.NewPublisher(p.js, p.topo)
	u := func(crawl, url string) admit.URL {
		return admit.URL{Crawl: crawl, URL: url, Depth: 1, From: "https://from.example/"}
	}
	type want struct{ dup, full bool }
	steps := []struct {
		urls []admit.URL
		want []want
	}{
		{[]admit.URL{u("c", "https://a.example/"), u("c", "https://b.example/")}, []want{{}, {}}},
		// Republished (a worker died between publish and mark), and the same
		// URL in another crawl, which is another entry.
		{[]admit.URL{u("c", "https://a.example/"), u("d", "https://a.example/")}, []want{{dup: true}, {}}},
		// The stream holds 3 messages: a fourth is refused.
		{[]admit.URL{u("c", "https://c.example/")}, []want{{full: true}}},
	}
	for i, st := range steps {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		acks, err := pub.Publish(ctx, st.urls)
		cancel()
		if err != nil || len(acks) != len(st.want) {
			t.Fatalf("step %d: Publish = %v, %v", i, acks, err)
		}
		for j, a := range acks {
			var apiErr *jetstream.APIError
			full := errors.As(a.Err, &apiErr) && apiErr.ErrorCode == 10077
			if a.Duplicate != st.want[j].dup || full != st.want[j].full || (a.Err != nil && !full) {
				t.Errorf("step %d: %s in %s: ack %+v, want %+v", i, st.urls[j].URL, st.urls[j].Crawl, a, st.want[j])
			}
		}
	}
	var got []string
	for _, m := range p.take(t, 0) {
		if want := p.topo.FrontierSubject(m.entry.Crawl, p.topo.Partition("a.example")); m.entry.URL == "https://a.example/" && m.subject != want {
			t.Errorf("%s on %s, want %s", m.entry.URL, m.subject, want)
		}
		if m.entry.Depth != 1 || m.entry.From != "https://from.example/" {
			t.Errorf("entry %+v lost its depth or page", m.entry)
		}
		got = append(got, m.entry.Crawl+" "+m.entry.URL)
	}
	slices.Sort(got)
	if want := []string{"c https://a.example/", "c https://b.example/", "d https://a.example/"}; !slices.Equal(got, want) {
		t.Errorf("frontier holds %q, want %q", got, want)
	}
}
