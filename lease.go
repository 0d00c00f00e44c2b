package sluice

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-go/sluice/engine"
)

// ErrNotHeld reports a release or an extension of a lease that is not
// held any more: released already, expired, or never granted. It is
// harmless (nothing changes on the key), and says that the slot may have
// gone to someone else: a holder that extends its lease and gets it should
// stop its work.
var ErrNotHeld = errors.New("sluice: lease not held")

// A Lease is a slot of a concurrency limit ([NewConcurrencyLimit]) held on
// one key, from [Limiter.TryAcquire] or [Limiter.Acquire]. Its Decision
// says whether it was granted (Allowed) and what the key holds with it;
// its At is the lease's identity on the store, which changes when the
// lease is extended.
//
// Release it when done, typically with defer right after it is granted;
// a lease that is never released ends at its expiry. A Lease is a value
// with its own state: release or extend it from one goroutine at a time.
type Lease struct {
	Decision

	l    *Limiter
	key  string
	cost float64
}

// TryAcquire takes a lease of cost on key if it fits now: if the leases
// held on key plus cost stay within the limit. A denied lease records
// nothing; its RetryAfter says when the earliest lease held expires
// enough for it to fit, at the latest (a release comes sooner). It does
// not wait for Acquire calls that are waiting on key.
func (l *Limiter) TryAcquire(ctx context.Context, key string, cost float64) (Lease, error) {
	return l.tryAcquire(ctx, key, cost, l.clock.now(), -1)
}

// tryAcquire is TryAcquire at now, for an Acquire that began at began,
// or for none if began is negative.
func (l *Limiter) tryAcquire(ctx context.Context, key string, cost float64, now, began int64) (Lease, error) {
	ls := Lease{l: l, key: key, cost: cost}
	n := note{lease: true}
	if began >= 0 {
		n.waited = time.Duration(max(now-began, 0))
	}
	err := l.leaseOp(ctx, key, engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: now}, &ls.Decision, n)
	return ls, err
}

// Acquire takes a lease of cost on key, waiting until one fits, or until
// ctx ends (it then returns ctx's error). Waiters on a key are served in
// the order they came, by each Limiter: only the first asks the store,
// and the others wait behind it, so that a large lease is not passed over
// for ever by small ones. The first is woken by a release of a lease on
// key when the store tells of them ([ReleaseWatcher]: MemStore, and the
// Redis and PostgreSQL stores), or else when the earliest lease held
// expires; in any case it asks again after [WithLeasePoll] at the latest,
// which bounds what a lost wake-up costs. Waiters of different Limiters
// (of different processes, say) are not lined up with each other: after a
// release, the first to ask gets the slot.
func (l *Limiter) Acquire(ctx context.Context, key string, cost float64) (Lease, error) {
	ls := Lease{l: l, key: key, cost: cost, Decision: Decision{Limit: l.params.Limit}}
	if err := l.checkLeases(); err != nil {
		return ls, err
	}
	began := l.clock.now()
	err := l.acquiring(ctx, key, func() (bool, time.Duration, error) {
		var err error
		ls, err = l.tryAcquire(ctx, key, cost, l.clock.now(), began)
		return ls.Allowed, ls.RetryAfter, err
	})
	return ls, err
}

// acquiring waits for key's line of l to reach the caller, and then calls
// try until it grants a lease or fails, sleeping between tries until a
// release on key, the retry that try returned, or l's lease poll. It
// watches for releases only once a first try was denied, so that a lease
// granted at once costs one store call; the try after the watch began
// sees every release since.
func (l *Limiter) acquiring(ctx context.Context, key string, try func() (granted bool, retry time.Duration, err error)) error {
	turn := l.queue.join(key)
	defer l.queue.leave(key, turn)
	select {
	case <-turn.head:
	case <-ctx.Done():
		return ctx.Err()
	}
	granted, retry, err := try()
	if err != nil || granted {
		return err
	}
	released := make(chan struct{}, 1)
	if w, ok := l.store.(ReleaseWatcher); ok {
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

// Release gives the lease back, so that its slot is free at once. It
// returns an error wrapping [ErrNotHeld] if the lease was not held (not
// granted, released already, or expired): harmless. It runs even if ctx
// has ended, as when a client went away, so that a release deferred in a
// handler is made: within the limiter's timeout ([WithTimeout]), or a
// second for a remote store without one.
func (ls *Lease) Release(ctx context.Context) error {
	return ls.end(ctx, engine.VerbCancel)
}

// Extend makes the lease last the limiter's time to live from now, for a
// task that runs longer than it. The lease's At changes: it is the
// lease's identity from then on. It returns an error wrapping
// [ErrNotHeld] if the lease was not held any more: its slot may be
// someone else's, and the task should stop.
func (ls *Lease) Extend(ctx context.Context) error {
	return ls.end(ctx, engine.VerbExtend)
}

// end releases or extends the lease, as verb says.
func (ls *Lease) end(ctx context.Context, verb engine.Verb) error {
	l := ls.l
	if l == nil || !ls.Allowed || ls.At == 0 {
		return fmt.Errorf("%w: %q", ErrNotHeld, ls.key)
	}
	ctx, cancel := givingBack(ctx, l.mem != nil, l.timeout)
	defer cancel()
	var d Decision
	err := l.leaseOp(ctx, ls.key, engine.Op{Verb: verb, Cost: ls.cost, Now: l.clock.now(), At: ls.At}, &d, note{lease: true})
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

// leaseOp decides op, a lease's, on key into *d, which is zero, and hands
// the decision to the observer with n.
func (l *Limiter) leaseOp(ctx context.Context, key string, op engine.Op, d *Decision, n note) error {
	err := l.checkLeases()
	if err != nil {
		d.Limit = l.params.Limit
	} else {
		err = l.decide(ctx, key, op, decided(d))
	}
	if l.observer != nil {
		l.observe(ctx, key, op, decided(d), err, n)
	}
	return err
}

// checkLeases refuses a lease of a limiter that holds none.
func (l *Limiter) checkLeases() error {
	if l.params.Kind != engine.KindConcurrency {
		return fmt.Errorf("%w: %v takes no leases: use NewConcurrencyLimit", ErrUnsupported, l.params.Kind)
	}
	return nil
}

// A ReleaseWatcher is a [Store] that tells waiters when a lease is
// released, so that [Limiter.Acquire] sleeps until a release instead of
// polling. MemStore tells the waiters of its process; the Redis store
// publishes each release on a channel (Redis pub/sub), the PostgreSQL
// store with NOTIFY, so that waiters in every process that shares the
// store are woken.
type ReleaseWatcher interface {
	// WatchReleases sends on c, without blocking (a full channel has a
	// wake-up pending already), after each release of a lease on key,
	// from any limiter sharing the store, until stop is called. A
	// spurious send is allowed; a missed one costs the waiter a poll.
	// It returns an error if the store cannot watch now; ctx bounds the
	// setting up only.
	WatchReleases(ctx context.Context, key string, c chan<- struct{}) (stop func(), err error)
}

// DefaultLeasePoll is how long at most Acquire waits before asking the
// store again, unless [WithLeasePoll] says otherwise: what a lost
// wake-up costs.
const DefaultLeasePoll = time.Second
