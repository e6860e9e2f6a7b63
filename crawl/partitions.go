package crawl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/internal/jspull"
	"github.com/sievecrawl/sieve/internal/lograte"
)

// partitionRun is the pulling of one owned partition.
type partitionRun struct {
	ctx      context.Context // ends when the partition is lost or the run ends: waiting jobs hand their message back
	cancel   context.CancelFunc
	stopPull context.CancelFunc // stops the puller only (giving the partition back: jobs in hand finish)
	done     chan struct{}      // closed when the puller returned
	jobs     sync.WaitGroup
	draining chan struct{} // non-nil while giving back: closed once the jobs in hand are done
}

// leaseLoop keeps our membership and partition leases, starting and stopping
// a puller per owned partition.
func (c *Crawler) leaseLoop(ctx context.Context) error {
	o := c.opts
	tick := time.NewTicker(o.LeaseTTL / 3)
	defer tick.Stop()
	// A NATS node away makes the leases fail and work by turns: each
	// change is logged at once, then once a minute, and the state they
	// stay in is said a minute after its line was left out.
	lines := lograte.New(time.Minute)
	var failing error
	for {
		err := c.balance(ctx, lines)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil && failing == nil:
			lines.Log(o.Logger, slog.LevelWarn, "failing", "partition leases failing; retrying", "err", err)
		case err != nil:
			lines.LogOwed(o.Logger, slog.LevelWarn, "failing", "partition leases failing; retrying", "err", err)
		case failing != nil:
			lines.Log(o.Logger, slog.LevelInfo, "working", "partition leases working again")
		default:
			lines.LogOwed(o.Logger, slog.LevelInfo, "working", "partition leases working again")
		}
		failing = err
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// balance renews our leases, gives back partitions above our share (once
// their messages in hand are done, so a host never has two crawlers) and
// takes free ones up to it.
func (c *Crawler) balance(ctx context.Context, lines *lograte.Limiter) error {
	members, err := c.leases.heartbeat(ctx)
	if err != nil {
		return err
	}
	lost, err := c.leases.renew(ctx)
	for _, p := range lost {
		lines.Log(c.opts.Logger, slog.LevelWarn, "lost", "lost partition lease", "partition", p)
		c.mu.Lock()
		r := c.owned[p]
		delete(c.owned, p)
		c.mu.Unlock()
		if r != nil {
			r.cancel()
			go func() { <-r.done; c.handBack(r) }()
		}
	}
	if err != nil {
		return err
	}
	want := share(c.opts.Topology.Partitions, members)

	c.mu.Lock()
	var active, drained []int
	for p, r := range c.owned {
		if r.draining == nil {
			active = append(active, p)
			continue
		}
		select {
		case <-r.draining:
			drained = append(drained, p)
			delete(c.owned, p)
		default:
		}
	}
	slices.Sort(active)
	for len(active) > want {
		p := active[len(active)-1]
		active = active[:len(active)-1]
		r := c.owned[p]
		r.draining = make(chan struct{})
		r.stopPull()
		go func() {
			<-r.done
			c.handBack(r)
			r.jobs.Wait()
			close(r.draining)
		}()
	}
	c.mu.Unlock()
	for _, p := range drained {
		if err := c.leases.release(ctx, p); err != nil {
			return err
		}
		c.opts.Logger.Debug("gave partition back", "partition", p, "crawlers", members)
	}

	got, err := c.leases.claim(ctx, want)
	for _, p := range got {
		if serr := c.startPartition(ctx, p); serr != nil {
			_ = c.leases.release(ctx, p)
			return serr
		}
	}
	return err
}

func (c *Crawler) startPartition(ctx context.Context, p int) error {
	o := c.opts
	if o.Exclusive {
		err := c.js.DeleteConsumer(ctx, o.Topology.FrontierStream(), o.Topology.PartitionConsumer(p))
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("crawl: reset consumer of partition %d: %w", p, err)
		}
	}
	cons, err := frontier.Provision(ctx, func(ctx context.Context) (jetstream.Consumer, error) {
		return c.js.CreateOrUpdateConsumer(ctx, o.Topology.FrontierStream(), jetstream.ConsumerConfig{
			Durable:       o.Topology.PartitionConsumer(p),
			Description:   fmt.Sprintf("Sieve crawlers: frontier partition %d", p),
			FilterSubject: o.Topology.PartitionFilter(p),
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       o.AckWait,
			MaxDeliver:    -1, // retries are bounded by the crawler, which terminates
			// Messages handed back to wait for their host's turn are
			// pending too: a host's backlog must not stop the partition.
			MaxAckPending: -1,
			DeliverPolicy: jetstream.DeliverAllPolicy,
		})
	})
	if err != nil {
		return fmt.Errorf("crawl: consumer of partition %d: %w", p, err)
	}
	pctx, cancel := context.WithCancel(ctx)
	context.AfterFunc(c.jobCtx, cancel)
	pullCtx, stopPull := context.WithCancel(pctx)
	r := &partitionRun{ctx: pctx, cancel: cancel, stopPull: stopPull, done: make(chan struct{})}
	c.mu.Lock()
	c.owned[p] = r
	c.mu.Unlock()
	c.opts.Logger.Debug("took partition", "partition", p)
	go func() {
		defer close(r.done)
		c.pull(pullCtx, p, cons, r)
	}()
	return nil
}

// pull takes the messages of one partition and offers them to the
// scheduler. It takes what is waiting without waiting (FetchNoWait, up to 64
// and up to the room left under Options.InFlight), and when nothing is, waits
// for one message at a time. A message whose host's buffer is full is handed
// straight back with the delay the scheduler expects its turn to take, so
// one host's backlog never stands between the puller and the hosts behind it
// in the stream, and nothing waits in hand for its host beyond the buffer.
func (c *Crawler) pull(ctx context.Context, p int, cons jetstream.Consumer, r *partitionRun) {
	const maxBatch = 64
	backoff := 100 * time.Millisecond
	wait := false // the last no-wait fetch found nothing: block for one
	for ctx.Err() == nil {
		if c.opts.MaxPages > 0 && c.started.Load() >= c.opts.MaxPages {
			// Every fetch allowed is reserved; one handed back frees
			// its place again.
			sleep(ctx, 50*time.Millisecond)
			continue
		}
		room := c.opts.InFlight - c.held()
		if room <= 0 {
			sleep(ctx, 20*time.Millisecond)
			continue
		}
		got, err := c.take(ctx, cons, r, wait, min(room, maxBatch))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.opts.Logger.Debug("fetch from frontier", "partition", p, "err", err)
			sleep(ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		wait = got == 0
	}
}

// take admits what waits on cons, up to max, or, if wait, waits for one
// message: the server ends the wait (1 s), and stopping does not wait for
// it (jspull.One). It returns the number of messages admitted.
func (c *Crawler) take(ctx context.Context, cons jetstream.Consumer, r *partitionRun, wait bool, max int) (int, error) {
	if wait {
		msg, err := jspull.One(ctx, cons, time.Second)
		if msg == nil {
			return 0, err
		}
		c.admit(msg, r)
		return 1, nil
	}
	batch, err := cons.FetchNoWait(max)
	if err != nil {
		return 0, err
	}
	got := 0
	for msg := range batch.Messages() {
		got++
		c.admit(msg, r)
	}
	if err := batch.Error(); err != nil {
		c.opts.Logger.Debug("fetch from frontier", "err", err)
	}
	return got, nil
}

// held is the number of frontier messages in hand.
func (c *Crawler) held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inflight)
}

// hold counts msg in hand until settle is called: kept alive, waited for by
// the partition's give-back and by shutdown.
func (c *Crawler) hold(msg jetstream.Msg, r *partitionRun) (settle func()) {
	c.mu.Lock()
	c.inflight[msg] = struct{}{}
	c.mu.Unlock()
	c.jobs.Add(1)
	r.jobs.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			delete(c.inflight, msg)
			c.mu.Unlock()
			c.settled.Store(time.Now().UnixNano())
			r.jobs.Done()
			c.jobs.Done()
		})
	}
}

// jobsPerRequest is how many URLs may be in process (robots.txt, the
// exchange, publishing the links, acknowledging) per HTTP exchange allowed at
// once (Fetcher.MaxParallel, which the Fetcher bounds itself): publishing and
// acknowledging are round trips that must not keep the next host's turn
// waiting.
const jobsPerRequest = 4

// dispatch takes each URL whose host's turn has come from the scheduler and
// runs it in a goroutine counted in wg, at most jobsPerRequest ×
// Fetcher.MaxParallel at once, until ctx ends. One goroutine waits on the
// scheduler, so a change there wakes one waiter, and a URL is taken only
// when it can start at once.
func (c *Crawler) dispatch(ctx context.Context, wg *sync.WaitGroup) {
	slots := make(chan struct{}, jobsPerRequest*c.fetcher.opts.MaxParallel)
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		key, j, err := c.sched.Take(ctx)
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			c.handle(key, j)
		}()
	}
}

// handBack takes the messages of partition run r (all runs if nil) waiting
// for their host's turn out of the scheduler and hands them back unfetched,
// for the partition's next owner.
func (c *Crawler) handBack(r *partitionRun) {
	for _, j := range c.sched.Remove(func(_ string, j *job) bool { return r == nil || j.run == r }) {
		c.opts.Logger.Debug("handed back unfetched", "url", j.entry.URL)
		_ = j.msg.Nak()
		j.settle()
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// keepAlive tells JetStream, every AckWait/3, that the messages in hand are
// still being worked on, so that waiting in their host's buffer does not get
// them redelivered to another crawler.
func (c *Crawler) keepAlive(ctx context.Context) {
	t := time.NewTicker(c.opts.AckWait / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		msgs := make([]jetstream.Msg, 0, len(c.inflight))
		for m := range c.inflight {
			msgs = append(msgs, m)
		}
		c.mu.Unlock()
		for _, m := range msgs {
			_ = m.InProgress()
		}
	}
}
