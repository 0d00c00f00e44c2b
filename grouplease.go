package sluice

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-go/sluice/engine"
)

// A GroupLease is the decision of a [Group] with a concurrency limit among
// its limits. Granted, it spent the cost on every rate limit and took a
// lease on every concurrency limit, all or nothing. Release gives the
// leases back (what the rate limits admitted stays spent), and Extend
// extends them.
type GroupLease struct {
	GroupDecision

	g    *Group
	keys []string
	cost float64
}

// TryAcquire admits cost now if every limit admits it, as [Group.Allow]
// does, and returns the leases it took, as [Limiter.TryAcquire] does for
// one. At least one of the group's limiters must be a concurrency limit.
func (g *Group) TryAcquire(ctx context.Context, keys []string, cost float64) (GroupLease, error) {
	return g.tryAcquire(ctx, keys, cost, g.first.clock.now(), -1, nil)
}

// tryAcquire is TryAcquire at now, for an Acquire that began at began and
// holds tickets in its concurrency limits' lines (0 for none), or for
// none if began is negative.
func (g *Group) tryAcquire(ctx context.Context, keys []string, cost float64, now, began int64, tickets *[engine.MaxGroup]int64) (GroupLease, error) {
	gl := GroupLease{g: g, keys: keys, cost: cost}
	first := g.firstLeases()
	if first < 0 {
		return gl, fmt.Errorf("%w: a group without a concurrency limit takes no leases", ErrUnsupported)
	}
	n := note{lease: true}
	op := engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: now}
	if began >= 0 {
		n.waited = time.Duration(max(now-began, 0))
		op.MaxDelay = int64(g.limits[first].patience())
	}
	err := g.decide(ctx, &gl.GroupDecision, keys, op, tickets, n)
	return gl, err
}

// Acquire waits until every limit admits cost, and returns the leases it
// took, as [Limiter.Acquire] does for one, in the line of each concurrency
// limit that denies it; it leaves them, and returns ctx's error, if ctx
// ends first. While a rate limit alone holds it back, its places last the
// first concurrency limit's patience. It wakes on a slot freed on that
// limit's key, when the group's denial said it could be admitted, or after
// that limit's lease poll.
func (g *Group) Acquire(ctx context.Context, keys []string, cost float64) (GroupLease, error) {
	i := g.firstLeases()
	if i < 0 || len(keys) != len(g.limits) {
		return g.TryAcquire(ctx, keys, cost) // the same error
	}
	gl := GroupLease{g: g, keys: keys, cost: cost}
	began := g.first.clock.now()
	var tickets [engine.MaxGroup]int64 // each concurrency limit's place in line
	err := g.limits[i].acquiring(ctx, keys[i], func() (bool, time.Duration, error) {
		var err error
		gl, err = g.tryAcquire(ctx, keys, cost, g.first.clock.now(), began, &tickets)
		switch {
		case err != nil:
		case !gl.Allowed:
			for j, e := range gl.Limits() {
				if e.At != 0 { // a place in line, not a lease
					tickets[j], gl.Limits()[j].At = e.At, 0
				}
			}
		case g.mem != nil:
			g.served(keys, &tickets, gl.Limits())
		}
		return gl.Allowed, gl.RetryAfter, err
	})
	if err != nil {
		for j, l := range g.limits {
			if tickets[j] != 0 {
				l.leaveLine(ctx, keys[j], &l.params, tickets[j])
			}
		}
	}
	return gl, err
}

// Release gives back every lease the group took, in one store call, as
// [Lease.Release] does for one: even after ctx ended, within the first
// limiter's timeout. It returns an error wrapping [ErrNotHeld] if any was
// not held.
func (gl *GroupLease) Release(ctx context.Context) error {
	return gl.end(ctx, engine.VerbCancel)
}

// Extend extends every lease the group took, as [Lease.Extend] does for
// one. It returns an error wrapping [ErrNotHeld] if any was not held any
// more.
func (gl *GroupLease) Extend(ctx context.Context) error {
	return gl.end(ctx, engine.VerbExtend)
}

// end releases or extends the group's leases, as verb says, in one group
// decision over the concurrency limits alone.
func (gl *GroupLease) end(ctx context.Context, verb engine.Verb) error {
	g := gl.g
	if g == nil || !gl.Allowed {
		return fmt.Errorf("%w: %q", ErrNotHeld, gl.keys)
	}
	ctx, cancel := givingBack(ctx, g.mem != nil, g.first.timeout)
	defer cancel()
	held := gl.Limits()
	var opsIn [inlineGroup]engine.GroupOp
	var limitsIn [inlineGroup]*Limiter
	var which [engine.MaxGroup]int // the group's index of each lease
	ops, limits := opsIn[:0], limitsIn[:0]
	now := g.first.clock.now()
	for i, l := range g.limits {
		if l.params.Kind == engine.KindConcurrency && held[i].At != 0 { // still held, as far as it knows
			which[len(ops)] = i
			ops = append(ops, engine.GroupOp{Key: gl.keys[i], Params: &l.params,
				Op: engine.Op{Verb: verb, Cost: gl.cost, Now: now, At: held[i].At}})
			limits = append(limits, l)
		}
	}
	if len(ops) == 0 {
		return fmt.Errorf("%w: %q", ErrNotHeld, gl.keys)
	}
	var d GroupDecision
	if err := g.apply(ctx, &d, ops, limits, note{lease: true}); err != nil {
		return err
	}
	for j, e := range d.Limits() {
		switch {
		case verb == engine.VerbExtend && e.Allowed:
			held[which[j]] = e
		default: // released, or not held: nothing to release or extend any more
			held[which[j]].At = 0
		}
	}
	if !d.Allowed {
		return fmt.Errorf("%w: %q", ErrNotHeld, gl.keys)
	}
	return nil
}

// served wakes, in memory, the watchers of each key whose line a granted
// group served a waiter of tickets from with room left
// ([engine.Params.Frees]); a remote store tells them itself. The group
// path of MemStore leaves it to its callers, off the path of Group.Allow.
func (g *Group) served(keys []string, tickets *[engine.MaxGroup]int64, each []Decision) {
	for j, l := range g.limits {
		op := engine.Op{Verb: engine.VerbAllow, At: tickets[j]}
		if l.params.Frees(&op, (*engine.Decision)(&each[j])) {
			g.mem.released(keys[j])
		}
	}
}

// firstLeases returns the index of g's first concurrency limit, or -1.
func (g *Group) firstLeases() int {
	for i, l := range g.limits {
		if l.params.Kind == engine.KindConcurrency {
			return i
		}
	}
	return -1
}
