package urlfrontier_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/sievecrawl/sieve/admit"
	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/stats"
	"github.com/sievecrawl/sieve/urlfrontier"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// The URLFrontier benchmark is a test that prints a table; it runs only
// when asked (bench.sh urlfrontier):
//
//	go test ./urlfrontier -run TestURLFrontierThroughput -sieve.urlfrontierbench -v
//
// Ingest: the same stream of batches of 100 discovered URLs (10 % repeats of
// earlier ones) goes in through PutDiscovered (a Go client, 4 streams) and
// through the NATS-native discovered path (one discovered message per
// batch, published by a client and admitted by a dedup worker to the
// frontier stream), each timed from the first send until every URL is
// admitted, over an in-memory Bloom filter and an in-process NATS.
// Hand-out: 1,000 queues of 100 URLs, no delay, handed out by GetURLs (100
// queues per call) until every URL is out, against the same number of
// messages pulled and acknowledged from a JetStream stream by one consumer,
// the floor of handing out work through JetStream. Medians of 3 rounds,
// each measure alternating with its baseline.
var (
	ufBench        = flag.Bool("sieve.urlfrontierbench", false, "run the URLFrontier throughput table (TestURLFrontierThroughput)")
	ufBenchBatches = flag.Int("sieve.urlfrontierbench.batches", 1000, "batches of 100 discovered URLs in the ingest stream")
)

// ingestStream returns batches of 100 absolute URLs over 500 hosts, each
// URL a repeat of an earlier one with probability 0.1.
func ingestStream(batches int) [][]string {
	r := rand.New(rand.NewPCG(19, 1))
	var all []string
	out := make([][]string, batches)
	for b := range out {
		for range 100 {
			var u string
			if len(all) > 0 && r.IntN(10) == 0 {
				u = all[r.IntN(len(all))]
			} else {
				u = fmt.Sprintf("https://www.site%d.example/articles/%d.html", len(all)%500, len(all))
				all = append(all, u)
			}
			out[b] = append(out[b], u)
		}
	}
	return out
}

// oneFilter gives every crawl the same in-memory filter.
type oneFilter struct{ f admit.Filter }

func (o oneFilter) Acquire(context.Context, string) (admit.Filter, func(), error) {
	return o.f, func() {}, nil
}

func memoryFilter(tb testing.TB) *dedup.ScalableBloom {
	f, err := dedup.NewScalableBloom(dedup.ScalableOptions{
		Growth: dedup.Growth{InitialCapacity: 200_000, TargetFPP: 1e-7}, Policy: normalize.PolicyVersion})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}

// putDiscoveredRate ingests the stream through PutDiscovered on 4 streams.
func putDiscoveredRate(tb testing.TB, stream [][]string) float64 {
	e := newEnv(tb)
	e.filters = oneFilter{memoryFilter(tb)}
	n := e.start("bench", func(o *urlfrontier.Options) { o.Now = time.Now })
	start := time.Now()
	var g errgroup.Group
	for s := range 4 {
		g.Go(func() error {
			st, err := n.client.PutDiscovered(context.Background())
			if err != nil {
				return err
			}
			var mine int
			go func() {
				for b := s; b < len(stream); b += 4 {
					items := make([]*pb.URLInfo, len(stream[b]))
					for i, u := range stream[b] {
						items[i] = &pb.URLInfo{Url: u, CrawlID: "bench"}
					}
					st.Send(&pb.DiscoveredBatch{ID: fmt.Sprint(b), Items: items})
				}
				st.CloseSend()
			}()
			for b := s; b < len(stream); b += 4 {
				mine++
			}
			for range mine {
				a, err := st.Recv()
				if err != nil {
					return err
				}
				for _, v := range a.GetStatuses() {
					if v == pb.AckMessage_FAIL {
						return fmt.Errorf("batch %s: FAIL", a.GetID())
					}
				}
			}
			_, err = st.Recv()
			if err != io.EOF {
				return fmt.Errorf("end of stream: %v", err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		tb.Fatal(err)
	}
	return float64(len(stream)*100) / time.Since(start).Seconds()
}

// nativeRate ingests the stream through the discovered stream and a dedup
// worker, from the first publish until the discovered stream is drained.
func nativeRate(tb testing.TB, stream [][]string) float64 {
	nsrv := natstest.Start(tb, natstest.Options{})
	nc := nsrv.Conn()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		tb.Fatal(err)
	}
	topo := frontier.Topology{MaxAckPending: 100_000}.WithDefaults()
	ctx := context.Background()
	if err := topo.Ensure(ctx, js); err != nil {
		tb.Fatal(err)
	}
	canon, err := normalize.New(normalize.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	w, err := frontier.NewWorker(nc, memoryFilter(tb), canon, stats.NewMemory(), frontier.WorkerOptions{Topology: topo})
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Close()
	start := time.Now()
	go func() { _ = w.Run(ctx) }()
	for b, links := range stream {
		d := frontier.Discovered{Crawl: "bench", URL: fmt.Sprintf("https://www.site%d.example/", b%500), Links: links}
		data, err := d.Encode()
		if err != nil {
			tb.Fatal(err)
		}
		publish(tb, js, topo.DiscoveredSubject("bench"), data)
	}
	<-js.PublishAsyncComplete()
	deadline := time.Now().Add(5 * time.Minute)
	for !natstest.Drained(js, topo.DiscoveredStream(), topo.Consumer()) {
		if time.Now().After(deadline) {
			tb.Fatal("the worker did not drain the discovered stream in 5 minutes")
		}
		time.Sleep(2 * time.Millisecond)
	}
	return float64(len(stream)*100) / time.Since(start).Seconds()
}

// getURLsRate fills 1,000 queues of 100 URLs and hands them all out.
func getURLsRate(tb testing.TB) float64 {
	e := newEnv(tb)
	e.filters = oneFilter{memoryFilter(tb)}
	n := e.start("bench", func(o *urlfrontier.Options) { o.Now = time.Now })
	ctx := context.Background()
	if _, err := n.client.SetDelay(ctx, &pb.QueueDelayParams{DelayRequestable: 0}); err != nil {
		tb.Fatal(err)
	}
	st, err := n.client.PutDiscovered(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	for q := range 1000 {
		items := make([]*pb.URLInfo, 100)
		for i := range items {
			items[i] = &pb.URLInfo{Url: fmt.Sprintf("https://q%d.example/%d", q, i)}
		}
		st.Send(&pb.DiscoveredBatch{ID: fmt.Sprint(q), Items: items})
		if _, err := st.Recv(); err != nil {
			tb.Fatal(err)
		}
	}
	st.CloseSend()
	const total = 100_000
	got := 0
	start := time.Now()
	for got < total {
		g, err := n.client.GetURLs(ctx, &pb.GetParams{MaxUrlsPerQueue: 100, MaxQueues: 100, DelayRequestable: 600, Item: &pb.GetParams_AnyCrawlID{AnyCrawlID: &pb.AnyCrawlID{}}})
		if err != nil {
			tb.Fatal(err)
		}
		for {
			_, err := g.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				tb.Fatal(err)
			}
			got++
		}
		if time.Since(start) > 5*time.Minute {
			tb.Fatalf("%d of %d URLs handed out in 5 minutes", got, total)
		}
	}
	if got != total {
		tb.Fatalf("handed out %d URLs, want %d", got, total)
	}
	return total / time.Since(start).Seconds()
}

// pullRate publishes 100,000 messages on 1,000 subjects and pulls and
// acknowledges them all with one consumer.
func pullRate(tb testing.TB) float64 {
	nsrv := natstest.Start(tb, natstest.Options{})
	js, err := jetstream.New(nsrv.Conn(), jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PULL", Subjects: []string{"pull.>"}, Retention: jetstream.WorkQueuePolicy})
	if err != nil {
		tb.Fatal(err)
	}
	const total = 100_000
	for i := range total {
		publish(tb, js, fmt.Sprintf("pull.%d", i%1000), []byte(fmt.Sprintf(`{"url":"https://q%d.example/%d"}`, i%1000, i)))
	}
	<-js.PublishAsyncComplete()
	c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "pull", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 100_000})
	if err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	var mu sync.Mutex
	got := 0
	done := make(chan struct{})
	cc, err := c.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		mu.Lock()
		got++
		if got == total {
			close(done)
		}
		mu.Unlock()
	}, jetstream.PullMaxMessages(1000))
	if err != nil {
		tb.Fatal(err)
	}
	defer cc.Stop()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		tb.Fatal("pulling timed out")
	}
	return total / time.Since(start).Seconds()
}

// publish publishes asynchronously, waiting while too many publishes
// await their acknowledgement.
func publish(tb testing.TB, js jetstream.JetStream, subject string, data []byte) {
	for {
		_, err := js.PublishAsync(subject, data)
		if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			<-js.PublishAsyncComplete()
			continue
		}
		if err != nil {
			tb.Fatal(err)
		}
		return
	}
}

// alternate runs a and b 3 times each, alternating, so that both see the
// machine alike, and returns their medians and rounds.
func alternate(a, b func() float64) (ma float64, ra []float64, mb float64, rb []float64) {
	for range 3 {
		ra = append(ra, a())
		rb = append(rb, b())
	}
	med := func(r []float64) float64 {
		s := slices.Clone(r)
		slices.Sort(s)
		return s[1]
	}
	return med(ra), ra, med(rb), rb
}

func TestURLFrontierThroughput(t *testing.T) {
	if !*ufBench {
		t.Skip("the URLFrontier throughput table runs with -sieve.urlfrontierbench")
	}
	stream := ingestStream(*ufBenchBatches)
	put, putAll, native, nativeAll := alternate(
		func() float64 { return putDiscoveredRate(t, stream) },
		func() float64 { return nativeRate(t, stream) })
	get, getAll, pull, pullAll := alternate(
		func() float64 { return getURLsRate(t) },
		func() float64 { return pullRate(t) })
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "measure\tmedian URLs/s\trounds\tratio\tgoal\n")
	fmt.Fprintf(tw, "PutDiscovered, 4 streams, batches of 100, 10%% repeats\t%.0f\t%.0f\t%.2f × native\t≥ 0.8 × native\n", put, putAll, put/native)
	fmt.Fprintf(tw, "NATS-native discovered path (publish + dedup worker)\t%.0f\t%.0f\t(baseline)\t\n", native, nativeAll)
	fmt.Fprintf(tw, "GetURLs hand-out, 1,000 queues × 100 URLs, 100 queues per call\t%.0f\t%.0f\t%.2f × pull\t≥ 50000 URLs/s\n", get, getAll, get/pull)
	fmt.Fprintf(tw, "JetStream pull + ack, 1,000 subjects, one consumer\t%.0f\t%.0f\t(baseline)\t\n", pull, pullAll)
	tw.Flush()
}
