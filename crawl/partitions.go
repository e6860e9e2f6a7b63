package crawl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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
	var failing error
	for {
		err := c.balance(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil:
			if failing == nil {
				o.Logger.Warn("partition leases failing; retrying", "err", err)
			}
			failing = err
		case failing != nil:
			o.Logger.Info("partition leases working again")
			failing = nil
		}
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
func (c *Crawler) balance(ctx context.Context) error {
	members, err := c.leases.heartbeat(ctx)
	if err != nil {
		return err
	}
	lost, err := c.leases.renew(ctx)
	for _, p := range lost {
		c.opts.Logger.Warn("lost partition lease", "partition", p)
		c.mu.Lock()
		r := c.owned[p]
		delete(c.owned, p)
		c.mu.Unlock()
		if r != nil {
			r.cancel()
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
	cons, err := c.js.CreateOrUpdateConsumer(ctx, o.Topology.FrontierStream(), jetstream.ConsumerConfig{
		Durable:       o.Topology.PartitionConsumer(p),
		Description:   fmt.Sprintf("Sieve crawlers: frontier partition %d", p),
		FilterSubject: o.Topology.PartitionFilter(p),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.AckWait,
		MaxDeliver:    -1, // retries are bounded by the crawler, which terminates
		MaxAckPending: o.InFlight,
		DeliverPolicy: jetstream.DeliverAllPolicy,
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

// pull fetches messages of one partition while free slots last. It takes
// what is waiting without waiting (FetchNoWait, as many as there are free
// slots), and when nothing is, waits for one message at a time: no slot is
// held for a message that has not come, and no message waits in a client
// buffer where AckWait would run out unseen.
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
		// One slot, waiting; then as many more as are free.
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		n := 1
		for !wait && n < maxBatch {
			select {
			case c.slots <- struct{}{}:
				n++
				continue
			default:
			}
			break
		}
		var batch jetstream.MessageBatch
		var err error
		if wait {
			// Short, so that stopping never waits long for it.
			batch, err = cons.Fetch(1, jetstream.FetchMaxWait(250*time.Millisecond))
		} else {
			batch, err = cons.FetchNoWait(n)
		}
		if err != nil {
			c.freeSlots(n)
			if ctx.Err() != nil {
				return
			}
			c.opts.Logger.Debug("fetch from frontier", "partition", p, "err", err)
			sleep(ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		got := 0
		for msg := range batch.Messages() {
			got++
			c.start(msg, r)
		}
		c.freeSlots(n - got)
		wait = got == 0
	}
}

// start runs the job of one message, which holds a slot.
func (c *Crawler) start(msg jetstream.Msg, r *partitionRun) {
	c.mu.Lock()
	c.inflight[msg] = struct{}{}
	c.mu.Unlock()
	c.jobs.Add(1)
	r.jobs.Add(1)
	go func() {
		defer func() {
			c.mu.Lock()
			delete(c.inflight, msg)
			c.mu.Unlock()
			<-c.slots
			r.jobs.Done()
			c.jobs.Done()
		}()
		c.handle(msg, r)
	}()
}

func (c *Crawler) freeSlots(n int) {
	for range n {
		<-c.slots
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
// still being worked on, so that waiting for a polite host's turn does not
// get them redelivered to another crawler.
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
