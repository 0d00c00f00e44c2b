package sluice

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/engine"
)

// A Limiter decides whether requests on a key conform to one algorithm's
// limit, keeping each key's state in an [engine.Store] (by default its own
// [MemStore]). Build one with an algorithm's constructor: [NewGCRA],
// [NewTokenBucket], [NewLeakyBucket], [NewFixedWindow], [NewSlidingLog]
// or [NewSlidingCounter], or, for how many at once rather than how often,
// [NewConcurrencyLimit]. A Limiter is safe for concurrent use.
type Limiter struct {
	params   engine.Params
	store    engine.Store
	clock    nanoClock
	mem      *MemStore // store, when it is a MemStore: called directly
	fast     bool      // mem, no observer and a fixed limit: the usual request goes straight to mem
	owned    bool      // store was made by the limiter, and Close closes it
	name     string
	observer Observer      // or nil
	timeout  time.Duration // bounds each remote store call; 0 is none
	lateness time.Duration // how late a reserved turn may be acted on

	leasePoll time.Duration // how long Acquire waits at most before asking again

	// lookup, for a limiter built with NewPerKey, returns the limiter
	// whose params hold a key; params is then zero.
	lookup func(ctx context.Context, key string) (*Limiter, error)
	kind   atomic.Uint32 // the algorithm of the limits lookup returns, once one is

	cal *calendarWindows // of a calendar window, whose params are those of its creation
}

func newLimiter(p engine.Params, opts []Option) (*Limiter, error) {
	return build(p, opts, false)
}

// build returns a limiter of p with opts, or, perKey, one without Params
// of its own, whose opts may not set any.
func build(p engine.Params, opts []Option, perKey bool) (*Limiter, error) {
	s := settings{params: p, lateness: defaultMaxLateness, leasePoll: defaultLeasePoll}
	for _, o := range opts {
		if err := o.apply(&s); err != nil {
			return nil, err
		}
	}
	if s.clock == nil {
		s.clock = systemClock{}
	}
	switch {
	case perKey && s.params != engine.Params{}:
		return nil, fmt.Errorf("%w: a per-key limiter takes its algorithm's options from the limiters its lookup returns", ErrInvalidConfig)
	case !perKey:
		if s.cal != nil {
			s.params = s.cal.start(s.params, nanoClock{s.clock}.now())
		}
		if err := s.params.Validate(); err != nil {
			return nil, err
		}
	}
	l := &Limiter{params: s.params, store: s.store, clock: nanoClock{s.clock}, cal: s.cal,
		name: s.name, observer: together(s.observers), timeout: s.timeout, lateness: s.lateness, leasePoll: s.leasePoll}
	if l.store == nil {
		l.store, l.owned = NewMemStore(MemStoreConfig{}), true
	}
	l.mem, _ = l.store.(*MemStore)
	l.fast = l.mem != nil && l.observer == nil && !perKey && s.cal == nil
	return l, nil
}

// Allow admits cost for key if it fits now and records it. A denied
// request records nothing; its decision says when to retry. The error is
// non-nil only for invalid input ([ErrInvalidCost], [ErrCostExceedsLimit])
// or a failing store, never for a denial.
func (l *Limiter) Allow(ctx context.Context, key string, cost float64) (d Decision, err error) {
	err = l.now(ctx, key, engine.VerbAllow, cost, decided(&d))
	return d, err
}

// CanAccept returns the decision Allow would make now, recording nothing.
// Use CanAccept(ctx, key, 0) to read a key's remaining allowance.
func (l *Limiter) CanAccept(ctx context.Context, key string, cost float64) (d Decision, err error) {
	err = l.now(ctx, key, engine.VerbCheck, cost, decided(&d))
	return d, err
}

// Reset forgets key: its next request sees a fresh state.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if l.mem != nil {
		return l.mem.Reset(ctx, key) // answers at once: never a timeout
	}
	if l.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	return timedOut(ctx, l.store.Reset(ctx, key))
}

// Params returns the limiter's algorithm and configuration, whose Step
// method is the algorithm as a pure function, and whether they are fixed:
// the same for every request. A calendar window's ([NewCalendarWindow])
// hold the windows around the limiter's time now, and a per-key
// limiter's ([NewPerKey]) are zero: neither is fixed, and an adapter that
// describes their limit reads [Limiter.ParamsFor] for each request.
func (l *Limiter) Params() (p engine.Params, fixed bool) {
	return *l.limitAt(l.clock.now()), l.fixed()
}

// fixed reports whether the limiter decides every request under its own
// Params (see [Limiter.Params]).
func (l *Limiter) fixed() bool { return l.lookup == nil && l.cal == nil }

// limitAt returns the limiter's own Params in force at now.
func (l *Limiter) limitAt(now int64) *engine.Params {
	if l.cal != nil {
		return l.cal.at(now)
	}
	return &l.params
}

// Close releases the limiter's default in-memory store. It does nothing
// to a store passed with [WithStore], which its owner closes.
func (l *Limiter) Close() error {
	if l.owned {
		return l.mem.Close()
	}
	return nil
}

// now decides verb for cost on key at the limiter's time, into *d, which
// is zero. The exported methods that call it are small enough to be
// inlined, so that *d is their caller's variable.
func (l *Limiter) now(ctx context.Context, key string, verb engine.Verb, cost float64, d *engine.Decision) error {
	op := engine.Op{Verb: verb, Cost: cost, Now: l.clock.now()}
	if l.fast && fixedUsual(&l.params, verb, cost, op.Now) {
		return l.mem.apply(key, &l.params, op, d) // the usual request, in memory, unobserved: do adds nothing
	}
	if l.lookup != nil || l.cal != nil {
		return l.nowLookedUp(ctx, key, op, d)
	}
	return l.do(ctx, key, &l.params, op, d)
}

// fixedUsual is p.Usual for the Params of a fast limiter, which are never
// a calendar window's: its four comparisons but the windows' test, which
// the hot path need not pay.
func fixedUsual(p *engine.Params, verb engine.Verb, cost float64, now int64) bool {
	return verb-engine.VerbAllow <= engine.VerbCheck-engine.VerbAllow && cost >= 0 && cost <= p.Limit && uint64(now) <= maxTime
}

// do decides op under p on key into *d, which is zero, and hands the
// decision to the observer. The clock is read again only for an observer.
func (l *Limiter) do(ctx context.Context, key string, p *engine.Params, op engine.Op, d *engine.Decision) error {
	err := l.decide(ctx, key, p, op, d)
	if l.observer != nil {
		l.observe(ctx, key, p, op, d, err, note{})
	}
	return err
}

// decide decides op under p on key into *d, which is zero.
func (l *Limiter) decide(ctx context.Context, key string, p *engine.Params, op engine.Op, d *engine.Decision) (err error) {
	var refused error // a cost above the limit that is decided all the same
	usual := p.Usual(op.Verb, op.Cost, op.Now) && op.At == 0 && op.MaxDelay == 0
	if !usual {
		if refused = p.Check(op); refused != nil && !p.Overflows(op, refused) {
			d.Limit = p.Limit
			return refused
		}
	}
	if l.mem != nil {
		err = l.mem.apply(key, p, op, d) // validated: skip Apply's checks
		if !usual && err == nil {
			l.mem.releasedBy(key, p, op, d) // an Allow or a check releases nothing
		}
	} else {
		err = l.apply(ctx, key, p, op, d)
	}
	if err == nil {
		err = refused // decided, and still refused: whatever the store says
	}
	return err
}

// apply decides op under p on a remote store, within the limiter's
// timeout.
func (l *Limiter) apply(ctx context.Context, key string, p *engine.Params, op engine.Op, d *engine.Decision) (err error) {
	if l.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	*d, err = l.store.Apply(ctx, key, p, op)
	return timedOut(ctx, err)
}

// timedOut returns err, from a store call under ctx, wrapping [ErrTimeout]
// and context.DeadlineExceeded if ctx's deadline passed: a client that
// honours deadlines reports them in its own words, often as a network
// timeout, and its socket's deadline may fire a moment before ctx's timer.
func timedOut(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, ErrTimeout) {
		return err
	}
	deadline, ok := ctx.Deadline()
	if !ok || !errors.Is(ctx.Err(), context.DeadlineExceeded) && time.Now().Before(deadline) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return fmt.Errorf("%w (%w): %w", ErrTimeout, context.DeadlineExceeded, err)
}
