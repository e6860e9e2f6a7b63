package config

import (
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/dedup"
)

// Spec maps the section to what dedup.Open takes, for a filter in Redis
// when rdb is not nil (else in memory, with the section's snapshot file)
// stored under policy. The section's values are taken as they are (zero:
// the stored value, or the default); pipeline.OpenFilter's adoption of stored values and
// its checks are not applied.
func (f Filter) Spec(rdb redis.UniversalClient, policy string) dedup.Spec {
	return dedup.Spec{
		Kind: f.Kind, Redis: rdb, Name: f.Name, Snapshot: f.Snapshot,
		Growth: dedup.Growth{InitialCapacity: f.Capacity, TargetFPP: f.FPP, Factor: f.Growth, Tightening: f.Tightening},
		Shards: f.Shards, Policy: policy, Force: f.Force, NoMirror: f.NoMirror,
	}
}

// SizedByCrawl returns the section with filter.kind, filter.capacity and
// filter.fpp no longer given explicitly, for a crawl's own filter: the
// crawl's settings replace them when its filter is created
// (pipeline.CrawlFilter), and an existing one adopts its stored values
// whatever the section says, so a setting meant for every filter (such as
// SIEVE_FILTER_CAPACITY in compose.yaml) cannot make a crawl's filter a
// mismatch.
func (f Filter) SizedByCrawl() Filter {
	f.Given = slices.DeleteFunc(slices.Clone(f.Given), func(k string) bool { return k == "kind" || k == "capacity" || k == "fpp" })
	return f
}
