package sluice

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-go/sluice/engine"
)

// ErrNotHeld reports a release or an extension of a lease no longer held
// (released, expired, or never granted): nothing changes on the key, but
// its slot may be another's: a holder whose extension gets it should stop.
var ErrNotHeld = errors.New("sluice: lease not held")

// A Lease is a slot of a concurrency limit ([NewConcurrencyLimit]) held on
// one key, from [Limiter.TryAcquire] or [Limiter.Acquire]. Its Decision
// says whether it was granted (Allowed) and what the key holds with it;
// its At, the lease's identity on the store, changes when it is extended.
// Release it when done, typically with defer; one never released ends at
// its expiry. Release or extend it from one goroutine at a time.
type Lease struct {
	Decision

	l    *Limiter
	p    *engine.Params // the limit that holds key, as looked up when taken
	key  string
	cost float64
}

// TryAcquire takes a lease of cost on key if it fits now: if the leases
// held on key plus cost stay within the limit, and no caller of Acquire
// waits on key (it does not pass them). A denied lease records nothing;
// its RetryAfter says when the earliest leases expire enough for it to
// fit, or the first waiter could have left the line (a release comes
// sooner).
func (l *Limiter) TryAcquire(ctx context.Context, key string, cost float64) (Lease, error) {
	p, err := l.limitOf(ctx, key)
	if err != nil {
		return Lease{l: l, key: key, cost: cost}, err
	}
	return l.tryAcquire(ctx, key, p, cost, l.clock.now(), -1, 0)
}

// tryAcquire is TryAcquire at now, for an Acquire that began at began and
// holds ticket in key's line (0 for none), or for none if began is
// negative. An Acquire waits in line: a denial gives it its ticket in
// Decision.At.
func (l *Limiter) tryAcquire(ctx context.Context, key string, p *engine.Params, cost float64, now, began, ticket int64) (Lease, error) {
	ls := Lease{l: l, p: p, key: key, cost: cost}
	n := note{lease: true}
	op := engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: now}
	if began >= 0 {
		n.waited = time.Duration(max(now-began, 0))
		op.At, op.MaxDelay = ticket, int64(l.patience())
	}
	err := l.leaseOp(ctx, key, p, op, &ls.Decision, n)
	return ls, err
}

// Acquire takes a lease of cost on key, waiting until one fits, or until
// ctx ends (it then leaves the line and returns ctx's error). Waiters on a
// key are served in the order they came, across every Limiter and process
// sharing the store. A waiter is woken when a slot may be free, if the
// store tells of it ([engine.ReleaseWatcher]), or else when the earliest lease
// held expires, and asks again after [WithLeasePoll] at the latest. One
// that stops asking without leaving (its process died) keeps its place for
// twice the lease poll plus the limiter's timeout or a second (a day at
// most), and is then passed over.
func (l *Limiter) Acquire(ctx context.Context, key string, cost float64) (Lease, error) {
	ls := Lease{l: l, key: key, cost: cost}
	p, err := l.limitOf(ctx, key)
	if err != nil {
		return ls, err
	}
	ls.p, ls.Limit = p, p.Limit
	if err := checkLeases(p); err != nil {
		return ls, err
	}
	began := l.clock.now()
	var ticket int64 // the waiter's place in key's line, once denied
	err = l.acquiring(ctx, key, func() (bool, time.Duration, error) {
		var err error
		ls, err = l.tryAcquire(ctx, key, p, cost, l.clock.now(), began, ticket)
		if err == nil && !ls.Allowed {
			ticket, ls.At = ls.At, 0 // a place in line, not a lease
		}
		return ls.Allowed, ls.RetryAfter, err
	})
	if err != nil && ticket != 0 {
		l.leaveLine(ctx, key, p, ticket)
	}
	return ls, err
}

// patience is how long a waiter keeps its place in a key's line after
// each try: it asks again within a lease poll, after a try that may take
// up to the limiter's timeout; a day at most.
func (l *Limiter) patience() time.Duration {
	const most = 24 * time.Hour
	poll, timeout := min(l.leasePoll, most), min(l.timeout, most)
	return min(2*poll+max(timeout, time.Second), most)
}

// leaveLine takes the waiter of ticket out of key's line, for an Acquire
// that stopped waiting: even after ctx ended, within the limiter's timeout
// or a second. A leaving that fails costs the others the waiter's
// patience at most; nobody to tell.
func (l *Limiter) leaveLine(ctx context.Context, key string, p *engine.Params, ticket int64) {
	ctx, cancel := givingBack(ctx, l.mem != nil, l.timeout)
	defer cancel()
	var d Decision
	_ = l.decide(ctx, key, p, engine.Op{Verb: engine.VerbLeave, Now: l.clock.now(), At: ticket}, decided(&d))
}

// acquiring calls try until it grants a lease or fails, sleeping between
// tries until key's watcher tells of a slot that may be free, the retry
// that try returned, or l's lease poll. It watches only once a first try
// was denied, so that a lease granted at once costs one store call; the
// try after the watch began sees everything since.
func (l *Limiter) acquiring(ctx context.Context, key string, try func() (granted bool, retry time.Duration, err error)) error {
	granted, retry, err := try()
	if err != nil || granted {
		return err
	}
	released := make(chan struct{}, 1)
	if w, ok := l.store.(engine.ReleaseWatcher); ok {
		stop, err := w.WatchReleases(ctx, key, released)
		if err != nil {
			return err
		}
		defer stop()
		if granted, retry, err = try(); err != nil || granted {
			return err
		}
	}
	for {
		select {
		case <-released:
		case <-l.clock.clock.After(min(retry, l.leasePoll)):
		case <-ctx.Done():
			return ctx.Err()
		}
		if granted, retry, err = try(); err != nil || granted {
			return err
		}
	}
}

// Release gives the lease back, freeing its slot at once, or returns an
// error wrapping [ErrNotHeld] if it was not held. It runs even after ctx
// ended (a handler whose client went away), within the limiter's timeout
// ([WithTimeout]) or, for a remote store without one, a second.
func (ls *Lease) Release(ctx context.Context) error {
	return ls.end(ctx, engine.VerbCancel)
}

// Extend makes the lease last the limiter's time to live from now, and
// changes its At, the lease's identity. It returns an error wrapping
// [ErrNotHeld] if the lease was not held any more: its slot may be someone
// else's; stop the task.
func (ls *Lease) Extend(ctx context.Context) error {
	return ls.end(ctx, engine.VerbExtend)
}

// end releases or extends the lease, as verb says.
func (ls *Lease) end(ctx context.Context, verb engine.Verb) error {
	l := ls.l
	if l == nil || ls.p == nil || !ls.Allowed || ls.At == 0 {
		return fmt.Errorf("%w: %q", ErrNotHeld, ls.key)
	}
	ctx, cancel := givingBack(ctx, l.mem != nil, l.timeout)
	defer cancel()
	var d Decision
	err := l.leaseOp(ctx, ls.key, ls.p, engine.Op{Verb: verb, Cost: ls.cost, Now: l.clock.now(), At: ls.At}, &d, note{lease: true})
	switch {
	case err != nil:
		return err
	case !d.Allowed:
		ls.At = 0 // not held: nothing to release or extend any more
		return fmt.Errorf("%w: %q", ErrNotHeld, ls.key)
	case verb == engine.VerbExtend:
		ls.Decision = d
	default:
		ls.At = 0
	}
	return nil
}

// givingBack returns the context in which a lease is given back or
// extended: ctx's values without its end, since a release must be made
// even when the caller's context has ended (a client that went away), and,
// for a remote store (not mem) without a timeout of its own, bounded by
// cancelTimeout, so that it does not hang on a store that does not
// answer.
func givingBack(ctx context.Context, mem bool, timeout time.Duration) (context.Context, context.CancelFunc) {
	if mem { // memory never waits on ctx
		return ctx, func() {}
	}
	ctx = context.WithoutCancel(ctx)
	if timeout > 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, cancelTimeout)
}

// leaseOp decides op, a lease's, under p on key into *d, which is zero,
// and hands the decision to the observer with n.
func (l *Limiter) leaseOp(ctx context.Context, key string, p *engine.Params, op engine.Op, d *Decision, n note) error {
	err := checkLeases(p)
	if err != nil {
		d.Limit = p.Limit
	} else {
		err = l.decide(ctx, key, p, op, decided(d))
	}
	if l.observer != nil {
		l.observe(ctx, key, p, op, decided(d), err, n)
	}
	return err
}

// checkLeases refuses a lease under p unless p is a concurrency limit.
func checkLeases(p *engine.Params) error {
	if p.Kind != engine.KindConcurrency {
		return fmt.Errorf("%w: %v takes no leases: use NewConcurrencyLimit", ErrUnsupported, p.Kind)
	}
	return nil
}

// defaultLeasePoll is the default of [WithLeasePoll], whose comment says
// why.
const defaultLeasePoll = time.Second
