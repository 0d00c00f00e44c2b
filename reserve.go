package sluice

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/arith"
)

// A Reservation is a turn booked with [Limiter.Reserve]: cost recorded for
// key as if admitted at an instant that may lie in the future. Its Decision
// says whether it was booked (Allowed), and how long the caller must wait
// before acting (Delay). Counting each reservation at the instant its
// caller may act, the algorithm's guarantee holds as it does for Allow.
// Reservations on one key are booked in the order the store receives them.
// A Reservation is safe for concurrent use; one made outside this package
// (a literal, in a test) waits on the system clock and has nothing to give
// back.
type Reservation struct {
	Decision

	l     *Limiter
	p     *engine.Params // the limit that held key, as looked up when booked
	key   string
	cost  float64
	act   int64 // when the caller may act, on the limiter's clock
	ready int64 // when a remote store's answer came; zero for memory
	given atomic.Bool
}

// Reserve books the earliest instant at which cost conforms for key, if it
// comes within maxDelay, and records the cost at once, as if admitted then.
// The caller acts after the reservation's Delay ([Reservation.Wait] sleeps
// it), or gives the turn back with [Reservation.Cancel]. Past maxDelay
// nothing is booked: the reservation is not Allowed, and its RetryAfter
// says when one with the same maxDelay would be booked. A maxDelay of 0
// books only what Allow would admit now. The GCRA and the buckets reserve;
// the window algorithms return an error wrapping [ErrUnsupported].
func (l *Limiter) Reserve(ctx context.Context, key string, cost float64, maxDelay time.Duration) (*Reservation, error) {
	r := new(Reservation) // on the caller's stack when Reserve is inlined
	return r, l.reserveOf(ctx, key, cost, maxDelay, r)
}

// reserveOf books into *r, which is zero, under key's limit.
func (l *Limiter) reserveOf(ctx context.Context, key string, cost float64, maxDelay time.Duration, r *Reservation) error {
	p, err := l.limitOf(ctx, key)
	if err != nil {
		return err
	}
	return l.reserve(ctx, key, p, cost, maxDelay, r)
}

// reserve books under p into *r, which is zero.
func (l *Limiter) reserve(ctx context.Context, key string, p *engine.Params, cost float64, maxDelay time.Duration, r *Reservation) error {
	r.l, r.p, r.key, r.cost = l, p, key, cost
	op := engine.Op{Verb: engine.VerbReserve, Cost: cost, Now: l.clock.now(), MaxDelay: int64(maxDelay)}
	err := l.do(ctx, key, p, op, decided(&r.Decision))
	r.act = op.Now + int64(r.Delay)
	if l.mem == nil {
		r.ready = l.clock.now()
	}
	return err
}

// Wait sleeps until the reservation's instant on the limiter's clock, and
// returns nil then, or at once if it may act now. If ctx ends first, it
// gives the reservation back ([Reservation.Cancel]) and returns ctx's
// error, joined with the cancel's if that failed. It returns at once an
// error wrapping [ErrNotReserved] for a reservation that was not booked,
// and one wrapping [ErrStaleTurn] if it wakes, or is called, more than the
// limiter's maximum lateness ([WithMaxLateness]) after the instant: the
// cost is spent, and the caller should book again, not act.
func (r *Reservation) Wait(ctx context.Context) error {
	if !r.Allowed {
		return fmt.Errorf("%w: %q", ErrNotReserved, r.key)
	}
	if r.l == nil { // made outside this package: its delay on the system clock
		if r.Delay > 0 {
			select {
			case <-time.After(r.Delay):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	err := waitTurn(ctx, r.l.clock, max(r.act, r.ready), r.l.lateness, r.Cancel)
	if errors.Is(err, ErrStaleTurn) {
		return fmt.Errorf("%q: %w", r.key, err)
	}
	return err
}

// waitTurn sleeps on c until the instant act, and returns nil then, or an
// error wrapping [ErrStaleTurn] if it wakes, or was called, more than
// lateness after it. If ctx ends first, it gives the turn back with
// cancel and returns ctx's error, joined with the cancel's.
func waitTurn(ctx context.Context, c nanoClock, act int64, lateness time.Duration, cancel func(context.Context) error) error {
	if d := act - c.now(); d > 0 {
		select {
		case <-c.clock.After(time.Duration(d)):
		case <-ctx.Done():
			return errors.Join(ctx.Err(), cancel(context.WithoutCancel(ctx)))
		}
	}
	if late := time.Duration(c.now() - act); late > lateness {
		return fmt.Errorf("%w: woke %v after its instant, more than %v", ErrStaleTurn, late, lateness)
	}
	return nil
}

// maxStaleTurns is how many stale turns in a row Wait books again before
// it gives up: a machine that is late for every turn would otherwise spend
// the key's allowance on turns nobody acts on.
const maxStaleTurns = 3

// cancelTimeout bounds a Cancel made after its caller's context ended, for
// a limiter without a timeout of its own: giving a turn back must not hang
// on a store that does not answer.
const cancelTimeout = time.Second

// Cancel gives the reservation back, so that its cost is available to
// others, if its instant has not come yet and nothing was booked on the key
// after it: the key is then as if never reserved, a nanosecond later, so
// that a cancel made twice cannot give back the freed turn's new booking.
// Otherwise nothing is given back. A reservation that was not booked, whose
// instant has passed, or that was already given back costs nothing to
// cancel: Cancel returns nil without calling the store. A call that failed
// is not made again: at worst the turn is lost, never given back twice.
func (r *Reservation) Cancel(ctx context.Context) error {
	if r.l == nil || !r.Allowed || r.Delay <= 0 || !r.given.CompareAndSwap(false, true) {
		return nil
	}
	l := r.l
	now := l.clock.now()
	if now >= r.act {
		return nil
	}
	if l.mem == nil && l.timeout <= 0 && ctx.Done() == nil { // memory never hangs
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cancelTimeout)
		defer cancel()
	}
	var d engine.Decision
	return l.do(ctx, r.key, r.p, engine.Op{Verb: engine.VerbCancel, Cost: r.cost, Now: now, At: r.At}, &d)
}

// Wait blocks until cost is admitted for key, and records it, sleeping on
// the limiter's clock. It returns ctx's error if ctx ends first, and at
// once an error wrapping context.DeadlineExceeded ("sluice: wait would
// exceed context deadline") if ctx's deadline comes before the earliest
// admission. For the GCRA and the buckets, Wait books its turn with one
// call to [Limiter.Reserve] and sleeps exactly until it: waiters on a key
// are served in the order they booked, and a Wait whose ctx ends first
// gives its turn back. The window algorithms cannot book ahead: there Wait
// asks again when its denial said it could, and waiters are not queued.
func (l *Limiter) Wait(ctx context.Context, key string, cost float64) error {
	p, err := l.limitOf(ctx, key)
	if err != nil {
		return err
	}
	if !p.Reservable() {
		return l.poll(ctx, key, cost)
	}
	return rebooking(func() error { return l.waitOnce(ctx, key, p, cost) })
}

// rebooking runs wait, which books a turn and waits for it, again while
// the turn it booked went stale, at most maxStaleTurns times in all.
func rebooking(wait func() error) error {
	for stale := 1; ; stale++ {
		err := wait()
		if !errors.Is(err, ErrStaleTurn) || stale == maxStaleTurns {
			return err
		}
	}
}

// waitOnce books one turn for Wait and sleeps until it.
func (l *Limiter) waitOnce(ctx context.Context, key string, p *engine.Params, cost float64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	maxDelay := untilDeadline(ctx)
	var r Reservation
	if err := l.reserve(ctx, key, p, cost, maxDelay, &r); err != nil {
		return err
	}
	if !r.Allowed {
		return pastDeadline(key, maxDelay+r.RetryAfter)
	}
	return r.Wait(ctx)
}

// pastDeadline is Wait's error, returned at once, when what (a key, or a
// group's keys) could be admitted only need from now, after its context's
// deadline.
func pastDeadline(what any, need time.Duration) error {
	return fmt.Errorf("sluice: wait would exceed context deadline: %q needs %v: %w", what, need, context.DeadlineExceeded)
}

// untilDeadline returns the longest delay a turn booked under ctx may
// have: until its deadline, if any.
func untilDeadline(ctx context.Context) time.Duration {
	maxDelay := time.Duration(arith.MaxSpan)
	if deadline, ok := ctx.Deadline(); ok {
		maxDelay = min(maxDelay, max(time.Until(deadline), 0))
	}
	return maxDelay
}

// poll is Wait for the algorithms that cannot book ahead.
func (l *Limiter) poll(ctx context.Context, key string, cost float64) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		d, err := l.Allow(ctx, key, cost)
		if err != nil || d.Allowed {
			return err
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d.RetryAfter {
			return pastDeadline(key, d.RetryAfter)
		}
		select {
		case <-l.clock.clock.After(d.RetryAfter):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
