package frontier_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/dedup"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/normalize"
	"github.com/sievecrawl/sieve/stats"
)

// pipeline is a real NATS server with the pipeline's streams, for tests.
type pipeline struct {
	srv  *natstest.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	topo frontier.Topology
}

func newPipeline(tb testing.TB, topo frontier.Topology) *pipeline {
	tb.Helper()
	srv := natstest.Start(tb, natstest.Options{})
	p := &pipeline{srv: srv, nc: srv.Conn(), topo: topo.WithDefaults()}
	js, err := jetstream.New(p.nc)
	if err != nil {
		tb.Fatal(err)
	}
	p.js = js
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.topo.Ensure(ctx, js); err != nil {
		tb.Fatal(err)
	}
	return p
}

// publish publishes discovered pages, retrying while NATS is away.
func (p *pipeline) publish(tb testing.TB, pages ...frontier.Discovered) {
	tb.Helper()
	for _, d := range pages {
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := p.topo.PublishDiscovered(ctx, p.js, d)
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("publish discovered: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// publishRaw publishes bytes to the discovered subject as a broken crawler
// would.
func (p *pipeline) publishRaw(tb testing.TB, data []byte) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.js.Publish(ctx, p.topo.DiscoveredSubject("raw"), data); err != nil {
		tb.Fatalf("publish raw: %v", err)
	}
}

// waitDrained waits until every discovered message has been processed: the
// stream is empty (work-queue retention deletes a message once a worker
// acknowledges or terminates it) and the workers' consumer has nothing
// pending or unacknowledged. The consumer's pending count alone is not
// enough: the server updates it asynchronously, so right after a publish it
// can read 0 for a message no worker has seen.
func (p *pipeline) waitDrained(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var info *jetstream.ConsumerInfo
		var sinfo *jetstream.StreamInfo
		c, err := p.js.Consumer(ctx, p.topo.DiscoveredStream(), p.topo.Consumer())
		if err == nil {
			info, err = c.Info(ctx)
		}
		if err == nil {
			var s jetstream.Stream
			if s, err = p.js.Stream(ctx, p.topo.DiscoveredStream()); err == nil {
				sinfo, err = s.Info(ctx)
			}
		}
		cancel()
		if err == nil {
			if sinfo.State.Msgs == 0 && info.NumPending == 0 && info.NumAckPending == 0 {
				return
			}
			last = fmt.Sprintf("%d messages in the stream, pending %d, ack pending %d", sinfo.State.Msgs, info.NumPending, info.NumAckPending)
		} else {
			last = err.Error()
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("discovered stream not drained within %v: %s", timeout, last)
}

// frontierMsg is one message read off the frontier stream.
type frontierMsg struct {
	subject string
	entry   frontier.Entry
}

// take consumes (and acknowledges, deleting) up to n frontier messages
// currently on the stream; n ≤ 0 means all.
func (p *pipeline) take(tb testing.TB, n int) []frontierMsg {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := p.js.CreateOrUpdateConsumer(ctx, p.topo.FrontierStream(), jetstream.ConsumerConfig{
		Durable: "test-reader", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: p.topo.FrontierFilter(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	var out []frontierMsg
	for n <= 0 || len(out) < n {
		want := 500
		if n > 0 {
			want = min(want, n-len(out))
		}
		batch, err := c.Fetch(want, jetstream.FetchMaxWait(300*time.Millisecond))
		if err != nil {
			tb.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			e, err := frontier.DecodeEntry(m.Data())
			if err != nil {
				tb.Fatalf("frontier message %q: %v", m.Data(), err)
			}
			out = append(out, frontierMsg{subject: m.Subject(), entry: e})
			if err := m.DoubleAck(ctx); err != nil {
				tb.Fatal(err)
			}
		}
		if got == 0 {
			break
		}
	}
	return out
}

// runWorker runs w in the background; the returned function stops it
// gracefully (as SIGTERM would) and returns Run's error.
func runWorker(tb testing.TB, w *frontier.Worker) (stop func() error) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(60 * time.Second):
				err = fmt.Errorf("worker did not stop")
			}
			w.Close()
		})
		return err
	}
	tb.Cleanup(func() { _ = stop() })
	return stop
}

func newNormalizer(tb testing.TB) *normalize.Normalizer {
	tb.Helper()
	n, err := normalize.New(normalize.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func newMemoryFilter(tb testing.TB) *dedup.ScalableBloom {
	tb.Helper()
	f, err := dedup.NewScalableBloom(dedup.ScalableOptions{
		Growth: dedup.Growth{InitialCapacity: 100_000, TargetFPP: 1e-7},
		Policy: normalize.PolicyVersion,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}

func newWorker(tb testing.TB, p *pipeline, f frontier.Filter, rec frontier.Recorder, o frontier.WorkerOptions) *frontier.Worker {
	tb.Helper()
	if rec == nil {
		rec = stats.NewMemory()
	}
	o.Topology = p.topo
	if o.BackoffMax == 0 {
		o.BackoffMin, o.BackoffMax = 10*time.Millisecond, 200*time.Millisecond
	}
	if o.FetchWait == 0 {
		o.FetchWait = 50 * time.Millisecond
	}
	if o.StatsInterval == 0 {
		o.StatsInterval = 50 * time.Millisecond
	}
	w, err := frontier.NewWorker(p.nc, f, newNormalizer(tb), rec, o)
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

// site generates crawl-shaped pages over a universe of URLs: each page links
// to other pages in several spellings of the same canonical URL.
type site struct {
	host  string
	pages int
}

// canonical is the canonical URL of page i.
func (s site) canonical(i int) string { return fmt.Sprintf("https://%s/p/%d", s.host, i) }

// spelling returns one of several raw links to page i, seen from a page
// under /p/.
func (s site) spelling(i, variant int) string {
	switch variant % 6 {
	case 0:
		return fmt.Sprintf("/p/%d", i)
	case 1:
		return fmt.Sprintf("https://%s:443/p/%d#top", strings.ToUpper(s.host), i)
	case 2:
		return fmt.Sprintf("%d?utm_source=newsletter", i)
	case 3:
		return fmt.Sprintf("../p/./%d", i)
	case 4:
		return fmt.Sprintf("HTTPS://%s/p/%%3%d", s.host, i) // "%31" + "23" is "123": an escaped digit
	default:
		return s.canonical(i)
	}
}

// page returns the discovered message of page i with links to the given
// pages.
func (s site) page(crawl string, i int, links []int, variant int) frontier.Discovered {
	d := frontier.Discovered{Crawl: crawl, URL: s.canonical(i), Depth: 1}
	for j, l := range links {
		d.Links = append(d.Links, s.spelling(l, variant+j))
	}
	return d
}

// keepPublishing has p publish pages of s (two links each) every 5 ms until
// the returned stop is called, which waits for the last publish.
func keepPublishing(tb testing.TB, p *pipeline, s site) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			p.publish(tb, s.page("c", i%s.pages, []int{(i * 7) % s.pages, (i * 13) % s.pages}, i))
			time.Sleep(5 * time.Millisecond)
		}
	})
	return func() { close(done); wg.Wait() }
}
