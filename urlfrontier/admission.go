package urlfrontier

import (
	"context"
	"errors"
	"time"

	"github.com/sievecrawl/sieve/admit"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/normalize"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// Reasons an item is SKIPPED, counted in sieve_urlfrontier_rejected_total.
const (
	reasonCrawl    = "crawl_id"     // not 1-64 of [A-Za-z0-9_-]
	reasonKey      = "key_too_long" // a queue key over 255 bytes
	reasonMeta     = "metadata"     // metadata beyond frontier's bounds
	reasonDate     = "bad_date"     // a refetchable_from_date past year 9999
	reasonNoInfo   = "no_info"      // an item without URLInfo
	reasonRepeated = "repeated"     // the same URL twice in one batch
)

// maxDate is the latest refetchable_from_date taken: 9999-12-31T23:59:59Z.
// Later ones are malformed (most likely milliseconds).
const maxDate = 253402300799

// candidate is one item of a put, checked and canonicalized.
type candidate struct {
	crawl, url, key string
	meta            map[string][]string
	reason          string // non-empty: SKIPPED for this reason
}

// check validates and canonicalizes one URLInfo.
func (s *Server) check(info *pb.URLInfo) candidate {
	if info == nil {
		return candidate{reason: reasonNoInfo}
	}
	c := candidate{crawl: crawlOf(info.GetCrawlID()), key: info.GetKey()}
	if !frontier.ValidCrawl(c.crawl) {
		c.reason = reasonCrawl
		return c
	}
	u, err := s.o.Canonicalize(info.GetUrl())
	if err != nil {
		c.reason = "invalid_url"
		var ne *normalize.Error
		if errors.As(err, &ne) {
			c.reason = string(ne.Reason)
		}
		return c
	}
	c.url = u
	if c.key == "" {
		c.key = frontier.HostKey(u)
	}
	if len(c.key) > frontier.MaxKeyBytes {
		c.reason = reasonKey
		return c
	}
	if m := info.GetMetadata(); len(m) > 0 {
		c.meta = make(map[string][]string, len(m))
		keys, values, size := 0, 0, 0
		for k, v := range m {
			keys++
			size += len(k)
			for _, s := range v.GetValues() {
				values++
				size += len(s)
			}
			if k == "" {
				c.reason = reasonMeta
			}
			c.meta[k] = append([]string(nil), v.GetValues()...)
		}
		if keys > frontier.MaxMetaKeys || values > frontier.MaxMetaValues || size > frontier.MaxMetaBytes {
			c.reason = reasonMeta
		}
	}
	return c
}

// crawlOf maps the API's crawl id onto Sieve's: "" is DEFAULT.
func crawlOf(id string) string {
	if id == "" {
		return DefaultCrawl
	}
	return id
}

// DefaultCrawl is the crawl of an empty crawlID, as in the API.
const DefaultCrawl = "DEFAULT"

// discover admits the discovered URLs of one batch through the crawl's
// filter, as the dedup workers do, and returns one status per info.
func (s *Server) discover(ctx context.Context, infos []*pb.URLInfo) []pb.AckMessage_Status {
	st := make([]pb.AckMessage_Status, len(infos))
	cands := make([]candidate, len(infos))
	urls := make([]admit.URL, 0, len(infos))
	at := make([]int, 0, len(infos))
	seen := make(map[[2]string]bool, len(infos))
	for i, info := range infos {
		c := s.check(info)
		cands[i] = c
		if c.reason == "" && seen[[2]string{c.crawl, c.url}] {
			c.reason = reasonRepeated
		}
		if c.reason != "" {
			st[i] = pb.AckMessage_SKIPPED
			s.m.rejected.WithLabelValues(c.reason).Inc()
			continue
		}
		seen[[2]string{c.crawl, c.url}] = true
		if err := s.ensureCrawl(ctx, c.crawl); err != nil {
			st[i] = pb.AckMessage_FAIL
			s.o.Logger.Warn("urlfrontier: record crawl", "crawl", c.crawl, "error", err)
			continue
		}
		u := admit.URL{Crawl: c.crawl, URL: s.pageKey(c.crawl, c.url), Key: c.key, Meta: c.meta}
		if u.URL != c.url {
			u.Fetch = c.url // stored as put: the spelling the client fetches
		}
		urls = append(urls, u)
		at = append(at, i)
	}
	if len(urls) == 0 {
		return st
	}
	actx, cancel := context.WithTimeout(ctx, s.o.AdmitTimeout)
	defer cancel()
	verdicts, _ := s.core.Admit(actx, urls, noMessages{})
	for j, v := range verdicts {
		i := at[j]
		switch v {
		case admit.Admitted:
			st[i] = pb.AckMessage_OK
		case admit.Republished, admit.Held, admit.Cached:
			st[i] = pb.AckMessage_SKIPPED
			s.m.rejected.WithLabelValues("known").Inc()
		default:
			st[i] = pb.AckMessage_FAIL
		}
	}
	return st
}

// pageKey is what crawl's filter holds for the canonical URL u: its page's
// key under the crawl's learned rules (dust.Set.Key), u itself without
// rules.
func (s *Server) pageKey(crawl, u string) string {
	if s.o.Rules == nil {
		return u
	}
	return s.o.Rules.Set(crawl).Key(u)
}

// stored is the spelling of u the store keeps: the one put, not its
// page's key.
func stored(u admit.URL) string {
	if u.Fetch != "" {
		return u.Fetch
	}
	return u.URL
}

// noMessages: a put has no messages to keep alive or hand back; a parked
// crawl's URLs stay Undecided and are answered FAIL.
type noMessages struct{}

func (noMessages) Touch()                         {}
func (noMessages) Park(string, time.Duration) int { return 0 }

// publisher is the admit.Publisher of the server: it stores admitted URLs
// in their queues, where a URL that has a record already (queued or
// completed) is the duplicate the protocol expects of a frontier. Each
// partition's URLs are one read-modify-write (urlstore.Update): the
// first writer of a URL wins in every server. A URL admitted under its
// page's key is stored as it was put (admit.URL.Fetch), and its record
// is what a duplicate is checked against.
type publisher struct{ s *Server }

var _ admit.Publisher = publisher{}

func (p publisher) Publish(ctx context.Context, urls []admit.URL) ([]admit.Ack, error) {
	now := p.s.o.Now().Unix()
	at := make([]int, len(urls))
	for i := range at {
		at[i] = i
	}
	parts, groups, sizes := byPartition(at, func(i int) int { return partOf(urls[i].Crawl, urls[i].Key) },
		func(i int) int { return 2*len(stored(urls[i])) + len(urls[i].Key) + metaSize(urls[i].Meta) + 64 })
	acks := make([]admit.Ack, len(urls))
	_ = parallel(len(parts), func(g int) error {
		dup := make([]bool, len(groups[g]))
		err := p.s.q.update(ctx, parts[g], sizes[g], func(tx *updateTx) error {
			for j, i := range groups[g] {
				u := urls[i]
				spelling := stored(u)
				e, err := tx.entry(u.Crawl, u.Key, spelling)
				if err != nil {
					return err
				}
				if dup[j] = e != nil; dup[j] {
					continue
				}
				q, err := tx.queue(u.Crawl, u.Key)
				if err != nil {
					return err
				}
				tx.putEntry(nil, &Entry{Crawl: u.Crawl, URL: spelling, Key: u.Key, Meta: u.Meta, Created: now})
				q.Queued++
				tx.set(q)
			}
			return nil
		})
		for j, i := range groups[g] {
			// dup is read only after the update ran: on an error (a
			// context that ended first) the writer may still fill it.
			acks[i] = admit.Ack{Duplicate: err == nil && dup[j], Err: err}
		}
		return nil
	})
	return acks, nil
}
