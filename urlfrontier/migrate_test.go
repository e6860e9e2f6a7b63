package urlfrontier_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// TestMoveEarlierBucket: a deployment upgraded from a version that kept
// the queues in the bucket <PREFIX>_UF_QUEUES (values as it wrote them)
// finds them in the store after its first start: the URLs with their
// dates, metadata and leases, the queues' settings and counts, a crawl's
// default delay; the bucket is gone, and a second server started on it
// finds the same.
func TestMoveEarlierBucket(t *testing.T) {
	e := newEnv(t)
	js := e.nats.JetStream()
	topo := frontier.Topology{}
	kv, err := js.CreateKeyValue(ctxT(t), jetstream.KeyValueConfig{Bucket: topo.URLFrontierQueuesBucket(), History: 1})
	if err != nil {
		t.Fatal(err)
	}
	now := e.clk.Now()
	put := func(key, value string) {
		t.Helper()
		if _, err := kv.Put(ctxT(t), key, []byte(value)); err != nil {
			t.Fatal(err)
		}
	}
	urlKey := func(crawl, queue, u string) string { return topo.URLFrontierURLKey(crawl, queue, u) }
	leasedKey := urlKey("old", "a.example", "https://a.example/leased")
	lease := now.Add(time.Minute).UnixMilli()
	for i := range 30 {
		u := fmt.Sprintf("https://a.example/%d", i)
		put(urlKey("old", "a.example", u), fmt.Sprintf(`{"v":1,"crawl":"old","url":%q,"key":"a.example","meta":{"depth":["%d"]},"created":%d,"due":0}`, u, i, now.Unix()))
	}
	put(leasedKey, fmt.Sprintf(`{"v":1,"crawl":"old","url":"https://a.example/leased","key":"a.example","created":%d,"due":0}`, now.Unix()))
	put(urlKey("old", "b.example", "https://b.example/later"), fmt.Sprintf(`{"v":1,"crawl":"old","url":"https://b.example/later","key":"b.example","created":%d,"due":%d,"known":true}`, now.Unix(), now.Add(time.Hour).UnixMilli()))
	leaseHash := leasedKey[len(leasedKey)-32:]
	put(topo.URLFrontierQueueKey("old", "a.example"), fmt.Sprintf(`{"v":1,"crawl":"old","key":"a.example","delay":5000,"has_delay":true,"fetched":7,"completed":4,"leases":{%q:%d}}`, leaseHash, lease))
	put(topo.URLFrontierQueueKey("old", "c.example"), fmt.Sprintf(`{"v":1,"crawl":"old","key":"c.example","blocked":%d}`, now.Add(time.Hour).UnixMilli()))
	put(topo.URLFrontierDefaultKey("old"), `{"v":1,"crawl":"old","key":"","delay":3000,"has_delay":true}`)
	put("old.garbage.value", `not json`)

	n := e.start("n1")
	if _, err := js.KeyValue(ctxT(t), topo.URLFrontierQueuesBucket()); err == nil {
		t.Error("the earlier bucket is still there after the move")
	}
	ctx := ctxT(t)
	st, err := n.client.GetStats(ctx, &pb.QueueWithinCrawlParams{CrawlID: "old", Key: "a.example"})
	if err != nil {
		t.Fatal(err)
	}
	// The bucket kept no completed URL (only a count): the store holds,
	// and counts, none.
	if st.GetSize() != 30 || st.GetInProcess() != 1 || st.GetCounts()["completed"] != 0 {
		t.Errorf("queue a.example after the move: size %d in process %d completed %d, want 30, 1, 0",
			st.GetSize(), st.GetInProcess(), st.GetCounts()["completed"])
	}
	got := n.get(t, &pb.GetParams{Item: &pb.GetParams_CrawlID{CrawlID: "old"}, DelayRequestable: 60})
	if len(got) != 30 || slices.Contains(got, "https://a.example/leased") || slices.Contains(got, "https://b.example/later") {
		t.Errorf("GetURLs after the move = %d URLs %v: want the 30 ready ones of a.example", len(got), got)
	}
	// a.example keeps its own delay (5 s): not served again 4 s later.
	n.put(t, known("old", "https://a.example/0", uint64(now.Unix())))
	e.clk.Add(4 * time.Second)
	if again := n.get(t, &pb.GetParams{Item: &pb.GetParams_CrawlID{CrawlID: "old"}, DelayRequestable: 60}); len(again) != 0 {
		t.Errorf("a.example served again within its delay: %v", again)
	}
	item, err := n.client.GetURLStatus(ctx, &pb.URLStatusRequest{CrawlID: "old", Url: "https://b.example/later"})
	if err != nil {
		t.Fatal(err)
	}
	if d := item.GetKnown().GetRefetchableFromDate(); d != uint64(now.Add(time.Hour).Unix()) {
		t.Errorf("b.example/later refetchable from %d, want %d", d, now.Add(time.Hour).Unix())
	}
	qs, err := n.client.ListQueues(ctx, &pb.Pagination{CrawlID: "old", IncludeInactive: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.example", "b.example", "c.example"}; !slices.Equal(qs.GetValues(), want) {
		t.Errorf("queues after the move = %v, want %v", qs.GetValues(), want)
	}
	m := e.start("n2")
	if c, err := m.client.CountURLs(ctx, &pb.CountUrlParams{CrawlID: "old"}); err != nil || c.GetValue() != 32 {
		t.Errorf("a second server counts %d URLs (%v), want 32", c.GetValue(), err)
	}
}
