package frontier_test

import (
	"context"
	"flag"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/redistest"
)

var latencyBench = flag.Bool("sieve.latencybench", false, "run the per-page latency table (TestPageLatency, ./bench.sh crawl)")

// TestPageLatency is issue 38's deployed path, measured: the time from a
// crawler handing over a fetched page's links to those links being on the
// frontier for a crawler to pull, one page at a time (the crawl's pace
// when the frontier is shallow: its start, its tail, a deep small site).
// Rows, each 300 pages of 10 new links:
//
//   - deployed: the crawler publishes to the discovered stream over TCP, a
//     dedup worker pulls it, tests the links in redis-server (a Bloom
//     filter), publishes them to the frontier, marks them, acknowledges;
//     the crawler's pull then finds them;
//   - deployed, filter in memory: the same without Redis, so the difference
//     is Redis's share;
//   - embedded (AdmitPage): the worker admits the page in process, as the
//     embedded mode does; the baseline.
//
// It prints the median and 90th percentile of each, and the ratio of the
// medians to the embedded row's.
func TestPageLatency(t *testing.T) {
	if !*latencyBench {
		t.Skip("a benchmark: ./bench.sh crawl")
	}
	rsrv := redistest.Start(t, redistest.Options{})
	type row struct {
		name   string
		redis  bool
		inProc bool
	}
	rows := []row{{"embedded (AdmitPage, filter in memory)", false, true}, {"deployed, filter in memory", false, false}, {"deployed, filter in redis-server", true, false}}
	var base time.Duration
	for i, r := range rows {
		p := newPipeline(t, frontier.Topology{})
		var f frontier.Filter = newMemoryFilter(t)
		if r.redis {
			f = openBenchFilterOf(t, rsrv, "latency", 1_000_000)
		}
		w := newWorker(t, p, f, nil, frontier.WorkerOptions{FetchWait: time.Second})
		stop := runWorker(t, w)
		lat := pageLatencies(t, p, w, r.inProc, 300)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		med, p90 := lat[len(lat)/2], lat[len(lat)*9/10]
		if i == 0 {
			base = med
		}
		t.Logf("%-40s median %6.2f ms, p90 %6.2f ms: %.2f × the embedded row", r.name, ms(med), ms(p90), float64(med)/float64(base))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pageLatencies hands n pages of 10 new links each to the pipeline, one at
// a time, and returns, sorted, the time until each page's links could all
// be pulled from the frontier.
func pageLatencies(t *testing.T, p *pipeline, w *frontier.Worker, inProc bool, n int) []time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cons, err := p.js.CreateOrUpdateConsumer(ctx, p.topo.FrontierStream(), jetstream.ConsumerConfig{
		Durable: "latency", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: p.topo.FrontierFilter(),
	})
	if err != nil {
		t.Fatal(err)
	}
	s := site{host: "latency.example", pages: 10 * n}
	var out []time.Duration
	for i := range n {
		var to []int
		for k := range 10 {
			to = append(to, 10*i+k)
		}
		d := s.page("c1", i, to, 5) // canonical spellings
		start := time.Now()
		if inProc {
			err = w.AdmitPage(ctx, d)
		} else {
			err = p.topo.PublishDiscovered(ctx, p.js, d)
		}
		if err != nil {
			t.Fatal(err)
		}
		for got := 0; got < len(to); {
			batch, err := cons.Fetch(len(to)-got, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for m := range batch.Messages() {
				got++
				_ = m.Ack()
			}
			if batch.Error() != nil || time.Since(start) > 10*time.Second {
				t.Fatalf("page %d: %d of %d links on the frontier after %v (%v)", i, got, len(to), time.Since(start), batch.Error())
			}
		}
		out = append(out, time.Since(start))
	}
	slices.Sort(out)
	return out
}
