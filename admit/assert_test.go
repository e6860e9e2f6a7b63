package admit_test

import (
	"github.com/sievecrawl/sieve/admit"
	"github.com/sievecrawl/sieve/dedup"
)

// Every dedup filter is an admit.Filter (frontier.Publisher's assertion is
// beside it; pipeline's crawl filters assert admit.Filters).
var (
	_ admit.Filter = (*dedup.ScalableBloom)(nil)
	_ admit.Filter = (*dedup.Cuckoo)(nil)
	_ admit.Filter = (*dedup.RedisBloom)(nil)
	_ admit.Filter = (*dedup.RedisCuckoo)(nil)
	_ admit.Filter = (*dedup.Window)(nil)
)
