package admit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/admit"
	"github.com/sievecrawl/sieve/admit/admittest"
)

// fixture is a Core over in-memory fakes that share one log.
type fixture struct {
	log     *admittest.Log
	filters *admittest.Filters
	pub     *admittest.Publisher
	clock   *admittest.Clock
	core    *admit.Core
}

// newFixture builds a Core over fakes that fail as fault says. With the
// fake clock (clock true) every backoff passes at once; without it the
// backoffs are a few microseconds of real time.
func newFixture(tb testing.TB, fault admittest.Fault, clock bool, o admit.Options) *fixture {
	tb.Helper()
	fx := &fixture{log: &admittest.Log{}}
	fx.filters = admittest.NewFilters(fx.log, fault)
	fx.pub = admittest.NewPublisher(fx.log, fault)
	o.Filters, o.Publisher = fx.filters, fx.pub
	if clock {
		fx.clock = admittest.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
		o.Clock = fx.clock
	}
	if o.BackoffMax == 0 {
		o.BackoffMin, o.BackoffMax = time.Microsecond, 10*time.Microsecond
	}
	c, err := admit.New(o)
	if err != nil {
		tb.Fatal(err)
	}
	fx.core = c
	return fx
}

// failure fails the first n calls of op whose keys include key (any key if
// key is empty) in crawl (any crawl if empty). n < 0 fails every call.
type failure struct {
	op, crawl, key string
	n              int
}

var errInjected = errors.New("injected failure")

// script is a Fault that fails as the failures say, and calls then (if
// not nil) on each failure, with the number of failures so far.
func script(then func(failed int), fs ...failure) admittest.Fault {
	var mu sync.Mutex
	left := make([]int, len(fs))
	failed := 0
	for i, f := range fs {
		left[i] = f.n
	}
	return func(ctx context.Context, op, crawl string, keys []string) error {
		mu.Lock()
		defer mu.Unlock()
		for i, f := range fs {
			if f.op != op || (f.crawl != "" && f.crawl != crawl) || (f.key != "" && !slices.Contains(keys, f.key)) || left[i] == 0 {
				continue
			}
			left[i]--
			failed++
			if then != nil {
				then(failed)
			}
			return fmt.Errorf("%w: %s %s", errInjected, op, f.key)
		}
		return nil
	}
}

func urls(spec ...string) []admit.URL {
	out := make([]admit.URL, len(spec))
	for i, s := range spec {
		crawl, u, _ := strings.Cut(s, " ")
		out[i] = admit.URL{Crawl: crawl, URL: u}
	}
	return out
}

func names(us []admit.URL) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.Crawl + " " + u.URL
	}
	return out
}

func perCrawl(us []admit.URL) map[string]int {
	m := map[string]int{}
	for _, u := range us {
		m[u.Crawl]++
	}
	return m
}

// checkOrder checks the protocol's ordering promises on a log: a URL is
// published only after a Contains of it succeeded (claim 2: nothing is
// published that the filter held when asked), and marked only after a
// publish of it succeeded (claim 1: seen ⇒ enqueued).
func checkOrder(tb testing.TB, log *admittest.Log) {
	tb.Helper()
	asked, published := map[string]bool{}, map[string]bool{}
	for _, e := range log.Events() {
		if e.Err != nil {
			continue
		}
		k := e.Crawl + " " + e.Key
		switch e.Op {
		case admit.OpContains:
			asked[k] = true
		case admit.OpPublish:
			if !asked[k] {
				tb.Errorf("%s published before the filter was asked about it", k)
			}
			published[k] = true
		case admit.OpMark:
			if !published[k] {
				tb.Errorf("%s marked before the frontier stored it", k)
			}
		}
	}
}

// checkLanded checks what Admit promises when it returns nil: every URL
// admitted or republished is on the frontier and in its filter.
func checkLanded(tb testing.TB, fx *fixture, us []admit.URL, v []admit.Verdict) {
	tb.Helper()
	stored := map[string]bool{}
	for _, n := range names(fx.pub.Stored()) {
		stored[n] = true
	}
	for i, u := range us {
		if v[i] != admit.Admitted && v[i] != admit.Republished {
			continue
		}
		if !fx.filters.Filter(u.Crawl).Has(u.URL) || !stored[u.Crawl+" "+u.URL] {
			tb.Errorf("%s %s: verdict %v, but marked %v, on the frontier %v", u.Crawl, u.URL, v[i],
				fx.filters.Filter(u.Crawl).Has(u.URL), stored[u.Crawl+" "+u.URL])
		}
	}
	if n := fx.filters.InUse(); n != 0 {
		tb.Errorf("%d filters acquired and never released", n)
	}
}

const (
	undecided   = admit.Undecided
	admitted    = admit.Admitted
	republished = admit.Republished
	held        = admit.Held
)

// TestAdmit runs one batch through the protocol, with faults, and checks
// each URL's verdict, what ends on the frontier and in the filter, and the
// order of the calls.
func TestAdmit(t *testing.T) {
	tests := []struct {
		name     string
		held     []string // in the filter before ("crawl url")
		stored   []string // on the frontier before, unmarked
		unusable []string // crawls whose filter cannot be opened
		urls     []string
		faults   []failure
		want     []admit.Verdict
		frontier []string       // stored after, in order
		tries    map[string]int // publishes per URL ("crawl url")
		calls    map[string]int // calls of each filter operation on crawl c
		parked   []string       // crawls parked
	}{
		{
			name: "new URLs are published, then marked",
			urls: []string{"c a", "c b"}, want: []admit.Verdict{admitted, admitted},
			frontier: []string{"c a", "c b"}, tries: map[string]int{"c a": 1, "c b": 1},
			calls: map[string]int{admit.OpContains: 1, admit.OpMark: 1},
		},
		{
			name: "a URL the filter holds is not published",
			held: []string{"c a"}, urls: []string{"c a", "c b"}, want: []admit.Verdict{held, admitted},
			frontier: []string{"c b"}, tries: map[string]int{"c a": 0, "c b": 1},
		},
		{
			name: "nothing new: no publish, no mark",
			held: []string{"c a", "c b"}, urls: []string{"c a", "c b"}, want: []admit.Verdict{held, held},
			calls: map[string]int{admit.OpContains: 1, admit.OpMark: 0},
		},
		{
			// The hard case of publishing first: the filter said new, the
			// publish failed; nothing may be marked until it is stored.
			name: "a publish that fails after the filter said new is retried, then marked",
			urls: []string{"c a", "c b"}, faults: []failure{{op: admit.OpPublish, key: "a", n: 3}},
			want: []admit.Verdict{admitted, admitted}, frontier: []string{"c b", "c a"},
			tries: map[string]int{"c a": 4, "c b": 1}, calls: map[string]int{admit.OpContains: 1, admit.OpMark: 1},
		},
		{
			name: "a mark that fails after publishing is retried, without publishing again",
			urls: []string{"c a"}, faults: []failure{{op: admit.OpMark, n: 2}},
			want: []admit.Verdict{admitted}, frontier: []string{"c a"},
			tries: map[string]int{"c a": 1}, calls: map[string]int{admit.OpContains: 1, admit.OpMark: 3},
		},
		{
			name: "a failing Contains is retried",
			urls: []string{"c a"}, faults: []failure{{op: admit.OpContains, n: 3}},
			want: []admit.Verdict{admitted}, frontier: []string{"c a"}, calls: map[string]int{admit.OpContains: 4, admit.OpMark: 1},
		},
		{
			name: "a filter that fails to open is retried",
			urls: []string{"c a"}, faults: []failure{{op: admit.OpOpen, n: 2}},
			want: []admit.Verdict{admitted}, frontier: []string{"c a"},
		},
		{
			// A worker that died between publish and mark: the redelivered
			// URL is published again (the window catches it) and marked.
			name:   "a URL on the frontier but not in the filter is republished and marked",
			stored: []string{"c a"}, urls: []string{"c a"},
			want: []admit.Verdict{republished}, frontier: []string{"c a"}, tries: map[string]int{"c a": 1},
		},
		{
			name:     "a parked crawl's URLs stay undecided; the other crawls go on",
			unusable: []string{"bad"}, urls: []string{"bad x", "c a", "bad y"},
			want: []admit.Verdict{undecided, admitted, undecided}, frontier: []string{"c a"},
			tries: map[string]int{"bad x": 0, "bad y": 0}, parked: []string{"bad"},
		},
		{
			name: "a URL is unique within its crawl: the same URL in two crawls is admitted in each",
			urls: []string{"c a", "d a"}, want: []admit.Verdict{admitted, admitted}, frontier: []string{"c a", "d a"},
		},
		{
			// The adapter drops repeats before the Core; one that reaches
			// it waits for its own first copy's verdict.
			name: "a URL twice in a batch is published once",
			urls: []string{"c a", "c a"}, want: []admit.Verdict{admitted, held},
			frontier: []string{"c a"}, tries: map[string]int{"c a": 1}, calls: map[string]int{admit.OpContains: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t, script(nil, tt.faults...), true, admit.Options{})
			for _, u := range urls(tt.held...) {
				fx.filters.Filter(u.Crawl).Add(u.URL)
			}
			for _, u := range urls(tt.stored...) {
				fx.pub.Store(u)
			}
			for _, c := range tt.unusable {
				fx.filters.SetUnusable(c, errors.New("corrupt snapshot"))
			}
			us := urls(tt.urls...)
			msgs := admittest.NewMessages(perCrawl(us))
			v, err := fx.core.Admit(context.Background(), us, msgs)
			if err != nil {
				t.Fatalf("Admit: %v", err)
			}
			if !slices.Equal(v, tt.want) {
				t.Errorf("verdicts %v, want %v", v, tt.want)
			}
			if got := names(fx.pub.Stored()); !slices.Equal(got, tt.frontier) {
				t.Errorf("frontier holds %q, want %q", got, tt.frontier)
			}
			for k, n := range tt.tries {
				crawl, u, _ := strings.Cut(k, " ")
				if got := fx.pub.Tries(crawl, u); got != n {
					t.Errorf("%s published %d times, want %d", k, got, n)
				}
			}
			for op, n := range tt.calls {
				if got := fx.filters.Filter("c").Calls(op); got != n {
					t.Errorf("%s called %d times, want %d", op, got, n)
				}
			}
			gotParked := slices.Sorted(func(yield func(string) bool) {
				for c := range msgs.Parked() {
					if !yield(c) {
						return
					}
				}
			})
			if !slices.Equal(gotParked, tt.parked) {
				t.Errorf("parked %v, want %v", gotParked, tt.parked)
			}
			if len(tt.faults) > 0 && msgs.Touches() < 2 {
				t.Errorf("touched the messages %d times while retrying", msgs.Touches())
			}
			checkOrder(t, fx.log)
			checkLanded(t, fx, us, v)
		})
	}
}

// TestAdmitStopsWithItsContext fails one operation for as long as the
// batch's context lives: Admit returns the context's error, so the caller
// acknowledges nothing, and nothing is in the filter that is not on the
// frontier. The redelivered batch then admits every URL exactly once.
func TestAdmitStopsWithItsContext(t *testing.T) {
	tests := []struct {
		op        string
		frontier  []string        // after the failed attempt
		redeliver []admit.Verdict // of the redelivery
	}{
		{admit.OpOpen, nil, []admit.Verdict{admitted, admitted}},
		{admit.OpContains, nil, []admit.Verdict{admitted, admitted}},
		// The filter said new and the publish of b fails: a is published
		// but, its batch unfinished, nothing is marked.
		{admit.OpPublish, []string{"c a"}, []admit.Verdict{republished, admitted}},
		// Both published, neither marked: both come back as republished.
		{admit.OpMark, []string{"c a", "c b"}, []admit.Verdict{republished, republished}},
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			key := ""
			if tt.op == admit.OpPublish {
				key = "b"
			}
			var repaired atomic.Bool
			failing := script(func(failed int) {
				if failed == 5 {
					cancel() // the worker is stopping
				}
			}, failure{op: tt.op, key: key, n: -1})
			fault := func(ctx context.Context, op, crawl string, keys []string) error {
				if repaired.Load() {
					return nil
				}
				return failing(ctx, op, crawl, keys)
			}
			fx := newFixture(t, fault, true, admit.Options{})
			us := urls("c a", "c b")
			msgs := admittest.NewMessages(perCrawl(us))
			v, err := fx.core.Admit(ctx, us, msgs)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Admit = %v, %v; want context.Canceled", v, err)
			}
			if got := names(fx.pub.Stored()); !slices.Equal(got, tt.frontier) {
				t.Errorf("frontier holds %q, want %q", got, tt.frontier)
			}
			for _, u := range us {
				if fx.filters.Filter("c").Has(u.URL) {
					t.Errorf("%s marked by a batch that did not finish", u.URL)
				}
			}
			if msgs.Touches() < 5 {
				t.Errorf("touched the messages %d times in 5 attempts", msgs.Touches())
			}
			if fx.filters.InUse() != 0 {
				t.Errorf("filter not released")
			}

			// JetStream redelivers the messages after AckWait, to a worker
			// whose dependencies work.
			repaired.Store(true)
			fx2 := &fixture{log: fx.log, filters: fx.filters, pub: fx.pub}
			core, err := admit.New(admit.Options{Filters: fx.filters, Publisher: fx.pub, SeenCache: -1})
			if err != nil {
				t.Fatal(err)
			}
			v, err = core.Admit(context.Background(), us, admittest.NewMessages(perCrawl(us)))
			if err != nil || !slices.Equal(v, tt.redeliver) {
				t.Errorf("redelivered: Admit = %v, %v; want %v", v, err, tt.redeliver)
			}
			if got := names(fx.pub.Stored()); !slices.Equal(got, []string{"c a", "c b"}) {
				t.Errorf("after redelivery the frontier holds %q", got)
			}
			checkOrder(t, fx.log)
			checkLanded(t, fx2, us, v)
		})
	}
}

// TestAdmitRechecksStaleVerdicts: a URL whose publish keeps failing (the
// frontier full) for longer than Recheck is asked about again before it is
// published, so a URL another process published and marked meanwhile — its
// message ID perhaps forgotten by the frontier's window — is not enqueued
// twice. Before Recheck the verdict stands.
func TestAdmitRechecksStaleVerdicts(t *testing.T) {
	tests := []struct {
		name     string
		recheck  time.Duration
		want     []admit.Verdict
		frontier []string
	}{
		{"verdict older than Recheck", 30 * time.Second, []admit.Verdict{held, admitted}, []string{"c y"}},
		// Without the re-check x would be enqueued twice: once by the
		// other process, once here (the fake window does not forget).
		{"verdict younger than Recheck", time.Hour, []admit.Verdict{admitted, admitted}, []string{"c x", "c y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fx *fixture
			fault := script(func(int) {
				// Meanwhile another worker published and marked x; the
				// frontier has since forgotten its message ID.
				fx.filters.Filter("c").Add("x")
			}, failure{op: admit.OpPublish, n: 2})
			fx = newFixture(t, fault, true, admit.Options{Recheck: tt.recheck, BackoffMin: 2 * time.Minute, BackoffMax: 2 * time.Minute})
			us := urls("c x", "c y")
			start := fx.clock.Now()
			v, err := fx.core.Admit(context.Background(), us, admittest.NewMessages(perCrawl(us)))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(v, tt.want) {
				t.Errorf("verdicts %v, want %v", v, tt.want)
			}
			if got := names(fx.pub.Stored()); !slices.Equal(got, tt.frontier) {
				t.Errorf("frontier holds %q, want %q", got, tt.frontier)
			}
			if waited := fx.clock.Now().Sub(start); waited < time.Minute {
				t.Errorf("the batch waited %v, want a backoff of at least a minute", waited)
			}
			checkOrder(t, fx.log)
		})
	}
}

// TestAdmitSeenCache checks that a URL the Core marked or found held is not
// asked about again, unless its filter's keys expire or its crawl was
// forgotten (deleted).
func TestAdmitSeenCache(t *testing.T) {
	tests := []struct {
		name     string
		cache    int
		expiring bool
		forget   bool
		want     []admit.Verdict // of the second batch
		contains int             // Contains calls in all
	}{
		{name: "repeats skip the filter", want: []admit.Verdict{admit.Cached, admit.Cached}, contains: 1},
		{name: "no cache", cache: -1, want: []admit.Verdict{held, held}, contains: 2},
		{name: "a filter whose keys expire is not cached", expiring: true, want: []admit.Verdict{held, held}, contains: 2},
		{name: "a forgotten crawl is asked again", forget: true, want: []admit.Verdict{held, held}, contains: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t, nil, true, admit.Options{SeenCache: tt.cache})
			fx.filters.Filter("c").SetExpiring(tt.expiring)
			fx.filters.Filter("c").Add("held")
			us := urls("c new", "c held")
			if _, err := fx.core.Admit(context.Background(), us, admittest.NewMessages(nil)); err != nil {
				t.Fatal(err)
			}
			if tt.forget {
				fx.core.Forget("c")
			}
			v, err := fx.core.Admit(context.Background(), us, admittest.NewMessages(nil))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(v, tt.want) {
				t.Errorf("second batch: verdicts %v, want %v", v, tt.want)
			}
			if n := fx.filters.Filter("c").Calls(admit.OpContains); n != tt.contains {
				t.Errorf("Contains called %d times, want %d", n, tt.contains)
			}
		})
	}
}

// TestAdmitParksUntilTheFilterOpens checks a parked crawl's life: its
// messages are handed back with ParkDelay each time, Parked reports it
// with the cause and a running count, and once its filter opens it is
// admitted and no longer parked.
func TestAdmitParksUntilTheFilterOpens(t *testing.T) {
	fx := newFixture(t, nil, true, admit.Options{ParkDelay: 3 * time.Minute})
	fx.filters.SetUnusable("bad", errors.New("corrupt snapshot"))
	us := urls("bad a", "bad b", "c a")
	for i := 1; i <= 2; i++ {
		msgs := admittest.NewMessages(map[string]int{"bad": 2, "c": 1})
		v, err := fx.core.Admit(context.Background(), us, msgs)
		if err != nil {
			t.Fatal(err)
		}
		if want := []admit.Verdict{undecided, undecided}; !slices.Equal(v[:2], want) {
			t.Errorf("delivery %d: verdicts %v, want the parked crawl's undecided", i, v)
		}
		if d := msgs.Parked()["bad"]; d != 3*time.Minute {
			t.Errorf("delivery %d: handed back with delay %v, want 3m", i, d)
		}
		p, ok := fx.core.Parked()["bad"]
		if !ok || p.Messages != int64(2*i) || !strings.Contains(p.Error, "corrupt snapshot") {
			t.Errorf("delivery %d: Parked()[bad] = %+v, %v; want 2×%d messages and the cause", i, p, ok, i)
		}
	}
	if len(fx.pub.Stored()) != 1 {
		t.Errorf("frontier holds %v, want only c's URL", names(fx.pub.Stored()))
	}
	fx.filters.SetUnusable("bad", nil) // repaired
	v, err := fx.core.Admit(context.Background(), us, admittest.NewMessages(nil))
	if err != nil || !slices.Equal(v, []admit.Verdict{admitted, admitted, admit.Cached}) {
		t.Errorf("after repair: Admit = %v, %v", v, err)
	}
	if p := fx.core.Parked(); p != nil {
		t.Errorf("after repair: Parked() = %v, want none", p)
	}
	checkOrder(t, fx.log)
}

// TestAdmitConcurrentBatchesPublishOnce runs many batches at once that hold
// the same new URLs at the same moment, on one Core without a seen cache:
// each URL must be published exactly once (no publish the frontier's window
// would have to catch), and every URL's verdicts add up.
func TestAdmitConcurrentBatchesPublishOnce(t *testing.T) {
	tests := []struct {
		name              string
		batches, per, pop int
		publishFailures   int // the first publishes of every URL fail
	}{
		{"overlapping batches", 64, 16, 40, 0},
		{"overlapping batches with failing publishes", 32, 16, 40, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fs []failure
			for i := 0; i < tt.pop && tt.publishFailures > 0; i++ {
				fs = append(fs, failure{op: admit.OpPublish, key: fmt.Sprint(i), n: tt.publishFailures})
			}
			fx := newFixture(t, script(nil, fs...), false, admit.Options{SeenCache: -1})
			rng := rand.New(rand.NewPCG(1, 2))
			batches := make([][]admit.URL, tt.batches)
			for i := range batches {
				seen := map[int]bool{}
				for len(batches[i]) < tt.per {
					if n := rng.IntN(tt.pop); !seen[n] {
						seen[n] = true
						batches[i] = append(batches[i], admit.URL{Crawl: "c", URL: fmt.Sprint(n)})
					}
				}
			}
			verdicts := make([][]admit.Verdict, len(batches))
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, b := range batches {
				wg.Go(func() {
					<-start
					v, err := fx.core.Admit(context.Background(), b, admittest.NewMessages(nil))
					if err != nil {
						t.Error(err)
					}
					verdicts[i] = v
				})
			}
			close(start)
			wg.Wait()
			count := map[admit.Verdict]int{}
			for _, vs := range verdicts {
				for _, v := range vs {
					count[v]++
				}
			}
			stored := fx.pub.Stored()
			if count[admitted] != len(stored) || count[admitted]+count[held] != tt.batches*tt.per || count[republished] != 0 {
				t.Errorf("verdicts %v for %d URLs, %d stored; want each stored URL admitted once, none republished",
					count, tt.batches*tt.per, len(stored))
			}
			for _, u := range stored {
				if n := fx.pub.Tries(u.Crawl, u.URL); n != 1+tt.publishFailures {
					t.Errorf("%s published %d times, want %d", u.URL, n, 1+tt.publishFailures)
				}
			}
			checkOrder(t, fx.log)
		})
	}
}

// TestAdmitOwnerGivesUp: a batch that owns a URL and stops (its context
// ended: the worker's shutdown grace ran out) hands the URL back to the
// batch waiting for it, which then admits it itself.
func TestAdmitOwnerGivesUp(t *testing.T) {
	ownerCtx, stopOwner := context.WithCancel(context.Background())
	defer stopOwner()
	first := make(chan struct{})
	var once sync.Once
	fault := func(ctx context.Context, op, crawl string, keys []string) error {
		if op == admit.OpPublish && ctx == ownerCtx {
			once.Do(func() { close(first) })
			<-ctx.Done() // the owner's publish hangs until it gives up
			return ctx.Err()
		}
		return nil
	}
	fx := newFixture(t, fault, false, admit.Options{SeenCache: -1, KeepAlive: time.Hour})
	us := urls("c x")
	ownerErr := make(chan error, 1)
	go func() {
		_, err := fx.core.Admit(ownerCtx, us, admittest.NewMessages(nil))
		ownerErr <- err
	}()
	<-first
	waiterMsgs := admittest.NewMessages(nil)
	type result struct {
		v   []admit.Verdict
		err error
	}
	waiter := make(chan result, 1)
	go func() {
		v, err := fx.core.Admit(context.Background(), us, waiterMsgs)
		waiter <- result{v, err}
	}()
	// The waiter owns nothing: it touches its messages when it opens the
	// filter, and next when it waits for the owner.
	for deadline := time.Now().Add(10 * time.Second); waiterMsgs.Touches() < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the second batch never waited for the first")
		}
		select {
		case r := <-waiter:
			t.Fatalf("the second batch did not wait for the owner: %v, %v", r.v, r.err)
		case <-time.After(time.Millisecond):
		}
	}
	stopOwner()
	if err := <-ownerErr; !errors.Is(err, context.Canceled) {
		t.Errorf("owner: %v, want context.Canceled", err)
	}
	r := <-waiter
	if r.err != nil || !slices.Equal(r.v, []admit.Verdict{admitted}) {
		t.Errorf("waiter: Admit = %v, %v; want admitted", r.v, r.err)
	}
	if got := names(fx.pub.Stored()); !slices.Equal(got, []string{"c x"}) || !fx.filters.Filter("c").Has("x") {
		t.Errorf("frontier holds %q, marked %v; want x on both", got, fx.filters.Filter("c").Has("x"))
	}
	checkOrder(t, fx.log)
}

// TestAdmitNewIncarnation: a crawl deleted and created again under its id
// (a new, empty filter of another incarnation) admits a URL the deleted
// crawl admitted, though the frontier's duplicate window still holds that
// URL's old ID; without incarnations the window takes it for a republish,
// and the URL is marked without being queued for the new crawl.
func TestAdmitNewIncarnation(t *testing.T) {
	for _, tt := range []struct {
		name          string
		before, after string // the crawl's incarnations
		want          admit.Verdict
		stored        int
	}{
		{"another incarnation", "one", "two", admitted, 2},
		{"no incarnation", "", "", republished, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t, nil, true, admit.Options{})
			fx.filters.Filter("c").SetIncarnation(tt.before)
			us := urls("c x")
			if _, err := fx.core.Admit(context.Background(), us, admittest.NewMessages(nil)); err != nil {
				t.Fatal(err)
			}
			fx.filters.Drop("c")
			fx.core.Forget("c")
			fx.filters.Filter("c").SetIncarnation(tt.after)
			v, err := fx.core.Admit(context.Background(), us, admittest.NewMessages(nil))
			if err != nil {
				t.Fatal(err)
			}
			if v[0] != tt.want || len(fx.pub.Stored()) != tt.stored {
				t.Errorf("the crawl created again: verdict %v, %d stored; want %v, %d", v[0], len(fx.pub.Stored()), tt.want, tt.stored)
			}
		})
	}
}

// failover is a Replicas whose first wait finds that a failover lost the
// marks not yet on a replica: it takes them out of the filter and fails.
type failover struct {
	filter *admittest.Filter
	lost   []string
	waits  int
}

func (f *failover) Wait(ctx context.Context) error {
	f.waits++
	if f.waits == 1 {
		f.filter.Remove(f.lost...)
		return errors.New("failover: 0 of 1 replicas acknowledged")
	}
	return nil
}

// TestAdmitMarksAgainWhenReplicasMissedTheMarks pins Options.Replicas: a
// mark whose wait for replicas fails is a failed mark, done again, so that
// a failover that lost it does not leave a published URL out of the
// filter (to be admitted a second time), and the batch is done only then.
func TestAdmitMarksAgainWhenReplicasMissedTheMarks(t *testing.T) {
	fo := &failover{lost: []string{"new"}}
	fx := newFixture(t, nil, false, admit.Options{Replicas: fo})
	f := fx.filters.Filter("c")
	fo.filter = f
	v, err := fx.core.Admit(context.Background(), urls("c new"), admittest.NewMessages(nil))
	if err != nil {
		t.Fatal(err)
	}
	if v[0] != admit.Admitted {
		t.Errorf("verdict %v, want Admitted", v[0])
	}
	if !f.Has("new") {
		t.Error("the filter lost the URL in the failover and it was not marked again")
	}
	if n := f.Calls(admit.OpMark); n != 2 || fo.waits != 2 {
		t.Errorf("marked %d times and waited %d, want 2 and 2 (again after the failed wait)", n, fo.waits)
	}
	if n := fx.pub.Tries("c", "new"); n != 1 {
		t.Errorf("published %d times, want 1 (only the mark is done again)", n)
	}
}
