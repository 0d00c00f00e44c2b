package sluice

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Limiter is what every sluice limiter does, whatever its algorithm and
// store.
type Limiter interface {
	// Allow admits cost for key if it fits now and records it. A denied
	// request records nothing; its decision says when to retry. The error
	// is non-nil only for invalid input ([ErrInvalidCost],
	// [ErrCostExceedsLimit]) or a failing store, never for a denial.
	Allow(ctx context.Context, key string, cost float64) (Decision, error)

	// CanAccept returns the decision Allow would make now, recording
	// nothing.
	CanAccept(ctx context.Context, key string, cost float64) (Decision, error)

	// Reset forgets key: its next request sees a fresh state.
	Reset(ctx context.Context, key string) error

	// Wait blocks until cost is admitted for key, and records it. It
	// returns ctx's error if ctx ends first, and returns at once with an
	// error wrapping [ErrWouldExceedDeadline] if ctx's deadline comes before
	// the earliest admission.
	Wait(ctx context.Context, key string, cost float64) error

	// Reserve books the earliest instant at which cost conforms for key,
	// if it comes within maxDelay, and records the cost at once: the
	// caller acts after the reservation's Delay. Past maxDelay nothing is
	// booked, and the reservation's RetryAfter says when a reservation
	// with the same maxDelay would be. A maxDelay of 0 is Allow. The
	// window algorithms return an error wrapping [ErrUnsupported].
	Reserve(ctx context.Context, key string, cost float64, maxDelay time.Duration) (*Reservation, error)

	// AllowAtMost admits as much of cost as fits now, and records it:
	// all of it, or the most whole units that fit. Decision.Granted says
	// how much.
	AllowAtMost(ctx context.Context, key string, cost float64) (Decision, error)
}

// Compile-time checks that every limiter is a Limiter.
var (
	_ Limiter = (*LeakyBucket)(nil)
	_ Limiter = (*GCRA)(nil)
	_ Limiter = (*TokenBucket)(nil)
	_ Limiter = (*FixedWindow)(nil)
	_ Limiter = (*SlidingLog)(nil)
	_ Limiter = (*SlidingCounter)(nil)
)

// limiter carries what every algorithm's limiter shares: its Params, its
// store, its clock, and how it is observed. Its methods are promoted to the
// exported types.
type limiter struct {
	params   Params
	store    Store
	clock    nanoClock
	mem      *MemStore // store, when it is a MemStore: called directly
	owned    bool      // store was made by the limiter, and Close closes it
	name     string
	observer Observer      // or nil
	timeout  time.Duration // bounds each remote store call; 0 is none
	lateness time.Duration // how late a reserved turn may be acted on
}

func newLimiter(p Params, opts []Option) (limiter, error) {
	s := settings{params: p, lateness: DefaultMaxLateness}
	for _, o := range opts {
		if err := o.apply(&s); err != nil {
			return limiter{}, err
		}
	}
	if err := s.params.Validate(); err != nil {
		return limiter{}, err
	}
	if s.clock == nil {
		s.clock = SystemClock()
	}
	l := limiter{params: s.params, store: s.store, clock: nanoClock{s.clock},
		name: s.name, observer: s.observer, timeout: s.timeout, lateness: s.lateness}
	if l.store == nil {
		l.store, l.owned = NewMemStore(MemStoreConfig{}), true
	}
	l.mem, _ = l.store.(*MemStore)
	return l, nil
}

// Allow admits cost for key if it fits now and records it. A denied
// request records nothing; its decision says when to retry. The error is
// non-nil only for invalid input ([ErrInvalidCost], [ErrCostExceedsLimit])
// or a failing store, never for a denial.
func (l *limiter) Allow(ctx context.Context, key string, cost float64) (d Decision, err error) {
	err = l.do(ctx, key, Op{Verb: VerbAllow, Cost: cost, Now: l.clock.now()}, &d)
	return d, err
}

// CanAccept returns the decision Allow would make now, recording nothing.
// Use CanAccept(ctx, key, 0) to read a key's remaining allowance.
func (l *limiter) CanAccept(ctx context.Context, key string, cost float64) (d Decision, err error) {
	err = l.do(ctx, key, Op{Verb: VerbCheck, Cost: cost, Now: l.clock.now()}, &d)
	return d, err
}

// Reset forgets key: its next request sees a fresh state.
func (l *limiter) Reset(ctx context.Context, key string) error {
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

// Params returns the limiter's algorithm and configuration. Its Step
// method is the algorithm as a pure function.
func (l *limiter) Params() Params { return l.params }

// Close releases the limiter's default in-memory store. It does nothing
// to a store passed with [WithStore], which its owner closes.
func (l *limiter) Close() error {
	if l.owned {
		return l.mem.Close()
	}
	return nil
}

// do decides op on key into *d, which is zero. The decision is written in
// place, in the frame of the exported method's caller (the methods are
// small enough to be inlined there), rather than returned through each
// level: copying it back out of a callee's frame, just written field by
// field, stalled the processor on every return.
//
// Without an observer, the decision costs one comparison more than it
// would without the feature: op.Now, read anyway, is when the decision
// began, and the clock is read again only for an observer.
func (l *limiter) do(ctx context.Context, key string, op Op, d *Decision) (err error) {
	var refused error // a cost above the limit that is decided all the same
	if !l.params.usual(op.Verb, op.Cost, op.Now) {
		if refused = l.params.checkOp(op); refused != nil && !l.params.Overflows(op, refused) {
			d.Limit = l.params.Limit
			if l.observer != nil {
				l.observe(ctx, key, op, d, refused)
			}
			return refused
		}
	}
	if l.mem != nil {
		err = l.mem.apply(key, &l.params, op, d) // validated: skip Apply's checks
	} else {
		err = l.apply(ctx, key, op, d)
	}
	if err == nil {
		err = refused // decided, and still refused: whatever the store says
	}
	if l.observer != nil {
		l.observe(ctx, key, op, d, err)
	}
	return err
}

// apply decides op on a remote store, within the limiter's timeout.
func (l *limiter) apply(ctx context.Context, key string, op Op, d *Decision) (err error) {
	if l.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	*d, err = l.store.Apply(ctx, key, &l.params, op)
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
