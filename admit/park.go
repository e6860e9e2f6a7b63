package admit

import "time"

// ParkedCrawl is a crawl whose filter cannot be opened (ErrFilterUnusable):
// its messages wait at their source, redelivered every ParkDelay.
type ParkedCrawl struct {
	// Error is why the filter cannot be opened.
	Error string `json:"error"`
	// Since is when the crawl was first parked.
	Since time.Time `json:"since"`
	// Messages counts the deliveries of its messages handed back.
	Messages int64 `json:"messages"`
	logged   time.Time
}

// park hands the crawl's messages of a batch back to their source, counts
// them and logs the cause (at most once per ParkDelay per crawl).
func (c *Core) park(msgs Messages, crawl string, err error) {
	n := msgs.Park(crawl, c.o.ParkDelay)
	c.obs.Parked(crawl, n)
	now := c.clk.Now()
	c.mu.Lock()
	p := c.parked[crawl]
	if p == nil {
		p = &ParkedCrawl{Since: now}
		c.parked[crawl] = p
	}
	p.Error, p.Messages = err.Error(), p.Messages+int64(n)
	logNow := p.logged.IsZero() || now.Sub(p.logged) >= c.o.ParkDelay
	if logNow {
		p.logged = now
	}
	c.mu.Unlock()
	if logNow {
		c.o.Logger.Error("crawl parked: its filter cannot be opened; its messages wait in the stream and are retried",
			"crawl", crawl, "error", err, "messages", n, "retry_after", c.o.ParkDelay)
	}
}

// unpark forgets that crawl was parked, once its filter opened.
func (c *Core) unpark(crawl string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.parked[crawl]; ok {
		delete(c.parked, crawl)
		c.o.Logger.Info("crawl unparked: its filter opened", "crawl", crawl, "parked_since", p.Since)
	}
}

// Parked returns the crawls parked now, by id, or nil if there are none.
func (c *Core) Parked() map[string]ParkedCrawl {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out map[string]ParkedCrawl
	for id, p := range c.parked {
		if out == nil {
			out = map[string]ParkedCrawl{}
		}
		out[id] = *p
	}
	return out
}
