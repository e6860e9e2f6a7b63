package stats

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/redistest"
)

type store interface {
	Add(ctx context.Context, d Delta) error
	Snapshot(ctx context.Context, n int) (Snapshot, error)
}

// clock is a settable time for the stores' rate buckets.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func stores(t *testing.T, c *clock) map[string]store {
	mem := NewMemory()
	mem.now = c.now
	single := NewRedis(redistest.Start(t, redistest.Options{}).Client(), "sieve")
	single.now = c.now
	cluster := NewRedis(redistest.StartCluster(t, 3).Client(), "sieve")
	cluster.now = c.now
	return map[string]store{"memory": mem, "redis": single, "cluster": cluster}
}

func TestStoresAgree(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	deltas := []Delta{
		{Pages: 1, Links: 10, Admitted: 6, Duplicates: 3, Rejected: map[string]int64{"scheme": 1},
			Hosts: map[string]int64{"a.example": 4, "b.example": 2}, DuplicateHosts: map[string]int64{"a.example": 3}, Crawls: map[string]CrawlCounts{"c1": {10, 6, 3, 1}}},
		{Pages: 2, Links: 20, Admitted: 5, Duplicates: 13, Republished: 2, Rejected: map[string]int64{"scheme": 1, "host": 1},
			Poison: map[string]int64{"malformed": 1}, Hosts: map[string]int64{"b.example": 4, "c.example": 1},
			DuplicateHosts: map[string]int64{"b.example": 12, "d.example": 1},
			Crawls:         map[string]CrawlCounts{"c1": {5, 1, 4, 0}, "c-2": {15, 4, 9, 2}}},
		{Imported: 7, ImportedSeen: 3},
		{}, // empty: no effect
	}
	want := Delta{Pages: 3, Links: 30, Admitted: 11, Duplicates: 16, Republished: 2, Imported: 7, ImportedSeen: 3,
		Rejected: map[string]int64{"scheme": 2, "host": 1}, Poison: map[string]int64{"malformed": 1},
		Crawls: map[string]CrawlCounts{"c1": {15, 7, 7, 1}, "c-2": {15, 4, 9, 2}}}
	wantTop := []HostCount{{"b.example", 6, 12}, {"a.example", 4, 3}}
	for name, s := range stores(t, c) {
		t.Run(name, func(t *testing.T) {
			for _, d := range deltas {
				if err := s.Add(ctx, d); err != nil {
					t.Fatal(err)
				}
			}
			snap, err := s.Snapshot(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(snap.Totals, want) {
				t.Errorf("Totals = %+v, want %+v", snap.Totals, want)
			}
			if !reflect.DeepEqual(snap.TopHosts, wantTop) {
				t.Errorf("TopHosts = %+v, want %+v", snap.TopHosts, wantTop)
			}
			if snap.HostCount != 3 {
				t.Errorf("HostCount = %d, want 3", snap.HostCount)
			}
			if !snap.Since.Equal(c.t) || !snap.Updated.Equal(c.t) {
				t.Errorf("Since, Updated = %v, %v; want %v", snap.Since, snap.Updated, c.t)
			}
			if got := want.Links; got != want.Admitted+want.Duplicates+want.RejectedTotal() {
				t.Errorf("test data does not add up")
			}
		})
	}
}

func TestRates(t *testing.T) {
	ctx := context.Background()
	start := time.Unix(1_700_000_000, 0) // a bucket boundary
	c := &clock{t: start}
	for name, s := range stores(t, c) {
		t.Run(name, func(t *testing.T) {
			c.t = start
			// 6 minutes of 100 links and 10 admitted every 10 s.
			for i := 0; i < 36; i++ {
				c.t = start.Add(time.Duration(i) * 10 * time.Second)
				if err := s.Add(ctx, Delta{Links: 100, Admitted: 10}); err != nil {
					t.Fatal(err)
				}
			}
			c.t = start.Add(360*time.Second + 5*time.Second) // mid-bucket after the last
			snap, err := s.Snapshot(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := Rates{LinksPerSec1m: 10, AdmittedPerSec1m: 1, LinksPerSec5m: 10, AdmittedPerSec5m: 1}
			if snap.Rates != want {
				t.Errorf("Rates = %+v, want %+v", snap.Rates, want)
			}
		})
	}
}

// TestRedisLayoutPinned pins the Redis keys and fields: tools and older
// workers read them.
func TestRedisLayoutPinned(t *testing.T) {
	ctx := context.Background()
	client := redistest.Start(t, redistest.Options{}).Client()
	r := NewRedis(client, "crawl1")
	r.now = func() time.Time { return time.Unix(1_700_000_005, 0) }
	if err := r.Add(ctx, Delta{Pages: 1, Links: 3, Admitted: 2, Duplicates: 1, Rejected: map[string]int64{"scheme": 1},
		Hosts: map[string]int64{"a.example": 2}, DuplicateHosts: map[string]int64{"a.example": 1}, Crawls: map[string]CrawlCounts{"c-1": {Links: 3, Admitted: 2, Duplicates: 1}}}); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		key, field, want string
	}{
		{"{crawl1}:stats", "pages", "1"},
		{"{crawl1}:stats", "links", "3"},
		{"{crawl1}:stats", "admitted", "2"},
		{"{crawl1}:stats", "duplicates", "1"},
		{"{crawl1}:stats", "rejected:scheme", "1"},
		{"{crawl1}:stats", "since_ms", "1700000005000"},
		{"{crawl1}:stats", "crawl:c-1:links", "3"},
		{"{crawl1}:stats", "crawl:c-1:admitted", "2"},
		{"{crawl1}:stats", "crawl:c-1:duplicates", "1"},
		{"{crawl1}:rate:170000000", "links", "3"},
		{"{crawl1}:rate:170000000", "admitted", "2"},
	}
	for _, c := range checks {
		if got, err := client.HGet(ctx, c.key, c.field).Result(); err != nil || got != c.want {
			t.Errorf("HGET %s %s = %q, %v; want %q", c.key, c.field, got, err, c.want)
		}
	}
	if got, err := client.ZScore(ctx, "{crawl1}:hosts", "a.example").Result(); err != nil || got != 2 {
		t.Errorf("ZSCORE {crawl1}:hosts a.example = %v, %v; want 2", got, err)
	}
	if got, err := client.ZScore(ctx, "{crawl1}:hosts:dup", "a.example").Result(); err != nil || got != 1 {
		t.Errorf("ZSCORE {crawl1}:hosts:dup a.example = %v, %v; want 1", got, err)
	}
	if ttl := client.TTL(ctx, "{crawl1}:rate:170000000").Val(); ttl <= 0 || ttl > rateTTL {
		t.Errorf("rate bucket TTL = %v, want in (0, %v]", ttl, rateTTL)
	}
	if err := r.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if n := client.Exists(ctx, "{crawl1}:stats", "{crawl1}:hosts", "{crawl1}:hosts:dup", "{crawl1}:rate:170000000").Val(); n != 0 {
		t.Errorf("%d keys left after Reset", n)
	}
}

func TestDeltaMerge(t *testing.T) {
	var d Delta
	if !d.IsZero() {
		t.Fatal("zero Delta is not IsZero")
	}
	d.Reject("scheme")
	d.AddPoison("malformed")
	d.AdmitHost("h")
	o := d.Clone()
	o.Links = 5
	d.Merge(o)
	if d.Rejected["scheme"] != 2 || d.Poison["malformed"] != 2 || d.Hosts["h"] != 2 || d.Links != 5 {
		t.Fatalf("merged %+v", d)
	}
	if o.Rejected["scheme"] != 1 {
		t.Fatalf("Clone shares maps: %+v", o)
	}
}
