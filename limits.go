package sluice

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/engine"
)

// A Group decides each request against several limiters, sharing one
// store ([NewGroup]), as one decision: admitted only if every limit admits
// it, and then recorded in all of them, or else in none. The group reads
// time from the first limiter's clock, and bounds each store call by its
// timeout. A Group is safe for concurrent use.
type Group struct {
	limits []*Limiter
	store  engine.GroupStore
	mem    *MemStore // store, when it is a MemStore: called directly
	first  *Limiter
	fixed  bool // every limiter is fixed: no limit to look up per key
}

// NewGroup returns a group of limiters, decided in the order given. They
// must share one store, given with [WithStore], that implements
// [engine.GroupStore]; otherwise NewGroup returns an error wrapping
// [ErrInvalidConfig] or [ErrUnsupported].
func NewGroup(limiters ...*Limiter) (*Group, error) {
	if len(limiters) == 0 || len(limiters) > engine.MaxGroup {
		return nil, fmt.Errorf("%w: a group has 1 to %d limiters, not %d", ErrInvalidConfig, engine.MaxGroup, len(limiters))
	}
	g := &Group{fixed: true}
	for i, l := range limiters {
		if l == nil {
			return nil, fmt.Errorf("%w: limiter %d is nil", ErrInvalidConfig, i)
		}
		if i > 0 && l.store != g.first.store {
			return nil, fmt.Errorf("%w: limiter %d keeps its state in another store: give every limiter of a group one store (WithStore)", ErrInvalidConfig, i)
		}
		if i == 0 {
			g.first = l
		}
		g.limits = append(g.limits, l)
		g.fixed = g.fixed && l.fixed()
	}
	st, ok := g.first.store.(engine.GroupStore)
	if !ok {
		return nil, fmt.Errorf("%w: %T cannot decide several limits atomically", ErrUnsupported, g.first.store)
	}
	g.store = st
	g.mem, _ = st.(*MemStore)
	return g, nil
}

// GroupDecision is a group's decision, the most restrictive limit's
// ([engine.DecideGroup]), with each limit's own ([GroupDecision.Limits]):
// when the group denies, one that would have admitted shows Allowed,
// recording nothing.
type GroupDecision struct {
	Decision

	// limits holds each limit's decision in place for a group of up to
	// inlineGroup limits, so that such a decision in memory allocates
	// nothing; more holds them for a larger group.
	limits [inlineGroup]Decision
	more   []Decision
	n      int
}

// inlineGroup is how many limits a GroupDecision holds without
// allocating: the common groups (a client's rate and quota, and a global
// cap), and no more, since a GroupDecision is returned by value.
const inlineGroup = 4

// Limits returns each limit's decision, in the group's order, in d's memory.
func (d *GroupDecision) Limits() []Decision {
	if d.more != nil {
		return d.more
	}
	return d.limits[:d.n]
}

// size makes d, which is zero, a decision of n limits.
func (d *GroupDecision) size(n int) {
	d.n = n
	if n > inlineGroup {
		d.more = make([]Decision, n)
	}
}

// Allow admits cost if every limit admits it, each on its key (keys[i] for
// the group's limiter i), and records it in all of them, or else in none.
func (g *Group) Allow(ctx context.Context, keys []string, cost float64) (d GroupDecision, err error) {
	// Small enough to be inlined: d is then the caller's variable, which
	// the decision is written into, rather than a result copied out.
	err = g.now(ctx, &d, keys, engine.VerbAllow, cost)
	return d, err
}

// CanAccept returns the decision Allow would make now, recording nothing.
func (g *Group) CanAccept(ctx context.Context, keys []string, cost float64) (d GroupDecision, err error) {
	err = g.now(ctx, &d, keys, engine.VerbCheck, cost)
	return d, err
}

// now decides verb for cost now, into gd. It reads the clock itself,
// so that Allow and CanAccept stay small enough to be inlined.
func (g *Group) now(ctx context.Context, gd *GroupDecision, keys []string, verb engine.Verb, cost float64) error {
	return g.decide(ctx, gd, keys, engine.Op{Verb: verb, Cost: cost, Now: g.first.clock.now()}, nil, note{})
}

// decide runs op, whose Now is set, on every limit as one decision, into
// gd, which is zero. at, if not nil, holds each limit's op.At: a cancel's
// booking, a waiter's ticket. ln is for the observers of the concurrency
// limits.
func (g *Group) decide(ctx context.Context, gd *GroupDecision, keys []string, op engine.Op, at *[engine.MaxGroup]int64, ln note) error {
	n := len(g.limits)
	if len(keys) != n {
		return fmt.Errorf("%w: %d keys for %d limits", ErrInvalidKey, len(keys), n)
	}
	var inline [inlineGroup]engine.GroupOp
	ops := inline[:min(n, inlineGroup)]
	if n > inlineGroup {
		ops = make([]engine.GroupOp, n)
	}
	for i, l := range g.limits {
		// Field by field, in place: no literal built aside and copied.
		o := &ops[i]
		o.Key, o.Params, o.Op = keys[i], &l.params, op
		if !g.fixed && !l.fixed() {
			p, err := l.limitFor(ctx, keys[i], op.Now)
			if err != nil {
				return err
			}
			if p.Kind == engine.KindConcurrency {
				return fmt.Errorf("%w: limiter %d of the group, per key, looked up a concurrency limit: a group's leases are taken on fixed limits", ErrUnsupported, i)
			}
			o.Params = p
		}
		if at != nil {
			o.Op.At = at[i]
		}
	}
	return g.apply(ctx, gd, ops, g.limits, ln)
}

// apply sends ops, those of limits, to the store, within the first
// limiter's timeout, and decides into gd, which is zero, reporting each
// limit's decision to its limiter's observer.
//
// n is for the observers of the concurrency limits: whether the decision
// is a group lease's (its acquisition, release or extension), and how
// long its Acquire waited.
func (g *Group) apply(ctx context.Context, gd *GroupDecision, ops []engine.GroupOp, limits []*Limiter, n note) error {
	if g.first.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.first.timeout)
		defer cancel()
	}
	gd.size(len(ops))
	each := decisions(gd.Limits())
	var err error
	if g.mem != nil {
		// No interface, and no Params to validate again: ops and gd stay
		// on the stack, and only the ops themselves are checked.
		if err = checkGroupOps(ops); err == nil {
			err = g.mem.applyGroup(ops, each, decided(&gd.Decision))
		}
	} else {
		// A store of any kind may keep what it is given.
		kept := append([]engine.GroupOp(nil), ops...)
		given := make([]engine.Decision, len(ops))
		var d engine.Decision
		d, err = g.store.ApplyGroup(ctx, kept, given)
		gd.Decision = Decision(d)
		copy(each, given)
		err = timedOut(ctx, err)
	}
	for i, l := range limits {
		if l.observer != nil {
			var ln note
			if ops[i].Params.Kind == engine.KindConcurrency {
				ln = n
			}
			l.observe(ctx, ops[i].Key, ops[i].Params, ops[i].Op, &each[i], err, ln)
		}
	}
	return err
}

// A GroupReservation is a [Reservation] on every limit of a group at once.
type GroupReservation struct {
	GroupDecision

	g     *Group
	keys  []string
	cost  float64
	act   int64 // when the caller may act, on the group's clock
	ready int64 // when a remote store's answer came; zero for memory
	given atomic.Bool
}

// Reserve books the earliest instant at which cost conforms to every
// limit, if it comes within maxDelay, in all of them, as [Limiter.Reserve]
// does for one. Every limiter must reserve (GCRA, leaky or token bucket).
func (g *Group) Reserve(ctx context.Context, keys []string, cost float64, maxDelay time.Duration) (*GroupReservation, error) {
	r := new(GroupReservation) // on the caller's stack when Reserve is inlined
	return r, g.reserve(ctx, keys, cost, maxDelay, r)
}

// reserve books into *r, which is zero.
func (g *Group) reserve(ctx context.Context, keys []string, cost float64, maxDelay time.Duration, r *GroupReservation) error {
	r.g, r.keys, r.cost = g, keys, cost
	now := g.first.clock.now()
	err := g.decide(ctx, &r.GroupDecision, keys, engine.Op{Verb: engine.VerbReserve, Cost: cost, Now: now, MaxDelay: int64(maxDelay)}, nil, note{})
	r.act = now + int64(r.Delay)
	if g.mem == nil {
		r.ready = g.first.clock.now()
	}
	return err
}

// Wait is [Reservation.Wait] on the group's clock: it gives the
// reservation back if ctx ends first, and returns an error wrapping
// [ErrStaleTurn] past the first limiter's maximum lateness.
func (r *GroupReservation) Wait(ctx context.Context) error {
	if !r.Allowed {
		return fmt.Errorf("%w: %q", ErrNotReserved, r.keys)
	}
	first := r.g.first
	err := waitTurn(ctx, first.clock, max(r.act, r.ready), first.lateness, r.Cancel)
	if errors.Is(err, ErrStaleTurn) {
		return fmt.Errorf("%q: %w", r.keys, err)
	}
	return err
}

// Cancel gives the reservation back on every limit, each by the rule of
// [Reservation.Cancel], in one store call.
func (r *GroupReservation) Cancel(ctx context.Context) error {
	if !r.Allowed || r.Delay <= 0 || !r.given.CompareAndSwap(false, true) {
		return nil
	}
	g := r.g
	now := g.first.clock.now()
	if now >= r.act {
		return nil
	}
	if g.mem == nil && g.first.timeout <= 0 && ctx.Done() == nil { // memory never hangs
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cancelTimeout)
		defer cancel()
	}
	var booked [engine.MaxGroup]int64
	for i, e := range r.Limits() {
		booked[i] = e.At
	}
	var d GroupDecision
	// At most once, as Reservation.Cancel.
	return g.decide(ctx, &d, r.keys, engine.Op{Verb: engine.VerbCancel, Cost: r.cost, Now: now}, &booked, note{})
}

// Wait blocks until cost is admitted by every limit and records it in all
// of them, as [Limiter.Wait] does for one, booking its turn in one store
// call.
func (g *Group) Wait(ctx context.Context, keys []string, cost float64) error {
	return rebooking(func() error { return g.waitOnce(ctx, keys, cost) })
}

// waitOnce books one turn for Wait and sleeps until it.
func (g *Group) waitOnce(ctx context.Context, keys []string, cost float64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	maxDelay := untilDeadline(ctx)
	r, err := g.Reserve(ctx, keys, cost, maxDelay)
	if err != nil {
		return err
	}
	if !r.Allowed {
		return pastDeadline(keys, maxDelay+r.RetryAfter)
	}
	return r.Wait(ctx)
}

// checkGroupOps is CheckGroup for the ops of a Group, whose Params its
// limiters validated and whose ops share their verb, time and delay by
// construction: each op's cost (and delay or instant), and distinct keys.
func checkGroupOps(ops []engine.GroupOp) error {
	for i := range ops {
		g := &ops[i]
		if !g.Params.Usual(g.Op.Verb, g.Op.Cost, g.Op.Now) {
			if err := g.Params.Check(g.Op); err != nil {
				return err
			}
		}
		for j := range i {
			if ops[j].Key == g.Key {
				return fmt.Errorf("%w: key %q appears twice in one group", ErrInvalidKey, g.Key)
			}
		}
	}
	return nil
}
