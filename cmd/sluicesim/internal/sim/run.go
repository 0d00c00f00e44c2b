package sim

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/guarantees"
	"github.com/sluice-go/sluice/internal/simclock"
)

// Epoch is where simulated time starts: a whole day since the Unix epoch,
// so that aligned windows of a second, a minute, an hour or a day start
// with the simulation.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Caps on what a run keeps for its figures, so that a simulation of
// millions of requests draws in bounded memory: the watched key's state
// is sampled twice per bin, and drawn around its requests in at most
// maxStatePoints points; at most maxDenialMarks of its denials are marked.
// A run with more keeps every other, every 4th, ..., over the whole run.
const (
	maxStatePoints = 20_000
	maxDenialMarks = 5_000
	samplesPerBin  = 2
)

// Run is one limiter's simulation.
type Run struct {
	// Name is the limiter's label.
	Name string
	// Params are the limiter's, as its constructor built them.
	Params engine.Params
	// Summary is what it admitted.
	Summary Summary
	// Series is what the figures draw.
	Series Series
	// Trace is every request and its decision, in the order decided, when
	// Options.Trace is set.
	Trace []Decided
}

// Decided is one request and the limiter's decision on it.
type Decided struct {
	Request
	sluice.Decision
}

// Options tunes a simulation without changing its results.
type Options struct {
	// Progress, when not nil, receives a line every ProgressEvery requests
	// (1,000,000 when zero) and one when each limiter's run ends, if it
	// wrote any.
	Progress      io.Writer
	ProgressEvery int64
	// Trace keeps every decision in Run.Trace.
	Trace bool
	// MaxRequests refuses, before it starts, a simulation whose traffic
	// would offer a limiter more requests than this (DefaultMaxRequests
	// when zero or less), since each holds memory until the run ends.
	MaxRequests int64
}

// Simulate runs every limiter of c on its traffic, in turn, until done or
// ctx ends. c's defaults are filled in. A simulation too large for
// o.MaxRequests is an error before any work.
func Simulate(ctx context.Context, c *Config, o Options) ([]Run, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	params := make([]engine.Params, len(c.Limiters))
	for i, ls := range c.Limiters {
		l, err := ls.New(simclock.New(Epoch))
		if err != nil {
			return nil, err
		}
		params[i], _ = l.Params()
		if err := l.Close(); err != nil {
			return nil, err
		}
	}
	if c.Window == 0 {
		for _, p := range params {
			c.Window = max(c.Window, time.Duration(guarantees.Period(p)))
		}
	}
	most := o.MaxRequests
	if most <= 0 {
		most = DefaultMaxRequests
	}
	if err := c.checkSize(params, most); err != nil {
		return nil, err
	}
	runs := make([]Run, 0, len(c.Limiters))
	for _, ls := range c.Limiters {
		r, err := simulate(ctx, c, ls, o)
		if err != nil {
			return nil, fmt.Errorf("limiter %q: %w", ls.Name, err)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// simulate runs one limiter.
func simulate(ctx context.Context, c *Config, ls LimiterSpec, o Options) (Run, error) {
	clk := simclock.New(Epoch)
	lim, err := ls.New(clk)
	if err != nil {
		return Run{}, err
	}
	defer lim.Close()
	p, _ := lim.Params()
	run := Run{Name: ls.Name, Params: p}
	m := newMeter(c)
	sh := newSheet(c, p)

	var q queue
	for _, t := range c.Traffic {
		for _, src := range t.sources(Epoch.UnixNano()) {
			q.add(&event{src: src}, nil, c.Duration)
		}
	}
	every := o.ProgressEvery
	if every <= 0 {
		every = 1_000_000
	}
	var n int64
	var sample time.Duration  // the next sample of the watched key's state
	last := time.Duration(-1) // the latest time the clock was set to
	watch := func(at time.Duration, detail bool) error {
		clk.Set(Epoch.Add(at))
		d, err := lim.CanAccept(ctx, c.Watch, 0)
		if err == nil {
			sh.state(at, d, detail)
		}
		return err
	}
	for q.Len() > 0 {
		e := q.pop()
		for ; sample < e.req.At; sample += sh.sampleEvery {
			if err := watch(sample, false); err != nil {
				return run, err
			}
			last = max(last, sample)
		}
		detail := e.req.Key == c.Watch && sh.detailNext()
		if detail {
			// The state a nanosecond before and at the request's instant,
			// so that a window turning over draws as a vertical drop.
			if before := e.req.At - 1; before > last {
				if err := watch(before, true); err != nil {
					return run, err
				}
			}
			if err := watch(e.req.At, true); err != nil {
				return run, err
			}
		}
		last = e.req.At
		clk.Set(Epoch.Add(e.req.At))
		d, err := lim.Allow(ctx, e.req.Key, e.req.Cost)
		if err != nil {
			return run, fmt.Errorf("request at %v on key %q costing %v: %w", e.req.At, e.req.Key, e.req.Cost, err)
		}
		m.record(e.req, d)
		sh.record(e.req, d, detail)
		if o.Trace {
			run.Trace = append(run.Trace, Decided{e.req, d})
		}
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return run, err
			}
		}
		if o.Progress != nil && n%every == 0 {
			fmt.Fprintf(o.Progress, "sluicesim: %s: %d requests, %.0f%% of %v simulated\n",
				ls.Name, n, 100*float64(e.req.At)/float64(c.Duration), c.Duration)
		}
		e.prev = outcome{e.req, d}
		q.add(e, &e.prev, c.Duration)
	}
	for ; sample <= c.Duration; sample += sh.sampleEvery {
		if err := watch(sample, false); err != nil {
			return run, err
		}
	}
	if o.Progress != nil && n >= every {
		fmt.Fprintf(o.Progress, "sluicesim: %s: done, %d requests in %v simulated\n", ls.Name, n, c.Duration)
	}
	run.Summary = m.summary(ls.Name)
	run.Series = sh.series(p.Limit)
	return run, nil
}

// event is a client's next request.
type event struct {
	req  Request
	src  source
	seq  int64   // breaks ties between equal times: first added, first decided
	prev outcome // the client's previous request, decided
}

// queue orders the clients' next requests by time.
type queue struct {
	events []*event
	seq    int64
}

func (q queue) Len() int { return len(q.events) }
func (q queue) Less(i, j int) bool {
	a, b := q.events[i], q.events[j]
	return a.req.At < b.req.At || a.req.At == b.req.At && a.seq < b.seq
}
func (q queue) Swap(i, j int) { q.events[i], q.events[j] = q.events[j], q.events[i] }
func (q *queue) Push(x any)   { q.events = append(q.events, x.(*event)) }
func (q *queue) Pop() any {
	e := q.events[len(q.events)-1]
	q.events = q.events[:len(q.events)-1]
	return e
}

// pop returns the earliest request.
func (q *queue) pop() *event { return heap.Pop(q).(*event) }

// add queues the next request of e's client, if it has one before end.
// e is reused, so that a request allocates nothing here.
func (q *queue) add(e *event, prev *outcome, end time.Duration) {
	r, ok := e.src.next(prev)
	if !ok || r.At >= end {
		return
	}
	q.seq++
	e.req, e.seq = r, q.seq
	heap.Push(q, e)
}

// percentile returns the p-th percentile of sorted by the nearest-rank
// method, or 0 for none.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
