package urlfrontier_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/urlfrontier"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// TestCompactedQueuesRestore: with compaction, the queues' log loses the
// work of all but the last periods, and a server on an empty directory
// (a new machine, a wiped disk) starts from the snapshot and the log's
// tail, whether it compacts or not: it lists every URL as the first server
// does, with its date, and hands out what the first would, leases and
// completions kept.
func TestCompactedQueuesRestore(t *testing.T) {
	e := newEnv(t)
	compacting := func(o *urlfrontier.Options) { o.CompactEvery = time.Minute; o.Dir = t.TempDir() }
	n := e.start("n1", compacting)
	ctx := ctxT(t)
	streamMsgs := func() uint64 {
		st, err := e.nats.JetStream().Stream(ctx, frontier.Topology{}.WithDefaults().StoreStream())
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	var trimmedFrom uint64
	for round := range 4 {
		var items []*pb.URLItem
		for i := range 50 {
			items = append(items, disc("", fmt.Sprintf("https://q%d.example/%d/%d", i%10, round, i), ""))
		}
		n.put(t, items...)
		// A turn of every queue: hand-outs, then half of them done for
		// good and the others to fetch again in an hour.
		got := n.get(t, anyCrawl(2, 0, 600))
		var done []*pb.URLItem
		for j, u := range got {
			refetch := uint64(0)
			if j%2 == 1 {
				refetch = uint64(e.clk.Now().Add(time.Hour).Unix())
			}
			done = append(done, known("", u, refetch))
		}
		n.put(t, done...)
		if round == 2 {
			trimmedFrom = streamMsgs()
		}
		c, err := urlfrontier.Compact(n.srv, ctx)
		if err != nil || c.Snapshot == "" {
			t.Fatalf("Compact after round %d = %+v, %v", round, c, err)
		}
		e.clk.Add(time.Minute)
	}
	if after := streamMsgs(); after >= trimmedFrom {
		t.Errorf("the queues' log holds %d entries after the trims, %d before: nothing trimmed", after, trimmedFrom)
	}

	dump := func(n *node) []string {
		var out []string
		for _, it := range listAll(t, n, "", "") {
			out = append(out, itemString(it))
		}
		slices.Sort(out)
		return out
	}
	want := dump(n)
	if len(want) != 200 {
		t.Fatalf("the first server lists %d URLs, want 200", len(want))
	}
	// A server that does not compact itself restores all the same.
	n2 := e.start("n2", func(o *urlfrontier.Options) { o.Dir = t.TempDir() })
	if got := dump(n2); !slices.Equal(got, want) {
		t.Errorf("the server restored from the snapshot lists %d URLs, want the first's %d", len(got), len(want))
	}
	n.stop()
	// The leases of the last round hold on the restored server; the next
	// turns hand out the rest, each once.
	e.clk.Add(time.Minute)
	var handed []string
	for range 30 {
		handed = append(handed, n2.get(t, anyCrawl(0, 0, 600))...)
		e.clk.Add(2 * time.Second)
	}
	slices.Sort(handed)
	if len(handed) != len(slices.Compact(slices.Clone(handed))) {
		t.Errorf("the restored server handed a URL out twice: %d hand-outs", len(handed))
	}
	if want := 200 - 4*20; len(handed) != want {
		t.Errorf("the restored server handed out %d URLs, want the %d never handed out", len(handed), want)
	}
}
