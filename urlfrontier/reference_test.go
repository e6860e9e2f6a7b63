package urlfrontier_test

import (
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// The tests of this file pin where Sieve answers as the reference service
// (crawler-commons/url-frontier 2.6) does, so that its clients and its own
// test suite (module tests/) work unchanged; docs/urlfrontier.md lists
// each behaviour.

// TestUnknownCrawlIsEmpty: a call that reads or deletes a crawl that does
// not exist (never used, or just deleted) answers as for an empty crawl,
// as the reference does; upstream's URLFrontierServiceTest deletes crawl
// BESPOKE before it exists, and reads its stats once it is deleted.
func TestUnknownCrawlIsEmpty(t *testing.T) {
	n := newEnv(t).start("n1")
	ctx := ctxT(t)
	n.put(t, disc("gone", "https://gone.example/1", ""), disc("gone", "https://gone.example/2", ""))
	if d, err := n.client.DeleteCrawl(ctx, &pb.DeleteCrawlMessage{Value: "gone"}); err != nil || d.GetValue() != 2 {
		t.Fatalf("DeleteCrawl(gone) = %v, %v, want 2", d, err)
	}
	for _, crawl := range []string{"never", "gone"} {
		cases := []struct {
			call string
			do   func() (uint64, error)
		}{
			{"DeleteCrawl", func() (uint64, error) {
				r, err := n.client.DeleteCrawl(ctx, &pb.DeleteCrawlMessage{Value: crawl})
				return r.GetValue(), err
			}},
			{"GetStats size", func() (uint64, error) {
				r, err := n.client.GetStats(ctx, &pb.QueueWithinCrawlParams{CrawlID: crawl})
				if err == nil && r.GetCrawlID() != crawl {
					t.Errorf("GetStats(%s).crawlID = %q", crawl, r.GetCrawlID())
				}
				return r.GetSize() + r.GetNumberOfQueues() + uint64(r.GetInProcess()) + r.GetCounts()["completed"], err
			}},
			{"GetStats of a queue", func() (uint64, error) {
				r, err := n.client.GetStats(ctx, &pb.QueueWithinCrawlParams{CrawlID: crawl, Key: "gone.example"})
				return r.GetSize() + r.GetNumberOfQueues(), err
			}},
			{"ListQueues", func() (uint64, error) {
				r, err := n.client.ListQueues(ctx, &pb.Pagination{CrawlID: crawl, IncludeInactive: true})
				return r.GetTotal() + uint64(len(r.GetValues())), err
			}},
			{"ListURLs", func() (uint64, error) {
				st, err := n.client.ListURLs(ctx, &pb.ListUrlParams{CrawlID: crawl})
				if err != nil {
					return 0, err
				}
				var got uint64
				for {
					_, err := st.Recv()
					if err == io.EOF {
						return got, nil
					}
					if err != nil {
						return got, err
					}
					got++
				}
			}},
			{"CountURLs", func() (uint64, error) {
				r, err := n.client.CountURLs(ctx, &pb.CountUrlParams{CrawlID: crawl})
				return r.GetValue(), err
			}},
			{"PurgeURLs", func() (uint64, error) {
				r, err := n.client.PurgeURLs(ctx, &pb.PurgeUrlParams{CrawlID: crawl})
				return r.GetValue(), err
			}},
			{"DeleteQueue", func() (uint64, error) {
				r, err := n.client.DeleteQueue(ctx, &pb.QueueWithinCrawlParams{CrawlID: crawl, Key: "gone.example"})
				return r.GetValue(), err
			}},
		}
		for _, c := range cases {
			if got, err := c.do(); err != nil || got != 0 {
				t.Errorf("%s of crawl %s = %d, %v, want 0 and no error", c.call, crawl, got, err)
			}
		}
		// A URL of a crawl that does not exist is unknown: NotFound, as
		// the reference answers a URL it does not hold.
		_, err := n.client.GetURLStatus(ctx, &pb.URLStatusRequest{CrawlID: crawl, Url: "https://gone.example/1"})
		if status.Code(err) != codes.NotFound {
			t.Errorf("GetURLStatus in crawl %s: %v, want NotFound", crawl, err)
		}
	}
	l, err := n.client.ListCrawls(ctx, &pb.Local{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range l.GetValues() {
		if id == "never" || id == "gone" {
			t.Errorf("ListCrawls = %v: the calls above created crawl %s", l.GetValues(), id)
		}
	}
	// Stricter on purpose: an id that is not one is still refused.
	if _, err := n.client.GetStats(ctx, &pb.QueueWithinCrawlParams{CrawlID: "no such id!"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("GetStats(invalid id): %v, want InvalidArgument", err)
	}
}
