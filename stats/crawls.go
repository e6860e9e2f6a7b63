package stats

import (
	"context"
	"fmt"
)

// DeleteCrawl removes a crawl's counts (its crawl:<id>:… fields) and
// returns how many it removed; the totals keep what the crawl added.
func (r *Redis) DeleteCrawl(ctx context.Context, crawl string) (int64, error) {
	var fields []string
	for _, f := range []string{"links", "admitted", "duplicates", "rejected"} {
		fields = append(fields, "crawl:"+crawl+":"+f)
	}
	n, err := r.c.HDel(ctx, r.key("stats"), fields...).Result()
	if err != nil {
		return 0, fmt.Errorf("stats: delete crawl %s: %w", crawl, err)
	}
	return n, nil
}
