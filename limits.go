package sluice

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"
)

// A Group decides each request against several limiters as one decision:
// "10 per second and 1,000 per day per API key, and 5,000 per second for
// everyone". A request is admitted only if every limit admits it, and is
// then recorded in all of them; if any limit denies it, it is recorded in
// none (stacking limiters by hand would have charged the limits it passed
// before the one that denied it).
//
// The limiters must share one store that decides groups atomically
// ([GroupStore]): MemStore, and the Redis and PostgreSQL stores. The
// group reads time from the first limiter's clock, and bounds each store
// call by its timeout. A Group is safe for concurrent use.
type Group struct {
	limits []*limiter
	store  GroupStore
	mem    *MemStore // store, when it is a MemStore: called directly
	first  *limiter
}

// grouped is what every limiter of this package is: the way to its
// configuration.
type grouped interface{ base() *limiter }

func (l *limiter) base() *limiter { return l }

// NewGroup returns a group of limiters, decided in the order given. They
// must be this package's limiters, sharing one store given with
// [WithStore] that implements [GroupStore]; otherwise NewGroup returns an
// error wrapping [ErrInvalidConfig] or [ErrUnsupported].
func NewGroup(limiters ...Limiter) (*Group, error) {
	if len(limiters) == 0 || len(limiters) > MaxGroup {
		return nil, fmt.Errorf("%w: a group has 1 to %d limiters, not %d", ErrInvalidConfig, MaxGroup, len(limiters))
	}
	g := &Group{}
	for i, lim := range limiters {
		b, ok := lim.(grouped)
		if v := reflect.ValueOf(lim); !ok || v.Kind() == reflect.Pointer && v.IsNil() {
			return nil, fmt.Errorf("%w: limiter %d (%T) is not one of sluice's", ErrInvalidConfig, i, lim)
		}
		l := b.base()
		if i > 0 && l.store != g.first.store {
			return nil, fmt.Errorf("%w: limiter %d keeps its state in another store: give every limiter of a group one store (WithStore)", ErrInvalidConfig, i)
		}
		if i == 0 {
			g.first = l
		}
		g.limits = append(g.limits, l)
	}
	st, ok := g.first.store.(GroupStore)
	if !ok {
		return nil, fmt.Errorf("%w: %T cannot decide several limits atomically", ErrUnsupported, g.first.store)
	}
	g.store = st
	g.mem, _ = st.(*MemStore)
	return g, nil
}

// GroupDecision is a group's decision: the most restrictive limit's (see
// [DecideGroup]), and each limit's own, in the group's order. When the
// group denies a request, a limit that would have admitted it on its own
// shows Allowed, but recorded nothing.
type GroupDecision struct {
	Decision
	Limits []Decision
}

// Allow admits cost if every limit admits it, each on its key (keys[i] for
// the group's limiter i), and records it in all of them; otherwise it
// records it in none.
func (g *Group) Allow(ctx context.Context, keys []string, cost float64) (GroupDecision, error) {
	return g.decide(ctx, keys, Op{Verb: VerbAllow, Cost: cost, Now: g.first.clock.now()})
}

// CanAccept returns the decision Allow would make now, recording nothing.
func (g *Group) CanAccept(ctx context.Context, keys []string, cost float64) (GroupDecision, error) {
	return g.decide(ctx, keys, Op{Verb: VerbCheck, Cost: cost, Now: g.first.clock.now()})
}

// decide runs op, whose Now is set, on every limit as one decision.
func (g *Group) decide(ctx context.Context, keys []string, op Op) (GroupDecision, error) {
	if len(keys) != len(g.limits) {
		return GroupDecision{}, fmt.Errorf("%w: %d keys for %d limits", ErrInvalidKey, len(keys), len(g.limits))
	}
	var ops [MaxGroup]GroupOp
	for i, l := range g.limits {
		ops[i] = GroupOp{Key: keys[i], Params: &l.params, Op: op}
	}
	return g.apply(ctx, ops[:len(keys)])
}

// apply sends ops to the store, within the first limiter's timeout, and
// reports each limit's decision to its limiter's observer.
func (g *Group) apply(ctx context.Context, ops []GroupOp) (GroupDecision, error) {
	if g.first.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.first.timeout)
		defer cancel()
	}
	gd := GroupDecision{Limits: make([]Decision, len(ops))}
	var err error
	if g.mem != nil {
		// No interface, and no Params to validate again: ops stay on the
		// stack, and only the ops themselves are checked.
		if err = checkGroupOps(ops); err == nil {
			gd.Decision, err = g.mem.applyGroup(ops, gd.Limits)
		}
	} else {
		kept := append([]GroupOp(nil), ops...) // a store of any kind may keep them
		gd.Decision, err = g.store.ApplyGroup(ctx, kept, gd.Limits)
		err = timedOut(ctx, err)
	}
	for i, l := range g.limits {
		if l.observer != nil {
			l.observe(ctx, ops[i].Key, ops[i].Op, &gd.Limits[i], err)
		}
	}
	return gd, err
}

// A GroupReservation is a turn booked on every limit of a group at one
// instant: see [Reservation].
type GroupReservation struct {
	GroupDecision

	g     *Group
	keys  []string
	cost  float64
	act   int64
	given atomic.Bool
}

// Reserve books the earliest instant at which cost conforms to every
// limit, if it comes within maxDelay, and records it in all of them, as
// [Limiter.Reserve] does for one. Every limiter must book reservations
// (GCRA, leaky bucket, token bucket).
func (g *Group) Reserve(ctx context.Context, keys []string, cost float64, maxDelay time.Duration) (*GroupReservation, error) {
	r := &GroupReservation{g: g, keys: keys, cost: cost}
	now := g.first.clock.now()
	var err error
	r.GroupDecision, err = g.decide(ctx, keys, Op{Verb: VerbReserve, Cost: cost, Now: now, MaxDelay: int64(maxDelay)})
	r.act = now + int64(r.Delay)
	return r, err
}

// Wait sleeps until the reservation's instant on the group's clock, as
// [Reservation.Wait] does, giving it back if ctx ends first.
func (r *GroupReservation) Wait(ctx context.Context) error {
	if !r.Allowed {
		return fmt.Errorf("%w: %q", ErrNotReserved, r.keys)
	}
	if r.Delay <= 0 {
		return nil
	}
	select {
	case <-r.g.first.clock.clock.After(r.Delay):
		return nil
	case <-ctx.Done():
		return errors.Join(ctx.Err(), r.Cancel(context.WithoutCancel(ctx)))
	}
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
	var ops [MaxGroup]GroupOp
	for i, l := range g.limits {
		ops[i] = GroupOp{Key: r.keys[i], Params: &l.params, Op: Op{Verb: VerbCancel, Cost: r.cost, Now: now, At: r.Limits[i].At}}
	}
	_, err := g.apply(ctx, ops[:len(r.keys)]) // at most once, as Reservation.Cancel
	return err
}

// Wait blocks until cost is admitted by every limit and records it in all
// of them, as [Limiter.Wait] does for one: one store call books the turn,
// and a Wait whose ctx ends first gives it back.
func (g *Group) Wait(ctx context.Context, keys []string, cost float64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	maxDelay := time.Duration(maxSpan)
	if deadline, ok := ctx.Deadline(); ok {
		maxDelay = min(maxDelay, max(time.Until(deadline), 0))
	}
	r, err := g.Reserve(ctx, keys, cost, maxDelay)
	if err != nil {
		return err
	}
	if !r.Allowed {
		return fmt.Errorf("%w: %q needs %v: %w", ErrWouldExceedDeadline, keys, maxDelay+r.RetryAfter, context.DeadlineExceeded)
	}
	return r.Wait(ctx)
}
